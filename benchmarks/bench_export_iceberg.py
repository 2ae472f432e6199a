"""Iceberg against Parquet: export time and peak memory of a full and an incremental (1 % new)
export of the same ledger, and the time of a whole-history effectiveness report read back.

The ledger is built as `bench_export.py` builds it (a base seeded through the services, cloned in
SQL to the size asked). Each export and each read runs in a child process that reports its own
peak resident memory. Parquet answers a whole-history report from its rollups and, for a fair
comparison, also from the rows; the Iceberg layout has no rollups and reads the rows (through the
catalog, with every data file's digest checked). Load (`uptime`) is printed beside the figures;
on the 2 shared cores of the development machine compare the ratios, not the seconds.
Results go to benchmarks/results/export_iceberg.json.

Run: .venv/bin/python benchmarks/bench_export_iceberg.py [--base 2000] [--size 100000]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
RESULTS = ROOT / "benchmarks" / "results" / "export_iceberg.json"

from bench_export import clone, load, seed_base  # noqa: E402

CHILD = """
import sys, time
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
started = time.perf_counter()
url, out, mode = sys.argv[1:4]
if mode in ("parquet", "iceberg"):
    from gate.ledger import Ledger
    from workbench.dataset.export import export_ledger
    from workbench.dataset.iceberg import default_target
    lakehouse = default_target(out, Path(out).parent) if mode == "iceberg" else None
    result = export_ledger(Ledger(url), out, now=datetime(2028, 6, 1, tzinfo=timezone.utc), lakehouse=lakehouse)
    rows = sum(v for k, v in result.new_rows.items() if k != "facts")
else:
    from workbench.dataset.load import from_dataset
    from workbench.reports.policy import ReportParams, effectiveness_report
    frames = from_dataset(out, policy_id=sys.argv[4], limit=None)
    if mode == "rows":
        frames = replace(frames, rollup=None)
    report = effectiveness_report(frames, sys.argv[4], ReportParams(limit=None))
    rows = report["sample"]["decisions_considered"]
print(time.perf_counter() - started, rows, end=" ")
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def child(url: str, out: str, mode: str, policy: str = "") -> dict:
    done = subprocess.run([sys.executable, "-c", CHILD, url, out, mode, policy], cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise SystemExit(f"child {mode} failed: {done.stderr}")
    seconds, rows, peak_kib = done.stdout.split()
    return {"seconds": round(float(seconds), 3), "rows": int(rows), "peak_rss_mib": round(int(peak_kib) / 1024, 1),
            "load": load()}


def policy_of(ledger: Path) -> str:
    import sqlite3

    connection = sqlite3.connect(ledger)
    (policy,) = connection.execute("SELECT policy_id FROM decisions GROUP BY policy_id ORDER BY COUNT(*) DESC "
                                   "LIMIT 1").fetchone()
    connection.close()
    return str(policy)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=2000, help="decisions seeded through the services")
    parser.add_argument("--size", type=int, default=100_000, help="ledger size (decisions)")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-iceberg-"))
    work.mkdir(parents=True, exist_ok=True)
    ledger = work / "ledger.db"
    seed_base(ledger, args.base)
    decisions, copy = args.base, 0
    while decisions + args.base <= args.size:
        copy += 1
        decisions += clone(ledger, str(copy))
    url, policy = f"sqlite:///{ledger}", policy_of(ledger)
    results: dict = {"python": platform.python_version(), "decisions": decisions, "policy": policy, "runs": {}}
    outs = {"parquet": str(work / "parquet"), "iceberg": str(work / "iceberg")}
    for layout, out in outs.items():
        results["runs"][layout] = {"full": child(url, out, layout)}
    added, wanted = 0, max(1, decisions // 100)
    while added < wanted:
        added += clone(ledger, f"inc{added}", limit=min(args.base, wanted - added), shift_days=400)
    for layout, out in outs.items():
        runs = results["runs"][layout]
        runs["incremental"] = child(url, out, layout)
        runs["report_from_rows"] = child(url, out, "rows", policy)
        if layout == "parquet":
            runs["report_from_rollups"] = child(url, out, "rollups", policy)
        size = sum(path.stat().st_size for path in Path(out).rglob("*") if path.is_file())
        runs["bytes_on_disk"] = size
    ice, pq = results["runs"]["iceberg"], results["runs"]["parquet"]
    results["ratios"] = {
        "full_export_iceberg_over_parquet": round(ice["full"]["seconds"] / pq["full"]["seconds"], 2),
        "incremental_export_iceberg_over_parquet": round(ice["incremental"]["seconds"] / pq["incremental"]["seconds"], 2),
        "report_from_rows_iceberg_over_parquet": round(ice["report_from_rows"]["seconds"]
                                                       / pq["report_from_rows"]["seconds"], 2),
        "bytes_iceberg_over_parquet": round(ice["bytes_on_disk"] / pq["bytes_on_disk"], 2),
    }
    print(json.dumps(results, indent=2))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
