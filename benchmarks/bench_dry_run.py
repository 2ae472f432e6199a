"""Rulebook migration dry-run: vectorized replay against a one-by-one scalar replay, and memory at 10M.

Measured in one run, on a synthetic history generated vectorized into the dataset contract
(`benchmarks/dryrun_data.py`: 12 rules over every operator kind, type-mismatched and nested
facts, 0.5% decisions without facts, 0.1% partial rows for the scalar evaluator):

- vectorized: `workbench.migration.dry_run(...)` + `write_dry_run(...)` end to end from the
  dataset (scan, replay, scalar rows, outcomes, every aggregate, `flips.parquet`, signed
  `migration.json`, both reports), in process, median of 3 runs after one warm-up;
- scalar dry-run (the baseline the target is stated against): the same history replayed one
  decision at a time, end to end from the same dataset (`benchmarks/scalar_dry_run.py`: read
  the decisions file by file, `json.loads` each decision's facts, the compiled scalar evaluator,
  tallies in dictionaries, one pass over the outcomes for the flips' latest outcomes), over
  every decision (not a sample), timed once. Its figures must equal the vectorized dry-run's
  `migration.json` exactly (transitions, rule transitions, drift by rule and reason, outcome
  classes of the flips, review load per month, field changes, unreplayable decisions);
- evaluation only (a lower bound of any scalar replay, printed beside it): `json.loads` and the
  compiled evaluator and three tallies on a sample of decisions spread over the history, read
  beforehand (not timed) and scaled linearly to the full size;
- identical results, decision by decision: every sampled decision's new verdict, application
  verdict, action, reason code, matched rule and status from the vectorized replay equal the
  scalar evaluator's, and the dry-run's transition matrix equals the one tallied row by row by
  the vectorized replay without grouping;
- 10M: the same dry-run over ten million decisions in a child process, its peak RSS read by
  the child itself from its own address space's high-water mark (`VmHWM` in `/proc/self/status`;
  `ru_maxrss` is not used: Linux carries it across `exec`, so a child started by a parent that
  just generated the dataset would report the parent's peak). Polars' streaming engine keeps
  only aggregates in memory.

Targets (`--check` exits 1 when missed): 1M end to end < 2 s; ≥ 30× the scalar dry-run;
10M peak RSS < 2 GiB. Results: table on stdout and `benchmarks/results/dry_run.json`, with the
machine's load before and after (other work on the machine slows both sides).

Run: .venv/bin/python benchmarks/bench_dry_run.py [--decisions N] [--big N|0] [--sample N] [--check]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import dryrun_data  # noqa: E402
import polars as pl  # noqa: E402
import scalar_dry_run  # noqa: E402

from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner  # noqa: E402
from workbench.migration import dry_run, write_dry_run  # noqa: E402
from workbench.migration.compute import replay  # noqa: E402
from workbench.migration.draft import load_draft  # noqa: E402
from workbench.migration.run import load_history  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
NOW = "2026-11-22T00:00:00.000Z"
TARGET_SECONDS, TARGET_RATIO, TARGET_RSS = 2.0, 30.0, 2 * 1024**3


def load() -> str:
    return os.getloadavg().__repr__()


def dataset(n: int) -> Path:
    root = RESULTS / "data" / f"dryrun-{n}"
    manifest = root / "manifest.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("decisions") == n:
        return root
    shutil.rmtree(root, ignore_errors=True)
    started = time.perf_counter()
    if n > dryrun_data.BASE_MAX and n % dryrun_data.BASE_MAX == 0:  # e.g. 100M: copies of the 10M history
        dryrun_data.replicate(dataset(dryrun_data.BASE_MAX), root, n // dryrun_data.BASE_MAX)
    else:
        dryrun_data.generate(root, n)
    print(f"generated {n:,} decisions in {time.perf_counter() - started:.1f} s at {root}", flush=True)
    return root


def end_to_end(root: Path, draft: dict, out: Path, signer) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process, all threads)."""
    started, cpu = time.perf_counter(), time.process_time()
    flips = out / "flips.parquet"
    out.mkdir(parents=True, exist_ok=True)
    run = dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW, flips_path=flips)
    write_dry_run(out, run.manifest, signer)
    return time.perf_counter() - started, time.process_time() - cpu


