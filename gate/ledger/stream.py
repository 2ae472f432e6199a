"""Streaming reads of the whole ledger: the read side of the Parquet export and of the
live-ledger loader (`workbench.dataset.load`).

Every function here yields *batches* (lists of plain dicts, at most `batch_size` rows each) in a
stable, documented order, and fetches each batch with its own keyset-paginated query
(`WHERE (key) > (last key) ORDER BY key LIMIT n`): no query holds a cursor open across batches,
no OFFSET scan grows with the position, and memory is bounded by one batch whatever the size of
the ledger. Every batch is read in its own short read transaction, so a stream does not pin a
snapshot (concurrent writers are never blocked); callers that need a consistent cut pass an
upper bound (`upto_position`, `reported_before`, `created_before`).

Orders (the keyset of each stream):

* `iter_decisions`: `(scope, created_at, decision_id)`.
* `iter_chain_decisions`: `chain_position` within one scope. Positions are assigned under the
  chain head's row lock, so position order is commit order: "everything after position p" is
  exact, which makes it the incremental export's watermark for decisions and chain links.
* `iter_receipts`: `(scope, reported_at, receipt_id)`, per receipt kind.

Rows carry the stored columns as stored (timestamps as the ISO 8601 text that was hashed, JSON
as the stored text); `workbench.dataset.convert` turns them into Arrow tables.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import ColumnElement, Select, and_, func, or_, select

from gate.ledger.store import Ledger
from gate.ledger.tables import chain_heads, chain_links, decisions, lifecycle_receipts

DEFAULT_BATCH = 2_000
MAX_BATCH = 50_000
RECEIPT_KINDS = ("execution", "outcome", "crm_sync")

# The decision columns every decision stream returns (plus `chain_position`).
DECISION_ROW_COLUMNS = (
    "decision_id", "scope", "created_at", "policy_id", "policy_version", "rulebook_hash",
    "policy_bundle_hash", "verdict", "record_hash", "receipt_hash", "input_hash", "idempotency_key",
    "record_json", "request_json",
)
RECEIPT_COLUMNS = (
    "receipt_id", "kind", "decision_id", "scope", "idempotency_key", "input_hash", "receipt_hash",
    "reported_at", "receipt_json",
)


def _batch(batch_size: int) -> int:
    if not isinstance(batch_size, int) or not 1 <= batch_size <= MAX_BATCH:
        raise ValueError(f"batch_size must be an integer from 1 to {MAX_BATCH}")
    return batch_size


def _after(columns: Sequence[Any], values: Sequence[Any]) -> ColumnElement[bool]:
    """The keyset condition `(c1, c2, …) > (v1, v2, …)`, written portably with OR/AND."""
    terms = []
    for index, column in enumerate(columns):
        equal = [columns[i] == values[i] for i in range(index)]
        terms.append(and_(*equal, column > values[index]))
    return or_(*terms)


def _pages(ledger: Ledger, build: Callable[[Any], tuple[Select[Any], int]],
           key_of: Callable[[dict[str, Any]], Any]) -> Iterator[list[dict[str, Any]]]:
    """Run `build(last_key)` page after page until a page comes back short."""
    last = None
    while True:
        query, limit = build(last)
        with ledger.read() as connection:
            rows = [dict(row) for row in connection.execute(query).mappings()]
        if rows:
            yield rows
            last = key_of(rows[-1])
        if len(rows) < limit:
            return


def _keyset_pages(ledger: Ledger, base: Select[Any], keys: Sequence[Any], limit: int,
                  after: Sequence[Any] | None) -> Iterator[list[dict[str, Any]]]:
    """Pages of `base` in `keys` order, each starting after the previous page's last key (or
    after `after` for the first)."""
    def build(last: Any) -> tuple[Select[Any], int]:
        start = last or after
        query = base if start is None else base.where(_after(keys, start))
        return query.order_by(*keys).limit(limit), limit

    return _pages(ledger, build, lambda row: tuple(row[key.name] for key in keys))


_DECISION_SELECT = [decisions.c[name] for name in DECISION_ROW_COLUMNS]


def iter_decisions(
    ledger: Ledger,
    *,
    scope: str | None = None,
    policy_id: str | None = None,
    after: tuple[str, str, str] | None = None,
    created_before: str | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> Iterator[list[dict[str, Any]]]:
    """Decisions in `(scope, created_at, decision_id)` order, in batches.

    Filters: one `scope` (every scope when None), one `policy_id` (the rulebook id in rulebook
    mode), `created_before` (ISO text, exclusive). `after` resumes after a key
    `(scope, created_at, decision_id)` that an earlier batch ended with. Each row has
    `DECISION_ROW_COLUMNS` plus `chain_position` (None for a decision without a chain link).
    """
    limit = _batch(batch_size)
    keys = [decisions.c.scope, decisions.c.created_at, decisions.c.decision_id]
    base = select(*_DECISION_SELECT, chain_links.c.chain_position).select_from(
        decisions.outerjoin(chain_links, chain_links.c.decision_id == decisions.c.decision_id))
    if scope is not None:
        base = base.where(decisions.c.scope == scope)
    if policy_id is not None:
        base = base.where(decisions.c.policy_id == policy_id)
    if created_before is not None:
        base = base.where(decisions.c.created_at < created_before)

    return _keyset_pages(ledger, base, keys, limit, after)


def iter_chain_decisions(
    ledger: Ledger,
    scope: str,
    *,
    after_position: int = 0,
    upto_position: int | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> Iterator[list[dict[str, Any]]]:
    """One scope's decisions in chain order, each joined with its chain link, in batches.

    Positions `after_position < chain_position <= upto_position` (no upper bound when None).
    Each row has `DECISION_ROW_COLUMNS` plus `chain_id`, `chain_position`, `leaf_hash`, `link_hash`
    and `link_json` (the stored link, whose `merkle_root` and `created_at` the export reads).
    """
    limit = _batch(batch_size)
    chain_id = chain_id_of(ledger, scope)
    if chain_id is None:
        return iter(())
    base = (
        select(*_DECISION_SELECT, chain_links.c.chain_id, chain_links.c.chain_position,
               chain_links.c.leaf_hash, chain_links.c.link_hash, chain_links.c.link_json)
        .select_from(chain_links.join(decisions, decisions.c.decision_id == chain_links.c.decision_id))
        .where(chain_links.c.chain_id == chain_id)
    )
    if upto_position is not None:
        base = base.where(chain_links.c.chain_position <= upto_position)

    def build(last: Any) -> tuple[Select[Any], int]:
        position = after_position if last is None else last
        query = base.where(chain_links.c.chain_position > position)
        return query.order_by(chain_links.c.chain_position).limit(limit), limit

    return _pages(ledger, build, lambda row: row["chain_position"])


def iter_receipts(
    ledger: Ledger,
    kind: str,
    *,
    scope: str | None = None,
    policy_id: str | None = None,
    after: tuple[str, str, str] | None = None,
    reported_before: str | None = None,
    batch_size: int = DEFAULT_BATCH,
) -> Iterator[list[dict[str, Any]]]:
    """Lifecycle receipts of one kind (`execution`, `outcome`, `crm_sync`) in
    `(scope, reported_at, receipt_id)` order, in batches.

    Filters as `iter_decisions`; `policy_id` keeps the receipts whose decision has that policy
    id; `reported_before` (ISO text) is exclusive. `after` resumes after a key
    `(scope, reported_at, receipt_id)`. Each row has `RECEIPT_COLUMNS`.
    """
    if kind not in RECEIPT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RECEIPT_KINDS)}")
    limit = _batch(batch_size)
    table = lifecycle_receipts
    keys = [table.c.scope, table.c.reported_at, table.c.receipt_id]
    base = select(*[table.c[name] for name in RECEIPT_COLUMNS]).where(table.c.kind == kind)
    if policy_id is not None:
        base = base.select_from(table.join(decisions, decisions.c.decision_id == table.c.decision_id)) \
            .where(decisions.c.policy_id == policy_id)
    if scope is not None:
        base = base.where(table.c.scope == scope)
    if reported_before is not None:
        base = base.where(table.c.reported_at < reported_before)

    return _keyset_pages(ledger, base, keys, limit, after)


def count_receipts(
    ledger: Ledger,
    kind: str,
    *,
    scope: str | None = None,
    after: tuple[str, str, str] | None = None,
    reported_before: str | None = None,
) -> int:
    """How many receipts `iter_receipts` would yield with the same arguments (no policy filter)."""
    if kind not in RECEIPT_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RECEIPT_KINDS)}")
    table = lifecycle_receipts
    query = select(func.count()).select_from(table).where(table.c.kind == kind)
    if scope is not None:
        query = query.where(table.c.scope == scope)
    if after is not None:
        query = query.where(_after([table.c.scope, table.c.reported_at, table.c.receipt_id], after))
    if reported_before is not None:
        query = query.where(table.c.reported_at < reported_before)
    with ledger.read() as connection:
        return int(connection.execute(query).scalar_one())


def scopes(ledger: Ledger) -> list[str]:
    """Every scope that has at least one decision, sorted. Read from the chain heads (one row
    per scope; a head is created in the transaction of its scope's first decision), so the
    cost does not grow with the number of decisions."""
    with ledger.read() as connection:
        return sorted(connection.execute(select(chain_heads.c.scope)).scalars())


def chain_id_of(ledger: Ledger, scope: str) -> str | None:
    with ledger.read() as connection:
        return connection.execute(
            select(chain_heads.c.chain_id).where(chain_heads.c.scope == scope)).scalar()


def chain_heads_of(ledger: Ledger, scope: str | None = None) -> list[dict[str, Any]]:
    """Chain heads (chain_id, scope, size, head_link_hash, merkle_root, updated_at), by scope."""
    query = select(chain_heads.c.chain_id, chain_heads.c.scope, chain_heads.c.size,
                   chain_heads.c.head_link_hash, chain_heads.c.merkle_root, chain_heads.c.updated_at)
    if scope is not None:
        query = query.where(chain_heads.c.scope == scope)
    with ledger.read() as connection:
        return [dict(row) for row in connection.execute(query.order_by(chain_heads.c.scope)).mappings()]


LOOKUP_BATCH = 500  # ids per `IN (...)` query: well under every backend's bound on parameters


def decisions_created_at(ledger: Ledger, decision_ids: Sequence[str]) -> dict[str, tuple[str, str]]:
    """`decision_id → (scope, created_at)` of the given decisions (ids not in the ledger are
    absent), by primary key, in queries of at most LOOKUP_BATCH ids."""
    out: dict[str, tuple[str, str]] = {}
    wanted = sorted(set(decision_ids))
    with ledger.read() as connection:
        for start in range(0, len(wanted), LOOKUP_BATCH):
            query = select(decisions.c.decision_id, decisions.c.scope, decisions.c.created_at).where(
                decisions.c.decision_id.in_(wanted[start:start + LOOKUP_BATCH]))
            out.update((row[0], (row[1], row[2])) for row in connection.execute(query))
    return out


def receipt_counts(ledger: Ledger, scope: str | None = None) -> dict[str, int]:
    """Stored receipts per kind (every kind present, 0 when none)."""
    query = select(lifecycle_receipts.c.kind, func.count()).group_by(lifecycle_receipts.c.kind)
    if scope is not None:
        query = query.where(lifecycle_receipts.c.scope == scope)
    with ledger.read() as connection:
        counts: dict[str, int] = dict(connection.execute(query).all())
    return {kind: int(counts.get(kind, 0)) for kind in RECEIPT_KINDS}


__all__ = [
    "DECISION_ROW_COLUMNS", "DEFAULT_BATCH", "MAX_BATCH", "RECEIPT_COLUMNS", "RECEIPT_KINDS",
    "chain_heads_of", "chain_id_of", "count_receipts", "decisions_created_at", "iter_chain_decisions",
    "iter_decisions", "iter_receipts", "receipt_counts", "scopes",
]
