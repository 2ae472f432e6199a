"""What writing one event costs once the outbox holds many, with the event id's unique index (the
schema before migration 0026) and without it (now), on SQLite and PostgreSQL, same run.

    .venv/bin/python benchmarks/bench_outbox_insert.py [--kept 200000] [--batches 1500] [--rounds 3]
                                                       [--ledgers sqlite,postgresql]

Per ledger kind, two new ledgers at the newest revision; in one the unique constraint on
`event_outbox.event_id` is put back as migration 0026's downgrade puts it. Both are filled with
`--kept` events of one scope (the stored bytes of a real `decision.created`: a sample decide's
record, its event text in the at-rest encoding, each row its own id and number), as a 30-day outbox
holds them, and the scope's sequence set past them. Then, in rounds that alternate the two
(`ledger_pairs.compare`), `--batches` write transactions of 6 events each (a batch of a busy
writer) through the ledger's own write path (`gate.ledger.outbox_write.append_event`: the
sequence's upsert, the CloudEvent, its text, the at-rest encoding, the INSERT). Reported per round:
CPU µs per event (with PostgreSQL's), the ratio without / with the index, and the load average.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from ledger_pairs import Arm, bulk_insert, compare, sample_record  # noqa: E402  (the harness of paired ledgers)

SCOPE = "bench"
PER_BATCH = 6


def _data(record: dict[str, Any]) -> dict[str, Any]:
    return {"decision_id": record["decision_id"], "record_hash": record["record_hash"],
            "receipt_hash": record["receipt_hash"], "audit_chain": record.get("audit_chain"), "record": record}


def fill_outbox(ledger, scope: str, kept: int, record: dict[str, Any], indexed: bool) -> None:
    """`kept` events of `scope` in the outbox (a real `decision.created`'s stored bytes, each row its
    own id and number, the scope's sequence set past them), with the event id's unique constraint
    put back first when `indexed` (the schema before migration 0026)."""
    from sqlalchemy import text

    from gate.events.cloudevent import cloud_event, event_id, event_text
    from gate.ledger import codec

    time_ = "2026-11-29T10:00:00.000Z"
    stored = codec.encode(event_text(cloud_event(scope, 1, "decision.created", record["decision_id"], time_,
                                                 _data(record))))
    with ledger.engine.begin() as connection:
        if indexed:  # as migration 0026's downgrade puts it back
            if connection.dialect.name == "postgresql":
                connection.exec_driver_sql("ALTER TABLE event_outbox ADD CONSTRAINT uq_event_outbox_event_id "
                                           "UNIQUE (event_id, created_at)")
            else:
                connection.exec_driver_sql("CREATE UNIQUE INDEX uq_event_outbox_event_id ON event_outbox (event_id)")
        bulk_insert(connection, "event_outbox", ("scope", "seq", "event_id", "event_type", "created_at", "event_json"),
                    ((scope, seq, event_id(scope, seq), "dev.decision-gate.decision.created", time_, stored)
                     for seq in range(1, kept + 1)))
        connection.execute(text("INSERT INTO event_sequences (scope, last_seq) VALUES (:s, :n)"),
                           {"s": scope, "n": kept})


def _arm(name: str, indexed: bool, kept: int, record: dict[str, Any]) -> Arm:
    from gate.ledger.outbox_write import append_event

    data = _data(record)

    def write(connection: Any, _batch: int) -> None:
        for _ in range(PER_BATCH):
            append_event(connection, SCOPE, "decision.created", record["decision_id"], record["created_at"], data)

    return Arm(name, lambda ledger: fill_outbox(ledger, SCOPE, kept, record, indexed), write)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kept", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gate-bench-outbox-insert-"))
    record = sample_record(home / "sample")
    arms = (_arm("with the index", True, args.kept, record), _arm("without", False, args.kept, record))
    for kind in args.ledgers.split(","):
        compare(kind, home, arms, rounds=args.rounds, batches=args.batches, per_batch=PER_BATCH, unit="an event",
                kept=args.kept)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
