"""The retention of events out (docs/events.md, "Retention"): what a pass prunes from the outbox
(`event_outbox`, its sequence per scope in `event_retention`, migration 0019) and from the delivery
attempts (`webhook_attempts`), and what `/metrics` reads of the outbox's size. The rest of the event
tables' reads and writes are `gate.ledger.outbox.Outbox`'s; they change for delivery, these for
keeping the outbox bounded.

`prune_pass` deletes each scope's oldest events in one bounded transaction, only a prefix of its
sequence, only events written before the cutoff and settled by every active subscription (and
every held stream cursor); `event_retention` then says how far the scope was pruned. The pruner,
`Outbox.add_subscription` and `Outbox.enable` take that row's lock first (`retention_locked`: an
upsert that changes nothing), so a subscription that starts or resumes never lands on events a
concurrent prune removes. `prune_attempts_batch` deletes a subscription's oldest delivery attempts
the same way, keeping its newest ones, and adds their counts to the subscription's row, so
`Outbox.attempt_totals` still counts every attempt of its life."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from itertools import takewhile
from typing import Any, TypedDict

from sqlalchemy import LargeBinary, String, and_, bindparam, cast, delete, func, literal, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate.ledger.outbox_partitions import drop_partitions, ensure_partitions
from gate.ledger.store import Ledger
from gate.ledger.tables import (
    event_outbox,
    event_retention,
    event_sequences,
    event_stream_cursors,
    webhook_attempts,
    webhook_subscriptions,
)


class OutboxRetention:
    """The outbox's retention over one `Ledger`: the pruned prefixes, a pruning pass, the delivery
    attempts' pruning and the outbox's figures."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def pruned(self, scope: str) -> tuple[int, str | None]:
        """(the last pruned seq, the newest pruned event's time) of the scope; (0, None) when none was."""
        with self.ledger.read() as connection:
            row = connection.execute(select(event_retention.c.pruned_through, event_retention.c.pruned_through_at)
                                     .where(event_retention.c.scope == scope)).first()
        return (int(row[0]), row[1]) if row is not None else (0, None)

    def prune_pass(self, cutoff: str, held_streams: Sequence[str], max_bytes: int = 0,
                   today: date | None = None) -> Pruned:
        """One retention pass over every scope, in one transaction: the new events' bytes counted,
        then each scope's leading run of events written before `cutoff` and settled by every
        active subscription and held stream (`_age_bound`), and, when `max_bytes` is set and the
        kept events' bytes exceed it, the oldest events beyond that (`_size_bounds`: settled ones
        first, then undelivered ones, counted), deleted by sequence ranges in one statement (on
        PostgreSQL the day partitions wholly inside them dropped first)."""
        with self.ledger.write() as connection:
            if today is not None:
                ensure_partitions(connection, today)
            kept = _retention_all_locked(connection)
            heads = {str(r[0]): int(r[1]) for r in connection.execute(
                select(event_sequences.c.scope, event_sequences.c.last_seq)).all()}
            counted = _count_new(connection, kept, heads)
            floors = _settled_floors(connection, heads, held_streams)
            bounds = {scope: _age_bound(connection, scope, kept[scope]["pruned_through"], floors[scope], cutoff)
                      for scope in heads}
            taken = _measure(connection, {s: (kept[s]["pruned_through"], b) for s, b in bounds.items()})
            undelivered: dict[str, int] = {}
            if max_bytes > 0:
                bounds, taken, undelivered = _size_bounds(connection, kept, heads, counted, floors, bounds, taken,
                                                          max_bytes)
            ranges = {s: (kept[s]["pruned_through"], b) for s, b in bounds.items() if b > kept[s]["pruned_through"]}
            partitions = drop_partitions(connection, ranges, {s: int(r["pruned_through"]) for s, r in kept.items()})
            if ranges:
                connection.execute(delete(event_outbox).where(_in_ranges(ranges)))
            _record(connection, kept, heads, counted, ranges, taken, undelivered)
        return Pruned(events=sum(t[0] for t in taken.values()), bytes=sum(t[1] for t in taken.values()),
                      undelivered=sum(undelivered.values()), partitions=partitions,
                      dropped={s: r for s, r in ranges.items() if undelivered.get(s)})

    def return_space(self) -> None:
        """SQLite: give the pages pruning freed back to the file system (a ledger created with
        `auto_vacuum=INCREMENTAL`, gate.ledger.engine; an older file keeps them for reuse until it
        is vacuumed once). PostgreSQL reuses a dropped partition's space at once and a deleted
        row's after its autovacuum."""
        if self.ledger.engine.dialect.name != "sqlite":
            return
        with self.ledger.write() as connection:  # the write queue's turn (gate.ledger.writelock)
            # Each step of the pragma frees one page and pysqlite's execute steps a statement without
            # columns once: `executescript` steps it to its end. It commits the (empty) transaction
            # first, and the pragma runs as its own; the BEGIN after it is the one `write` commits.
            connection.connection.driver_connection.executescript(  # type: ignore[union-attr]
                "PRAGMA incremental_vacuum; BEGIN IMMEDIATE;")

    def figures(self) -> OutboxFigures:
        """What `/metrics` shows of the outbox, read in a few indexed statements: its rows (each
        scope's head less its pruned prefix: a scope's seqs have no gaps), the bytes counted by the
        last retention pass, the events a size bound dropped undelivered, and the delivery lag of
        the active subscriptions (events behind, and the age of the oldest they have not had)."""
        with self.ledger.read() as connection:
            heads = dict(connection.execute(select(event_sequences.c.scope, event_sequences.c.last_seq)).all())
            kept = {r.scope: r for r in connection.execute(select(event_retention)).all()}
            subs = connection.execute(select(webhook_subscriptions.c.scope, webhook_subscriptions.c.cursor).where(
                webhook_subscriptions.c.status == "active")).all()
            lag, oldest = 0, None
            for sub in subs:
                behind = int(heads.get(sub.scope, 0)) - int(sub.cursor)
                if behind > 0:
                    lag = max(lag, behind)
                    at = connection.execute(select(event_outbox.c.created_at).where(
                        event_outbox.c.scope == sub.scope, event_outbox.c.seq > sub.cursor)
                        .order_by(event_outbox.c.seq).limit(1)).scalar()
                    oldest = at if at is not None and (oldest is None or at < oldest) else oldest
        rows = sum(int(h) - (int(kept[s].pruned_through) if s in kept else 0) for s, h in heads.items())
        return {"rows": rows, "bytes": sum(int(r.bytes) for r in kept.values()),
                "dropped_undelivered": sum(int(r.dropped_undelivered) for r in kept.values()),
                "lag_events": lag, "oldest_undelivered_at": oldest}

    def attempts_prunable(self, subscription_id: str, cutoff: str, keep: int) -> bool:
        """Whether the subscription has more than `keep` attempts and its oldest was made before
        `cutoff` (a read: most passes find nothing to do and write nothing)."""
        mine = webhook_attempts.c.subscription_id == subscription_id
        with self.ledger.read() as connection:
            oldest = connection.execute(select(webhook_attempts.c.attempted_at).where(mine)
                                        .order_by(webhook_attempts.c.attempt_id).limit(1)).scalar()
            beyond = connection.execute(select(webhook_attempts.c.attempt_id).where(mine)
                                        .order_by(webhook_attempts.c.attempt_id.desc()).offset(keep).limit(1)).scalar()
        return oldest is not None and beyond is not None and oldest < cutoff

    def prune_attempts_batch(self, subscription_id: str, cutoff: str, keep: int, batch: int) -> int:
        """Delete up to `batch` of the subscription's oldest attempts in one transaction: the
        leading run made before `cutoff`, never one of its newest `keep`; their number and how many
        succeeded move to the subscription's `pruned_attempts` / `pruned_succeeded` in the same
        transaction. The subscription's row is locked first, so two pruners never count the same
        attempts twice. Returns how many were deleted."""
        mine = webhook_attempts.c.subscription_id == subscription_id
        this = webhook_subscriptions.c.subscription_id == subscription_id
        with self.ledger.write() as connection:
            if connection.execute(select(webhook_subscriptions.c.cursor).where(this).with_for_update()).first() is None:
                return 0
            newest = connection.execute(select(webhook_attempts.c.attempt_id).where(mine)
                                        .order_by(webhook_attempts.c.attempt_id.desc()).offset(keep).limit(1)).scalar()
            if newest is None:
                return 0
            rows = connection.execute(select(webhook_attempts.c.attempt_id, webhook_attempts.c.attempted_at,
                                             webhook_attempts.c.ok).where(mine, webhook_attempts.c.attempt_id <= newest)
                                      .order_by(webhook_attempts.c.attempt_id).limit(batch)).all()
            taken = list(takewhile(lambda r: r.attempted_at < cutoff, rows))
            if not taken:
                return 0
            connection.execute(delete(webhook_attempts).where(
                webhook_attempts.c.attempt_id.in_([int(r.attempt_id) for r in taken])))
            connection.execute(update(webhook_subscriptions).where(this).values(
                pruned_attempts=webhook_subscriptions.c.pruned_attempts + len(taken),
                pruned_succeeded=webhook_subscriptions.c.pruned_succeeded + sum(int(r.ok) for r in taken)))
        return len(taken)


