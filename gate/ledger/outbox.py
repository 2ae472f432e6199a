"""Ledger reads and writes of events out (tables `event_outbox`, `event_sequences`,
`webhook_subscriptions`, `webhook_attempts`, `webhook_replays`, `event_stream_cursors`; migration
0013): the events, the subscriptions and their leases, the delivery attempts and replays, the
stream cursors. `append_event` runs inside the caller's write transaction, so an event exists
exactly when the fact it announces does. A scope's sequence is taken from its `event_sequences` row
by one upsert that holds the row until commit: two transactions of one scope take 5 and 6 in the
order they commit, so a reader that sees 6 has seen 5.

What the retention prunes, and the outbox's figures, are `gate.ledger.outbox_retention`'s
(docs/events.md, "Retention"). `add_subscription` and `enable` take the scope's retention row's
lock first (`retention_locked`), so a subscription that starts or resumes never lands on events a
concurrent prune removes."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypedDict, cast

from sqlalchemy import RowMapping, and_, bindparam, delete, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate.events.cloudevent import OutboxRow
from gate.ledger.codec import decode
from gate.ledger.outbox_retention import retention_locked
from gate.ledger.outbox_write import append_event
from gate.ledger.store import Ledger
from gate.ledger.tables import (
    event_outbox,
    event_sequences,
    event_stream_cursors,
    webhook_attempts,
    webhook_replays,
    webhook_subscriptions,
)


class NewSubscription(TypedDict):
    """A `webhook_subscriptions` row as `add_subscription` stores it: where and what to deliver,
    the secrets (the previous one until `previous_until`), its state, its cursor and failures,
    and the dispatcher's lease."""

    subscription_id: str
    scope: str
    url: str
    event_types: str  # canonical JSON list of types (`event_types_of`)
    secret: str
    previous_secret: str | None
    previous_until: str | None
    status: str  # active | disabled | pending
    disabled_reason: str | None
    cursor: int
    attempts: int
    failing_since: str | None
    next_attempt_at: str | None
    lease_owner: str | None
    lease_until: str | None
    created_at: str
    created_by: str
    sign_ed25519: int


class SubscriptionRow(NewSubscription):
    """A stored subscription: its row, with the attempts the retention pruned (they start at 0)."""

    pruned_attempts: int
    pruned_succeeded: int


class SubscriptionChange(TypedDict, total=False):
    """The members of a subscription a change sets (`update_subscription`, `enable`, `delivered`)."""

    secret: str
    previous_secret: str | None
    previous_until: str | None
    status: str
    disabled_reason: str | None
    cursor: int
    attempts: int
    failing_since: str | None
    next_attempt_at: str | None
    lease_owner: str | None
    lease_until: str | None
    sign_ed25519: int


def _subscription_row(row: RowMapping) -> SubscriptionRow:
    return cast(SubscriptionRow, dict(row))  # select(webhook_subscriptions): exactly its columns


class DeliveryAttempt(TypedDict):
    """One post of one event to a subscription, as the ledger keeps it (`ok`, `replay`: 0 or 1):
    a `webhook_attempts` row before the store numbers it."""

    subscription_id: str
    scope: str
    seq: int
    event_id: str
    attempted_at: str
    ok: int
    status_code: int | None
    latency_ms: int
    excerpt: str
    replay: int


HEADS_PER_STATEMENT = 500  # scopes whose newest seq one statement reads (`Outbox.heads`)

# A DeliveryAttempt's members: the columns of its row but the number the store gives it.
ATTEMPT_COLUMNS = tuple(column.name for column in webhook_attempts.columns if column.name != "attempt_id")


class AttemptRow(DeliveryAttempt):
    """A stored `webhook_attempts` row: the attempt with its number."""

    attempt_id: int


_EVENTS_AFTER = (select(event_outbox).where(event_outbox.c.scope == bindparam("scope"),
                                            event_outbox.c.seq > bindparam("after"))
                 .order_by(event_outbox.c.seq).limit(bindparam("limit")))


def _event_row(row: RowMapping) -> OutboxRow:
    return cast(OutboxRow, dict(row))  # select(event_outbox): exactly its columns


