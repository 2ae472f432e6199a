"""Signature checks against trust anchors: the receipt signature (with its key fingerprint and the
untrusted-key diagnostic) and the signatures over the record's `audit_chain` and
`decision_confidence` members (both outside record_hash, both signed with the receipt key)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.keys.detached import _ed25519_signature_holds, _hmac_signature_holds, _member_signature, _safe
from gate.keys.signing import b64url_decode, raw_public_key_from_pem
from gate.protocol.confidence import confidence_hash, confidence_signature_payload
from gate.protocol.records import audit_chain_signature_payload, receipt_signature_payload
from gate.protocol.release_arm import release_arm_hash, release_arm_signature_payload
from gate.strict_json import JsonValue
from gate.verify.result import CheckName, CheckResult, CheckValue
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256


def check_audit_chain_signature(record: Mapping[str, JsonValue], anchors: TrustAnchors) -> CheckValue:
    """`audit_chain_signature`: the receipt key's signature over the audit_chain member."""
    member = record.get("audit_chain")
    if member is None:
        return None
    payload = _safe(audit_chain_signature_payload, record.get("decision_id"), record.get("receipt_key_id"),
                    member) if isinstance(member, Mapping) else None
    return _member_signature(record, anchors, "audit_chain_signature", payload)


def check_confidence_signature(record: Mapping[str, JsonValue], anchors: TrustAnchors) -> CheckValue:
    """`confidence_signature`: the receipt key's signature over the confidence block's hash.

    It signs the hash *recomputed* from `decision_confidence`, so editing the block, or its
    stated `confidence_hash`, breaks the signature."""
    member = record.get("decision_confidence")
    if member is None:
        return None
    payload = None
    if isinstance(member, Mapping):
        payload = _safe(confidence_signature_payload, record.get("decision_id"), record.get("receipt_key_id"),
                        _safe(confidence_hash, member))
    return _member_signature(record, anchors, "confidence_signature", payload)


def check_release_arm_signature(record: Mapping[str, JsonValue], anchors: TrustAnchors) -> CheckValue:
    """`release_arm_signature`: the receipt key's signature over the recomputed arm block hash."""
    member = record.get("release_arm")
    if member is None:
        return None
    payload = None
    if isinstance(member, Mapping):
        payload = _safe(release_arm_signature_payload, record.get("decision_id"), record.get("receipt_key_id"),
                        _safe(release_arm_hash, member))
    return _member_signature(record, anchors, "release_arm_signature", payload)


# --------------------------------------------------------------------------- receipt signature


@dataclass(frozen=True, slots=True)
class ReceiptSignatureCheck:
    """The receipt signature's checks and notes, and where its trusted key came from."""

    result: CheckResult
    key_source: str | None = None


@dataclass(frozen=True, slots=True)
class _SignedReceipt:
    """A record's well-formed receipt signature fields and the payload they must sign."""

    algorithm: str
    key_id: str
    fingerprint: Any
    body: str
    payload: bytes


def _receipt_failure(note: str, checks: Mapping[CheckName, CheckValue] | None = None) -> ReceiptSignatureCheck:
    return ReceiptSignatureCheck(CheckResult(checks={**(checks or {}), "receipt_signature": False}, notes=(note,)))


def _signed_receipt(record: Mapping[str, JsonValue], expected_record_hash: Any,
                    expected_receipt_hash: Any) -> _SignedReceipt | str:
    """The receipt signature fields with their payload, or the note saying why there are none.

    The payload is rebuilt from the *recomputed* record and receipt hashes, so a signature only
    verifies when the signer signed exactly this content."""
    signature = record.get("receipt_signature")
    algorithm = record.get("receipt_signature_algorithm")
    key_id = record.get("receipt_key_id")
    if signature is None and algorithm is None and key_id is None:
        return "record is not signed: it cannot be authenticated"
    if not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not isinstance(key_id, str) or not signature.startswith(algorithm + ":"):
        return "receipt signature fields are malformed"
    payload = None
    if isinstance(expected_record_hash, str) and isinstance(expected_receipt_hash, str):
        payload = _safe(receipt_signature_payload, record.get("decision_id"), key_id,
                        expected_receipt_hash, expected_record_hash)
    if payload is None:
        return "receipt signature not checked: the record cannot be hashed"
    return _SignedReceipt(algorithm, key_id, record.get("receipt_public_key_fingerprint"),
                          signature[len(algorithm) + 1:], payload)


def _check_hmac_receipt(signed: _SignedReceipt, anchors: TrustAnchors) -> ReceiptSignatureCheck:
    """An HMAC receipt: a trusted secret for its key id, and no public key fingerprint."""
    fingerprint: dict[CheckName, CheckValue] = {}
    if signed.fingerprint is not None:
        fingerprint["receipt_public_key_fingerprint"] = False  # HMAC has no public key
    secret = anchors.select_hmac(signed.key_id)
    if secret is None:
        return _receipt_failure(f"no trusted HMAC secret for key id {signed.key_id!r}", fingerprint)
    ok = _hmac_signature_holds(secret.secret, signed.payload, signed.body)
    return ReceiptSignatureCheck(CheckResult(checks={**fingerprint, "receipt_signature": ok}), secret.source)


def _untrusted_key_diagnostic(signed: _SignedReceipt, raw_signature: bytes | None,
                              request_public_key: str | None) -> dict[CheckName, CheckValue]:
    """`signature_matches_untrusted_key`: the signature against a key the request supplied."""
    if request_public_key is None:
        return {}
    untrusted = _safe(raw_public_key_from_pem, request_public_key)
    return {"signature_matches_untrusted_key": untrusted is not None
            and _ed25519_signature_holds(untrusted, signed.payload, raw_signature)}


def _check_ed25519_receipt(signed: _SignedReceipt, anchors: TrustAnchors,
                           request_public_key: str | None) -> ReceiptSignatureCheck:
    """An Ed25519 receipt: a trusted key for its key id (and fingerprint), which the stated
    fingerprint names; the request's own key only feeds the diagnostic."""
    raw_signature = _safe(b64url_decode, signed.body)
    checks = _untrusted_key_diagnostic(signed, raw_signature, request_public_key)
    key = anchors.select_ed25519(signed.key_id, signed.fingerprint)
    if key is None:
        return _receipt_failure(
            f"no trusted Ed25519 key for key id {signed.key_id!r}; request keys are not trust anchors", checks)
    if signed.fingerprint is not None:
        checks["receipt_public_key_fingerprint"] = (
            isinstance(signed.fingerprint, str) and signed.fingerprint in key.fingerprints)
    checks["receipt_signature"] = _ed25519_signature_holds(key.public_key_raw, signed.payload, raw_signature)
    return ReceiptSignatureCheck(CheckResult(checks=checks), key.source)


def check_receipt_signature(record: Mapping[str, JsonValue], anchors: TrustAnchors, request_public_key: str | None,
                            expected_record_hash: Any, expected_receipt_hash: Any) -> ReceiptSignatureCheck:
    """Receipt signature, key fingerprint and the untrusted-key diagnostic, with the key's source."""
    signed = _signed_receipt(record, expected_record_hash, expected_receipt_hash)
    if isinstance(signed, str):
        return _receipt_failure(signed)
    if signed.algorithm == SIG_HMAC_SHA256:
        return _check_hmac_receipt(signed, anchors)
    return _check_ed25519_receipt(signed, anchors, request_public_key)
