"""Ledger reads and writes of events out (tables `event_outbox`, `event_sequences`,
`webhook_subscriptions`, `webhook_attempts`, `webhook_replays`, `event_stream_cursors`; migration
0013; `event_retention`, migration 0019). `append_event` runs inside the caller's write transaction, so an event exists exactly when
the fact it announces does. A scope's sequence is taken from its `event_sequences` row by one
upsert that holds the row until commit: two transactions of one scope take 5 and 6 in the order
they commit, so a reader that sees 6 has seen 5.

Retention (docs/events.md, "Retention"): `prune_batch` deletes a scope's oldest events in one
bounded transaction, only a prefix of its sequence, only events written before the cutoff and
settled by every active subscription (and every held stream cursor); `event_retention` then says
how far the scope was pruned. The pruner, `add_subscription` and `enable` take that row's lock
first (an upsert that changes nothing), so a subscription that starts or resumes never lands on
events a concurrent prune removes. `prune_attempts_batch` deletes a subscription's oldest delivery
attempts the same way, keeping its newest ones, and adds their counts to the subscription's row,
so `attempt_totals` still counts every attempt of its life."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from itertools import takewhile
from typing import Any

from sqlalchemy import and_, delete, func, insert, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gate.ledger.outbox_write import append_event
from gate.ledger.store import Ledger
from gate.ledger.tables import (
    event_outbox,
    event_retention,
    event_sequences,
    event_stream_cursors,
    webhook_attempts,
    webhook_replays,
    webhook_subscriptions,
)


class Outbox:
    """The event tables over one `Ledger`."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    # ------------------------------------------------------------------ events

    def events_after(self, scope: str, after: int, limit: int = 100) -> list[dict[str, Any]]:
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(event_outbox).where(event_outbox.c.scope == scope, event_outbox.c.seq > after)
                .order_by(event_outbox.c.seq).limit(limit)).mappings().all()
        return [dict(r) for r in rows]

    def event(self, scope: str, seq: int) -> dict[str, Any] | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(event_outbox).where(
                event_outbox.c.scope == scope, event_outbox.c.seq == seq)).mappings().first()
        return dict(row) if row else None

    def seqs_between(self, scope: str, since: str, until: str) -> list[int]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(event_outbox.c.seq).where(
                event_outbox.c.scope == scope, event_outbox.c.created_at >= since,
                event_outbox.c.created_at <= until).order_by(event_outbox.c.seq)).all()
        return [int(r[0]) for r in rows]

    def head(self, scope: str) -> int:
        with self.ledger.read() as connection:
            value = connection.execute(select(event_sequences.c.last_seq)
                                       .where(event_sequences.c.scope == scope)).scalar()
        return int(value or 0)

    def scopes(self) -> list[str]:
        with self.ledger.read() as connection:
            return [r[0] for r in connection.execute(select(event_sequences.c.scope)
                                                     .order_by(event_sequences.c.scope)).all()]

    # ------------------------------------------------------------------ subscriptions

    def add_subscription(self, row: Mapping[str, Any]) -> int:
        """Store a new subscription; its cursor never starts inside the pruned range (a subscription
        `from` the beginning starts after it). Returns the cursor stored."""
        with self.ledger.write() as connection:
            pruned, _ = _retention_locked(connection, row["scope"])
            cursor = max(int(row["cursor"]), pruned)
            connection.execute(insert(webhook_subscriptions).values(**{**row, "cursor": cursor}))
        return cursor

    def enable(self, subscription_id: str, values: Mapping[str, Any], skip_pruned: bool) -> int | None:
        """Make a subscription active with `values`, unless events after its cursor were pruned:
        then nothing changes and the scope's `pruned_through` is returned, or, with `skip_pruned`,
        its cursor moves to `pruned_through` (the oldest kept event is delivered next)."""
        with self.ledger.write() as connection:
            row = connection.execute(select(webhook_subscriptions.c.scope, webhook_subscriptions.c.cursor).where(
                webhook_subscriptions.c.subscription_id == subscription_id)).first()
            if row is None:
                return None
            pruned, _ = _retention_locked(connection, row.scope)
            changes = dict(values)
            if int(row.cursor) < pruned:
                if not skip_pruned:
                    return pruned
                changes["cursor"] = pruned
            connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id).values(**changes))
        return None

    def subscription(self, scope: str, subscription_id: str) -> dict[str, Any] | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(webhook_subscriptions).where(
                webhook_subscriptions.c.scope == scope,
                webhook_subscriptions.c.subscription_id == subscription_id)).mappings().first()
        return dict(row) if row else None

    def subscriptions(self, scope: str | None = None, *, active_only: bool = False) -> list[dict[str, Any]]:
        query = select(webhook_subscriptions).order_by(webhook_subscriptions.c.created_at,
                                                       webhook_subscriptions.c.subscription_id)
        if scope is not None:
            query = query.where(webhook_subscriptions.c.scope == scope)
        if active_only:
            query = query.where(webhook_subscriptions.c.status == "active")
        with self.ledger.read() as connection:
            return [dict(r) for r in connection.execute(query).mappings().all()]

    def update_subscription(self, subscription_id: str, values: Mapping[str, Any],
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

    def disable(self, subscription: Mapping[str, Any], reason: str, at: str,
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

    def record_attempt(self, row: Mapping[str, Any]) -> None:
        with self.ledger.write() as connection:
            connection.execute(insert(webhook_attempts).values(**row))

    def delivered(self, subscription_id: str, owner: str, attempts: Sequence[Mapping[str, Any]],
                  values: Mapping[str, Any] | None) -> bool:
        """Attempts made and the subscription's new cursor (`values`), in one transaction; the
        subscription changes only while `owner` still holds its lease (False when it lost it)."""
        with self.ledger.write() as connection:
            if attempts:
                connection.execute(insert(webhook_attempts), [dict(a) for a in attempts])
            if values is None:
                return True
            return connection.execute(update(webhook_subscriptions).where(
                webhook_subscriptions.c.subscription_id == subscription_id,
                webhook_subscriptions.c.lease_owner == owner).values(**values)).rowcount == 1

    def attempts(self, subscription_id: str, limit: int = 200) -> list[dict[str, Any]]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(webhook_attempts).where(
                webhook_attempts.c.subscription_id == subscription_id)
                .order_by(webhook_attempts.c.attempt_id.desc()).limit(limit)).mappings().all()
        return [dict(r) for r in rows]

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

    def pruned(self, scope: str) -> tuple[int, str | None]:
        """(the last pruned seq, the newest pruned event's time) of the scope; (0, None) when none was."""
        with self.ledger.read() as connection:
            row = connection.execute(select(event_retention.c.pruned_through, event_retention.c.pruned_through_at)
                                     .where(event_retention.c.scope == scope)).first()
        return (int(row[0]), row[1]) if row is not None else (0, None)

    def prunable(self, scope: str, cutoff: str) -> bool:
        """Whether the scope's oldest kept event was written before `cutoff` (a read: most passes
        find nothing to do and write nothing)."""
        with self.ledger.read() as connection:
            done = connection.execute(select(event_retention.c.pruned_through)
                                      .where(event_retention.c.scope == scope)).scalar()
            oldest = connection.execute(select(event_outbox.c.created_at).where(
                event_outbox.c.scope == scope, event_outbox.c.seq > int(done or 0))
                .order_by(event_outbox.c.seq).limit(1)).scalar()
        return oldest is not None and oldest < cutoff

    def prune_batch(self, scope: str, cutoff: str, held_streams: Sequence[str], batch: int) -> int:
        """Delete up to `batch` of the scope's oldest events in one transaction: the leading run
        written before `cutoff` and at or below every active subscription's cursor and every
        held stream's cursor. Returns how many were deleted."""
        with self.ledger.write() as connection:
            pruned, pruned_at = _retention_locked(connection, scope)
            query = select(event_outbox.c.seq, event_outbox.c.created_at).where(
                event_outbox.c.scope == scope, event_outbox.c.seq > pruned)
            floor = _settled_floor(connection, scope, held_streams)
            if floor is not None:
                query = query.where(event_outbox.c.seq <= floor)
            rows = connection.execute(query.order_by(event_outbox.c.seq).limit(batch)).all()
            taken = []
            for row in rows:
                if row.created_at >= cutoff:
                    break
                taken.append(row)
            if not taken:
                return 0
            last, newest = int(taken[-1].seq), max([r.created_at for r in taken] + ([pruned_at] if pruned_at else []))
            connection.execute(delete(event_outbox).where(
                event_outbox.c.scope == scope, event_outbox.c.seq > pruned, event_outbox.c.seq <= last))
            connection.execute(update(event_retention).where(event_retention.c.scope == scope)
                               .values(pruned_through=last, pruned_through_at=newest))
        return len(taken)

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


def _retention_locked(connection: Connection, scope: str) -> tuple[int, str | None]:
    """The scope's retention row, created when absent and locked until the transaction ends (an
    upsert that changes nothing: PostgreSQL locks the row; SQLite's writer is alone anyway)."""
    dialect = postgresql if connection.dialect.name == "postgresql" else sqlite
    statement = dialect.insert(event_retention).values(scope=scope, pruned_through=0, pruned_through_at=None)
    row = connection.execute(statement.on_conflict_do_update(
        index_elements=["scope"], set_={"pruned_through": event_retention.c.pruned_through})
        .returning(event_retention.c.pruned_through, event_retention.c.pruned_through_at)).one()
    return int(row[0]), row[1]


def _settled_floor(connection: Connection, scope: str, held_streams: Sequence[str]) -> int | None:
    """The highest seq every active subscription of the scope and every held stream has settled
    (None: nobody holds the scope's events)."""
    cursors = [int(c) for c in connection.execute(select(webhook_subscriptions.c.cursor).where(
        webhook_subscriptions.c.scope == scope, webhook_subscriptions.c.status == "active")).scalars()]
    if held_streams:  # a stream without a cursor in the scope has published nothing of it yet
        found = dict(connection.execute(select(event_stream_cursors.c.stream, event_stream_cursors.c.cursor).where(
            event_stream_cursors.c.scope == scope, event_stream_cursors.c.stream.in_(list(held_streams)))).all())
        cursors += [int(found.get(name, 0)) for name in held_streams]
    return min(cursors) if cursors else None


def event_types_of(row: Mapping[str, Any]) -> list[str]:
    value = json.loads(row["event_types"])
    return [str(v) for v in value]
