"""What storing a decision's row costs once the ledger holds many, with ids in time order (now:
`gate.clock.RandomIds`) and with ids all random (`dec_` and 24 random hex digits, before), on
SQLite and PostgreSQL, same run.

    .venv/bin/python benchmarks/bench_decision_ids.py [--kept 200000] [--batches 1500] [--rounds 3]
                                                      [--ledgers sqlite,postgresql]

Per ledger kind, two new ledgers at the newest revision, each filled with `--kept` rows of the
`decisions` table in its real schema (its key on `decision_id` and its three other indexes; one
scope, no idempotency key, the stored bytes of a real record and request), whose ids are made the
way that arm makes them, in time order of making. Then rounds alternate the two (order reversed
every other round): `--batches` write transactions of 6 rows each, the rows written through the
table's own column types (the at-rest encoding of the record and the request) as the ledger
writes them. Reported per round: CPU µs per row of this process (for PostgreSQL plus its backends'
CPU from `/proc`), the ratio time-ordered / random, and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _database  # noqa: E402  (the throw-away ledger database)
from bench_outbox_insert import _record, _server_cpu  # noqa: E402  (a real record; PostgreSQL's own CPU)

PER_BATCH = 6
REQUEST = ROOT / "gate" / "data" / "requests" / "verdict-yes.json"


def _random_id() -> str:
    """A decision id as `RandomIds` made it before: 96 random bits and nothing else."""
    return "dec_" + secrets.token_hex(12)


def _ordered_id() -> str:
    from gate.clock import RandomIds

    return RandomIds().decision_id()


ARMS: dict[str, Callable[[], str]] = {"time-ordered": _ordered_id, "random": _random_id}


def _row(decision_id: str, record: dict[str, Any], request_text: str, n: int) -> dict[str, Any]:
    return {"decision_id": decision_id, "scope": "bench", "key_id": "key_bench", "idempotency_key": None,
            "input_hash": record["input_hash"], "record_hash": record["record_hash"],
            "receipt_hash": record["receipt_hash"], "policy_bundle_hash": record.get("policy_bundle_hash"),
            "rulebook_hash": record.get("policy_hash"), "policy_id": record.get("policy_id"),
            "policy_version": record.get("policy_version"), "verdict": record["verdict"],
            "created_at": f"2026-11-29T{n // 3_600_000 % 24:02d}:{n // 60_000 % 60:02d}:{n // 1000 % 60:02d}."
                          f"{n % 1000:03d}Z",
            "record_json": json.dumps(record), "request_json": request_text, "row_hash": record["record_hash"],
            "row_signature": "x" * 88}


def _ledger(kind: str, home: Path, make_id: Callable[[], str], kept: int, record: dict[str, Any]):
    from sqlalchemy import insert

    from gate.ledger import Ledger, codec
    from gate.ledger.tables import decisions

    home.mkdir(parents=True)
    url, drop = _database(kind, home)
    ledger = Ledger(url)
    ledger.upgrade()
    row = _row("", record, REQUEST.read_text(), 0)
    stored_record, stored_request = codec.encode(row["record_json"]), codec.encode(row["request_json"])
    columns = list(row)
    mark = "?" if kind == "sqlite" else "%s"
    statement = f"INSERT INTO decisions ({', '.join(columns)}) VALUES ({', '.join([mark] * len(columns))})"
    with ledger.engine.begin() as connection:
        for start in range(0, kept, 10_000):
            rows = []
            for n in range(start, min(kept, start + 10_000)):
                values = {**row, "decision_id": make_id(), "created_at": _row("", record, "", n)["created_at"],
                          "record_json": stored_record, "request_json": stored_request}
                rows.append(tuple(values[column] for column in columns))
            connection.exec_driver_sql(statement, rows)
    if kind == "sqlite":
        with ledger.engine.begin() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    return ledger, drop, insert(decisions)


def _round(made, make_id: Callable[[], str], batches: int, record: dict[str, Any], request_text: str) -> float:
    ledger, _, statement = made
    cpu, server = time.process_time(), _server_cpu(ledger)
    for batch in range(batches):
        with ledger.engine.begin() as connection:
            connection.execute(statement, [_row(make_id(), record, request_text, batch * PER_BATCH + n)
                                           for n in range(PER_BATCH)])
    spent = time.process_time() - cpu + _server_cpu(ledger) - server
    return 1e6 * spent / (batches * PER_BATCH)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kept", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gate-bench-decision-ids-"))
    record, request_text = _record(home / "sample"), REQUEST.read_text()
    for kind in args.ledgers.split(","):
        made = {arm: _ledger(kind, home / f"{kind}-{arm}", make_id, args.kept, record)
                for arm, make_id in ARMS.items()}
        ratios = []
        try:
            for number in range(args.rounds):
                order = list(ARMS) if number % 2 == 0 else list(reversed(ARMS))
                spent = {arm: _round(made[arm], ARMS[arm], args.batches, record, request_text) for arm in order}
                ratios.append(spent["time-ordered"] / spent["random"])
                print(f"{kind} round {number + 1}: time-ordered ids {spent['time-ordered']:.1f} µs a row, random "
                      f"{spent['random']:.1f} ({ratios[-1]:.2f}), {args.kept:,} kept, load {os.getloadavg()[0]:.2f}",
                      flush=True)
        finally:
            for ledger, drop, _ in made.values():
                ledger.dispose()
                drop()
        print(f"{kind}: median time-ordered / random {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
