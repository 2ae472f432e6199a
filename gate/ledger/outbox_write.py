"""The outbox's write: one event in the caller's write transaction (see `gate.ledger.outbox`).
Kept apart from the rest of the outbox so the ledger's own writes (`gate.ledger.store`,
`gate.ledger.releases`) can announce their facts without a circle.

In a group-commit batch run all at once (`gate.ledger.groupcommit`, `BATCH_MEMO`), where the
decides' announcements (`decision.created`, `hold.opened`) are written, a scope's sequence is
moved once per batch, not once per event: its first event takes the next number with the
upsert, which locks the scope's sequence row to the batch's transaction (on SQLite the whole file
is), the batch's later events of that scope count on in memory, and the last number is written
once before the commit; the events' rows go in one multi-row INSERT there too (`BATCH_FLUSH`).
The numbers, ids and bytes are exactly those event by event would give; a batch run member by
member (after a refusal) writes event by event. Both statements are compiled once per dialect
(`gate.ledger.prepared`)."""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, insert, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Dialect
from sqlalchemy.sql import ClauseElement

from gate.errors import LedgerUnavailable
from gate.events.cloudevent import CloudEvent, OutboxRow, cloud_event, event_text
from gate.ledger.groupcommit import BATCH_MEMO, defer, defer_row
from gate.ledger.prepared import Prepared
from gate.ledger.tables import event_outbox, event_sequences
from gate.protocol.decision_record import DecisionRecord

# The statements compiled for each engine's dialect (an engine's dialect lives as long as it).
_COMPILED: weakref.WeakKeyDictionary[Dialect, dict[str, Prepared]] = weakref.WeakKeyDictionary()


def _upsert_seq(dialect: Dialect) -> ClauseElement:
    """The scope's next number: its row created at 1, or moved on by one (and locked)."""
    insert_ = (postgresql if dialect.name == "postgresql" else sqlite).insert
    statement = insert_(event_sequences).values(scope=bindparam("scope"), last_seq=1)
    upsert: ClauseElement = statement.on_conflict_do_update(
        index_elements=["scope"], set_={"last_seq": event_sequences.c.last_seq + 1}
    ).returning(event_sequences.c.last_seq)
    return upsert


def _set_seq(_dialect: Dialect) -> ClauseElement:
    """The scope's last number, written once at the end of a batch."""
    return update(event_sequences).where(event_sequences.c.scope == bindparam("s_scope")).values(
        last_seq=bindparam("s_last"))


def _insert_event(_dialect: Dialect) -> ClauseElement:
    return insert(event_outbox)


_STATEMENTS: dict[str, Callable[[Dialect], ClauseElement]] = {
    "next": _upsert_seq, "set": _set_seq, "insert": _insert_event}
_OUTBOX_COLUMNS = ("scope", "seq", "event_id", "event_type", "created_at", "event_json")


def _statement(connection: Connection, name: str) -> Prepared:
    dialect = connection.dialect
    compiled = _COMPILED.setdefault(dialect, {})
    prepared = compiled.get(name)
    if prepared is None:
        prepared = compiled[name] = Prepared(_STATEMENTS[name](dialect), dialect,
                                             _OUTBOX_COLUMNS if name == "insert" else None)
    return prepared


def _next_seq(connection: Connection, scope: str) -> int:
    row = _statement(connection, "next").first(connection, {"scope": scope})
    if row is None:  # pragma: no cover - an upsert with RETURNING answers its row
        raise RuntimeError("the event sequence answered no row")
    return int(row["last_seq"])


def _batch_seq(connection: Connection, memo: dict[Any, Any], scope: str) -> int:
    """The scope's next number in a batch run all at once: the upsert for its first event, then
    counted on in memory, the last number written once at the end of the batch."""
    last: int | None = memo.get(("event-seq", scope))
    if last is None:
        seq = _next_seq(connection, scope)
    else:
        seq = last + 1
        setter = _statement(connection, "set")
        defer(connection, ("event-seq", scope), lambda connection: setter.run(connection, {
            "s_scope": scope, "s_last": seq}))
    memo["event-seq", scope] = seq
    return seq


def outbox_row(scope: str, seq: int, event: CloudEvent, text: str | None = None) -> OutboxRow:
    """The outbox row that stores `event` (the scope's `seq`-th), whose canonical text is `text`
    when the caller wrote it (`event_text`)."""
    return {"scope": scope, "seq": seq, "event_id": event["id"], "event_type": event["type"],
            "created_at": event["time"], "event_json": event_text(event) if text is None else text}


@dataclass(frozen=True, slots=True)
class DecisionCreated:
    """`decision.created` of a scope that mirrors its decisions, stored with the decision
    (gate.ledger.store.DecisionExtra): the record as stored, announced in the decision's
    transaction once its chain link is sealed into it."""

    scope: str

    def rows(self) -> tuple[()]:
        return ()

    def after_seal(self, connection: Connection, record: DecisionRecord | None) -> None:
        """The record's canonical text is spliced into the event's (`DecisionRecord.canonical_text`:
        its envelope's share written by the decide's request thread, `DecisionPipeline.store_sealed`),
        not written again on the writer thread."""
        if record is None:  # pragma: no cover - the decide pipeline always stores the chain
            raise LedgerUnavailable("the decision was stored without its chain")
        stored = record.as_dict()
        append_event(connection, self.scope, "decision.created", stored["decision_id"], stored["created_at"], {
            "decision_id": stored["decision_id"], "record_hash": stored["record_hash"],
            "receipt_hash": stored["receipt_hash"], "audit_chain": stored.get("audit_chain"), "record": stored},
            rendered={"record": record.canonical_text()})


def append_event(connection: Connection, scope: str, name: str, subject: str | None, time: str,
                 data: Mapping[str, Any], rendered: Mapping[str, str] | None = None) -> CloudEvent:
    """Write one event in the caller's transaction; returns the CloudEvent written. `rendered`:
    canonical texts of members of `data` already written (`event_text`)."""
    memo = connection.info.get(BATCH_MEMO)
    seq = _next_seq(connection, scope) if memo is None else _batch_seq(connection, memo, scope)
    event = cloud_event(scope, seq, name, subject, time, data)
    row = outbox_row(scope, seq, event, event_text(event, rendered))
    if memo is None:
        _statement(connection, "insert").run(connection, row)
    else:
        defer_row(connection, "event-outbox", _statement(connection, "insert"), row)
    return event
