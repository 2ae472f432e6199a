"""Exact semantic diff of two 100-rule rulebooks: time against a sampling diff in the same run.

Measured, in one process and one run, over several seeded pairs of 100-rule rulebooks (numeric
thresholds on six fields, string enums on three, a `contains` on an array/string field and a
boolean; `all`, `not` and single leaves; random priorities; an `input_schema` with a number and
an integer field, so needs_input regions exist too):

- exact: `semantic_diff(old, new)`, the whole call (validation, atoms, both decision lists, the
  product partition, region merging, witnesses checked through both evaluators);
- baseline: a sampling diff of the same pair, both compiled evaluators run on 10,000 random fact
  sets (the cheapest way to look for differences, and one that proves nothing);
- for scale: one `evaluate` call of the 100-rule rulebook.

Two kinds of pairs: "edited" (the new version is the old one with 5 edits: thresholds, outcomes,
priorities, a replaced condition) and "unrelated" (two independently generated rulebooks, the
worst case for region counts). Each figure is the median of `--runs` timings (perf_counter).

Target (`--check` exits 1 when missed): every exact diff under 1 s.
Run: .venv/bin/python benchmarks/bench_rulebook_analysis.py [--runs 5] [--check]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.rulebook.analysis import lint, semantic_diff  # noqa: E402
from gate.rulebook.analysis.common import evaluator  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "rulebook_analysis.json"
TARGET_S = 1.0
NUMBERS = ["amount", "discount", "margin", "score", "age", "count"]
ENUMS = {"tier": ["gold", "silver", "bronze", "platinum"], "region": ["eu", "us", "apac", "latam"],
         "channel": ["web", "store", "partner"]}
OUTCOMES = [("yes", "APPROVE"), ("no", "BLOCK"), ("review", "REVIEW")]


def _outcome(rng):
    decision, verdict = rng.choice(OUTCOMES)
    return {"decision": decision, "verdict": verdict, "action": "act", "reason_code": f"R_{verdict}"}


def _leaf(rng):
    roll = rng.random()
    if roll < 0.6:
        return {"field": rng.choice(NUMBERS), "operator": rng.choice(["gt", "gte", "lt", "lte"]),
                "value": rng.randrange(0, 100, 5)}
    if roll < 0.85:
        name = rng.choice(list(ENUMS))
        operator = rng.choice(["eq", "neq", "in", "not_in"])
        value = rng.choice(ENUMS[name]) if operator in ("eq", "neq") else rng.sample(ENUMS[name], 2)
        return {"field": name, "operator": operator, "value": value}
    if roll < 0.95:
        return {"field": "flags", "operator": "contains", "value": rng.choice(["vip", "fraud", "new"])}
    return {"field": "verified", "operator": "eq", "value": True}


def _condition(rng):
    roll = rng.random()
    if roll < 0.5:
        return _leaf(rng)
    if roll < 0.85:
        return {"all": [_leaf(rng), _leaf(rng)]}
    return {"not": _leaf(rng)}


def rulebook(seed: int, rules: int = 100) -> dict:
    rng = random.Random(seed)
    return {
        "schema_version": "rulebook_v1", "rulebook_id": "bench_book", "version": "1",
        "input_schema": {"required": ["amount"], "properties": {"amount": {"type": "number"},
                                                                "count": {"type": "integer"}}},
        "rules": [{"rule_id": f"rule_{i:03d}", "priority": rng.randrange(-50, 50), "condition": _condition(rng),
                   "outcome": _outcome(rng)} for i in range(rules)],
        "default_outcome": {"decision": "review", "verdict": "REVIEW", "action": "hold", "reason_code": "NO_MATCH"},
    }


def edited(book: dict, seed: int, edits: int = 5) -> dict:
    rng = random.Random(seed)
    new = copy.deepcopy(book)
    new["version"] = "2"
    for _ in range(edits):
        rule = rng.choice(new["rules"])
        roll = rng.random()
        if roll < 0.3:
            rule["condition"] = _condition(rng)
        elif roll < 0.55:
            rule["outcome"] = _outcome(rng)
        elif roll < 0.8:
            rule["priority"] = rng.randrange(-50, 50)
        else:
            node = rule["condition"]
            node = node.get("not") or (node.get("all") or [node])[0]
            if isinstance(node.get("value"), int):
                node["value"] += 5
    return new


def _facts(rng):
    facts = {}
    for name in NUMBERS:
        if rng.random() < 0.85:
            facts[name] = rng.choice([rng.randrange(-5, 105), round(rng.random() * 100, 2)])
    for name, values in ENUMS.items():
        if rng.random() < 0.85:
            facts[name] = rng.choice(values + ["other"])
    if rng.random() < 0.7:
        facts["flags"] = rng.sample(["vip", "fraud", "new", "x"], rng.randrange(0, 4))
    if rng.random() < 0.7:
        facts["verified"] = rng.random() < 0.5
    return facts


def sampling_diff(old: dict, new: dict, samples: list[dict]) -> int:
    run_old, run_new = evaluator(old), evaluator(new)
    differing = 0
    for facts in samples:
        a, b = run_old(facts), run_new(facts)
        if (a.status, a.decision, a.application_verdict, a.action, a.reason_code) != \
                (b.status, b.decision, b.application_verdict, b.action, b.reason_code):
            differing += 1
    return differing


def _median(fn, runs):
    times, result = [], None
    for _ in range(runs):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times), result


def measure(runs: int, seeds: int, samples: int) -> dict:
    rng = random.Random(7)
    facts = [_facts(rng) for _ in range(samples)]
    rows = []
    for seed in range(seeds):
        old = rulebook(seed)
        for kind, new in (("edited", edited(old, 1000 + seed)), ("unrelated", rulebook(500 + seed))):
            exact_s, exact_max, report = _median(lambda old=old, new=new: semantic_diff(old, new), runs)
            base_s, _, differing = _median(lambda old=old, new=new: sampling_diff(old, new, facts), runs)
            rows.append({"pair": f"{kind} #{seed}", "exact_s": exact_s, "exact_max_s": exact_max,
                         "sampling_s": base_s, "ratio": exact_s / base_s, "verdict": report.verdict,
                         "exact": report.exact, "regions": len(report.differences),
                         "sampled_disagreements": differing})
    one = evaluator(rulebook(0))
    eval_s, _, _ = _median(lambda: [one(f) for f in facts[:1000]], runs)
    lint_s, _, lint_report = _median(lambda: lint(rulebook(0)), 1)
    return {"rows": rows, "evaluate_one_s": eval_s / 1000, "lint_s": lint_s,
            "lint_findings": len(lint_report.findings), "samples": samples, "runs": runs,
            "load": os.getloadavg(), "target_s": TARGET_S,
            "worst_exact_s": max(r["exact_max_s"] for r in rows)}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--check", action="store_true", help="exit 1 when an exact diff takes 1 s or more")
    options = parser.parse_args(argv)
    result = measure(options.runs, options.seeds, options.samples)
    print(f"load average {result['load'][0]:.2f} {result['load'][1]:.2f} {result['load'][2]:.2f}; "
          f"median of {options.runs} runs; baseline = sampling diff over {options.samples} fact sets")
    print(f"{'pair':14} {'exact diff':>11} {'worst':>8} {'sampling':>9} {'exact/sampling':>15}  verdict (regions)")
    for row in result["rows"]:
        print(f"{row['pair']:14} {row['exact_s'] * 1000:9.0f}ms {row['exact_max_s'] * 1000:6.0f}ms "
              f"{row['sampling_s'] * 1000:7.0f}ms {row['ratio']:15.2f}  {row['verdict']} ({row['regions']})")
    print(f"one 100-rule evaluate: {result['evaluate_one_s'] * 1e6:.1f} µs; lint of one 100-rule rulebook: "
          f"{result['lint_s'] * 1000:.0f} ms ({result['lint_findings']} findings)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if options.check and result["worst_exact_s"] >= TARGET_S:
        print(f"MISSED: worst exact diff {result['worst_exact_s']:.2f} s >= {TARGET_S} s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
