"""The steps every decide shares, whatever builds the record (rulebook or advisory modes).

`DecisionPipeline` is their one home; `DecisionService` and `AdvisoryService` both call it:

* `fingerprint(request)`: the canonical request text and its input hash;
* `replay_known(...)`: the idempotency fast path (the stored record again, or
  `IdempotencyConflict` for another body under the same key);
* `receipt_signer()`: the signer, or 503 `SIGNING_UNAVAILABLE` when signing is required and no key
  is usable (SECURITY: no unsigned record is emitted then);
* `store(...)`: seal the built record (row seal, chain link, tree nodes), store it atomically with
  its snapshot and monthly-cap charge, and answer `created`; a concurrent request that claimed the
  key first is answered as its replay.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gate.chain.links import chain_id_for, new_link, record_audit_chain
from gate.chain.merkle import CompactRange
from gate.chain.rowseal import DecisionRow, SealedDecisionRow, sealed_decision_row
from gate.clock import Clock, IdSource, iso_ms
from gate.errors import DuplicateIdempotencyKey, GateError, IdempotencyConflict, SigningUnavailable
from gate.keys.apikeys import DEFAULT_PERMISSIONS
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import (
    CapCharge,
    ChainAppend,
    ChainHead,
    Ledger,
    SealedDecision,
    SnapshotRow,
    StoredDecision,
    Written,
)
from gate.ledger.confidence import Bucket
from gate.ledger.outbox_write import DecisionCreated
from gate.ledger.store import DecisionExtra
from gate.principals import Permissions, Principal
from gate.protocol.canonical import canonical_text, sha256_bytes_hex
from gate.protocol.confidence import ConfidenceCounts, confidence_block
from gate.protocol.decision_record import DecisionRecord
from gate.services.holds import HoldOpener
from gate.services.scope_events import MirrorFlags

CREATED = "created"
REPLAYED = "replayed"


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated API key (or CI run), resolved to its scope and effective limits."""

    key_id: str
    scope: str
    plan: str
    rate_limit: int
    monthly_cap: int
    permissions: Permissions = DEFAULT_PERMISSIONS
    holder: str | None = None  # the key's stated holder (issue 52); None: a key of none, key:<key_id>
    # A CI run's principal (api.ci; its key_id is the principal's id); None: an API key, whose
    # principal is built from key_id and holder.
    principal: Principal | None = None


@dataclass(frozen=True, slots=True)
class DecideResult:
    record: DecisionRecord
    idempotency_status: str  # created | replayed
    monthly_used: int | None
    headers: tuple[tuple[str, str], ...] = ()  # response headers a release adds (docs/releases.md)

    @property
    def record_json(self) -> str | None:
        """The stored text of a record this decide created (its `full` answer as stored); None
        for a replay, whose answer is encoded from the stored value as before."""
        return self.record.text if self.idempotency_status == CREATED else None


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """A prepared request in canonical text, and the input hash a record and a replay compare."""

    request_text: str
    input_hash: str


@dataclass(frozen=True, slots=True)
class Claim:
    """Who asks, under which idempotency key, and the canonical request (the route shapes the answer)."""

    caller: Caller
    idempotency_key: str | None
    fingerprint: Fingerprint


@dataclass(frozen=True, slots=True)
class Stamp:
    """What every new record of a decide states first, binding or advisory: its ids, its time
    and the input hash its claim fingerprinted (`DecisionPipeline.stamp`)."""

    decision_id: str
    request_id: str
    idempotency_key: str | None
    created_at: str
    input_hash: str


def fingerprint(request: Any) -> Fingerprint:
    request_text = canonical_text(request)
    return Fingerprint(request_text, sha256_bytes_hex(request_text.encode("utf-8")))


