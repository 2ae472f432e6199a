"""Ledger reads of stored decisions (table `decisions`) and of their confidence counts; the
decisions are written by `gate.ledger.decision_write`."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from sqlalchemy import RowMapping, and_, select
from sqlalchemy.engine import Connection

from gate.ledger.confidence import COUNTS_QUERY, Bucket, counts_from_rows, counts_params
from gate.ledger.connection import LedgerConnection
from gate.ledger.tables import decisions
from gate.protocol.confidence import ConfidenceCounts

BUNDLE_CANDIDATES = 8


@dataclass(frozen=True, slots=True)
class StoredDecision:
    decision_id: str
    scope: str
    idempotency_key: str | None
    input_hash: str
    record_hash: str
    receipt_hash: str
    created_at: str
    record_json: str
    request_json: str
    # Every other column, as stored (what `gate.chain.rowseal` seals and verify compares).
    columns: dict[str, Any]


class DecisionHashes(TypedDict):
    """`RecordLedger.decision_hashes`: where a decision is filed, its two hashes and its stored record."""

    decision_id: str
    scope: str
    record_hash: str
    receipt_hash: str
    record_json: str


def _stored(row: RowMapping | None) -> StoredDecision | None:
    if row is None:
        return None
    return StoredDecision(
        decision_id=row["decision_id"],
        scope=row["scope"],
        idempotency_key=row["idempotency_key"],
        input_hash=row["input_hash"],
        record_hash=row["record_hash"],
        receipt_hash=row["receipt_hash"],
        created_at=row["created_at"],
        record_json=row["record_json"],
        request_json=row["request_json"],
        columns={name: row[name] for name in row if name not in ("record_json", "request_json")},
    )


class RecordLedger:
    """Reads of the decision table over one `LedgerConnection`."""

    def __init__(self, ledger: LedgerConnection) -> None:
        self.ledger = ledger

    def decision(self, scope: str, decision_id: str) -> StoredDecision | None:
        """The decision if it belongs to `scope` (another scope's decision reads as absent)."""
        with self.ledger.read() as connection:
            row = connection.execute(
                select(decisions).where(
                    and_(decisions.c.decision_id == decision_id, decisions.c.scope == scope)
                )
            ).mappings().first()
        return _stored(row)

    def decision_by_idempotency(self, scope: str, idempotency_key: str) -> StoredDecision | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(decisions).where(
                    and_(
                        decisions.c.scope == scope,
                        decisions.c.idempotency_key == idempotency_key,
                    )
                )
            ).mappings().first()
        return _stored(row)

    def bundle_hash_known(self, policy_bundle_hash: str) -> dict[str, Any] | None:
        """First decision that carries this policy bundle hash (any scope; hashes only).

        The indexed column only finds candidates: every value returned is read from the stored
        record itself, and a row whose record does not carry this bundle hash is skipped
        (SECURITY: an edited column can neither invent a bundle nor relabel one). At most
        `BUNDLE_CANDIDATES` rows are read."""
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(decisions.c.record_json)
                .where(decisions.c.policy_bundle_hash == policy_bundle_hash)
                .order_by(decisions.c.created_at)
                .limit(BUNDLE_CANDIDATES)
            ).all()
        found = []
        for (record_json,) in rows:
            try:
                record = json.loads(record_json)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("policy_bundle_hash") == policy_bundle_hash \
                    and isinstance(record.get("created_at"), str):
                found.append({"policy_bundle_hash": policy_bundle_hash, "policy_id": record.get("policy_id"),
                              "policy_version": record.get("policy_version"),
                              "rulebook_hash": record.get("policy_hash"), "created_at": record["created_at"]})
        return min(found, key=lambda known: known["created_at"]) if found else None

    def decision_hashes(self, decision_ids: Sequence[str | None]) -> dict[str | None, DecisionHashes]:
        """scope, record_hash, receipt_hash and the stored record JSON of the given decisions."""
        if not decision_ids:
            return {}
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(decisions.c.decision_id, decisions.c.scope, decisions.c.record_hash,
                       decisions.c.receipt_hash, decisions.c.record_json)
                .where(decisions.c.decision_id.in_(decision_ids))
            ).mappings().all()
        return {row["decision_id"]: cast(DecisionHashes, dict(row)) for row in rows}  # the columns selected

    def confidence_counts(self, bucket: Bucket) -> ConfidenceCounts | None:
        """The confidence counts of `bucket` as stored now; None before its scope's first outcome."""
        with self.ledger.read() as connection:
            return counts_from_rows(bucket, self.counts_rows(connection, bucket))

    def counts_rows(self, connection: Connection, bucket: Bucket) -> list[dict[str, Any]]:
        """The stored rows `counts_from_rows` makes `bucket`'s counts of: one indexed read by key prefix."""
        return self.ledger.hot("counts", COUNTS_QUERY).run(connection, counts_params(bucket))
