"""A threshold sweep of 100 thresholds over a million decisions, against one full dry-run of the
same draft over the same dataset in the same run (issue 21, item 3: floor 2 s for the sweep).

The dataset is `benchmarks/dryrun_data.py`'s (generated once under benchmarks/results/data); the
swept comparison is the draft's `huge_amount` rule (`amount gt 5000`), over 0 to 10,000. Reported:
median wall seconds of three runs each, the sweep's ratio to the full dry-run, and the load
average before and after.

Run: .venv/bin/python benchmarks/bench_sweep.py [--decisions 1000000] [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]

import dryrun_data  # noqa: E402
from bench_dry_run import NOW, RESULTS, dataset  # noqa: E402

from workbench.migration import dry_run  # noqa: E402
from workbench.migration.sweep import sweep, thresholds_between  # noqa: E402


def _timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    root = dataset(args.decisions)
    _, draft = dryrun_data.rulebooks()
    thresholds = thresholds_between(0, 10_000, args.steps)
    load_before = os.getloadavg()

    def full() -> None:
        dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW)

    def swept() -> None:
        sweep(draft, dryrun_data.RULEBOOK_ID, ("huge_amount", "amount", 0), thresholds, dataset=root)

    full(), swept()  # warm-up: file cache, compiled drafts
    full_s = statistics.median(_timed(full) for _ in range(3))
    sweep_s = statistics.median(_timed(swept) for _ in range(3))
    result = {"decisions": args.decisions, "thresholds": args.steps, "full_dry_run_s": round(full_s, 3),
              "sweep_s": round(sweep_s, 3), "sweep_over_full_dry_run": round(sweep_s / full_s, 3),
              "floor_s": 2.0, "load_before": load_before, "load_after": os.getloadavg(), "cpus": os.cpu_count()}
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "sweep.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