def replay(existing: StoredDecision, idempotency_key: str, input_hash: str) -> DecideResult:
    """The stored record again; another body under the same key is `IdempotencyConflict`."""
    if existing.input_hash != input_hash:
        raise IdempotencyConflict(idempotency_key, existing.decision_id, input_hash, existing.input_hash)
    return DecideResult(DecisionRecord.stored(json.loads(existing.record_json), existing.record_json), REPLAYED, None)


def decision_row(claim: Claim, record: DecisionRecord, rulebook_hash: str) -> DecisionRow:
    """The decision row's columns before sealing (`record_json` is written by the seal)."""
    return {
        "decision_id": record.decision_id,
        "scope": claim.caller.scope,
        "key_id": claim.caller.key_id,
        "idempotency_key": claim.idempotency_key,
        "input_hash": claim.fingerprint.input_hash,
        "record_hash": record.record_hash,
        "receipt_hash": record.receipt_hash,
        "policy_bundle_hash": record.policy_bundle_hash,
        # The rulebook's hash; an advisory record's `policy_hash` (its advisor panel), which
        # gate.verify.ledger_rows checks the column against.
        "rulebook_hash": rulebook_hash,
        "policy_id": record.policy_id,
        "policy_version": record.policy_version,
        "verdict": record.verdict,
        "created_at": record.created_at,
        "record_json": "",
        "request_json": claim.fingerprint.request_text,
    }


def record_chain(chain_id: str, scope: str, record: DecisionRecord, row: SealedDecisionRow,
                 receipt_signer: ReceiptSigner | None, confidence: Bucket | None = None) -> ChainAppend:
    """The record's two sealing steps in its storing transaction, each returning a new record:
    `prepare` adds the decide-time confidence block (outside the chain head lock; when the scope
    has outcomes for the bucket), `seal` links the record into its chain under the lock, adds the
    signed `audit_chain`, completes the tree nodes and writes the row's stored text (the record's
    `text`: the envelope's, encoded when built, with the parts written under the lock)."""

    def prepare(counts: ConfidenceCounts | None) -> DecisionRecord:
        if counts is None:
            return record
        return record.with_confidence(confidence_block(counts, policy_version=record.policy_version),
                                      receipt_signer)

    def seal(head: ChainHead, prepared: DecisionRecord) -> SealedDecision:
        link = new_link(
            chain_id=chain_id,
            chain_position=head.size + 1,
            previous_link_hash=head.head_link_hash,
            previous_merkle_root=head.merkle_root,
            decision_id=record.decision_id,
            record_hash=record.record_hash,
            receipt_hash=record.receipt_hash,
            policy_id=record.policy_id,
            policy_version=record.policy_version,
            created_at=record.created_at,
        )
        # The chain member is outside record_hash: it is signed on its own (gate.verify).
        sealed = prepared.with_audit_chain(record_audit_chain(link), receipt_signer)
        tree, completed = CompactRange(head.size, head.tree_peaks).append(link["leaf_hash"])
        return SealedDecision({**row, "record_json": sealed.text}, link,
                              [(n.level, n.index, n.hash) for n in completed], tree.peaks, sealed)

    return ChainAppend(chain_id, scope, seal, prepare, confidence)


