"""The outbox's write: one event in the caller's write transaction (see `gate.ledger.outbox`).
Kept apart from the rest of the outbox so the ledger's own writes (`gate.ledger.store`,
`gate.ledger.releases`) can announce their facts without a circle."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sqlalchemy import insert
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate.events.cloudevent import cloud_event
from gate.ledger.tables import event_outbox, event_sequences
from gate.protocol.canonical import canonical_text


def _next_seq(connection: Connection, scope: str) -> int:
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(event_sequences).values(scope=scope, last_seq=1)
    statement = statement.on_conflict_do_update(
        index_elements=["scope"], set_={"last_seq": event_sequences.c.last_seq + 1}
    ).returning(event_sequences.c.last_seq)
    return int(connection.execute(statement).scalar_one())


def append_event(connection: Connection, scope: str, name: str, subject: str | None, time: str,
                 data: Mapping[str, Any]) -> dict[str, Any]:
    """Write one event in the caller's transaction; returns the CloudEvent written."""
    seq = _next_seq(connection, scope)
    event = cloud_event(scope, seq, name, subject, time, data)
    connection.execute(insert(event_outbox).values(
        scope=scope, seq=seq, event_id=event["id"], event_type=event["type"], created_at=time,
        event_json=canonical_text(event)))
    return event
