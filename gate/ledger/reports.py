"""Ledger reads behind the policy report endpoints: one scope's most recent decisions of a
policy, the receipts of exactly those decisions, and the per-scope benchmark opt-in.

Rows have the columns of `gate.ledger.stream` (`DECISION_ROW_COLUMNS` plus `chain_position`,
`RECEIPT_COLUMNS`), so `workbench.dataset.convert` turns them into the dataset contract unchanged.
Every read is bounded: `limit` decisions per scope (at most `MAX_LIMIT`), and the receipts of
those decisions only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypedDict

from sqlalchemy import func, insert, select, update

from gate.ledger.store import Ledger
from gate.ledger.stream import DECISION_ROW_COLUMNS, RECEIPT_COLUMNS
from gate.ledger.tables import (
    chain_links,
    decisions,
    lifecycle_receipts,
    scope_benchmark_settings,
)

MAX_LIMIT = 10_000
MAX_SCOPES = 100


def _check_limit(limit: int) -> int:
    if not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return limit


def recent_decisions(ledger: Ledger, scopes: Sequence[str], policy_id: str, *, limit: int,
                     policy_version: str | None = None) -> list[dict[str, Any]]:
    """For each scope, its `limit` most recent decisions (created_at, then decision_id, newest
    first) of `policy_id` (and `policy_version` when given); one query with a window function."""
    limit = _check_limit(limit)
    scopes = sorted(set(scopes))
    if not scopes:
        return []
    if len(scopes) > MAX_SCOPES:
        raise ValueError(f"at most {MAX_SCOPES} scopes per read")
    rank = func.row_number().over(
        partition_by=decisions.c.scope,
        order_by=(decisions.c.created_at.desc(), decisions.c.decision_id.desc()),
    ).label("recency")
    inner = select(*[decisions.c[name] for name in DECISION_ROW_COLUMNS], rank).where(
        decisions.c.scope.in_(scopes), decisions.c.policy_id == policy_id)
    if policy_version is not None:
        inner = inner.where(decisions.c.policy_version == policy_version)
    ranked = inner.subquery()
    query = (
        select(*[ranked.c[name] for name in DECISION_ROW_COLUMNS], chain_links.c.chain_position)
        .select_from(ranked.outerjoin(chain_links, chain_links.c.decision_id == ranked.c.decision_id))
        .where(ranked.c.recency <= limit)
        .order_by(ranked.c.scope, ranked.c.created_at, ranked.c.decision_id)
    )
    with ledger.read() as connection:
        return [dict(row) for row in connection.execute(query).mappings()]


def receipts_of(ledger: Ledger, kind: str, decision_rows: Iterable[dict[str, Any]],
                chunk: int = 500) -> list[dict[str, Any]]:
    """The receipts of one kind of exactly these decisions (same scope as the decision),
    ordered by (scope, reported_at, receipt_id)."""
    wanted: dict[str, list[str]] = {}
    for row in decision_rows:
        wanted.setdefault(row["scope"], []).append(row["decision_id"])
    table = lifecycle_receipts
    rows: list[dict[str, Any]] = []
    with ledger.read() as connection:
        for scope, ids in sorted(wanted.items()):
            for start in range(0, len(ids), chunk):
                query = select(*[table.c[name] for name in RECEIPT_COLUMNS]).where(
                    table.c.kind == kind, table.c.scope == scope, table.c.decision_id.in_(ids[start:start + chunk]))
                rows.extend(dict(r) for r in connection.execute(query).mappings())
    rows.sort(key=lambda r: (r["scope"], r["reported_at"], r["receipt_id"]))
    return rows


# --------------------------------------------------------------------------- benchmark opt-in


def benchmark_opt_ins(ledger: Ledger) -> set[str]:
    """Scopes that currently opt in to anonymized cross-customer benchmarks."""
    with ledger.read() as connection:
        return set(connection.execute(
            select(scope_benchmark_settings.c.scope).where(scope_benchmark_settings.c.opted_in == 1)).scalars())


class BenchmarkSetting(TypedDict):
    """A row of `scope_benchmark_settings`, `opted_in` as a boolean."""

    scope: str
    opted_in: bool
    updated_at: str


def benchmark_setting(ledger: Ledger, scope: str) -> BenchmarkSetting | None:
    with ledger.read() as connection:
        row = connection.execute(
            select(scope_benchmark_settings).where(scope_benchmark_settings.c.scope == scope)).mappings().first()
    return None if row is None else {"scope": row["scope"], "opted_in": bool(row["opted_in"]),
                                     "updated_at": row["updated_at"]}


def set_benchmark_opt_in(ledger: Ledger, scope: str, opted_in: bool, now: str) -> BenchmarkSetting:
    """Opt a scope in or out (revocable at any time); returns the stored setting."""
    table = scope_benchmark_settings
    with ledger.write() as connection:
        changed = connection.execute(
            update(table).where(table.c.scope == scope).values(opted_in=int(opted_in), updated_at=now)).rowcount
        if not changed:
            connection.execute(insert(table).values(scope=scope, opted_in=int(opted_in), updated_at=now))
    return {"scope": scope, "opted_in": opted_in, "updated_at": now}


__all__ = [
    "MAX_LIMIT",
    "MAX_SCOPES",
    "benchmark_opt_ins",
    "benchmark_setting",
    "receipts_of",
    "recent_decisions",
    "set_benchmark_opt_in",
]