@dataclass(frozen=True)
class Pruned:
    """What one retention pass removed: events, their bytes, how many of them an active
    subscription or held stream had not had (a size bound only), PostgreSQL partitions dropped
    whole, and the ranges (first exclusive, last inclusive) of the scopes that lost undelivered ones."""

    events: int = 0
    bytes: int = 0
    undelivered: int = 0
    partitions: int = 0
    dropped: dict[str, tuple[int, int]] = field(default_factory=dict)


class OutboxFigures(TypedDict):
    rows: int
    bytes: int
    dropped_undelivered: int
    lag_events: int
    oldest_undelivered_at: str | None


class RetentionRow(TypedDict):
    """A scope's `event_retention` row, as the pass reads it (locked): `counted_through` is never
    below `pruned_through` there."""

    scope: str
    pruned_through: int
    pruned_through_at: str | None
    counted_through: int
    bytes: int
    dropped_undelivered: int


# The stored bytes of one event row: its body at rest (compressed or not) and its keys.
ROW_BYTES = (func.length(cast(event_outbox.c.event_json, LargeBinary)) + func.length(event_outbox.c.scope)
             + func.length(event_outbox.c.event_id) + func.length(event_outbox.c.event_type)
             + func.length(event_outbox.c.created_at) + 8)
SIZE_STEP_ROWS = 5_000  # rows a size bound takes from one scope at a time, oldest scope first