class DecisionPipeline:
    """Replay, signer check, seal and store: the steps shared by every way of deciding."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, ids: IdSource,
                 hold_opener: HoldOpener) -> None:
        self.ledger = ledger
        self.signing = signing
        self.clock = clock
        self.ids = ids
        # A held verdict opens its hold in the decide's transaction; its event links to the Inbox
        # at the opener's `inbox_base` (GATE_WORKBENCH_URL). A writer of history's opener defers.
        self.holds = hold_opener
        self.mirror = MirrorFlags(ledger)  # scopes that opted in to decision.created (docs/events.md)

    def replay_known(self, claim: Claim) -> DecideResult | None:
        """The idempotency fast path: the stored answer for the claim's key, or None when new."""
        if claim.idempotency_key is None:
            return None
        existing = self.ledger.decision_by_idempotency(claim.caller.scope, claim.idempotency_key)
        if existing is None:
            return None
        return replay(existing, claim.idempotency_key, claim.fingerprint.input_hash)

    def replay_winner(self, claim: Claim) -> DecideResult:
        """The answer after a concurrent request claimed the key first: the winner's record."""
        existing = self.ledger.decision_by_idempotency(claim.caller.scope, claim.idempotency_key or "")
        if existing is None:  # pragma: no cover - the winner's row must be visible
            raise GateError("LEDGER_UNAVAILABLE", "idempotency claim could not be read")
        return replay(existing, claim.idempotency_key or "", claim.fingerprint.input_hash)

    def receipt_signer(self) -> ReceiptSigner | None:
        """SECURITY: reference facts §3 — when signing is required and no key is usable, refuse
        (503) rather than emit an unsigned record."""
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()
        return signer

    def stamp(self, claim: Claim, request_id: str | None) -> Stamp:
        """The new record's ids (the caller's request id, else a new one) and time, now."""
        created_at = iso_ms(self.clock.now())
        decision_id = self.ids.decision_id()
        return Stamp(decision_id, request_id or self.ids.request_id(), claim.idempotency_key, created_at,
                     claim.fingerprint.input_hash)

    def store_sealed(
        self, claim: Claim, record: DecisionRecord, *, rulebook_hash: str, receipt_signer: ReceiptSigner | None,
        snapshot_row: SnapshotRow | None = None, confidence: Bucket | None = None,
        extra: Sequence[DecisionExtra] = (), facts: Any = None,
    ) -> Written:
        """Store a built record with its row seal, chain link, tree nodes, snapshot (if new) and
        monthly-cap charge in one transaction; returns the key's monthly usage and the record as
        sealed (its confidence block, when `confidence` names a bucket with outcomes, and its
        chain member). A record whose verdict holds the action opens its hold (with `facts` for
        the reviewer) in the same transaction (gate.services.holds). Raises
        `DuplicateIdempotencyKey` when a concurrent request claimed the key first."""
        caller = claim.caller
        extra = [*extra, *self.holds.opening(caller.scope, record, caller.key_id, facts, caller.holder,
                                                     claim.fingerprint.request_text)]
        if self.mirror.mirrored(caller.scope):
            record.canonical_text()  # the envelope's share of the event's text, here, not on the writer thread
            extra.append(DecisionCreated(caller.scope))
        row = sealed_decision_row(decision_row(claim, record, rulebook_hash), receipt_signer)
        chain_id = chain_id_for(caller.scope)
        return self.ledger.store_decision(
            row,
            snapshot=snapshot_row,
            charge=CapCharge(caller.key_id, record.created_at[:7], caller.monthly_cap, record.created_at),
            chain=record_chain(chain_id, caller.scope, record, row, receipt_signer, confidence),
            extra=extra,
        )

    def store(
        self, claim: Claim, record: DecisionRecord, *, rulebook_hash: str, receipt_signer: ReceiptSigner | None,
        snapshot_row: SnapshotRow | None = None, confidence: Bucket | None = None,
        extra: Sequence[DecisionExtra] = (), facts: Any = None, headers: tuple[tuple[str, str], ...] = (),
    ) -> DecideResult:
        """The one end of every decide, binding or advisory: store the record (`store_sealed`) and
        answer `created` (with the decide's response `headers`); a lost race for the key answers
        the winner's replay."""
        try:
            written = self.store_sealed(claim, record, rulebook_hash=rulebook_hash, receipt_signer=receipt_signer,
                                        snapshot_row=snapshot_row, confidence=confidence, extra=extra, facts=facts)
        except DuplicateIdempotencyKey:
            return self.replay_winner(claim)
        return DecideResult(written.sealed, CREATED, written.used, headers)


__all__ = [
    "CREATED",
    "REPLAYED",
    "Caller",
    "Claim",
    "DecideResult",
    "DecisionPipeline",
    "Fingerprint",
    "Stamp",
    "fingerprint",
    "record_chain",
    "replay",
]
