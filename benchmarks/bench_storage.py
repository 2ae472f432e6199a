"""Ledger bytes per decision at rest, split by table and index, on SQLite and PostgreSQL.

    .venv/bin/python benchmarks/bench_storage.py [--n 1000] [--backends sqlite,postgresql] [--modes plain,zstd]

The workload of docs/operating.md "Sizing": `n` decides of `gate/data/requests/verdict-yes.json`
through the Flask app (in process, test client), with one outcome receipt per two decisions
(every second decision gets `POST /api/decision/{id}/outcome`). Then:

* SQLite: `PRAGMA wal_checkpoint(TRUNCATE)`, `VACUUM`, and the pages of every table and index
  from the `dbstat` virtual table;
* PostgreSQL (a fresh database per run): `VACUUM FULL`, `ANALYZE`, and per table
  `pg_table_size` (heap + TOAST) and `pg_indexes_size`.

Each figure is divided by `n`. "marginal" subtracts the same ledger measured empty (right after
its migrations), so the fixed pages of the thirty-odd empty tables and indexes do not count at a
small `n`; "total" is the whole database divided by `n`.

Modes (`GATE_LEDGER_AT_REST`, gate/ledger/codec.py): `plain` stores the JSON documents as their
text in an SQLite file of 4 KiB pages (the code before issue 23's storage change), `zstd` in the
compact at-rest encoding (and SQLite's 8 KiB pages of new ledgers). Every
(backend, mode) runs in its own child process, one after the other in the same run; the 1-minute
load average is reported beside each figure. Results: benchmarks/results/storage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "storage.json"
REQUEST = ROOT / "gate" / "data" / "requests" / "verdict-yes.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import PG_ADMIN, _database  # noqa: E402  (the throw-away ledger database, as bench_http makes it)
from gate_app import bench_app, bench_key  # noqa: E402  (the one start-up of a benchmark's gate)

TABLE_ORDER = ("decisions", "chain_links", "merkle_nodes", "lifecycle_receipts", "receipt_heads",
               "outcome_latest", "confidence_counters", "rulebook_snapshots", "chain_heads", "usage_counters")


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


# ---------------------------------------------------------------------------------- measuring


def sqlite_sizes(path: Path) -> dict[str, dict[str, int]]:
    """{table: {"table": bytes, "indexes": bytes}} after a checkpoint and VACUUM."""
    connection = sqlite3.connect(path)
    try:
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        connection.execute("VACUUM")
        connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        owner = {name: (kind, table) for kind, name, table in
                 connection.execute("SELECT type, name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')")}
        sizes: dict[str, dict[str, int]] = {}
        for name, pages in connection.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            kind, table = owner.get(name, ("table", name))
            part = sizes.setdefault(table, {"table": 0, "indexes": 0})
            part["table" if kind == "table" else "indexes"] += int(pages)
        return sizes
    finally:
        connection.close()


def pg_sizes(url: str) -> dict[str, dict[str, int]]:
    """{table: {"table": heap + TOAST bytes, "indexes": bytes}} after VACUUM FULL and ANALYZE."""
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("VACUUM FULL")
        conn.execute("ANALYZE")
        rows = conn.execute(
            "SELECT c.relname, pg_table_size(c.oid), pg_indexes_size(c.oid) FROM pg_class c "
            "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' AND c.relkind = 'r'"
        ).fetchall()
    return {name: {"table": int(table), "indexes": int(indexes)} for name, table, indexes in rows}


def _sizes(kind: str, url: str, home: Path) -> dict[str, dict[str, int]]:
    return sqlite_sizes(home / "gate.db") if kind == "sqlite" else pg_sizes(url)


def fill(url: str, home: Path, n: int, request: dict[str, Any]) -> None:
    """`n` decides of `request`, one outcome receipt per two decisions, through the app."""
    settings, app = bench_app(home, url)
    try:
        key = bench_key(settings, None, plan="starter")
        client, headers = app.test_client(), {"x-api-key": key}
        for index in range(n):
            answer = client.post("/api/decide", json=request, headers=headers)
            if answer.status_code != 200:
                raise RuntimeError(f"decide answered {answer.status_code}: {answer.get_data(as_text=True)[:300]}")
            if index % 2 == 1:
                record = answer.json
                outcome = client.post(f"/api/decision/{record['decision_id']}/outcome", headers=headers, json={
                    "outcome_status": "succeeded", "action_executed": True,
                    "decision_record_hash": record["record_hash"]})
                if outcome.status_code not in (200, 201):
                    raise RuntimeError(f"outcome answered {outcome.status_code}")
    finally:
        app.extensions["gate"].ledger.dispose()


def child(kind: str, n: int, request_file: Path) -> dict[str, Any]:
    """One (backend, mode) measurement; the mode comes from GATE_LEDGER_AT_REST in the environment."""
    from gate.ledger import Ledger

    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-storage-{kind}-"))
    url, drop = _database(kind, home)
    if kind == "sqlite" and os.environ.get("GATE_LEDGER_AT_REST") == "plain":
        # "before": the file as the code before issue 23's storage change created it (4 KiB pages;
        # the page size is fixed when the file is created, so the engine's 8 KiB no longer applies).
        connection = sqlite3.connect(home / "gate.db")
        connection.execute("PRAGMA page_size=4096")
        connection.execute("PRAGMA journal_mode=WAL")
        connection.close()
    try:
        ledger = Ledger(url)
        ledger.upgrade()
        ledger.dispose()
        empty = _sizes(kind, url, home)
        load_before = _load1()
        fill(url, home, n, json.loads(request_file.read_text()))
        full = _sizes(kind, url, home)
        return {"backend": kind, "mode": os.environ.get("GATE_LEDGER_AT_REST", ""), "n": n,
                "load1_before": load_before, "load1_after": _load1(), "empty": empty, "full": full}
    finally:
        drop()
        import shutil

        shutil.rmtree(home, ignore_errors=True)


NO_PAGES = {"table": 0, "indexes": 0}


def bytes_per_row(result: dict[str, Any], table: str, rows: int) -> float:
    """The bytes `table` and its indexes grew by (`full` less `empty`, as `_sizes` measured them)
    per one of the `rows` written: the one measure of bytes per row of every storage benchmark."""
    full, empty = result["full"].get(table, NO_PAGES), result["empty"].get(table, NO_PAGES)
    return (full["table"] + full["indexes"] - empty["table"] - empty["indexes"]) / max(1, rows)


def per_decision(result: dict[str, Any]) -> dict[str, Any]:
    """Bytes per decision: per table (table, indexes, both, marginal) and the totals."""
    n, empty, full = result["n"], result["empty"], result["full"]
    tables = {}
    for name, part in full.items():
        tables[name] = {"table": round(part["table"] / n), "indexes": round(part["indexes"] / n),
                        "marginal": round(bytes_per_row(result, name, n))}
    total = sum(p["table"] + p["indexes"] for p in full.values())
    marginal = total - sum(p["table"] + p["indexes"] for p in empty.values())
    return {"tables": tables, "total": round(total / n), "marginal": round(marginal / n)}


def measure(kind: str, mode: str, n: int, request_file: Path) -> dict[str, Any]:
    env = {**os.environ, "GATE_LEDGER_AT_REST": mode}
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--n", str(n), "--request", str(request_file)],
                          check=False, env=env, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{kind}/{mode} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["bytes_per_decision"] = per_decision(result)
    return result


def print_table(results: list[dict[str, Any]]) -> None:
    names = [name for name in TABLE_ORDER if any(name in r["bytes_per_decision"]["tables"] for r in results)]
    header = f"{'backend':10} {'mode':6} " + " ".join(f"{name[:12]:>12}" for name in names) + \
        f" {'marginal':>9} {'total':>7} {'KiB':>6} {'load1':>11}"
    print(header)
    for result in results:
        per = result["bytes_per_decision"]
        cells = " ".join(f"{per['tables'].get(name, {}).get('marginal', 0):>12,}" for name in names)
        print(f"{result['backend']:10} {result['mode']:6} {cells} {per['marginal']:>9,} {per['total']:>7,} "
              f"{per['marginal'] / 1024:>6.2f} {result['load1_before']:>5}-{result['load1_after']:<5}")
    print("(bytes per decision: each table with its indexes, marginal over the empty ledger; "
          "total = whole database / n)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--modes", default="plain,zstd")
    parser.add_argument("--request", default=str(REQUEST))
    parser.add_argument("--child", choices=("sqlite", "postgresql"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        print(json.dumps(child(args.child, args.n, Path(args.request))))
        return 0
    results = []
    for kind in args.backends.split(","):
        if kind == "postgresql":
            try:
                import psycopg

                psycopg.connect(PG_ADMIN, connect_timeout=3).close()
            except Exception as exc:  # noqa: BLE001 - a missing server skips the backend
                print(f"postgresql skipped: {type(exc).__name__}")
                continue
        for mode in args.modes.split(","):
            results.append(measure(kind, mode, args.n, Path(args.request)))
    print_table(results)
    for result in results:
        print(f"{result['backend']}/{result['mode']}: " + json.dumps(
            {name: part for name, part in result["bytes_per_decision"]["tables"].items() if part["marginal"]}))
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
