"""What storing a decision's row costs once the ledger holds many, with ids in time order (now:
`gate.clock.RandomIds`) and with ids all random (`dec_` and 24 random hex digits, before), on
SQLite and PostgreSQL, same run.

    .venv/bin/python benchmarks/bench_decision_ids.py [--kept 200000] [--batches 1500] [--rounds 3]
                                                      [--ledgers sqlite,postgresql]

Per ledger kind, two new ledgers at the newest revision, each filled with `--kept` rows of the
`decisions` table in its real schema (its key on `decision_id` and its three other indexes; one
scope, no idempotency key, the stored bytes of a real record and request), whose ids are made the
way that arm makes them, in time order of making. Then rounds alternate the two (`ledger_pairs.compare`):
`--batches` write transactions of 6 rows each, the rows written through the table's own column
types (the at-rest encoding of the record and the request) as the ledger writes them. Reported per
round: CPU µs per row (with PostgreSQL's), the ratio time-ordered / random, and the load average.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ledger_pairs import REQUEST, Arm, bulk_insert, compare, sample_record  # noqa: E402  (paired ledgers)

PER_BATCH = 6


def _random_id() -> str:
    """A decision id as `RandomIds` made it before: 96 random bits and nothing else."""
    return "dec_" + secrets.token_hex(12)


def _ordered_id() -> str:
    from gate.clock import RandomIds

    return RandomIds().decision_id()


def _created_at(n: int) -> str:
    return f"2026-11-29T{n // 3_600_000 % 24:02d}:{n // 60_000 % 60:02d}:{n // 1000 % 60:02d}.{n % 1000:03d}Z"


def _row(decision_id: str, record: dict[str, Any], request_text: str, n: int) -> dict[str, Any]:
    return {"decision_id": decision_id, "scope": "bench", "key_id": "key_bench", "idempotency_key": None,
            "input_hash": record["input_hash"], "record_hash": record["record_hash"],
            "receipt_hash": record["receipt_hash"], "policy_bundle_hash": record.get("policy_bundle_hash"),
            "rulebook_hash": record.get("policy_hash"), "policy_id": record.get("policy_id"),
            "policy_version": record.get("policy_version"), "verdict": record["verdict"],
            "created_at": _created_at(n), "record_json": json.dumps(record), "request_json": request_text,
            "row_hash": record["record_hash"], "row_signature": "x" * 88}


def _arm(name: str, make_id: Callable[[], str], kept: int, record: dict[str, Any], request_text: str) -> Arm:
    from sqlalchemy import insert

    from gate.ledger import codec
    from gate.ledger.tables import decisions

    statement, row = insert(decisions), _row("", record, request_text, 0)
    stored = {**row, "record_json": codec.encode(row["record_json"]), "request_json": codec.encode(request_text)}

    def fill(ledger: Any) -> None:
        with ledger.engine.begin() as connection:
            bulk_insert(connection, "decisions", list(stored), (
                tuple({**stored, "decision_id": make_id(), "created_at": _created_at(n)}.values())
                for n in range(kept)))

    def write(connection: Any, batch: int) -> None:
        connection.execute(statement, [_row(make_id(), record, request_text, batch * PER_BATCH + n)
                                       for n in range(PER_BATCH)])

    return Arm(name, fill, write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kept", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gate-bench-decision-ids-"))
    record, request_text = sample_record(home / "sample"), REQUEST.read_text()
    arms = (_arm("random", _random_id, args.kept, record, request_text),
            _arm("time-ordered", _ordered_id, args.kept, record, request_text))
    for kind in args.ledgers.split(","):
        compare(kind, home, arms, rounds=args.rounds, batches=args.batches, per_batch=PER_BATCH, unit="a row",
                kept=args.kept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
