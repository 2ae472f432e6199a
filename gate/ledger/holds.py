"""Ledger reads and writes of held actions (tables `holds` and `hold_events`, migration 0014).

A hold's row is inserted with its decision (`store_decision`'s same-transaction rows), or, for
history written after the fact (the demo seed), whole with its events (`insert_whole`). Every
later change is one transaction: the row moves from the version the service read
(`row_version`) and the scope's hold chain grows by one event at `seq = head + 1`, with its
announcement in the outbox. Of two racing changes one commits; the other finds the row moved or
the sequence taken (`HoldRace`) and the service reads again.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict, cast

from sqlalchemy import ColumnElement, Table, func, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError

from gate.errors import Signal
from gate.holds.events import HoldEvent
from gate.ledger.outbox_write import append_event
from gate.ledger.store import Ledger
from gate.ledger.tables import decisions, hold_events, holds
from gate.strict_json import JsonValue
from gate.vocabulary import HoldState


class HoldRow(TypedDict):
    """A row of `holds` (gate.ledger.tables): a held decision, its queue and where it stands.
    `approvals_json` is the JSON list of the approving votes so far (`Approval`), `facts_json`
    the facts a reviewer sees; the flags are 0 or 1. `request_json` is the request's summary as
    opened (gate.holds.request; null before migration 0021), `target_object_id` and
    `source_record_id` two of its members, searchable."""

    decision_id: str
    scope: str
    record_hash: str
    policy_id: str | None
    policy_version: str | None
    rule_id: str | None
    reason_code: str | None
    requested_by: str
    queue: str
    priority: str
    priority_rank: int
    opened_at: str
    deadline_at: str
    escalate_at: str | None
    approvals_needed: int
    require_justification: int
    four_eyes: int
    state: HoldState
    claimed_by: str | None
    claimed_at: str | None
    approvals_json: str
    resolved_at: str | None
    resolved_by: str | None
    resolution_seq: int | None
    row_version: int
    facts_json: str
    requested_holder: str | None
    request_json: str | None
    target_object_id: str | None
    source_record_id: str | None


class QueueColumns(TypedDict):
    """The columns a queue sets on its hold: its name, quorum and escalation time."""

    queue: str
    approvals_needed: int
    require_justification: int
    escalate_at: str | None


class HoldMove(TypedDict, total=False):
    """The columns one hold event moves on its row (`row_version` moves with every one)."""

    queue: str
    approvals_needed: int
    require_justification: int
    escalate_at: str | None
    claimed_by: str | None
    claimed_at: str | None
    approvals_json: str
    state: HoldState
    resolved_at: str
    resolved_by: str
    resolution_seq: int


class Approval(TypedDict):
    """One approving vote so far, as `approvals_json` lists it (`holder` since issue 52)."""

    actor: str
    holder: NotRequired[str]
    event_hash: str


def _hold_row(row: RowMapping) -> HoldRow:
    """A `holds` row as read (the table's columns are HoldRow's)."""
    return cast(HoldRow, dict(row))


class HoldRace(Signal):
    """Internal: the row or the chain moved since it was read; read again and retry."""


@dataclass(frozen=True, slots=True)
class Announce:
    """The outbox event that announces a hold event (its CloudEvent type and data)."""

    name: str
    data: Mapping[str, JsonValue]


# What writes one hold event: its build(seq, previous_event_hash), the row's move(event) and its
# announcement; a step of a hold written whole (`HoldLedger.insert_whole`) makes it from the row
# as the steps before it left it.
Build = Callable[[int, str | None], HoldEvent]
Move = Callable[[HoldEvent], HoldMove]
Writing = tuple[Build, Move, Announce]
Making = Callable[[HoldRow], Writing]


@dataclass(frozen=True, slots=True)
class StoredRequest:
    """A decision's stored canonical request and what binds it to its record (`stored_requests`)."""

    input_hash: str
    record_hash: str
    record_json: str
    request_json: str