def sample_rows(root: Path, n: int, size: int) -> pl.DataFrame:
    step = max(1, n // size)
    frame = pl.scan_parquet(str(root / "decisions" / "**" / "*.parquet"), hive_partitioning=True)
    ids = [f"dec_{i:010d}" for i in range(0, n, step)][:size]
    return (frame.filter(pl.col("decision_id").is_in(ids))
            .select("decision_id", "verdict", "matched_rule_id", "reason_code", "facts_json").collect())


def scalar_replay(rows: pl.DataFrame, evaluate) -> tuple[float, float, dict]:
    """One by one, as a scalar dry-run would: parse, evaluate, tally. Returns (wall, CPU, results)."""
    transitions, rules, reasons = Counter(), Counter(), Counter()
    results = {}
    data = rows.rows()
    started, cpu = time.perf_counter(), time.process_time()
    for decision_id, verdict, rule, reason, text in data:
        if text is None:
            continue
        e = evaluate(json.loads(text))
        transitions[(verdict, e.decision)] += 1
        rules[(rule, e.matched_rule_id)] += 1
        reasons[(reason, e.reason_code)] += 1
        results[decision_id] = (e.status, e.decision, e.application_verdict, e.action, e.reason_code, e.matched_rule_id)
    return time.perf_counter() - started, time.process_time() - cpu, results


def vector_results(root: Path, draft: dict, ids: list[str]) -> dict:
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    history = load_history(dryrun_data.RULEBOOK_ID, None, dataset=root, ledger=None, paths=compiled.polars.paths)
    evaluated, _ = replay(history, compiled)
    frame = (evaluated.filter(pl.col("decision_id").is_in(ids) & (pl.col("replay") != "unreplayable"))
             .select("decision_id", "new_status", "new_verdict", "new_application_verdict", "new_action",
                     "new_reason", "new_rule").collect(engine="streaming"))
    return {row[0]: tuple(row[1:]) for row in frame.iter_rows()}


def full_transitions(root: Path, draft: dict) -> dict:
    """Every decision's (old, new) verdict pair from the row-by-row vector replay (`replay`, the
    string columns, no grouping by pick): the dry-run's transitions must equal these."""
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    history = load_history(dryrun_data.RULEBOOK_ID, None, dataset=root, ledger=None, paths=compiled.polars.paths)
    evaluated, _ = replay(history, compiled)
    frame = (evaluated.filter(pl.col("replay") != "unreplayable").group_by("old_verdict", "new_verdict")
             .agg(pl.len()).collect(engine="streaming"))
    return {(a, b): n for a, b, n in frame.iter_rows()}


def big_run(n: int, code_root: Path = ROOT, out: Path = RESULTS / "dry-run-big", digest_store: Path | None = None) -> dict:
    """The dry-run over `n` decisions in a child process, written to `out`: wall time, CPU time
    and peak RSS. `code_root`: a checkout whose dry-run is run (this one by default; another,
    e.g. the code before a change, on the same history). `digest_store`: the child keeps what it
    found of each file there, as `gate dry-run` does in GATE_HOME (`integrity.use_digest_store`):
    an empty store is filled (every file hashed), a filled one spares hashing unchanged files."""
    root = dataset(n)
    code = (
        "import sys, time; sys.path[:0] = [{!r}, {!r}]\n"
        "import dryrun_data\n"
        "from workbench.migration import dry_run, write_dry_run\n"
        "from workbench.dataset import integrity\n"
        "from pathlib import Path\n"
        "_, draft = dryrun_data.rulebooks()\n"
        "store = {!r}\n"
        "t, cpu = time.perf_counter(), time.process_time()\n"
        "integrity.use_digest_store(Path(store) if store else None)\n"
        "out = Path({!r}); out.mkdir(parents=True, exist_ok=True)\n"
        "run = dry_run(draft, dryrun_data.RULEBOOK_ID, dataset={!r}, created_at='2026-11-22T00:00:00.000Z',"
        " flips_path=out / 'flips.parquet')\n"
        "write_dry_run(out, run.manifest, None)\n"
        "print(time.perf_counter() - t, time.process_time() - cpu, run.result['decisions_total'], run.result['decisions_changed'],"
        " next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmHWM:')))\n"
    ).format(str(code_root), str(code_root / "benchmarks"), str(digest_store or ""), str(out), str(root))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(done.stderr)
    # The child reports its own address space's peak: RUSAGE_CHILDREN would be the largest of every
    # child so far, and the child's ru_maxrss would include the parent's peak (kept across exec).
    seconds, cpu, total, changed, peak_kib = done.stdout.split()
    return {"decisions": int(total), "changed": int(changed), "seconds": round(float(seconds), 3),
            "cpu_seconds": round(float(cpu), 3), "code": str(code_root),
            "peak_rss_bytes": int(peak_kib) * 1024, "peak_rss_note": "the child's own VmHWM"}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--big", type=int, default=10_000_000, help="0 skips the memory run")
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    load_before = load()
    _, draft = dryrun_data.rulebooks()
    root = dataset(args.decisions)
    signer = Ed25519ReceiptSigner(Ed25519Key.generate())
    out = RESULTS / "dry-run-1m"
    end_to_end(root, draft, out, signer)  # warm-up (file cache, compiled rulebooks)
    runs = [end_to_end(root, draft, out, signer) for _ in range(3)]
    times = [wall for wall, _ in runs]
    vector_s = statistics.median(times)
    vector_cpu = statistics.median(cpu for _, cpu in runs)

    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    member = json.loads((out / "migration.json").read_text())["dry_run"]
    started, cpu = time.perf_counter(), time.process_time()
    one_by_one = scalar_dry_run.scalar_dry_run(root, dryrun_data.RULEBOOK_ID, compiled.scalar.evaluate,
                                                rule_ids=list(compiled.order))
    full_s, full_cpu = time.perf_counter() - started, time.process_time() - cpu
    expected = scalar_dry_run.figures_of(member)
    differing = sorted(name for name in expected if expected[name] != one_by_one[name])

    rows = sample_rows(root, args.decisions, args.sample)
    scalar_s, scalar_cpu, scalar = scalar_replay(rows, compiled.scalar.evaluate)
    scalar_per = scalar_s / max(len(scalar), 1)
    scalar_cpu_full = scalar_cpu / max(len(scalar), 1)
    replayable = member["decisions_evaluated"]
    scalar_full_s = scalar_per * replayable
    scalar_full_cpu = scalar_cpu_full * replayable
    vector = vector_results(root, draft, rows["decision_id"].to_list())
    transitions = {(t["from"], t["to"]): t["count"] for t in member["transitions"] if t["count"]}
    identical = vector == scalar and transitions == full_transitions(root, draft) and not differing
    mismatches = [k for k in scalar if vector.get(k) != scalar[k]][:5]

    big = big_run(args.big) if args.big else None
    load_after = load()
    result = {
        "decisions": args.decisions, "replayed": replayable,
        "decisions_changed": member["decisions_changed"],
        "vectorized_end_to_end_s": round(vector_s, 4), "vectorized_runs_s": [round(t, 4) for t in times],
        "scalar_dry_run_s": round(full_s, 3), "scalar_dry_run_cpu_s": round(full_cpu, 3),
        "speedup": round(full_s / vector_s, 1), "speedup_cpu": round(full_cpu / vector_cpu, 1),
        "scalar_dry_run_identical": not differing, "scalar_dry_run_differs_in": differing,
        "evaluation_only_sample": len(scalar), "evaluation_only_per_decision_us": round(scalar_per * 1e6, 3),
        "evaluation_only_scaled_s": round(scalar_full_s, 3),
        "evaluation_only_note": f"parse + evaluate + tally timed on {len(scalar):,} sampled, pre-read decisions "
                                f"and scaled linearly to {replayable:,}",
        "speedup_vs_evaluation_only": round(scalar_full_s / vector_s, 1),
        "speedup_vs_evaluation_only_cpu": round(scalar_full_cpu / vector_cpu, 1),
        "identical_on_sample": identical,
        "vectorized_cpu_s": round(vector_cpu, 4),
        "big": big, "load_before": load_before, "load_after": load_after, "cpus": os.cpu_count(),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "dry_run.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"dry-run over {args.decisions:,} decisions ({replayable:,} replayable), load {load_before} → {load_after}")
    print(f"  vectorized end to end      {vector_s:8.3f} s   (median of {times}); CPU {vector_cpu:.3f} s")
    print(f"  scalar dry-run, one by one {full_s:8.3f} s   (every decision, end to end from the dataset); "
          f"CPU {full_cpu:.3f} s")
    print(f"  speedup                    {full_s / vector_s:8.1f}×   (CPU time {full_cpu / vector_cpu:.1f}×)")
    print(f"  evaluation only            {scalar_full_s:8.3f} s   ({scalar_per * 1e6:.2f} µs/decision on a "
          f"{len(scalar):,}-decision pre-read sample, scaled): {scalar_full_s / vector_s:.1f}× "
          f"(CPU {scalar_full_cpu / vector_cpu:.1f}×)")
    print(f"  identical results          scalar dry-run {differing or '= every figure'}; "
          f"{identical} on {len(scalar):,} sampled decisions and the whole history's transition matrix "
          f"{mismatches or ''}")
    if big:
        print(f"  {big['decisions']:,} decisions: {big['seconds']:.2f} s, peak RSS {big['peak_rss_bytes'] / 2**30:.2f} GiB")
    missed = []
    if vector_s >= TARGET_SECONDS:
        missed.append(f"end to end {vector_s:.2f} s ≥ {TARGET_SECONDS} s")
    if full_s / vector_s < TARGET_RATIO:
        missed.append(f"speedup {full_s / vector_s:.1f}× < {TARGET_RATIO}× the scalar dry-run")
    if not identical:
        missed.append("results differ")
    if big and big["peak_rss_bytes"] >= TARGET_RSS:
        missed.append(f"10M peak RSS {big['peak_rss_bytes'] / 2**30:.2f} GiB ≥ 2 GiB")
    for line in missed:
        print("  MISSED:", line)
    return 1 if (args.check and missed) else 0


if __name__ == "__main__":
    sys.exit(main())