def _retention_all_locked(connection: Connection) -> dict[str, RetentionRow]:
    """Every scope's retention row (created for a scope that has none), locked until the
    transaction ends (PostgreSQL, in scope order; SQLite's writer is alone anyway)."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    missing = select(event_sequences.c.scope, literal(0), literal(None, String)).where(
        event_sequences.c.scope.not_in(select(event_retention.c.scope)))
    connection.execute(dialect.insert(event_retention).from_select(
        ["scope", "pruned_through", "pruned_through_at"], missing).on_conflict_do_nothing())
    rows = connection.execute(select(event_retention).order_by(event_retention.c.scope).with_for_update()).mappings()
    found: dict[str, RetentionRow] = {}
    for row in rows:
        found[str(row["scope"])] = {
            "scope": row["scope"], "pruned_through": row["pruned_through"], "pruned_through_at": row["pruned_through_at"],
            "counted_through": max(int(row["counted_through"]), int(row["pruned_through"])),
            "bytes": row["bytes"], "dropped_undelivered": row["dropped_undelivered"]}
    return found


def _in_ranges(ranges: Mapping[str, tuple[int, int]]) -> Any:
    return or_(*[and_(event_outbox.c.scope == scope, event_outbox.c.seq > first, event_outbox.c.seq <= last)
                 for scope, (first, last) in ranges.items()])


def _measure(connection: Connection, ranges: Mapping[str, tuple[int, int]]) -> dict[str, tuple[int, int, str]]:
    """Per scope, (rows, bytes, newest time) of its events in the range (first exclusive, last inclusive)."""
    ranges = {s: r for s, r in ranges.items() if r[1] > r[0]}
    if not ranges:
        return {}
    rows = connection.execute(select(event_outbox.c.scope, func.count(), func.sum(ROW_BYTES),
                                     func.max(event_outbox.c.created_at)).where(_in_ranges(ranges))
                              .group_by(event_outbox.c.scope)).all()
    return {str(r[0]): (int(r[1]), int(r[2] or 0), str(r[3])) for r in rows}


def _count_new(connection: Connection, kept: Mapping[str, RetentionRow], heads: Mapping[str, int]) -> dict[str, int]:
    """The bytes of each scope's events written since the last pass counted them."""
    measured = _measure(connection, {s: (kept[s]["counted_through"], h) for s, h in heads.items()})
    return {scope: measured[scope][1] if scope in measured else 0 for scope in heads}


