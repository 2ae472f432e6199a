"""Parquet export: peak memory and time of a full export, and of an incremental one (1% new).

A ledger of N decisions is built by seeding a base ledger through the real services
(`gate demo seed`'s library: signed, chained records with receipts), then cloning its rows in
SQL until it holds N decisions (new decision and receipt ids, contiguous chain positions per
scope, the same record sizes). Building a ledger of 10,000,000 signed decisions through the
services would take hours here (and a cloned ledger takes about 18 GB of disk per million
decisions, so 10,000,000 do not fit on this machine's disk), so the benchmark measures at the
sizes given and reports whether peak memory grows with N (the export is bounded by design: one ledger batch plus the
writer's buffers, capped at BUFFER_ROWS rows); the summary states the measured growth.

Each export runs in a child process, which reports its own peak resident memory (`VmHWM` of its
address space; `ru_maxrss` from `wait4` is not used: Linux carries it across `exec`, so it could
show this parent's peak instead of the child's).
Baselines measured in the same run: the child's memory after imports and opening the ledger
(no export), and for the incremental export the full export's time. Load (`uptime`) is printed
beside the figures. Results go to benchmarks/results/export.json.

Run: .venv/bin/python benchmarks/bench_export.py [--base 2000] [--sizes 100000,1000000]
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "export.json"

from workbench.dataset.partwriter import BUFFER_ROWS  # noqa: E402

CHILD = """
import sys, time
from datetime import datetime, timezone
from gate.ledger import Ledger
from workbench.dataset.export import export_ledger
started = time.perf_counter()
ledger = Ledger(sys.argv[1]) if sys.argv[3] != "synth" else None
if sys.argv[3] == "synth":
    from workbench.dataset.synth import synthesize
    manifest = synthesize(sys.argv[2], decisions=int(sys.argv[1]))
    print(time.perf_counter() - started, manifest["tables"]["decisions"]["rows"], end=" ")
elif sys.argv[3] == "export":
    result = export_ledger(ledger, sys.argv[2], now=datetime(2028, 6, 1, tzinfo=timezone.utc))
    print(time.perf_counter() - started, sum(v for k, v in result.new_rows.items() if k != "facts"), end=" ")
else:
    ledger.read().__enter__()
    print(0.0, 0, end=" ")