class Outbox:
    """The event tables over one `Ledger`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # ------------------------------------------------------------------ events

    def events_after(self, scope: str, after: int, limit: int = 100) -> list[OutboxRow]:
        """Up to `limit` events of `scope` after seq `after`, in order: a dispatcher's turn reads
        its events here, compiled once for the ledger (`Ledger.hot`), each body decoded from its
        at-rest form as the column type reads it."""
        with self.ledger.read() as connection:  # decoded inside: a corrupt value fails closed as any read's
            rows = self.ledger.hot("events-after", _EVENTS_AFTER).run(
                connection, {"scope": scope, "after": after, "limit": limit})
            return [cast(OutboxRow, {**row, "event_json": decode(row["event_json"])}) for row in rows]

    def event(self, scope: str, seq: int) -> OutboxRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(event_outbox).where(
                event_outbox.c.scope == scope, event_outbox.c.seq == seq)).mappings().first()
        return _event_row(row) if row else None

    def seqs_between(self, scope: str, since: str, until: str) -> list[int]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(event_outbox.c.seq).where(
                event_outbox.c.scope == scope, event_outbox.c.created_at >= since,
                event_outbox.c.created_at <= until).order_by(event_outbox.c.seq)).all()
        return [int(r[0]) for r in rows]

    def head(self, scope: str) -> int:
        """The scope's newest event seq; 0 before its first event."""
        return self.heads([scope]).get(scope, 0)

    def scopes(self) -> list[str]:
        with self.ledger.read() as connection:
            return [r[0] for r in connection.execute(select(event_sequences.c.scope)
                                                     .order_by(event_sequences.c.scope)).all()]

    # ------------------------------------------------------------------ subscriptions

    def add_subscription(self, row: NewSubscription) -> int:
        """Store a new subscription; its cursor never starts inside the pruned range (a subscription
        `from` the beginning starts after it). Returns the cursor stored."""
        with self.ledger.write() as connection:
            pruned, _ = retention_locked(connection, row["scope"])
            cursor = max(int(row["cursor"]), pruned)
            connection.execute(insert(webhook_subscriptions).values(**{**row, "cursor": cursor}))
        return cursor

    def enable(self, subscription_id: str, values: SubscriptionChange, skip_pruned: bool) -> int | None:
        """Make a subscription active with `values`, unless events after its cursor were pruned:
        then nothing changes and the scope's `pruned_through` is returned, or, with `skip_pruned`,
        its cursor moves to `pruned_through` (the oldest kept event is delivered next)."""
        with self.ledger.write() as connection:
            row = connection.execute(select(webhook_subscriptions.c.scope, webhook_subscriptions.c.cursor).where(
                webhook_subscriptions.c.subscription_id == subscription_id)).first()
            if row is None:
                return None
            pruned, _ = retention_locked(connection, row.scope)
            changes = SubscriptionChange(**values)
            if int(row.cursor) < pruned:
                if not skip_pruned:
                    return pruned
                changes["cursor"] = pruned
            connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id).values(**changes))
        return None

    def subscription(self, scope: str, subscription_id: str) -> SubscriptionRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(webhook_subscriptions).where(
                webhook_subscriptions.c.scope == scope,
                webhook_subscriptions.c.subscription_id == subscription_id)).mappings().first()
        return _subscription_row(row) if row else None

    def subscriptions(self, scope: str | None = None, *, active_only: bool = False) -> list[SubscriptionRow]:
        query = select(webhook_subscriptions).order_by(webhook_subscriptions.c.created_at,
                                                       webhook_subscriptions.c.subscription_id)
        if scope is not None:
            query = query.where(webhook_subscriptions.c.scope == scope)
        if active_only:
            query = query.where(webhook_subscriptions.c.status == "active")
        with self.ledger.read() as connection:
            return [_subscription_row(r) for r in connection.execute(query).mappings().all()]

    def update_subscription(self, subscription_id: str, values: SubscriptionChange,
                            lease_owner: str | None = None) -> bool:
        """Change a subscription (only while `lease_owner` still holds it, when given)."""
        condition = webhook_subscriptions.c.subscription_id == subscription_id
        if lease_owner is not None:
            condition = and_(condition, webhook_subscriptions.c.lease_owner == lease_owner)
        with self.ledger.write() as connection:
            return connection.execute(update(webhook_subscriptions).where(condition).values(**values)).rowcount == 1

    def claim(self, subscription_id: str, owner: str, now: str, until: str) -> bool:
        """Take the subscription's lease if nobody holds an unexpired one (compare and set: of
        several dispatchers, on any number of hosts, one wins)."""
        free = or_(webhook_subscriptions.c.lease_until.is_(None), webhook_subscriptions.c.lease_until < now,
                   webhook_subscriptions.c.lease_owner == owner)
        with self.ledger.write() as connection:
            changed = connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id,
                webhook_subscriptions.c.status == "active", free)
                .values(lease_owner=owner, lease_until=until)).rowcount
        return changed == 1

    def release(self, subscription_id: str, owner: str) -> None:
        with self.ledger.write() as connection:
            connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id,
                webhook_subscriptions.c.lease_owner == owner).values(lease_owner=None, lease_until=None))

    def disable(self, subscription: SubscriptionRow, reason: str, at: str,
                event: tuple[str, Mapping[str, Any]] | None) -> None:
        """Disable a subscription, and (when `event` is given) write its event in the same transaction."""
        with self.ledger.write() as connection:
            connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription["subscription_id"])
                .values(status="disabled", disabled_reason=reason, lease_owner=None, lease_until=None))
            if event is not None:
                append_event(connection, subscription["scope"], event[0], subscription["subscription_id"], at,
                             event[1])

    # ------------------------------------------------------------------ attempts and replays

    def record_attempt(self, row: DeliveryAttempt) -> None:
        with self.ledger.write() as connection:
            self._insert_attempts(connection, [row])

    def delivered(self, subscription_id: str, owner: str, attempts: Sequence[DeliveryAttempt],
                  values: SubscriptionChange | None) -> bool:
        """Attempts made and the subscription's new cursor (`values`), in one transaction; the
        subscription changes only while `owner` still holds its lease (False when it lost it)."""
        with self.ledger.write() as connection:
            if attempts:
                self._insert_attempts(connection, attempts)
            if values is None:
                return True
            return connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id,
                webhook_subscriptions.c.lease_owner == owner).values(**values)).rowcount == 1

    def _insert_attempts(self, connection: Connection, attempts: Sequence[DeliveryAttempt]) -> None:
        """The attempts in one multi-row INSERT compiled once for the ledger (`Ledger.hot`): a
        dispatcher writes one row per post, and through `Connection.execute` each row cost about
        40 µs of the dispatcher's CPU, as much as a quarter of the post itself. `inline()`: no
        RETURNING of the numbers (PostgreSQL's implicit one), which nothing here reads."""
        statement = self.ledger.hot("webhook-attempts", insert(webhook_attempts).inline(), ATTEMPT_COLUMNS)
        statement.insert_rows(connection, attempts)

    def attempts(self, subscription_id: str, limit: int = 200) -> list[AttemptRow]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(webhook_attempts).where(
                webhook_attempts.c.subscription_id == subscription_id)
                .order_by(webhook_attempts.c.attempt_id.desc()).limit(limit)).mappings().all()
        return [cast(AttemptRow, dict(r)) for r in rows]  # select(webhook_attempts): exactly its columns

    def attempt_totals(self, subscription_id: str) -> tuple[int, int]:
        """(attempts, successful attempts) of a subscription, over its whole life: the rows kept
        plus the counts of those the retention pruned. One statement, so a prune that moves rows
        into the counts meanwhile is seen wholly or not at all (never counted twice or not at all)."""
        mine = webhook_attempts.c.subscription_id == subscription_id
        kept = select(func.count()).where(mine).scalar_subquery()
        kept_ok = select(func.coalesce(func.sum(webhook_attempts.c.ok), 0)).where(mine).scalar_subquery()
        with self.ledger.read() as connection:
            row = connection.execute(select(webhook_subscriptions.c.pruned_attempts + kept,
                                            webhook_subscriptions.c.pruned_succeeded + kept_ok)
                                     .where(webhook_subscriptions.c.subscription_id == subscription_id)).first()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    def add_replays(self, subscription_id: str, seqs: Sequence[int], at: str) -> int:
        with self.ledger.write() as connection:
            known = {int(r[0]) for r in connection.execute(select(webhook_replays.c.seq).where(
                webhook_replays.c.subscription_id == subscription_id)).all()}
            fresh = [s for s in seqs if s not in known]
            if fresh:
                connection.execute(insert(webhook_replays), [
                    {"subscription_id": subscription_id, "seq": s, "requested_at": at} for s in fresh])
        return len(fresh)

    def heads(self, scopes: Iterable[str]) -> dict[str, int]:
        """The newest event seq of each of `scopes` that has one (its `event_sequences` row): a
        subscription whose cursor is there has nothing new to deliver. Read by primary key, at
        most `HEADS_PER_STATEMENT` scopes a statement, whatever number of scopes the ledger holds."""
        wanted = sorted(set(scopes))
        heads: dict[str, int] = {}
        with self.ledger.read() as connection:
            for start in range(0, len(wanted), HEADS_PER_STATEMENT):
                heads.update((str(scope), int(seq)) for scope, seq in connection.execute(
                    select(event_sequences.c.scope, event_sequences.c.last_seq).where(
                        event_sequences.c.scope.in_(wanted[start:start + HEADS_PER_STATEMENT]))).all())
        return heads

    def replaying(self) -> set[str]:
        """The subscriptions with replays queued."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(webhook_replays.c.subscription_id).distinct()).all()
        return {str(r[0]) for r in rows}

    def replays(self, subscription_id: str, limit: int = 50) -> list[int]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(webhook_replays.c.seq).where(
                webhook_replays.c.subscription_id == subscription_id).order_by(webhook_replays.c.seq)
                .limit(limit)).all()
        return [int(r[0]) for r in rows]

    def replay_done(self, subscription_id: str, seq: int) -> None:
        with self.ledger.write() as connection:
            connection.execute(delete(webhook_replays).where(webhook_replays.c.subscription_id == subscription_id,
                                                             webhook_replays.c.seq == seq))

    # ------------------------------------------------------------------ retention
    # ------------------------------------------------------------------ streams

    def stream_cursor(self, stream: str, scope: str, missing: int = 0) -> int:
        """The stream's cursor in the scope (`missing` when it has none yet)."""
        with self.ledger.read() as connection:
            value = connection.execute(select(event_stream_cursors.c.cursor).where(
                event_stream_cursors.c.stream == stream, event_stream_cursors.c.scope == scope)).scalar()
        return missing if value is None else int(value)

    def claim_stream(self, stream: str, scope: str, now: int, until: int) -> bool:
        """Take the lease row `stream` of the scope until `until` when it is free (its value, the
        end of the last lease, is `now` or before): one upsert, so of two dispatchers one wins."""
        with self.ledger.write() as connection:
            dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(event_stream_cursors).values(stream=stream, scope=scope, cursor=until)
            taken = connection.execute(statement.on_conflict_do_update(
                index_elements=["stream", "scope"], set_={"cursor": until},
                where=event_stream_cursors.c.cursor <= now).returning(event_stream_cursors.c.cursor)).first()
        return taken is not None  # (an upsert's rowcount is not reported by every driver)

    def release_stream(self, stream: str, scope: str, until: int) -> None:
        """Free a lease taken with `claim_stream` (unless another took it since)."""
        with self.ledger.write() as connection:
            connection.execute(update(event_stream_cursors).where(
                event_stream_cursors.c.stream == stream, event_stream_cursors.c.scope == scope,
                event_stream_cursors.c.cursor == until).values(cursor=0))

    def set_stream_cursor(self, stream: str, scope: str, cursor: int) -> None:
        with self.ledger.write() as connection:
            dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
            statement = dialect.insert(event_stream_cursors).values(stream=stream, scope=scope, cursor=cursor)
            connection.execute(statement.on_conflict_do_update(
                index_elements=["stream", "scope"], set_={"cursor": cursor}))


def event_types_of(row: NewSubscription) -> list[str]:
    value = json.loads(row["event_types"])
    return [str(v) for v in value]
