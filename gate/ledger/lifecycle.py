"""Storage of lifecycle receipts and their idempotency claims.

The claim protocol (spec idempotency table, "POST …/execution with key"):
1. `claim` inserts (scope, kind, key) as `pending` in its own transaction. The primary key
   makes the claim atomic across processes and hosts; a loser reads the existing claim.
2. `complete` inserts the receipt and flips the claim to `done` in one transaction, only while
   the claim still carries this writer's token.
3. `release` deletes a pending claim after a failed write, so no claim survives without its
   receipt and a retry can proceed.
A pending claim older than `stale_after` seconds (its writer died) can be taken over.

Every receipt row is also appended to its decision's receipt chain (`gate.chain.rowseal`) in the
same transaction: the decision's `receipt_heads` row is locked first, the receipt gets the
next `sequence` and the head's `row_hash` as `previous_row_hash`, and the head is advanced
and re-signed. So sequences are contiguous per decision and the head always names the newest
row, whatever writes race.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypedDict, cast

from sqlalchemy import ColumnElement, and_, delete, func, insert, or_, select, update
from sqlalchemy.engine import Connection, RowMapping
from sqlalchemy.exc import IntegrityError

from gate.chain.rowseal import receipt_row_hash
from gate.errors import LedgerUnavailable, Signal
from gate.ledger.confidence import OutcomeMove, apply_outcome
from gate.ledger.store import Ledger
from gate.ledger.tables import idempotency_claims, lifecycle_receipts, receipt_heads

# (decision_id, count, head_row_hash) -> (key_id, signature), both None without a signer.
HeadSigner = Callable[[str, int, str], tuple[str | None, str | None]]

PENDING = "pending"
DONE = "done"


@dataclass(frozen=True, slots=True)
class Claim:
    decision_id: str
    input_hash: str
    state: str
    claim_token: str
    claimed_at: str
    receipt_id: str | None


class ReceiptRow(TypedDict):
    """A `lifecycle_receipts` row: the receipt's keys, its stored text, its place in the
    decision's receipt chain (`sequence`, `previous_row_hash`, `row_hash`; null on rows written
    before the chain) and an Outcome Record's link columns (null on every other row)."""

    receipt_id: str
    kind: str
    decision_id: str
    scope: str
    idempotency_key: str | None
    input_hash: str
    receipt_hash: str
    reported_at: str
    receipt_json: str
    sequence: int | None
    previous_row_hash: str | None
    row_hash: str | None
    execution_receipt_id: str | None
    execution_hash: str | None


class ExecutionLinkRow(TypedDict):
    """`LifecycleStore.execution_links`: an Outcome Record's link columns beside the row they name
    (`named_*` null when no row has that id)."""

    decision_id: str
    outcome_id: str
    outcome_hash: str
    execution_receipt_id: str | None
    execution_hash: str | None
    named_kind: str | None
    named_decision_id: str | None
    named_hash: str | None


def _receipt_row(row: RowMapping) -> ReceiptRow:
    return cast(ReceiptRow, dict(row))  # select(lifecycle_receipts): exactly its columns


class ClaimLost(Signal):
    """Internal: the pending claim was taken over before this writer completed it."""


def _claim_filter(scope: str, kind: str, key: str) -> ColumnElement[bool]:
    return and_(idempotency_claims.c.scope == scope, idempotency_claims.c.kind == kind,
                idempotency_claims.c.idempotency_key == key)


def _unsigned_head(decision_id: str, count: int, head_row_hash: str) -> tuple[None, None]:
    return None, None


