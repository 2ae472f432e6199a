"""Reads of held actions for the analytics: the export's hold states and hold events, and the
holds a live hold report reads (`workbench.dataset.load.holds_from_ledger`).

Rows carry the stored columns as stored (timestamps as ISO 8601 text, `approvals_json` as text)
plus `last_event_seq`: the seq of the newest event of the scope's hold chain about that hold (0
before any), which orders the states of one hold the export saw (`workbench.dataset.schema.HOLDS`).
`workbench.dataset.convert` turns them into Arrow tables.

Consistency: a hold's row and the event that moves it are written in one transaction
(`gate.ledger.holds.HoldLedger.append`), and a scope's hold chain is gap-free and committed in seq
order (an event is built on the committed head, and two builders of the same seq collide on the
primary key). So inside one snapshot (`Ledger.one_snapshot`) the hold rows reflect exactly the
events up to the head read there, and "every event after seq s, up to that head" is exact: the
export's watermark for both hold tables.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from sqlalchemy import ColumnElement, Select, func, or_, select

from gate.ledger.reports import MAX_LIMIT
from gate.ledger.store import Ledger
from gate.ledger.stream import _batch, _keyset_pages
from gate.ledger.tables import chain_heads, chain_links, hold_events, holds
from gate.strict_json import JsonValue
from gate.vocabulary import HOLD_OPEN

HOLD_ROW_COLUMNS = (
    "decision_id", "scope", "record_hash", "policy_id", "policy_version", "rule_id", "reason_code", "queue",
    "priority", "opened_at", "deadline_at", "state", "approvals_json", "approvals_needed", "resolved_at",
    "resolved_by",
)
HOLD_EVENT_COLUMNS = ("scope", "seq", "decision_id", "action", "event_hash", "created_at", "event_json")


def hold_head(ledger: Ledger, scope: str) -> tuple[int, str | None]:
    """The scope's hold chain head: (seq, event_hash), (0, None) without an event."""
    query = (select(hold_events.c.seq, hold_events.c.event_hash).where(hold_events.c.scope == scope)
             .order_by(hold_events.c.seq.desc()).limit(1))
    with ledger.read() as connection:
        row = connection.execute(query).first()
    return (int(row[0]), str(row[1])) if row else (0, None)


def count_holds(ledger: Ledger, scope: str, *, upto_position: int) -> int:
    """How many holds (any state) the scope's decisions at chain positions `<= upto_position` have."""
    query = (select(func.count()).select_from(holds.join(chain_links, chain_links.c.decision_id == holds.c.decision_id))
             .where(holds.c.scope == scope, chain_links.c.chain_id == _chain_of(scope),
                    chain_links.c.chain_position <= upto_position))
    with ledger.read() as connection:
        return int(connection.execute(query).scalar_one())


def _chain_of(scope: str) -> Any:
    """The scope's chain id, as a subquery."""
    return select(chain_heads.c.chain_id).where(chain_heads.c.scope == scope).scalar_subquery()


def _last_event_seq() -> ColumnElement[Any]:
    """The seq of the newest hold event about the row's hold (0 before any)."""
    events = hold_events.alias("last_events")
    newest = (select(func.coalesce(func.max(events.c.seq), 0))
              .where(events.c.scope == holds.c.scope, events.c.decision_id == holds.c.decision_id)
              .scalar_subquery())
    return newest.label("last_event_seq")


def _hold_select() -> Select[Any]:
    return select(*[holds.c[name] for name in HOLD_ROW_COLUMNS], _last_event_seq())


def iter_hold_states(ledger: Ledger, scope: str, *, upto_position: int, new_after_position: int,
                     changed_after_seq: int, batch_size: int) -> Iterator[list[dict[str, JsonValue]]]:
    """The scope's holds whose decision is at chain position `<= upto_position` and that are new
    (position `> new_after_position`) or changed (an event after `changed_after_seq`), in
    `decision_id` order, in batches. Call it inside `Ledger.one_snapshot` with the head read there,
    so the rows are the holds as of that head."""
    limit = _batch(batch_size)
    changed = hold_events.alias("changed_events")
    moved = select(changed.c.decision_id).where(changed.c.scope == scope, changed.c.seq > changed_after_seq)
    base = (_hold_select()
            .select_from(holds.join(chain_links, chain_links.c.decision_id == holds.c.decision_id))
            .where(holds.c.scope == scope, chain_links.c.chain_id == _chain_of(scope),
                   chain_links.c.chain_position <= upto_position,
                   or_(chain_links.c.chain_position > new_after_position, holds.c.decision_id.in_(moved))))
    return _keyset_pages(ledger, base, [holds.c.decision_id], limit, None)


def iter_hold_events(ledger: Ledger, scope: str, *, after_seq: int, upto_seq: int,
                     batch_size: int) -> Iterator[list[dict[str, JsonValue]]]:
    """The scope's hold events with `after_seq < seq <= upto_seq`, in seq order, in batches."""
    limit = _batch(batch_size)
    base = (select(*[hold_events.c[name] for name in HOLD_EVENT_COLUMNS])
            .where(hold_events.c.scope == scope, hold_events.c.seq <= upto_seq))
    return _keyset_pages(ledger, base, [hold_events.c.seq], limit, (after_seq,))


def iter_policy_holds(ledger: Ledger, policy_id: str, *, scope: str | None = None,
                      batch_size: int) -> Iterator[list[dict[str, JsonValue]]]:
    """Every hold of `policy_id` (in `scope`, or every scope) as it is now, in `decision_id`
    order, in batches: the dry-run's history of a live ledger."""
    where = [holds.c.policy_id == policy_id]
    if scope is not None:
        where.append(holds.c.scope == scope)
    return _keyset_pages(ledger, _hold_select().where(*where), [holds.c.decision_id], _batch(batch_size), None)


def report_holds(ledger: Ledger, scope: str, policy_id: str, *, policy_version: str | None, closed_limit: int,
                 batch_size: int = 5_000) -> list[dict[str, JsonValue]]:
    """What a live hold report reads of one scope's policy: every open hold (in `decision_id`
    batches) and the `closed_limit` most recently closed (by `resolved_at`, then `decision_id`),
    `closed_limit` from 1 to `gate.ledger.reports.MAX_LIMIT`."""
    if not isinstance(closed_limit, int) or not 1 <= closed_limit <= MAX_LIMIT:
        raise ValueError(f"closed_limit must be an integer from 1 to {MAX_LIMIT}")
    where = [holds.c.scope == scope, holds.c.policy_id == policy_id]
    if policy_version is not None:
        where.append(holds.c.policy_version == policy_version)
    rows = [row for batch in _keyset_pages(ledger, _hold_select().where(*where, holds.c.state == HOLD_OPEN),
                                           [holds.c.decision_id], _batch(batch_size), None) for row in batch]
    closed = (_hold_select().where(*where, holds.c.state != HOLD_OPEN)
              .order_by(holds.c.resolved_at.desc(), holds.c.decision_id.desc()).limit(closed_limit))
    with ledger.read() as connection:
        rows.extend(dict(row) for row in connection.execute(closed).mappings())
    return rows


__all__ = [
    "HOLD_EVENT_COLUMNS", "HOLD_ROW_COLUMNS", "count_holds", "hold_head", "iter_hold_events", "iter_hold_states",
    "iter_policy_holds", "report_holds",
]
