"""Lifecycle writes and reads: execution receipts, outcome records and CRM sync records.

`LifecycleService.record` runs the spec's idempotency table for the three write endpoints:

| condition | result |
|---|---|
| no key, or key unused | receipt built, claimed and stored: `created` (201) |
| same key, same canonical payload, done | the stored receipt: `replayed` (200, identical body) |
| same key while another request holds the claim | `SVC_*_IDEMPOTENCY_IN_PROGRESS` (409) |
| same key, different payload (or decision) | `SVC_*_IDEMPOTENCY_CONFLICT` (409) |
| claim or storage failure | `SVC_*_UNAVAILABLE` (503); the claim is released, no receipt exists |
| any other failure while storing | the error propagates (500); the claim is still released |

Validation and record-reference errors are raised before any claim is taken, so a refused
request leaves nothing behind.
"""

from __future__ import annotations

import builtins
import json
import logging
import secrets
from collections.abc import Callable, Mapping
from contextlib import suppress
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from gate import receipts as R
from gate.chain.rowseal import receipt_head_payload
from gate.clock import Clock, iso_ms, ordered_token
from gate.errors import GateError, LedgerUnavailable
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.ledger.confidence import Bucket, OutcomeMove
from gate.ledger.lifecycle import DONE, ClaimLost, LifecycleStore
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.strict_json import JsonValue

STALE_CLAIM_SECONDS = 30
CREATED = "created"
REPLAYED = "replayed"


@dataclass(frozen=True)
class Kind:
    name: str  # execution | outcome | crm_sync
    code: str  # SVC_EXECUTION / SVC_OUTCOME / SVC_CRM_SYNC
    id_prefix: str
    id_field: str
    hash_field: str
    wrapper: str
    list_name: str
    build: Callable[..., Mapping[str, Any]]  # a `gate.receipts.kinds` receipt of the kind
    input_hash_kw: str


def _without_lookup(kw: dict[str, Any]) -> dict[str, Any]:
    """Only an Outcome Record links to an execution receipt."""
    kw.pop("execution_lookup")
    return kw


KINDS: dict[str, Kind] = {
    "execution": Kind("execution", "SVC_EXECUTION", "exe_", "execution_receipt_id", "execution_hash",
                      "execution", "execution_receipts",
                      lambda **kw: R.build_execution_receipt(execution_receipt_id=kw.pop("receipt_id"),
                                                             **_without_lookup(kw)),
                      "execution_input_hash"),
    "outcome": Kind("outcome", "SVC_OUTCOME", "out_", "outcome_id", "outcome_hash", "outcome",
                    "outcome_records",
                    lambda **kw: R.build_outcome_record(outcome_id=kw.pop("receipt_id"), **kw),
                    "outcome_input_hash"),
    "crm_sync": Kind("crm_sync", "SVC_CRM_SYNC", "crm_", "sync_id", "sync_hash", "crm_sync",
                     "crm_sync_records",
                     lambda **kw: R.build_crm_sync_record(sync_id=kw.pop("receipt_id"), **_without_lookup(kw)),
                     "sync_input_hash"),
}


@dataclass(frozen=True, slots=True)
class LifecycleResult:
    receipt: Mapping[str, Any]  # built (a `gate.receipts.kinds` receipt) or replayed from the ledger
    idempotency_status: str  # created | replayed