def _settled_floors(connection: Connection, heads: Mapping[str, int], held_streams: Sequence[str]) -> dict[str, int]:
    """Per scope, the highest seq every active subscription and every held stream has settled (its
    head when nobody holds its events): the lowest such cursor."""
    floors = dict(heads)
    for scope, cursor in connection.execute(select(webhook_subscriptions.c.scope, func.min(
            webhook_subscriptions.c.cursor)).where(webhook_subscriptions.c.status == "active")
            .group_by(webhook_subscriptions.c.scope)).all():
        if scope in floors:
            floors[scope] = min(floors[scope], int(cursor))
    if held_streams:  # a stream without a cursor in the scope has published nothing of it yet
        found = {(r[0], r[1]): int(r[2]) for r in connection.execute(select(
            event_stream_cursors.c.stream, event_stream_cursors.c.scope, event_stream_cursors.c.cursor).where(
            event_stream_cursors.c.stream.in_(list(held_streams)))).all()}
        for scope in floors:
            floors[scope] = min([floors[scope], *(found.get((name, scope), 0) for name in held_streams)])
    return floors


def _age_bound(connection: Connection, scope: str, pruned: int, floor: int, cutoff: str) -> int:
    """The last seq of the scope's leading run of settled events written before `cutoff`: the
    first event at or after it (found by walking the key from the pruned prefix, as far as the
    pass deletes anyway) ends the run."""
    if floor <= pruned or not cutoff:
        return pruned
    first_new = connection.execute(select(event_outbox.c.seq).where(
        event_outbox.c.scope == scope, event_outbox.c.seq > pruned, event_outbox.c.seq <= floor,
        event_outbox.c.created_at >= cutoff).order_by(event_outbox.c.seq).limit(1)).scalar()
    return int(first_new) - 1 if first_new is not None else floor