@dataclass(frozen=True, slots=True)
class HoldQuery:
    """Which holds an inbox page shows (`HoldService.list` checks the values): their states, and
    optionally one queue, priority or policy; `claimed_by`: only holds under this principal's live
    claim (claimed after `live_since`); `unassigned`: only holds under no live claim; `search`: a
    target object or source record id (exactly), or a decision id or its beginning."""

    states: Sequence[str]
    queue: str | None = None
    priority: str | None = None
    policy_id: str | None = None
    claimed_by: str | None = None
    unassigned: bool = False
    live_since: str = ""
    search: str | None = None

    def conditions(self) -> list[ColumnElement[bool]]:
        where: list[ColumnElement[bool]] = [holds.c.state.in_(list(self.states))]
        for column, value in ((holds.c.queue, self.queue), (holds.c.priority, self.priority),
                              (holds.c.policy_id, self.policy_id)):
            if value is not None:
                where.append(column == value)
        if self.claimed_by is not None:
            where += [holds.c.claimed_by == self.claimed_by, holds.c.claimed_at > self.live_since]
        if self.unassigned:
            where.append(or_(holds.c.claimed_by.is_(None), holds.c.claimed_at <= self.live_since))
        if self.search:
            where.append(or_(holds.c.decision_id == self.search, holds.c.target_object_id == self.search,
                             holds.c.source_record_id == self.search,
                             holds.c.decision_id.startswith(self.search, autoescape=True)))
        return where


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[HoldRow]
    total: int


def announce_opened(connection: Connection, row: HoldRow, inbox_url: str | None = None) -> None:
    """`hold.opened` in the decide's own transaction (the hold row is inserted beside it)."""
    append_event(connection, row["scope"], "hold.opened", row["decision_id"], row["opened_at"], {
        "decision_id": row["decision_id"], "record_hash": row["record_hash"], "queue": row["queue"],
        "priority": row["priority"], "deadline_at": row["deadline_at"], "policy_id": row["policy_id"],
        "rule_id": row["rule_id"], "reason_code": row["reason_code"], "inbox_url": inbox_url})


@dataclass(frozen=True, slots=True)
class HoldOpening:
    """A held decision's hold, stored with it (gate.ledger.store.DecisionExtra): its row, then
    its `hold.opened` announcement (with the Inbox's link to it, when the gate has one)."""

    row: HoldRow
    inbox_url: str | None = None

    def rows(self) -> tuple[tuple[Table, Mapping[str, object]], ...]:
        return ((holds, self.row),)

    def after_seal(self, connection: Connection, record: object) -> None:
        announce_opened(connection, self.row, self.inbox_url)