class LifecycleService:
    def __init__(self, ledger: Ledger, clock: Clock, signing: SigningSetup | LiveSigning | None, *,
                 after_outcome: Callable[[str, str, str, str | None], None] | None = None) -> None:
        """`signing` is required so no writer forgets it: its receipt key signs each decision's
        receipt head, and hosted verify names an unsigned head (`receipt_chain.signature`).
        `after_outcome(scope, decision_id, outcome_id, reported_by)` runs after an Outcome Record is
        stored (the canary guardrails, gate.services.releases, which name the outcome and the key
        that reported it in a halt's evidence); it never fails the stored receipt."""
        self.store = LifecycleStore(ledger, self._sign_head)
        self.clock = clock
        self.signing = signing
        self.after_outcome = after_outcome

    def _sign_head(self, decision_id: str, count: int, head_row_hash: str) -> tuple[str | None, str | None]:
        """The receipt key's signature over the decision's new receipt head (gate.chain.rowseal)."""
        signer = self.signing.receipt_signer() if self.signing is not None else None
        if signer is None:
            return None, None
        return signer.key_id, signer.sign_payload(
            receipt_head_payload(decision_id, count, head_row_hash, signer.key_id))

    def record(self, kind: Kind, *, scope: str, decision_id: str, record: Mapping[str, Any],
               body: Any, idempotency_key: str | None, reported_by: str | None = None) -> LifecycleResult:
        reported_at = iso_ms(self.clock.now())
        input_hash = R.request_input_hash(body)
        receipt_id = ordered_token(kind.id_prefix)  # in time order, as decisions' (gate.clock)
        # Build first: validation and reference errors refuse before anything is claimed.
        receipt = kind.build(body=body, record=record, receipt_id=receipt_id,
                             idempotency_key=idempotency_key, reported_at=reported_at,
                             execution_lookup=lambda linked: self.store.execution_receipt(decision_id, linked),
                             **{kind.input_hash_kw: input_hash})
        token = None
        if idempotency_key is not None:
            token = secrets.token_hex(16)
            replay = self._claim(kind, scope, decision_id, idempotency_key, input_hash, token, reported_at)
            if replay is not None:
                return replay
        row = {
            "receipt_id": receipt_id, "kind": kind.name, "decision_id": decision_id, "scope": scope,
            "idempotency_key": idempotency_key, "input_hash": input_hash,
            "receipt_hash": receipt[kind.hash_field], "reported_at": reported_at,
            "receipt_json": json.dumps(receipt, ensure_ascii=False, separators=(",", ":")),
            **_link_columns(kind, receipt),
        }
        try:
            self.store.store(row, claim_token=token, outcome=_outcome_move(kind, scope, record, receipt, row))
        except ClaimLost as exc:
            raise self._in_progress(kind, idempotency_key) from exc
        except LedgerUnavailable as exc:
            # SECURITY: spec — "no untracked receipt is acknowledged": release the claim and
            # answer 503; the transaction rolled back, so no receipt exists.
            if token is not None and idempotency_key is not None:  # a claim was made
                self._release_quietly(kind, scope, idempotency_key, token)
            raise GateError(f"{kind.code}_UNAVAILABLE",
                            f"the {kind.name} receipt could not be stored; nothing was recorded") from exc
        except BaseException:
            # SECURITY: whatever else failed (a driver error, a crash), the claim is ours and no
            # receipt exists: release it, or every retry would be "in progress" until takeover.
            if token is not None and idempotency_key is not None:  # a claim was made
                self._release_quietly(kind, scope, idempotency_key, token)
            raise
        if kind.name == "outcome" and self.after_outcome is not None:
            self._after_outcome_quietly(scope, decision_id, receipt_id, reported_by)
        return LifecycleResult(receipt, CREATED)

    def _after_outcome_quietly(self, scope: str, decision_id: str, outcome_id: str, reported_by: str | None) -> None:
        """The receipt is stored and acknowledged whatever the follow-up does; a failure is logged."""
        try:
            if self.after_outcome is not None:
                self.after_outcome(scope, decision_id, outcome_id, reported_by)
        except Exception:
            logging.getLogger("gate.releases").exception("guardrail check after an outcome failed")

    def _claim(self, kind: Kind, scope: str, decision_id: str, key: str, input_hash: str, token: str,
               now: str) -> LifecycleResult | None:
        try:
            existing = self.store.claim(scope=scope, kind=kind.name, key=key, decision_id=decision_id,
                                        input_hash=input_hash, token=token, now=now)
            if existing is None:
                return None
            if existing.decision_id != decision_id or existing.input_hash != input_hash:
                raise GateError(
                    f"{kind.code}_IDEMPOTENCY_CONFLICT",
                    "this idempotency key was already used with a different payload",
                    idempotency_key=key, decision_id=existing.decision_id,
                    input_hash=input_hash, existing_input_hash=existing.input_hash,
                )
            if existing.state == DONE:
                stored = self.store.receipt(existing.receipt_id or "")
                if stored is None:  # pragma: no cover - done claims are written with their receipt
                    raise GateError(f"{kind.code}_UNAVAILABLE", "the claimed receipt could not be read")
                return LifecycleResult(json.loads(stored["receipt_json"]), REPLAYED)
            cutoff = iso_ms(self.clock.now() - timedelta(seconds=STALE_CLAIM_SECONDS))
            if existing.claimed_at < cutoff and self.store.take_over(
                    scope=scope, kind=kind.name, key=key, stale=existing, token=token, now=now,
                    input_hash=input_hash, decision_id=decision_id):
                return None
            raise self._in_progress(kind, key)
        except LedgerUnavailable as exc:
            raise GateError(f"{kind.code}_UNAVAILABLE",
                            "the idempotency claim could not be made; nothing was recorded") from exc

    @staticmethod
    def _in_progress(kind: Kind, key: str | None) -> GateError:
        return GateError(f"{kind.code}_IDEMPOTENCY_IN_PROGRESS",
                         "a request with this idempotency key is being written; retry shortly",
                         idempotency_key=key)

    def _release_quietly(self, kind: Kind, scope: str, key: str, token: str) -> None:
        with suppress(LedgerUnavailable):  # a stale pending claim is taken over after STALE_CLAIM_SECONDS
            self.store.release(scope=scope, kind=kind.name, key=key, token=token)

    def list(self, kind: Kind, decision_id: str, *, limit: int, cursor: str | None) -> dict[str, JsonValue]:
        before = _parse_cursor(cursor) if cursor else None
        rows = self.store.receipts(decision_id, kind.name, limit=limit + 1, before=before)
        page, more = rows[:limit], len(rows) > limit
        return {
            "ok": True,
            "decision_id": decision_id,
            kind.list_name: [json.loads(row["receipt_json"]) for row in page],
            "count": len(page),
            "total": self.store.count(decision_id, kind.name),
            "next_cursor": f"{page[-1]['reported_at']}|{page[-1]['receipt_id']}" if more else None,
        }

    def integrity_failures(self, decision_id: str, record: dict[str, Any], limit: int = 1000) -> builtins.list[str]:
        """Named failures of the decision's stored receipts (newest `limit` of each kind): each
        receipt's hash and its links to the record recomputed (packet step 3, outcome links to
        execution receipts included), and each row's indexed hash, decision id and link columns
        equal to the receipt it stores."""
        parsed: dict[str, builtins.list[dict[str, JsonValue]]] = {}
        failures: list[str] = []
        for kind in KINDS.values():
            rows = self.store.receipts(decision_id, kind.name, limit=limit)
            parsed[kind.name] = [json.loads(row["receipt_json"]) for row in rows]
            for index, (row, receipt) in enumerate(zip(rows, parsed[kind.name], strict=True)):
                if row["receipt_hash"] != receipt.get(kind.hash_field) or row["receipt_id"] != receipt.get(kind.id_field) \
                        or row["decision_id"] != receipt.get("decision_id") \
                        or any(row.get(name) != value for name, value in _link_columns(kind, receipt).items()):
                    failures.append(f"{kind.list_name}[{index}].ledger_row")
        links = R.verify_receipt_links(record, parsed["execution"], parsed["outcome"], parsed["crm_sync"],
                                       linked_executions=self._linked_executions(decision_id, parsed))
        return sorted(set(failures) | {failure.name for failure in links})

    def _linked_executions(self, decision_id: str,
                           parsed: dict[str, builtins.list[dict[str, JsonValue]]]) -> builtins.list[dict[str, JsonValue]]:
        """The execution receipts the outcomes' links resolve against: those read, and any older
        one a link names, read by id (absent when the decision has no such receipt)."""
        known = {receipt.get("execution_receipt_id") for receipt in parsed["execution"]}
        named = {receipt_id for outcome in parsed["outcome"]
                 if isinstance(receipt_id := outcome.get("execution_receipt_id"), str)} - known
        older = [self.store.execution_receipt(decision_id, receipt_id) for receipt_id in sorted(named)]
        return parsed["execution"] + [receipt for receipt in older if receipt is not None]

    def all_for(self, kind: Kind, decision_id: str, limit: int) -> tuple[builtins.list[dict[str, JsonValue]], int]:
        rows = self.store.receipts(decision_id, kind.name, limit=limit)
        return [json.loads(row["receipt_json"]) for row in rows], self.store.count(decision_id, kind.name)