def _size_bounds(connection: Connection, kept: Mapping[str, RetentionRow], heads: Mapping[str, int],
                 counted: Mapping[str, int], floors: Mapping[str, int], bounds: dict[str, int],
                 taken: dict[str, tuple[int, int, str]], max_bytes: int) -> tuple[dict[str, int], dict[str, tuple[int, int, str]], dict[str, int]]:
    """Move the bounds on until the kept events' bytes are within `max_bytes`: the oldest kept
    event of all scopes goes first, settled events before any undelivered one (an event past an
    active subscription's or held stream's cursor), those counted per scope. Returns the bounds,
    what they take, and the undelivered events taken per scope."""
    total = sum(int(r["bytes"]) for r in kept.values()) + sum(counted.values()) - sum(t[1] for t in taken.values())
    undelivered: dict[str, int] = {}
    for limits in (floors, heads):
        while total > max_bytes:
            step = _oldest_step(connection, kept, heads, limits, bounds, total - max_bytes)
            if step is None:
                break
            scope, last = step
            rows, size, newest = _measure(connection, {scope: (bounds[scope], last)}).get(scope, (0, 0, ""))
            if limits is heads:
                undelivered[scope] = undelivered.get(scope, 0) + last - max(bounds[scope], floors[scope])
            before = taken.get(scope, (0, 0, ""))
            taken[scope] = (before[0] + rows, before[1] + size, max(before[2], newest))
            bounds[scope], total = last, total - size
    return bounds, taken, undelivered


def _oldest_step(connection: Connection, kept: Mapping[str, RetentionRow], heads: Mapping[str, int],
                 limits: Mapping[str, int], bounds: Mapping[str, int], excess: int) -> tuple[str, int] | None:
    """(the scope whose next kept event is the oldest, the last seq of the step it gives up):
    about the rows `excess` bytes make at the scope's mean row size, at most `SIZE_STEP_ROWS`."""
    oldest: tuple[str, str] | None = None
    for scope, limit in limits.items():
        if bounds[scope] < limit:
            at = connection.execute(select(event_outbox.c.created_at).where(
                event_outbox.c.scope == scope, event_outbox.c.seq == bounds[scope] + 1)).scalar()
            if at is not None and (oldest is None or at < oldest[1]):
                oldest = (scope, str(at))
    if oldest is None:
        return None
    scope = oldest[0]
    rows = max(1, heads[scope] - int(kept[scope]["pruned_through"]))
    mean = max(1, int(kept[scope]["bytes"]) // rows) if int(kept[scope]["bytes"]) else 1024
    step = min(SIZE_STEP_ROWS, max(1, -(-excess // mean)))
    return scope, min(limits[scope], bounds[scope] + step)


def _record(connection: Connection, kept: Mapping[str, RetentionRow], heads: Mapping[str, int],
            counted: Mapping[str, int], ranges: Mapping[str, tuple[int, int]],
            taken: Mapping[str, tuple[int, int, str]], undelivered: Mapping[str, int]) -> None:
    """Each scope's retention row after the pass: how far it is pruned (and the newest time
    pruned), the bytes kept, counted through its head, the undelivered events dropped."""
    changes = []
    for scope, row in kept.items():
        _, size, newest = taken.get(scope, (0, 0, ""))
        times = [t for t in (row["pruned_through_at"], newest) if t]
        changes.append({
            "s": scope, "p": ranges[scope][1] if scope in ranges else int(row["pruned_through"]),
            "pa": max(times) if times else None, "b": int(row["bytes"]) + counted.get(scope, 0) - size,
            "c": heads.get(scope, int(row["counted_through"])),
            "d": int(row["dropped_undelivered"]) + undelivered.get(scope, 0)})
    if changes:
        connection.execute(update(event_retention).where(event_retention.c.scope == bindparam("s")).values(
            pruned_through=bindparam("p"), pruned_through_at=bindparam("pa"), bytes=bindparam("b"),
            counted_through=bindparam("c"), dropped_undelivered=bindparam("d")), changes)


def retention_locked(connection: Connection, scope: str) -> tuple[int, str | None]:
    """The scope's retention row, created when absent and locked until the transaction ends (an
    upsert that changes nothing: PostgreSQL locks the row; SQLite's writer is alone anyway)."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(event_retention).values(scope=scope, pruned_through=0, pruned_through_at=None)
    row = connection.execute(statement.on_conflict_do_update(
        index_elements=["scope"], set_={"pruned_through": event_retention.c.pruned_through})
        .returning(event_retention.c.pruned_through, event_retention.c.pruned_through_at)).one()
    return int(row[0]), row[1]