class HoldLedger:
    """The hold tables over one `Ledger`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def hold(self, scope: str, decision_id: str) -> HoldRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(holds).where(holds.c.scope == scope, holds.c.decision_id == decision_id)
                                     ).mappings().first()
        return _hold_row(row) if row else None

    def scope_of(self, decision_id: str) -> str | None:
        """The scope of the hold of this decision (a Slack button names the decision only)."""
        with self.ledger.read() as connection:
            value = connection.execute(select(holds.c.scope).where(holds.c.decision_id == decision_id)).scalar()
        return None if value is None else str(value)

    def page(self, scope: str, query: HoldQuery, *, limit: int, offset: int) -> Page:
        """The scope's holds `query` selects, the most urgent first (the highest `priority_rank`),
        then the least time left (`deadline_at`), then by decision id: one order over every
        matching hold, so a page is a slice of it (issue 65)."""
        where = [holds.c.scope == scope, *query.conditions()]
        ordered = (select(holds).where(*where)
                   .order_by(holds.c.priority_rank.desc(), holds.c.deadline_at, holds.c.decision_id)
                   .limit(limit).offset(offset))
        with self.ledger.read() as connection:
            rows = [_hold_row(r) for r in connection.execute(ordered).mappings().all()]
            total = int(connection.execute(select(func.count()).select_from(holds).where(*where)).scalar_one())
        return Page(rows, total)

    def version(self, scope: str) -> tuple[int, int]:
        """What changes whenever the scope's inbox does, read cheaply (two index reads, whatever
        the number of holds): its count of holds (a decide opens one without a hold event) and its
        hold chain's head (every later step, the clock's too, appends one event)."""
        with self.ledger.read() as connection:
            count = int(connection.execute(select(func.count()).select_from(holds)
                                           .where(holds.c.scope == scope)).scalar_one())
            return count, _head(connection, scope)[0]

    def counts(self, scope: str) -> dict[str, int]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(holds.c.state, func.count()).where(holds.c.scope == scope)
                                      .group_by(holds.c.state)).all()
        return {str(state): int(count) for state, count in rows}

    def events_of(self, scope: str, decision_id: str, limit: int = 500) -> list[HoldEvent]:
        """A decision's hold events, oldest first."""
        query = (select(hold_events.c.event_json).where(hold_events.c.scope == scope,
                                                        hold_events.c.decision_id == decision_id)
                 .order_by(hold_events.c.seq).limit(limit))
        with self.ledger.read() as connection:
            return [json.loads(r[0]) for r in connection.execute(query).all()]

    def history(self, scope: str, limit: int) -> list[HoldEvent]:
        """The scope's newest `limit` hold events, oldest first."""
        query = (select(hold_events.c.event_json).where(hold_events.c.scope == scope)
                 .order_by(hold_events.c.seq.desc()).limit(limit))
        with self.ledger.read() as connection:
            return [json.loads(r[0]) for r in reversed(connection.execute(query).all())]

    def policy_event(self, scope: str) -> HoldEvent | None:
        """The scope's newest hold-policy change (None while it keeps the default policy)."""
        query = (select(hold_events.c.event_json).where(hold_events.c.scope == scope,
                                                        hold_events.c.action == "policy_set")
                 .order_by(hold_events.c.seq.desc()).limit(1))
        with self.ledger.read() as connection:
            text = connection.execute(query).scalar()
        return json.loads(text) if text is not None else None

    def head(self, scope: str) -> tuple[int, str | None]:
        with self.ledger.read() as connection:
            return _head(connection, scope)

    def event_hashes(self, scope: str) -> list[str]:
        """The `event_hash` of every event of the scope's hold chain, oldest first (what its
        witnessed checkpoints are made of, `gate.chain.event_witness`)."""
        with self.ledger.read() as connection:
            return _event_hashes(connection, scope)

    def append(self, scope: str, build: Build, *, move: Move | None = None,
               decision_id: str | None = None, expected_version: int | None = None,
               announce: Announce | None = None,
               witness: Callable[[Callable[[], list[str]]], object] | None = None) -> HoldEvent:
        """One step in one transaction: `build(seq, previous_event_hash)` makes the sealed event
        on the chain head read here; the hold row (when `move`) takes the columns `move(event)` names,
        from `expected_version`. `witness(read)` runs first, in the transaction: `read()` gives the
        chain's event hashes as stored, and a refusal it raises writes nothing.
        Raises HoldRace when either moved meanwhile; nothing is then written."""
        try:
            with self.ledger.write() as connection:
                if witness is not None:
                    witness(lambda: _event_hashes(connection, scope))
                return _append_on(connection, scope, build, move, decision_id, expected_version, announce)[0]
        except IntegrityError as exc:
            raise HoldRace(str(scope)) from exc

    def insert_whole(self, row: HoldRow, steps: Sequence[Making], *, inbox_url: str | None = None,
                     witness: Callable[[Callable[[], list[str]]], object] | None = None) -> list[HoldEvent]:
        """A hold written whole in one transaction: its `row` (as a decide opens it, with its
        `hold.opened` announcement), then one event per step, each made as `append` makes one
        (`step(row as the events before it left it)` gives its build, move and announcement).
        No reader ever sees the hold in between. Returns the events; raises HoldRace when the
        chain moved meanwhile or the hold exists (nothing is then written)."""
        scope, decision_id = row["scope"], row["decision_id"]
        events = []
        try:
            with self.ledger.write() as connection:
                if witness is not None:
                    witness(lambda: _event_hashes(connection, scope))
                connection.execute(insert(holds).values(**row))
                announce_opened(connection, row, inbox_url)
                current = row
                for step in steps:
                    build, move, announce = step(current)
                    event, moved = _append_on(connection, scope, build, move, decision_id, current["row_version"],
                                              announce)
                    current = {**current, **moved, "row_version": current["row_version"] + 1}
                    events.append(event)
        except IntegrityError as exc:
            raise HoldRace(decision_id) from exc
        return events

    def due(self, now: str, limit: int) -> list[HoldRow]:
        """Open holds whose deadline or escalation time has come (any scope), soonest first."""
        deadline = (select(holds).where(holds.c.state == "open", holds.c.deadline_at <= now)
                    .order_by(holds.c.deadline_at).limit(limit))
        escalation = (select(holds).where(holds.c.state == "open", holds.c.escalate_at.is_not(None),
                                          holds.c.escalate_at <= now)
                      .order_by(holds.c.escalate_at).limit(limit))
        with self.ledger.read() as connection:
            rows = {r["decision_id"]: _hold_row(r) for r in connection.execute(deadline).mappings().all()}
            for r in connection.execute(escalation).mappings().all():
                rows.setdefault(r["decision_id"], _hold_row(r))
        return list(rows.values())

    def closed_like(self, scope: str, policy_id: str | None, rule_id: str | None, *, limit: int,
                    excluding: str | None = None) -> list[HoldRow]:
        """The scope's newest `limit` closed holds of one policy and rule, newest first (the
        candidates of `gate.holds.similar`); `excluding` leaves one decision out."""
        where = [holds.c.scope == scope, holds.c.state.in_(["approved", "denied", "expired"]),
                 holds.c.policy_id.is_(None) if policy_id is None else holds.c.policy_id == policy_id,
                 holds.c.rule_id.is_(None) if rule_id is None else holds.c.rule_id == rule_id]
        if excluding is not None:
            where.append(holds.c.decision_id != excluding)
        query = (select(holds).where(*where).order_by(holds.c.opened_at.desc(), holds.c.decision_id.desc())
                 .limit(limit))
        with self.ledger.read() as connection:
            return [_hold_row(r) for r in connection.execute(query).mappings().all()]

    def events_at(self, scope: str, seqs: Sequence[int]) -> dict[int, HoldEvent]:
        """The scope's hold events at these positions, by seq (a closed hold's `resolution_seq`)."""
        if not seqs:
            return {}
        query = select(hold_events.c.seq, hold_events.c.event_json).where(
            hold_events.c.scope == scope, hold_events.c.seq.in_(list(seqs)))
        with self.ledger.read() as connection:
            return {int(r[0]): json.loads(r[1]) for r in connection.execute(query).all()}

    def stored_requests(self, scope: str, decision_ids: Sequence[str]) -> dict[str, StoredRequest]:
        """The stored canonical request of each of these decisions of `scope`, with what binds it
        (the row's `input_hash` and `record_hash`, the record's text): what a hold's request is read from."""
        if not decision_ids:
            return {}
        with self.ledger.read() as connection:
            rows = connection.execute(select(
                decisions.c.decision_id, decisions.c.input_hash, decisions.c.record_hash, decisions.c.record_json,
                decisions.c.request_json).where(decisions.c.scope == scope,
                                                decisions.c.decision_id.in_(list(decision_ids)))).all()
        return {r[0]: StoredRequest(r[1], r[2], r[3], r[4]) for r in rows}

    def closed_among(self, decision_ids: Sequence[str]) -> set[str]:
        """Which of these held decisions are no longer open (what long-polls wait for)."""
        if not decision_ids:
            return set()
        with self.ledger.read() as connection:
            rows = connection.execute(select(holds.c.decision_id).where(
                holds.c.decision_id.in_(list(decision_ids)), holds.c.state != "open")).all()
        return {r[0] for r in rows}


