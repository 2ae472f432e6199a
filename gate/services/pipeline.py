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
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from gate.chain.links import chain_id_for, new_link, record_audit_chain
from gate.chain.merkle import CompactRange
from gate.chain.rowseal import decision_row_hash, row_signature_payload
from gate.clock import Clock, IdSource
from gate.errors import DuplicateIdempotencyKey, GateError, IdempotencyConflict, SigningUnavailable
from gate.keys.apikeys import DEFAULT_PERMISSIONS
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import CapCharge, ChainAppend, ChainHead, ConfidenceRead, Ledger, StoredDecision
from gate.protocol.canonical import canonical_text, sha256_bytes_hex
from gate.protocol.records import attach_audit_chain
from gate.services.holds import HoldOpener
from gate.services.scope_events import MirrorFlags, announce_decision

CREATED = "created"
REPLAYED = "replayed"

# What `ChainAppend.seal` returns: the sealed row, its chain link, the completed tree nodes
# (level, index, hash) and the tree's new peaks.
Sealed = tuple[dict[str, Any], dict[str, Any], list[tuple[int, int, str]], tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class Caller:
    """An authenticated API key, resolved to its scope and effective limits."""

    key_id: str
    scope: str
    plan: str
    rate_limit: int
    monthly_cap: int
    permissions: frozenset[str] = DEFAULT_PERMISSIONS


@dataclass(frozen=True, slots=True)
class DecideResult:
    record: dict[str, Any]
    idempotency_status: str  # created | replayed
    monthly_used: int | None
    headers: tuple[tuple[str, str], ...] = ()  # response headers a release adds (docs/releases.md)
    # The stored text of a record this decide created (its full view, written once by the seal).
    record_json: str | None = None


@dataclass(slots=True)
class SealedText:
    """Where the seal leaves the record's stored JSON text, so the answer need not encode it again."""

    value: str | None = None


_json_text = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
# orjson writes a finite float below 1e-4 as `0.0000…` or with a one-digit exponent (`1e-7`),
# where Python writes `1e-05` and `1e-07`; everything else a record holds it writes as Python does.
# (One expression for both, `[0-9]e-[0-9]|0\.0000`, took 107 µs over the sample record's 7 KB:
# it tries each byte; a literal start is found by a fast search, 10 µs for both tests.)
_NEGATIVE_EXPONENT = re.compile(rb"e-[0-9]")


def _orjson_may_differ(data: bytes) -> bool:
    if b"0.0000" in data:
        return True
    if b"e-" not in data:  # the common case, found by a byte search (1 against 9 µs for 7 KB)
        return False
    return any(match.start() and data[match.start() - 1] in b"0123456789"
               for match in _NEGATIVE_EXPONENT.finditer(data))


def _encode_text(value: Any) -> str:
    """Exactly `json.dumps(value, ensure_ascii=False, separators=(",", ":"))`, about 4 times
    faster for a record (13 against 50 µs for the sample): orjson writes the text, and where it
    could differ (a float it writes otherwise, which its text shows, or what it refuses: an
    integer beyond 64 bits, a lone surrogate, a key that is not text) Python's encoder writes it.
    A record holds no NaN or infinity (its canonical text refuses them), the one value orjson
    writes (as null) without a trace in its text."""
    try:
        data = orjson.dumps(value)
    except TypeError:  # orjson.JSONEncodeError
        return _json_text(value)
    if _orjson_may_differ(data):
        return _json_text(value)
    return data.decode("utf-8")


class RecordText:
    """The stored JSON text of a record that only gains members after this point.

    The record's text is written under the chain head (its `audit_chain` is known only there),
    and on SQLite that lock is the whole ledger's write lock: encoding the whole record there
    with `json.dumps` (45-70 µs for the sample record, up to a tenth of the time a decide held
    the lock) kept every other writer waiting. So the record as the request thread hands it over
    is encoded there, and under the lock only the members added since (`decision_confidence`,
    `audit_chain` and their signatures) are encoded, as one object, and spliced in before the
    closing brace: the same bytes `json.dumps(record, ensure_ascii=False, separators=(",", ":"))`
    writes, since JSON writes a dict's members in their insertion order (`_encode_text` writes
    both texts). A member replaced or removed meanwhile is seen (by identity, at the top level),
    and the whole record is encoded again; nothing changes a member's contents in place after
    the hand-over (the seal only adds members), and the tests hold the stored text to
    `json.dumps` of the stored record on both ledgers.
    """

    __slots__ = ("_members", "_text")

    def __init__(self, record: dict[str, Any]) -> None:
        self._members = tuple(record.items())
        self._text = _encode_text(record)

    def of(self, record: dict[str, Any]) -> str:
        """The text of `record` now."""
        if len(record) < len(self._members) or not self._members:
            return _encode_text(record)
        members = iter(record.items())
        # The known members first: zip stops at their end without taking an added one.
        for (known_key, known_value), (key, value) in zip(self._members, members, strict=False):
            if key != known_key or value is not known_value:
                return _encode_text(record)
        added = dict(members)
        if not added:
            return self._text
        if any(type(key) is not str for key in added):  # json.dumps writes other keys as text
            return _encode_text(record)
        # The added members as one object, in their order: its text without the braces is
        # exactly what they add inside the record's (one encoder call, not two per member).
        return self._text[:-1] + "," + _encode_text(added)[1:]


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


def fingerprint(request: Any) -> Fingerprint:
    request_text = canonical_text(request)
    return Fingerprint(request_text, sha256_bytes_hex(request_text.encode("utf-8")))


def replay(existing: StoredDecision, idempotency_key: str, input_hash: str) -> DecideResult:
    """The stored record again; another body under the same key is `IdempotencyConflict`."""
    if existing.input_hash != input_hash:
        raise IdempotencyConflict(idempotency_key, existing.decision_id, input_hash, existing.input_hash)
    return DecideResult(json.loads(existing.record_json), REPLAYED, None)


def decision_row(claim: Claim, record: dict[str, Any], rulebook_hash: str) -> dict[str, Any]:
    """The decision row's columns before sealing (`record_json` is written by the seal)."""
    return {
        "decision_id": record["decision_id"],
        "scope": claim.caller.scope,
        "key_id": claim.caller.key_id,
        "idempotency_key": claim.idempotency_key,
        "input_hash": claim.fingerprint.input_hash,
        "record_hash": record["record_hash"],
        "receipt_hash": record["receipt_hash"],
        "policy_bundle_hash": record.get("policy_bundle_hash"),
        # The rulebook's hash; an advisory record's `policy_hash` (its advisor panel), which
        # gate.verify.ledger_rows checks the column against.
        "rulebook_hash": rulebook_hash,
        "policy_id": record.get("policy_id"),
        "policy_version": record.get("policy_version"),
        "verdict": record["verdict"],
        "created_at": record["created_at"],
        "record_json": "",
        "request_json": claim.fingerprint.request_text,
    }


def seal_row(row: dict[str, Any], receipt_signer: ReceiptSigner | None) -> None:
    """The row's own seal: its columns hashed, and signed with the receipt key (gate.chain.rowseal)."""
    row["row_hash"] = decision_row_hash(row)
    row["row_signature"] = (receipt_signer.sign_payload(row_signature_payload(row["row_hash"], receipt_signer.key_id))
                            if receipt_signer is not None else None)


def chain_sealer(chain_id: str, record: dict[str, Any], row: dict[str, Any],
                 receipt_signer: ReceiptSigner | None, text: SealedText | None = None) -> Callable[[ChainHead], Sealed]:
    """The step that runs under the chain head lock: link the record and complete its tree nodes.
    The record's text so far is encoded here, before the lock (`RecordText`)."""
    encoded = RecordText(record)

    def seal(head: ChainHead) -> Sealed:
        link = new_link(
            chain_id=chain_id,
            chain_position=head.size + 1,
            previous_link_hash=head.head_link_hash,
            previous_merkle_root=head.merkle_root,
            decision_id=record["decision_id"],
            record_hash=record["record_hash"],
            receipt_hash=record["receipt_hash"],
            policy_id=record.get("policy_id"),
            policy_version=record.get("policy_version"),
            created_at=record["created_at"],
        )
        # The chain member is outside record_hash: it is signed on its own (gate.verify).
        attach_audit_chain(record, record_audit_chain(link), receipt_signer)
        tree, completed = CompactRange(head.size, head.tree_peaks).append(link["leaf_hash"])
        record_json = encoded.of(record)
        if text is not None:
            text.value = record_json
        sealed_row = dict(row, record_json=record_json)
        return sealed_row, link, [(n.level, n.index, n.hash) for n in completed], tree.peaks

    return seal


class DecisionPipeline:
    """Replay, signer check, seal and store: the steps shared by every way of deciding."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, ids: IdSource) -> None:
        self.ledger = ledger
        self.signing = signing
        self.clock = clock
        self.ids = ids
        self.holds = HoldOpener(ledger)  # a held verdict opens its hold in the decide's transaction
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

    def store_sealed(
        self, claim: Claim, record: dict[str, Any], *, rulebook_hash: str, receipt_signer: ReceiptSigner | None,
        snapshot_row: dict[str, Any] | None = None, confidence: ConfidenceRead | None = None,
        extra: Sequence[Any] = (), text: SealedText | None = None, facts: Any = None,
    ) -> int | None:
        """Store a built record with its row seal, chain link, tree nodes, snapshot (if new) and
        monthly-cap charge in one transaction; returns the key's monthly usage (and leaves the
        stored record text in `text`). A record whose verdict holds the action opens its hold
        (with `facts` for the reviewer) in the same transaction (gate.services.holds). Raises
        `DuplicateIdempotencyKey` when a concurrent request claimed the key first."""
        caller = claim.caller
        extra = [*extra, *self.holds.opening(caller.scope, record, caller.key_id, facts)]
        if self.mirror.mirrored(caller.scope):
            extra.append(lambda connection: announce_decision(connection, caller.scope, record))
        row = decision_row(claim, record, rulebook_hash)
        seal_row(row, receipt_signer)
        chain_id = chain_id_for(caller.scope)
        return self.ledger.store_decision(
            row,
            snapshot=snapshot_row,
            charge=CapCharge(caller.key_id, record["created_at"][:7], caller.monthly_cap),
            chain=ChainAppend(chain_id, caller.scope, chain_sealer(chain_id, record, row, receipt_signer, text)),
            confidence=confidence,
            extra=extra,
        )

    def store(
        self, claim: Claim, record: dict[str, Any], *, rulebook_hash: str, receipt_signer: ReceiptSigner | None,
        facts: Any = None,
    ) -> DecideResult:
        """Store the record and answer `created`; a lost race for the key answers the winner's replay."""
        try:
            used = self.store_sealed(claim, record, rulebook_hash=rulebook_hash, receipt_signer=receipt_signer,
                                     facts=facts)
        except DuplicateIdempotencyKey:
            return self.replay_winner(claim)
        return DecideResult(record, CREATED, used)


__all__ = [
    "CREATED",
    "REPLAYED",
    "Caller",
    "Claim",
    "DecideResult",
    "DecisionPipeline",
    "Fingerprint",
    "SealedText",
    "fingerprint",
    "replay",
]