def _outcome_move(kind: Kind, scope: str, record: Mapping[str, Any], receipt: Mapping[str, Any],
                  row: dict[str, Any]) -> OutcomeMove | None:
    """How an Outcome Record moves its decision in the confidence counters (None for the other
    kinds, and for records without a policy). The bucket is the decision's own record."""
    if kind.name != "outcome" or not isinstance(record.get("policy_id"), str):
        return None
    bucket = Bucket(scope, record["policy_id"], str(record.get("verdict")), str(record.get("action")),
                    str(record.get("policy_version")))
    return OutcomeMove(bucket, row["decision_id"], row["reported_at"], row["receipt_id"],
                       OUTCOME_EFFECTIVENESS_CLASS[receipt["outcome_status"]])


def _link_columns(kind: Kind, receipt: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The row's copies of an Outcome Record's execution link (null on every other row: an
    execution receipt's own id and hash are not a link)."""
    linked = kind.name == "outcome"
    return {name: receipt.get(name) if linked else None for name in R.OUTCOME_LINK_MEMBERS}


def _parse_cursor(cursor: str) -> tuple[str, str]:
    at, sep, receipt_id = cursor.partition("|")
    if not sep or not at or not receipt_id or len(cursor) > 120:
        raise GateError("REQUEST_INVALID", "cursor is not one this endpoint issued",
                        errors=[{"field": "cursor", "code": "invalid_value", "message": "use next_cursor"}])
    return at, receipt_id
