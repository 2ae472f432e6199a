"""What checking the dataset against its manifest costs, as a ratio to the run it guards.

Readers check every file they read against the manifest's size, sha256, row count and schema
(`workbench.dataset.integrity.check_files`), at every open. Measured in one run, on the dry-run
benchmark's synthetic history (`benchmarks/dryrun_data.py`, every file listed with its digest):

- guarded: `workbench.migration.dry_run(...)` end to end from the dataset, with the check (the
  process's digest cache emptied before each run, so every file is hashed: a CLI run's cost);
- unguarded (the baseline): the same dry-run with `integrity.check_files` replaced by a function
  that only names the listed files' paths (no stat, no hash, no footer read): the dry-run as it
  was before, reading the listed files;
- the check alone over the files the dry-run reads (decisions, outcomes, the rulebook's facts);
- warm: both again with what the previous pass found still held (`integrity._SEEN`), as a CLI
  run finds it in its digest store (`$GATE_HOME/cache/dataset-digests.json`) when the files
  have not changed since they were last checked: a stat per file instead of a read;
- the same pair for a whole-history effectiveness report from the rows (`load.from_dataset` +
  `effectiveness_report`, what `gate report effectiveness --dataset DIR --limit all` runs on a
  dataset without rollups).

Each figure is the median of `--rounds` alternating runs; the ratios guarded / unguarded are the
result (the machine is shared: absolute times vary, the ratio less). The load average is printed
beside them. Results: stdout and `benchmarks/results/dataset_integrity.json`.

Run: .venv/bin/python benchmarks/bench_dataset_integrity.py [--decisions N] [--rounds R]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import dryrun_data  # noqa: E402

from workbench.dataset import integrity  # noqa: E402
from workbench.dataset.load import from_dataset  # noqa: E402
from workbench.dataset.location import open_location  # noqa: E402
from workbench.migration import dry_run  # noqa: E402
from workbench.reports.policy import ReportParams, effectiveness_report  # noqa: E402

NOW = "2026-11-23T00:00:00.000Z"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def _unchecked(location, entries) -> list[str]:
    """A stand-in for `integrity.check_files` that checks nothing (the unguarded baseline)."""
    return [location.path(entry.path) for entry in entries]


def timed(fn, cold: bool = True) -> float:
    if cold:
        integrity._SEEN.clear()
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def measure(root: Path, rounds: int) -> dict:
    manifest = json.loads((root / "manifest.json").read_text())
    draft = dryrun_data.rulebooks()[1]
    real = integrity.check_files
    location = open_location(str(root))
    read = [e for e in integrity.iter_all(manifest) if e.kind in ("decisions", "outcomes", "facts")]

    def run() -> None:
        dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW)

    def report() -> None:
        frames = from_dataset(root, policy_id=dryrun_data.RULEBOOK_ID, limit=None)
        effectiveness_report(frames, dryrun_data.RULEBOOK_ID, ReportParams(limit=None))

    series: dict[str, list[float]] = {name: [] for name in
                                      ("guarded_s", "unguarded_s", "check_s", "report_guarded_s",
                                       "report_unguarded_s", "warm_s", "report_warm_s")}
    run()  # warm-up: the page cache holds the files for both sides
    for _ in range(rounds):
        integrity.check_files = _unchecked
        series["unguarded_s"].append(timed(run))
        series["report_unguarded_s"].append(timed(report))
        integrity.check_files = real
        series["guarded_s"].append(timed(run))
        series["report_guarded_s"].append(timed(report))
        series["warm_s"].append(timed(run, cold=False))  # what the digest store leaves: stats only
        series["report_warm_s"].append(timed(report, cold=False))
        series["check_s"].append(timed(lambda: real(location, read)))
    median = {name: statistics.median(values) for name, values in series.items()}
    median["report_ratio_guarded_to_unguarded"] = median["report_guarded_s"] / median["report_unguarded_s"]
    median["ratio_warm_to_unguarded"] = median["warm_s"] / median["unguarded_s"]
    median["report_ratio_warm_to_unguarded"] = median["report_warm_s"] / median["report_unguarded_s"]
    median["bytes_checked"] = sum(e.bytes or 0 for e in read)
    median["files_checked"] = len(read)
    median["ratio_guarded_to_unguarded"] = median["guarded_s"] / median["unguarded_s"]
    median["ratio_check_to_unguarded"] = median["check_s"] / median["unguarded_s"]
    return median


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    results = {"load_before": loadavg(), "runs": {}}
    for n in args.decisions:
        root = Path(tempfile.mkdtemp(prefix="bench-integrity-")) / "ds"
        try:
            dryrun_data.generate(root, n)
            figures = measure(root, args.rounds)
        finally:
            shutil.rmtree(root.parent, ignore_errors=True)
        figures["load"] = loadavg()
        results["runs"][str(n)] = figures
        print(f"{n:>10,} decisions: dry-run {figures['unguarded_s']:.3f} s unguarded, {figures['guarded_s']:.3f} s "
              f"guarded ({figures['ratio_guarded_to_unguarded']:.3f}x); check alone {figures['check_s']:.3f} s = "
              f"{figures['ratio_check_to_unguarded']:.1%} of the dry-run ({figures['files_checked']} files, "
              f"{figures['bytes_checked'] / 1e6:.1f} MB); report {figures['report_unguarded_s']:.3f} s → "
              f"{figures['report_guarded_s']:.3f} s ({figures['report_ratio_guarded_to_unguarded']:.3f}x); "
              f"with the digest store (files unchanged since checked): dry-run "
              f"{figures['ratio_warm_to_unguarded']:.3f}x, report {figures['report_ratio_warm_to_unguarded']:.3f}x; "
              f"load {figures['load']}", flush=True)
    results["load_after"] = loadavg()
    out = ROOT / "benchmarks" / "results" / "dataset_integrity.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
