"""Ledger reads and writes behind the operational routes: pilot intakes and proof metrics.

Pilot submissions follow the workflow-run pattern: the row is built first and inserted once; the
idempotency key's unique constraint decides a race, and the loser reads the stored row. Proof
metrics are aggregate counts over the whole ledger (no scope names, no identifiers).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict, cast

from sqlalchemy import RowMapping, case, func, insert, select, update
from sqlalchemy.exc import IntegrityError

from gate.errors import LedgerUnavailable
from gate.ledger.store import Ledger
from gate.ledger.tables import (
    chain_heads,
    decisions,
    lifecycle_receipts,
    pilot_intakes,
    workflow_runs,
)

ADVISORY_POLICY_PREFIX = "advisory."  # gate.advisory.record.POLICY_PREFIX (kept free of that import)

__all__ = ["PilotRow", "PilotStore", "proof_counts", "recent_policy_ids"]


class PilotRow(TypedDict):
    """A `pilot_intakes` row: who asked for a pilot, for what, and whether they confirmed it."""

    pilot_id: str
    idempotency_key: str
    input_hash: str
    company: str
    contact_name: str
    contact_email: str
    use_case: str
    monthly_decisions: int
    notes: str
    status: str  # submitted | confirmed
    token_hash: str
    created_at: str
    confirmed_at: str | None


def _pilot_row(row: RowMapping) -> PilotRow:
    return cast(PilotRow, dict(row))  # select(pilot_intakes): exactly its columns


class PilotStore:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def by_key(self, idempotency_key: str) -> PilotRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(pilot_intakes).where(
                pilot_intakes.c.idempotency_key == idempotency_key)).mappings().first()
        return _pilot_row(row) if row is not None else None

    def by_id(self, pilot_id: str) -> PilotRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(pilot_intakes).where(
                pilot_intakes.c.pilot_id == pilot_id)).mappings().first()
        return _pilot_row(row) if row is not None else None

    def store_or_existing(self, row: dict[str, Any]) -> PilotRow | None:
        """None when `row` was stored now; else the row already stored under its key."""
        try:
            with self.ledger.write() as connection:
                connection.execute(insert(pilot_intakes), row)
            return None
        except IntegrityError as exc:
            existing = self.by_key(row["idempotency_key"])
            if existing is None:
                raise LedgerUnavailable("pilot intake write failed: integrity error") from exc
            return existing

    def confirm(self, pilot_id: str, now: str) -> PilotRow | None:
        """Mark submitted → confirmed once (a second confirmation keeps the first time)."""
        with self.ledger.write() as connection:
            connection.execute(update(pilot_intakes).where(
                pilot_intakes.c.pilot_id == pilot_id, pilot_intakes.c.status == "submitted",
            ).values(status="confirmed", confirmed_at=now))
        return self.by_id(pilot_id)

    def export(self, limit: int) -> Iterator[dict[str, Any]]:
        """The `limit` oldest-first intakes (created_at, pilot_id)."""
        query = (select(pilot_intakes).order_by(pilot_intakes.c.created_at, pilot_intakes.c.pilot_id)
                 .limit(limit))
        with self.ledger.read() as connection:
            rows = [dict(row) for row in connection.execute(query).mappings()]
        yield from rows


def proof_counts(ledger: Ledger) -> dict[str, Any]:
    """Aggregate counts for `/api/proof-metrics`: decisions by authority and verdict, receipts
    by kind, chains, workflow runs and pilot intakes. One grouped query per table."""
    advisory = decisions.c.policy_id.like(ADVISORY_POLICY_PREFIX + "%")
    authority = case((advisory, "advisory"), else_="binding")
    with ledger.read() as connection:
        by_verdict = connection.execute(
            select(authority.label("authority"), decisions.c.verdict, func.count())
            .group_by(authority, decisions.c.verdict)).all()
        receipts = connection.execute(
            select(lifecycle_receipts.c.kind, func.count()).group_by(lifecycle_receipts.c.kind)).all()
        chains = connection.execute(select(func.count(), func.coalesce(func.sum(chain_heads.c.size), 0))
                                    .select_from(chain_heads)).one()
        workflows = connection.execute(select(func.count()).select_from(workflow_runs)).scalar_one()
        pilots = connection.execute(
            select(pilot_intakes.c.status, func.count()).group_by(pilot_intakes.c.status)).all()
    verdicts = {"binding": {"yes": 0, "no": 0, "review": 0}, "advisory": {"yes": 0, "no": 0, "review": 0}}
    for kind, verdict, count in by_verdict:
        verdicts[kind][verdict] = verdicts[kind].get(verdict, 0) + count
    receipt_counts = {"execution": 0, "outcome": 0, "crm_sync": 0}
    receipt_counts.update(dict(receipts))
    pilot_counts = {"submitted": 0, "confirmed": 0}
    pilot_counts.update(dict(pilots))
    return {
        "decisions": {
            "total": sum(sum(v.values()) for v in verdicts.values()),
            "binding": {"total": sum(verdicts["binding"].values()), "by_verdict": verdicts["binding"]},
            # An advisory record's verdict is never yes (docs/advisory.md): its approvals are review.
            "advisory": {"total": sum(verdicts["advisory"].values()), "by_verdict": verdicts["advisory"]},
        },
        "receipts": receipt_counts,
        "audit_chains": {"chains": chains[0], "links": int(chains[1])},
        "workflow_runs": workflows,
        "pilots": {"total": sum(pilot_counts.values()), **pilot_counts},
    }


def recent_policy_ids(ledger: Ledger, scope: str, limit: int) -> list[str]:
    """The scope's `limit` most recently decided policy ids, newest first (one grouped query)."""
    newest = func.max(decisions.c.created_at)
    query = (select(decisions.c.policy_id).where(decisions.c.scope == scope, decisions.c.policy_id.is_not(None))
             .group_by(decisions.c.policy_id).order_by(newest.desc(), decisions.c.policy_id).limit(limit))
    with ledger.read() as connection:
        return list(connection.execute(query).scalars())