class LifecycleStore:
    def __init__(self, ledger: Ledger, sign_head: HeadSigner = _unsigned_head) -> None:
        self.ledger = ledger
        self.sign_head = sign_head

    # ------------------------------------------------------------------ claims

    def claim(self, *, scope: str, kind: str, key: str, decision_id: str, input_hash: str,
              token: str, now: str) -> Claim | None:
        """Claim the key; None when claimed now, else the existing claim (nothing written)."""
        row = {"scope": scope, "kind": kind, "idempotency_key": key, "decision_id": decision_id,
               "input_hash": input_hash, "state": PENDING, "claim_token": token, "claimed_at": now,
               "receipt_id": None}
        try:
            with self.ledger.write() as connection:
                connection.execute(insert(idempotency_claims), row)
            return None
        except IntegrityError:
            existing = self.existing_claim(scope, kind, key)
            if existing is None:  # released between our insert and read: claim again
                return self.claim(scope=scope, kind=kind, key=key, decision_id=decision_id,
                                  input_hash=input_hash, token=token, now=now)
            return existing

    def existing_claim(self, scope: str, kind: str, key: str) -> Claim | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(idempotency_claims).where(_claim_filter(scope, kind, key))
            ).mappings().first()
        if row is None:
            return None
        return Claim(row["decision_id"], row["input_hash"], row["state"], row["claim_token"],
                     row["claimed_at"], row["receipt_id"])

    def take_over(self, *, scope: str, kind: str, key: str, stale: Claim, token: str, now: str,
                  input_hash: str, decision_id: str) -> bool:
        """Replace a stale pending claim (its writer is gone); False if someone else did."""
        with self.ledger.write() as connection:
            result = connection.execute(
                update(idempotency_claims)
                .where(and_(_claim_filter(scope, kind, key), idempotency_claims.c.state == PENDING,
                            idempotency_claims.c.claim_token == stale.claim_token))
                .values(claim_token=token, claimed_at=now, input_hash=input_hash, decision_id=decision_id)
            )
        return result.rowcount == 1

    def release(self, *, scope: str, kind: str, key: str, token: str) -> None:
        with self.ledger.write() as connection:
            connection.execute(
                delete(idempotency_claims).where(and_(
                    _claim_filter(scope, kind, key), idempotency_claims.c.state == PENDING,
                    idempotency_claims.c.claim_token == token))
            )

    # ------------------------------------------------------------------ receipts

    def store(self, row: dict[str, Any], *, claim_token: str | None,
              outcome: OutcomeMove | None = None) -> None:
        """Insert a receipt; with a claim, complete it in the same transaction (or raise ClaimLost);
        with `outcome` (Outcome Records), update the confidence counters in that transaction too.

        Any storage failure surfaces as LedgerUnavailable, with nothing written."""
        try:
            self._store(row, claim_token, outcome)
        except IntegrityError as exc:
            raise LedgerUnavailable("receipt write failed: integrity error") from exc

    def _store(self, row: dict[str, Any], claim_token: str | None, outcome: OutcomeMove | None) -> None:
        with self.ledger.write() as connection:
            row = self._chain(connection, row)
            connection.execute(insert(lifecycle_receipts), row)
            if outcome is not None:
                apply_outcome(connection, self.ledger.dialect, outcome)
            if claim_token is not None:
                result = connection.execute(
                    update(idempotency_claims)
                    .where(and_(_claim_filter(row["scope"], row["kind"], row["idempotency_key"]),
                                idempotency_claims.c.state == PENDING,
                                idempotency_claims.c.claim_token == claim_token))
                    .values(state=DONE, receipt_id=row["receipt_id"])
                )
                if result.rowcount != 1:
                    raise ClaimLost(row["idempotency_key"])

    def _chain(self, connection: Connection, row: dict[str, Any]) -> dict[str, Any]:
        """Lock the decision's receipt head, give `row` its place in the chain, advance the head."""
        decision_id = row["decision_id"]
        connection.execute(self.ledger.insert_ignore(receipt_heads, {
            "decision_id": decision_id, "count": 0, "head_row_hash": None, "key_id": None,
            "signature": None, "updated_at": row["reported_at"]}))
        head = connection.execute(
            select(receipt_heads).where(receipt_heads.c.decision_id == decision_id).with_for_update()
        ).mappings().one()  # inserted just above, or already there
        row = dict(row, sequence=head["count"] + 1, previous_row_hash=head["head_row_hash"])
        row["row_hash"] = receipt_row_hash(row)
        key_id, signature = self.sign_head(decision_id, row["sequence"], row["row_hash"])
        connection.execute(
            update(receipt_heads).where(receipt_heads.c.decision_id == decision_id).values(
                count=row["sequence"], head_row_hash=row["row_hash"], key_id=key_id, signature=signature,
                updated_at=row["reported_at"]))
        return row

    def receipt_head(self, decision_id: str) -> dict[str, Any] | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(receipt_heads).where(receipt_heads.c.decision_id == decision_id)
            ).mappings().first()
        return dict(row) if row else None

    def chained(self, decision_id: str, *, limit: int) -> tuple[list[ReceiptRow], int]:
        """The decision's newest `limit` receipt rows by sequence (ascending), and the count of
        all its rows (any kind, sequenced or not)."""
        with self.ledger.read() as connection:
            rows = connection.execute(
                select(lifecycle_receipts).where(lifecycle_receipts.c.decision_id == decision_id)
                .order_by(lifecycle_receipts.c.sequence.desc()).limit(limit)
            ).mappings().all()
            total = connection.execute(
                select(func.count()).select_from(lifecycle_receipts)
                .where(lifecycle_receipts.c.decision_id == decision_id)
            ).scalar_one()
        return [_receipt_row(row) for row in reversed(rows)], int(total)

    def receipt(self, receipt_id: str) -> ReceiptRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(
                select(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == receipt_id)
            ).mappings().first()
        return _receipt_row(row) if row else None

    def execution_receipt(self, decision_id: str, receipt_id: str) -> dict[str, Any] | None:
        """The stored execution receipt `receipt_id` of `decision_id` (parsed), None when the
        decision has none with that id (another kind, another decision, no such row)."""
        with self.ledger.read() as connection:
            row = connection.execute(
                select(lifecycle_receipts.c.receipt_json).where(and_(
                    lifecycle_receipts.c.receipt_id == receipt_id, lifecycle_receipts.c.kind == "execution",
                    lifecycle_receipts.c.decision_id == decision_id))
            ).mappings().first()
        if row is None:
            return None
        receipt: dict[str, Any] = json.loads(row["receipt_json"])
        return receipt

    def execution_links(self, decision_ids: list[str], *, limit: int) -> list[ExecutionLinkRow]:
        """Outcome rows of `decision_ids` that link to an execution receipt (oldest first, at most
        `limit`): the outcome's id, hash and link columns, and the named row's kind, decision id
        and hash (null when no row has that id)."""
        outcome, named = lifecycle_receipts.alias("outcome"), lifecycle_receipts.alias("named")
        query = (
            select(outcome.c.decision_id, outcome.c.receipt_id.label("outcome_id"),
                   outcome.c.receipt_hash.label("outcome_hash"), outcome.c.execution_receipt_id,
                   outcome.c.execution_hash, named.c.kind.label("named_kind"),
                   named.c.decision_id.label("named_decision_id"), named.c.receipt_hash.label("named_hash"))
            .select_from(outcome.outerjoin(named, named.c.receipt_id == outcome.c.execution_receipt_id))
            .where(and_(outcome.c.decision_id.in_(decision_ids), outcome.c.kind == "outcome",
                        or_(outcome.c.execution_receipt_id.is_not(None), outcome.c.execution_hash.is_not(None))))
            .order_by(outcome.c.reported_at, outcome.c.receipt_id).limit(limit)
        )
        with self.ledger.read() as connection:  # the columns selected, by the names given there
            return [cast(ExecutionLinkRow, dict(row)) for row in connection.execute(query).mappings().all()]

    def receipts(self, decision_id: str, kind: str, *, limit: int,
                 before: tuple[str, str] | None = None) -> list[ReceiptRow]:
        """Newest first (reported_at, then receipt_id, descending); `before` is a page cursor."""
        query = select(lifecycle_receipts).where(and_(
            lifecycle_receipts.c.decision_id == decision_id, lifecycle_receipts.c.kind == kind))
        if before is not None:
            at, receipt_id = before
            query = query.where(or_(
                lifecycle_receipts.c.reported_at < at,
                and_(lifecycle_receipts.c.reported_at == at, lifecycle_receipts.c.receipt_id < receipt_id)))
        query = query.order_by(lifecycle_receipts.c.reported_at.desc(),
                               lifecycle_receipts.c.receipt_id.desc()).limit(limit)
        with self.ledger.read() as connection:
            return [_receipt_row(row) for row in connection.execute(query).mappings().all()]

    def count(self, decision_id: str, kind: str) -> int:
        with self.ledger.read() as connection:
            return int(connection.execute(
                select(func.count()).select_from(lifecycle_receipts).where(and_(
                    lifecycle_receipts.c.decision_id == decision_id, lifecycle_receipts.c.kind == kind))
            ).scalar_one())


__all__ = ["DONE", "PENDING", "Claim", "ClaimLost", "ExecutionLinkRow", "LedgerUnavailable", "LifecycleStore",
           "ReceiptRow"]