def _append_on(connection: Connection, scope: str, build: Build, move: Move | None, decision_id: str | None,
               expected_version: int | None, announce: Announce | None) -> tuple[HoldEvent, HoldMove]:
    """`HoldLedger.append`'s statements on the transaction's connection: the event and the
    columns its move set on the hold row."""
    seq, previous = _head(connection, scope)
    event = build(seq + 1, previous)
    moved: HoldMove = {}
    if move is not None:
        moved = move(event)
        count = connection.execute(
            update(holds).where(holds.c.scope == scope, holds.c.decision_id == decision_id,
                                holds.c.row_version == expected_version)
            .values(**moved, row_version=holds.c.row_version + 1)).rowcount
        if count != 1:
            raise HoldRace(decision_id)
    connection.execute(insert(hold_events).values(
        scope=scope, seq=event["seq"], decision_id=event.get("decision_id"), action=event["action"],
        event_hash=event["event_hash"], created_at=event["created_at"],
        event_json=json.dumps(event, ensure_ascii=False, separators=(",", ":"))))
    if announce is not None:
        append_event(connection, scope, announce.name, decision_id, event["created_at"],
                     {**announce.data, "hold_event": event})
    return event, moved


def _head(connection: Connection, scope: str) -> tuple[int, str | None]:
    row = connection.execute(select(hold_events.c.seq, hold_events.c.event_hash)
                             .where(hold_events.c.scope == scope)
                             .order_by(hold_events.c.seq.desc()).limit(1)).first()
    return (int(row[0]), str(row[1])) if row else (0, None)


def _event_hashes(connection: Connection, scope: str) -> list[str]:
    rows = connection.execute(select(hold_events.c.event_hash).where(hold_events.c.scope == scope)
                              .order_by(hold_events.c.seq)).all()
    return [str(row[0]) for row in rows]
