"""The ledger's side of removing decisions' inputs (issue 67, items 3 and 4; docs/privacy.md,
"Retention"): which decisions are due, the removal itself in one transaction, and the counts
replay, dry-runs and reports state.

A removal (`remove`) rewrites, for each decision of the scope not removed before: the stored
request to `gate.privacy.removal.removed_request`, the stored record to its remainder, the hold's
facts and request summary (and the two plain columns the Inbox searches) to nothing, every
`decision.created` event in the outbox that copied the record to the event with its remainder,
the excerpt of every webhook delivery attempt of an event about those decisions (the
receiver's answer may echo what it was sent) to nothing, and the stored blocks of every Slack
message that shows one of those holds to a line saying its inputs were removed (marked `stale`:
the notifier's Slack pass sends them); and it files one `decision_removals` row. Nothing else is touched: the decisions row's hashes and
seal, the chain links, the Merkle nodes, the checkpoints, the hold chain and the receipts stay as
signed. The outbox's counted bytes (`event_retention.bytes`) are lowered by what the rewrite saved.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import TypedDict, cast

from sqlalchemy import and_, func, select, tuple_, update
from sqlalchemy.engine import Connection

from gate.events.cloudevent import full_type
from gate.events.notices import removed_blocks
from gate.ledger.store import Ledger
from gate.ledger.tables import (
    decision_removals,
    decisions,
    event_outbox,
    event_retention,
    holds,
    slack_messages,
    webhook_attempts,
)
from gate.privacy.removal import Cause, event_remainder, remainder, removed_request
from gate.protocol.canonical import canonical_text

OPEN = "open"


def due(ledger: Ledger, scope: str, before: str, limit: int) -> list[str]:
    """Up to `limit` of the scope's decisions made before `before`, oldest first, whose inputs
    are still there and whose hold (if any) is closed: an open hold keeps its facts for its
    reviewers until it closes."""
    removed = select(decision_removals.c.decision_id).where(decision_removals.c.decision_id == decisions.c.decision_id)
    held = select(holds.c.decision_id).where(holds.c.decision_id == decisions.c.decision_id, holds.c.state == OPEN)
    with ledger.read() as connection:
        rows = connection.execute(
            select(decisions.c.decision_id).where(
                decisions.c.scope == scope, decisions.c.created_at < before, ~removed.exists(), ~held.exists())
            .order_by(decisions.c.created_at, decisions.c.decision_id).limit(limit))
        return [row[0] for row in rows]


def remove(ledger: Ledger, scope: str, decision_ids: Sequence[str], cause: Cause) -> list[str]:
    """Remove the inputs of the scope's `decision_ids` (those not removed before; another scope's
    are not touched) in one transaction; returns the ids removed."""
    if not decision_ids:
        return []
    with ledger.write() as connection:
        rows = connection.execute(
            select(decisions.c.decision_id, decisions.c.created_at, decisions.c.record_json)
            .where(decisions.c.scope == scope, decisions.c.decision_id.in_(list(decision_ids)),
                   ~select(decision_removals.c.decision_id)
                   .where(decision_removals.c.decision_id == decisions.c.decision_id).exists())).mappings().all()
        if not rows:
            return []
        request_text = removed_request(cause)
        for row in rows:
            connection.execute(update(decisions).where(decisions.c.decision_id == row["decision_id"]).values(
                record_json=canonical_text(remainder(json.loads(row["record_json"]), cause)),
                request_json=request_text))
        ids = [row["decision_id"] for row in rows]
        connection.execute(update(holds).where(holds.c.decision_id.in_(ids)).values(
            facts_json="{}", request_json=None, target_object_id=None, source_record_id=None))
        about = _rewrite_events(connection, scope, ids, min(row["created_at"] for row in rows), cause)
        for chunk in range(0, len(about), 500):
            connection.execute(update(webhook_attempts).where(
                webhook_attempts.c.scope == scope, webhook_attempts.c.seq.in_(about[chunk:chunk + 500]))
                .values(excerpt=""))
        _rewrite_slack(connection, scope, ids, cause)
        connection.execute(decision_removals.insert(), [
            {"decision_id": row["decision_id"], "scope": scope, "created_at": row["created_at"],
             "cause": cause.cause, "cause_ref": cause.ref, "removed_at": cause.removed_at} for row in rows])
        return ids


def _rewrite_slack(connection: Connection, scope: str, ids: Sequence[str], cause: Cause) -> None:
    """Every Slack message that shows one of `ids` has their blocks replaced by a line saying
    their inputs were removed (a digest keeps its other holds' blocks) and is marked `stale`, for
    the notifier's Slack pass to send (gate.services.notify)."""
    shown = connection.execute(select(slack_messages.c.channel, slack_messages.c.ts).distinct().where(
        slack_messages.c.scope == scope, slack_messages.c.decision_id.in_(list(ids)))).all()
    removed = dict.fromkeys(ids, cause.cause)
    for channel, ts in shown:
        where = and_(slack_messages.c.channel == channel, slack_messages.c.ts == ts)
        text = connection.execute(select(slack_messages.c.blocks_json).where(where).limit(1)).scalar()
        blocks = removed_blocks(removed, json.loads(text)) if text is not None else None
        if blocks is not None:
            connection.execute(update(slack_messages).where(where).values(
                blocks_json=json.dumps(blocks, separators=(",", ":")), stale=1))


def _rewrite_events(connection: Connection, scope: str, ids: Iterable[str], since: str, cause: Cause) -> list[int]:
    """The scope's `decision.created` events of `ids` (written at or after `since`, the oldest
    decision's time) with their records replaced by remainders; returns the seqs of every event
    about `ids` (any type)."""
    wanted = set(ids)
    created = full_type("decision.created")
    rows = connection.execute(
        select(event_outbox.c.seq, event_outbox.c.event_type, event_outbox.c.event_json)
        .where(event_outbox.c.scope == scope, event_outbox.c.created_at >= since)).mappings().all()
    # What the retention pass has counted so far (read once): a rewrite of an event it counted
    # lowers the counted bytes; one it has not counted yet is counted later at its new size.
    counted = connection.execute(select(event_retention.c.counted_through)
                                 .where(event_retention.c.scope == scope)).scalar()
    saved = 0
    about: list[int] = []
    for row in rows:
        event = json.loads(row["event_json"])
        if event.get("subject") not in wanted:
            continue
        about.append(int(row["seq"]))
        changed = event_remainder(event, cause) if row["event_type"] == created else None
        if changed is None:
            continue
        text = canonical_text(changed)
        if counted is not None and row["seq"] <= counted:
            saved += max(len(row["event_json"].encode("utf-8")) - len(text.encode("utf-8")), 0)
        connection.execute(update(event_outbox).where(
            and_(event_outbox.c.scope == scope, event_outbox.c.seq == row["seq"])).values(event_json=text))
    if saved:
        connection.execute(update(event_retention).where(event_retention.c.scope == scope).values(
            bytes=func.max(event_retention.c.bytes - saved, 0) if connection.dialect.name == "sqlite"
            else func.greatest(event_retention.c.bytes - saved, 0)))
    return about


class RemovalRow(TypedDict):
    """A `decision_removals` row: a decision whose inputs were removed, why, and when."""

    decision_id: str
    scope: str
    created_at: str  # the decision's own time
    cause: str
    cause_ref: str
    removed_at: str


def removal(ledger: Ledger, decision_id: str) -> RemovalRow | None:
    """The removal row of one decision, or None."""
    with ledger.read() as connection:
        row = connection.execute(select(decision_removals)
                                 .where(decision_removals.c.decision_id == decision_id)).mappings().first()
    return cast(RemovalRow, dict(row)) if row is not None else None  # select(decision_removals): its columns


def counts(ledger: Ledger, scope: str | None, since: str | None = None, until: str | None = None,
           ) -> dict[str, int]:
    """Decisions (of `scope`, every scope when None) made in [since, until) whose inputs were
    removed, per cause."""
    where = []
    if scope is not None:
        where.append(decision_removals.c.scope == scope)
    if since is not None:
        where.append(decision_removals.c.created_at >= since)
    if until is not None:
        where.append(decision_removals.c.created_at < until)
    with ledger.read() as connection:
        rows = connection.execute(select(decision_removals.c.cause, func.count()).where(*where)
                                  .group_by(decision_removals.c.cause))
        return {str(cause): int(number) for cause, number in rows}


def removed_ids(ledger: Ledger, scope: str | None) -> dict[str, RemovalRow]:
    """Every removed decision (of `scope`, or all) with its cause, reference and time."""
    where = [decision_removals.c.scope == scope] if scope is not None else []
    with ledger.read() as connection:
        rows = connection.execute(select(decision_removals).where(*where)).mappings().all()
    return {row["decision_id"]: cast(RemovalRow, dict(row)) for row in rows}  # select(decision_removals)


def filed_after(ledger: Ledger, scope: str, after: tuple[str, str] | None, before: str,
                limit: int) -> list[RemovalRow]:
    """The scope's removals filed before `before` and after the keyset `after` (`removed_at`,
    `decision_id`), in that order, at most `limit`: how a copy of the ledger (the dataset's export)
    follows them."""
    where = [decision_removals.c.scope == scope, decision_removals.c.removed_at < before]
    if after is not None:
        where.append(tuple_(decision_removals.c.removed_at, decision_removals.c.decision_id) > tuple_(*after))
    with ledger.read() as connection:
        rows = connection.execute(select(decision_removals).where(*where).order_by(
            decision_removals.c.removed_at, decision_removals.c.decision_id).limit(limit)).mappings().all()
    return [cast(RemovalRow, dict(row)) for row in rows]  # select(decision_removals): its columns


def count_through(ledger: Ledger, scope: str, through: tuple[str, str]) -> int:
    """How many of the scope's removals sort at or before the keyset `through` (a copy that
    followed that many knows none was filed behind its mark since)."""
    with ledger.read() as connection:
        return int(connection.execute(select(func.count()).select_from(decision_removals).where(
            decision_removals.c.scope == scope,
            tuple_(decision_removals.c.removed_at, decision_removals.c.decision_id) <= tuple_(*through))).scalar() or 0)
