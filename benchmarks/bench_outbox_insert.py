"""What writing one event costs once the outbox holds many, with the event id's unique index (the
schema before migration 0026) and without it (now), on SQLite and PostgreSQL, same run.

    .venv/bin/python benchmarks/bench_outbox_insert.py [--kept 200000] [--batches 1500] [--rounds 3]
                                                       [--ledgers sqlite,postgresql]

Per ledger kind, two new ledgers at the newest revision; in one the unique constraint on
`event_outbox.event_id` is put back as migration 0026's downgrade puts it. Both are filled with
`--kept` events of one scope (the stored bytes of a real `decision.created`: a sample decide's
record, its event text in the at-rest encoding, each row its own id and number), as a 30-day outbox
holds them, and the scope's sequence set past them. Then, in rounds that alternate the two in an
order reversed every other round, `--batches` write transactions of 6 events each (a batch of a
busy writer) through the ledger's own write path (`gate.ledger.outbox_write.append_event`: the
sequence's upsert, the CloudEvent, its text, the at-rest encoding, the INSERT). Reported per round:
CPU µs per event of this process (for PostgreSQL, plus the server's, read from its backend's
`/proc` entry), the ratio without / with the index, and the 1-minute load average.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _database  # noqa: E402  (the throw-away ledger database)
from gate_app import bench_app, bench_key  # noqa: E402  (the one start-up of a benchmark's gate)

SCOPE = "bench"
PER_BATCH = 6
REQUEST = ROOT / "gate" / "data" / "requests" / "verdict-yes.json"


def _record(home: Path) -> dict[str, Any]:
    """A real record to announce: one decide of the sample request on a throw-away gate."""
    settings, app = bench_app(home, None, {"GATE_EVENTS_DISPATCH": "false"})
    answer = app.test_client().post("/api/decide", json=json.loads(REQUEST.read_text()),
                                    headers={"x-api-key": bench_key(settings)})
    assert answer.status_code == 200, answer.get_json()
    record: dict[str, Any] = answer.get_json()
    return record


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

    kind = ledger.engine.dialect.name
    time_ = "2026-11-29T10:00:00.000Z"
    stored = codec.encode(event_text(cloud_event(scope, 1, "decision.created", record["decision_id"], time_,
                                                 _data(record))))
    mark = "?" if kind == "sqlite" else "%s"
    with ledger.engine.begin() as connection:
        if indexed:  # as migration 0026's downgrade puts it back
            if kind == "postgresql":
                connection.exec_driver_sql("ALTER TABLE event_outbox ADD CONSTRAINT uq_event_outbox_event_id "
                                           "UNIQUE (event_id, created_at)")
            else:
                connection.exec_driver_sql("CREATE UNIQUE INDEX uq_event_outbox_event_id ON event_outbox (event_id)")
        for start in range(1, kept + 1, 10_000):
            rows = [(scope, seq, event_id(scope, seq), "dev.decision-gate.decision.created", time_, stored)
                    for seq in range(start, min(kept, start + 9_999) + 1)]
            connection.exec_driver_sql(f"INSERT INTO event_outbox VALUES ({', '.join([mark] * 6)})", rows)
        connection.execute(text("INSERT INTO event_sequences (scope, last_seq) VALUES (:s, :n)"),
                           {"s": scope, "n": kept})
    if kind == "sqlite":
        with ledger.engine.begin() as connection:
            connection.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")


def _ledger(kind: str, home: Path, indexed: bool, kept: int, record: dict[str, Any]):
    from gate.ledger import Ledger

    home.mkdir(parents=True)
    url, drop = _database(kind, home)
    ledger = Ledger(url)
    ledger.upgrade()
    fill_outbox(ledger, SCOPE, kept, record, indexed)
    return ledger, drop


def _server_cpu(ledger) -> float:
    """CPU seconds of the PostgreSQL backends of this ledger's pool (0 on SQLite)."""
    if ledger.engine.dialect.name != "postgresql":
        return 0.0
    with ledger.engine.connect() as connection:
        pids = [row[0] for row in connection.exec_driver_sql(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database()")]
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _round(ledger, batches: int, record: dict[str, Any]) -> float:
    """CPU µs per event (this process and the database server) over `batches` transactions."""
    from gate.ledger.outbox_write import append_event

    data = _data(record)
    cpu, server = time.process_time(), _server_cpu(ledger)
    for _ in range(batches):
        with ledger.engine.begin() as connection:
            for _ in range(PER_BATCH):
                append_event(connection, SCOPE, "decision.created", record["decision_id"], record["created_at"], data)
    spent = time.process_time() - cpu + _server_cpu(ledger) - server
    return 1e6 * spent / (batches * PER_BATCH)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kept", type=int, default=200_000)
    parser.add_argument("--batches", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="gate-bench-outbox-insert-"))
    record = _record(home / "sample")
    for kind in args.ledgers.split(","):
        made = {indexed: _ledger(kind, home / f"{kind}-{indexed}", indexed, args.kept, record)
                for indexed in (True, False)}
        ratios = []
        try:
            for number in range(args.rounds):
                order = (True, False) if number % 2 == 0 else (False, True)
                spent = {indexed: _round(made[indexed][0], args.batches, record) for indexed in order}
                ratios.append(spent[False] / spent[True])
                print(f"{kind} round {number + 1}: with the index {spent[True]:.1f} µs an event, without "
                      f"{spent[False]:.1f} ({ratios[-1]:.2f}), {args.kept:,} kept, load {os.getloadavg()[0]:.2f}",
                      flush=True)
        finally:
            for ledger, drop in made.values():
                ledger.dispose()
                drop()
        print(f"{kind}: median without / with {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