print(next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:")))
"""


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def child(url: str, out: str, mode: str) -> dict:
    process = subprocess.Popen([sys.executable, "-c", CHILD, url, out, mode], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stdout, stderr = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"export child failed: {stderr}")
    seconds, rows, peak_kib = stdout.split()
    return {"seconds": round(float(seconds), 3), "rows": int(rows), "peak_rss_mib": round(int(peak_kib) / 1024, 1)}


def seed_base(path: Path, decisions: int) -> None:
    from gate.keys.config import SigningSetup
    from gate.keys.signing import generate_keyring
    from workbench.demo.seed import seed_ledger_at

    keys = path.parent / "keys.json"
    generate_keyring(keys, "2026-01-01T00:00:00.000Z")
    seed_ledger_at(f"sqlite:///{path}", SigningSetup.load(keys, None, "h"), decisions=decisions, seed=7)


def clone(path: Path, tag: str, *, limit: int | None = None, shift_days: int = 0) -> int:
    """Append one copy of the base decisions (the first `limit` in created_at order) with their
    chain links and receipts; returns the decisions added."""
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA synchronous=OFF")
    ts = lambda column: (f"strftime('%Y-%m-%dT%H:%M:%fZ', {column}, '+{shift_days} days')"  # noqa: E731
                         if shift_days else column)
    with connection:
        connection.execute("DROP TABLE IF EXISTS pick")
        connection.execute(
            "CREATE TEMP TABLE pick AS SELECT d.decision_id AS old_id, ? || substr(d.decision_id, 5) AS new_id, "
            "l.chain_id, h.size + ROW_NUMBER() OVER (PARTITION BY l.chain_id ORDER BY l.chain_position) AS position "
            "FROM decisions d JOIN chain_links l ON l.decision_id = d.decision_id "
            "JOIN chain_heads h ON h.chain_id = l.chain_id "
            f"WHERE d.decision_id LIKE 'dec\\_%' ESCAPE '\\' "
            f"ORDER BY d.created_at {'LIMIT ' + str(limit) if limit else ''}", (f"dcl{tag}_",))
        # Columns named, so a column a later migration adds is left at its default. The row seals
        # are copied as they are: the clones are for size, not for verification.
        connection.execute(
            "INSERT INTO decisions (decision_id, scope, key_id, idempotency_key, input_hash, record_hash, "
            "receipt_hash, policy_bundle_hash, rulebook_hash, policy_id, policy_version, verdict, created_at, "
            "record_json, request_json, row_hash, row_signature) "
            "SELECT p.new_id, scope, key_id, NULL, input_hash, record_hash, receipt_hash, "
            f"policy_bundle_hash, rulebook_hash, policy_id, policy_version, verdict, {ts('created_at')}, "
            "record_json, request_json, row_hash, row_signature "
            "FROM decisions JOIN pick p ON p.old_id = decisions.decision_id")
        connection.execute(
            "INSERT INTO chain_links (chain_id, chain_position, decision_id, leaf_hash, link_hash, link_json) "
            "SELECT p.chain_id, p.position, p.new_id, leaf_hash, link_hash, link_json "
            "FROM chain_links JOIN pick p ON p.old_id = chain_links.decision_id")
        connection.execute(
            "INSERT INTO lifecycle_receipts (receipt_id, kind, decision_id, scope, idempotency_key, input_hash, "
            "receipt_hash, reported_at, receipt_json, sequence, previous_row_hash, row_hash) "
            "SELECT ? || receipt_id, kind, p.new_id, scope, NULL, input_hash, "
            f"receipt_hash, {ts('reported_at')}, receipt_json, sequence, previous_row_hash, row_hash "
            "FROM lifecycle_receipts JOIN pick p ON p.old_id = lifecycle_receipts.decision_id", (f"c{tag}_",))
        connection.execute(
            "UPDATE chain_heads SET size = (SELECT MAX(position) FROM pick WHERE pick.chain_id = chain_heads.chain_id) "
            "WHERE chain_id IN (SELECT chain_id FROM pick)")
        added = connection.execute("SELECT COUNT(*) FROM pick").fetchone()[0]
    connection.close()
    return added


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", type=int, default=2000, help="decisions seeded through the services")
    parser.add_argument("--sizes", default="100000,1000000", help="ledger sizes (decisions) to export")
    parser.add_argument("--synth", type=int, default=1_000_000, help="decisions of the synthetic dataset (0: skip)")
    parser.add_argument("--workdir", default=None, help="where ledgers and datasets go (default: a temp dir)")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    work = Path(args.workdir or tempfile.mkdtemp(prefix="bench-export-"))
    work.mkdir(parents=True, exist_ok=True)
    base = work / "base.db"
    started = time.perf_counter()
    seed_base(base, args.base)
    results = {"python": platform.python_version(), "base_decisions": args.base,
               "seed_seconds": round(time.perf_counter() - started, 1), "load_before": load(), "sizes": []}
    print(f"seeded {args.base} decisions through the services in {results['seed_seconds']} s  ({results['load_before']})")
    for size in sizes:
        ledger = work / f"ledger-{size}.db"
        shutil.copyfile(base, ledger)
        decisions, copy = args.base, 0
        while decisions + args.base <= size:
            copy += 1
            decisions += clone(ledger, str(copy))
        url, out = f"sqlite:///{ledger}", str(work / f"ds-{size}")
        idle = child(url, out, "idle")
        full = child(url, out, "export")
        added, wanted = 0, max(1, decisions // 100)  # 1% new (several copies when the base is smaller)
        while added < wanted:
            added += clone(ledger, f"inc{added}", limit=min(args.base, wanted - added), shift_days=400)
        incremental = child(url, out, "export")
        rerun = child(url, out, "export")
        entry = {
            "decisions": decisions, "incremental_decisions": added,
            "idle": idle, "full": full, "incremental": incremental, "rerun": rerun,
            "full_rows_per_second": round(full["rows"] / full["seconds"]),
            "incremental_over_full_time": round(incremental["seconds"] / full["seconds"], 4),
            "incremental_over_full_rows": round(incremental["rows"] / full["rows"], 4),
            "peak_over_idle_rss": round(full["peak_rss_mib"] / idle["peak_rss_mib"], 2),
            "load": load(),
        }
        results["sizes"].append(entry)
        print(f"{decisions:>10,} decisions: full {full['seconds']:.1f} s ({full['rows']:,} rows, "
              f"{entry['full_rows_per_second']:,} rows/s), peak {full['peak_rss_mib']} MiB "
              f"(idle {idle['peak_rss_mib']} MiB); incremental +{added:,} decisions: {incremental['seconds']:.2f} s "
              f"= {entry['incremental_over_full_time']:.2%} of full for {entry['incremental_over_full_rows']:.2%} "
              f"of the rows, peak {incremental['peak_rss_mib']} MiB; rerun {rerun['seconds']:.2f} s  ({entry['load']})")
        shutil.rmtree(out, ignore_errors=True)
        ledger.unlink()
    if args.synth:
        synth = child(str(args.synth), str(work / "synth"), "synth")
        synth["decisions_per_second"] = round(synth["rows"] / synth["seconds"])
        synth["load"] = load()
        results["synth"] = synth
        print(f"synthetic dataset of {args.synth:,} decisions: {synth['seconds']:.1f} s "
              f"({synth['decisions_per_second']:,} decisions/s), peak {synth['peak_rss_mib']} MiB  ({synth['load']})")
        shutil.rmtree(work / "synth", ignore_errors=True)
    peaks = [entry["full"]["peak_rss_mib"] for entry in results["sizes"]]
    first, last = results["sizes"][0], results["sizes"][-1]
    growth = last["full"]["peak_rss_mib"] - first["full"]["peak_rss_mib"]
    # What was measured, not a conclusion: the writer caps its buffers at BUFFER_ROWS rows in all
    # (workbench/dataset/partwriter.py), so the peak should level off once they fill; a size between
    # the two shows whether it has.
    results["extrapolation"] = (
        f"peak memory {min(peaks)}–{max(peaks)} MiB from {first['decisions']:,} to {last['decisions']:,} decisions "
        f"({growth:+.1f} MiB for ×{last['decisions'] / first['decisions']:.0f} the decisions; the writer's buffers "
        f"are capped at {BUFFER_ROWS:,} rows); full-export time {last['full']['seconds'] / first['full']['seconds']:.1f}× "
        f"for that ×{last['decisions'] / first['decisions']:.0f} (~{last['full_rows_per_second']:,} rows/s at the largest)")
    print(results["extrapolation"])
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    if not args.workdir:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
