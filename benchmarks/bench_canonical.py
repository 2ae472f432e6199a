"""Canonical JSON writer on hostile keys (issue 6, defects 1 and 2).

Measures, in one run, `canonical_bytes` on inputs that used to cost quadratic time or unbounded
memory, each against a linear baseline on the same input: `json.dumps(value, sort_keys=True)`
(C encoder, code-point key order). The ratio ours / baseline should stay roughly constant as
the key grows; before the fix it grew with the key length (250,000 letters took over 30 s).

* one 250,000-letter key; one key of 125,000 "a + two combining marks of different classes"
  (CPython's NFD reorders those by insertion sort); one key of 125,000 "l·" (a contraction);
* 4,500 distinct 200-letter keys in one object, ten times: time, and the memory the key caches
  retain afterwards (tracemalloc), which must stay under the byte budget;
* with `--pyuca`, the old path (`pyuca.Collator().sort_key`) on the same long key at 20,000 and
  40,000 letters, to show its quadratic growth (skipped by default: it takes seconds).

Results go to benchmarks/results/canonical.json; `uptime` load is printed beside the figures.

Run: .venv/bin/python benchmarks/bench_canonical.py [--pyuca]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import string
import sys
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.protocol import canonical  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "canonical.json"


def best_of(function, runs: int = 3) -> float:
    timings = []
    for _ in range(runs):
        start = time.perf_counter()
        function()
        timings.append(time.perf_counter() - start)
    return min(timings)


def row(name: str, value) -> dict:
    canonical._SORT_KEY_CACHE.clear()
    canonical._ORDER_CACHE.clear()
    ours = best_of(lambda: canonical.canonical_bytes(value))
    baseline = best_of(lambda: json.dumps(value, sort_keys=True, ensure_ascii=False))
    print(f"{name:<44} ours {ours * 1000:9.1f} ms  baseline {baseline * 1000:7.1f} ms  ratio {ours / baseline:7.1f}")
    return {"name": name, "ours_s": ours, "baseline_s": baseline, "ratio": ours / baseline}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pyuca", action="store_true", help="also time the old quadratic path")
    args = parser.parse_args()
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores")
    rows = []
    for size in (62_500, 125_000, 250_000):
        rows.append(row(f"one {size:,}-letter key", {"a" * size: 1, "b": 2}))
    rows.append(row("one key: a + 125,000 × (U+0301 U+0316)", {"a" + "\u0301\u0316" * 125_000: 1, "b": 2}))
    rows.append(row("one key: 125,000 × l·", {"l\u00b7" * 125_000: 1, "b": 2}))
    rng = random.Random(1)
    objects = [{"".join(rng.choice(string.ascii_letters) for _ in range(200)): i for i in range(4500)}
               for _ in range(10)]
    rows.append(row("4,500 distinct 200-letter keys", objects[0]))

    canonical._SORT_KEY_CACHE.clear()
    canonical._ORDER_CACHE.clear()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    start = time.perf_counter()
    for value in objects:
        canonical.canonical_bytes(value)
    elapsed = time.perf_counter() - start
    retained = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    budget = canonical._CACHE_BUDGET_BYTES
    print(f"10 × 4,500 distinct 200-letter keys: {elapsed:.2f} s, caches retain {retained / 1e6:.2f} MB "
          f"(budget {budget / 1e6:.1f} MB per cache)")
    memory = {"seconds": elapsed, "retained_bytes": retained, "budget_bytes_per_cache": budget,
              "within_budget": retained <= 2 * budget}

    old = []
    if args.pyuca:
        from pyuca import Collator

        collator = Collator()
        for size in (20_000, 40_000):
            seconds = best_of(lambda size=size: collator.sort_key("a" * size), runs=1)
            ours = best_of(lambda size=size: canonical.collation_key("a" * size))
            print(f"pyuca sort_key, {size:,} letters: {seconds:.2f} s (ours {ours * 1000:.1f} ms)")
            old.append({"letters": size, "pyuca_s": seconds, "ours_s": ours})

    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"load": load, "rows": rows, "memory": memory, "pyuca": old}, indent=2))
    return 0 if memory["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
