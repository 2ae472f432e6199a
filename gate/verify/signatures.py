"""Signature checks against trust anchors: the receipt signature (with its key fingerprint and the
untrusted-key diagnostic) and the signatures over the record's `audit_chain` and
`decision_confidence` members (both outside record_hash, both signed with the receipt key)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Any

from gate.keys.signing import (
    b64url_decode,
    ed25519_verify,
    raw_public_key_from_pem,
    receipt_signature_payload,
)
from gate.protocol.confidence import confidence_hash, confidence_signature_payload
from gate.protocol.records import audit_chain_signature_payload
from gate.verify.anchors import TrustAnchors
from gate.verify.checks import _digest_equal, _safe
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256


def _check_audit_chain_signature(record: Mapping[str, Any], anchors: TrustAnchors,
                                 checks: dict[str, bool | None]) -> None:
    """`audit_chain_signature`: the receipt key's signature over the audit_chain member."""
    member = record.get("audit_chain")
    if member is None:
        return
    payload = _safe(audit_chain_signature_payload, record.get("decision_id"), record.get("receipt_key_id"),
                    member) if isinstance(member, Mapping) else None
    checks["audit_chain_signature"] = _member_signature(record, anchors, "audit_chain_signature", payload)


def _check_confidence_signature(record: Mapping[str, Any], anchors: TrustAnchors,
                                checks: dict[str, bool | None]) -> None:
    """`confidence_signature`: the receipt key's signature over the confidence block's hash.

    It signs the hash *recomputed* from `decision_confidence`, so editing the block, or its
    stated `confidence_hash`, breaks the signature."""
    member = record.get("decision_confidence")
    if member is None:
        return
    payload = None
    if isinstance(member, Mapping):
        payload = _safe(confidence_signature_payload, record.get("decision_id"), record.get("receipt_key_id"),
                        _safe(confidence_hash, member))
    checks["confidence_signature"] = _member_signature(record, anchors, "confidence_signature", payload)


def _member_signature(record: Mapping[str, Any], anchors: TrustAnchors, name: str,
                      payload: bytes | None) -> bool | None:
    """A signature member made with the record's receipt key (same algorithm and key id).
    False when missing, malformed or wrong; None when no trusted key can check it."""
    signature = record.get(name)
    algorithm, key_id = record.get("receipt_signature_algorithm"), record.get("receipt_key_id")
    # SECURITY: fail closed — a member without its signature, or signed some other way, fails.
    if payload is None or not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not signature.startswith(f"{algorithm}:"):
        return False
    body = signature[len(algorithm) + 1:]
    if algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        return None if secret is None else _digest_equal(hmac.new(secret.secret, payload, "sha256").hexdigest(), body)
    key = anchors.select_ed25519(key_id, record.get("receipt_public_key_fingerprint"))
    raw = _safe(b64url_decode, body)
    return None if key is None else bool(
        raw is not None and len(raw) == 64 and ed25519_verify(key.public_key_raw, payload, raw))


def _check_receipt_signature(record, anchors, request_public_key, expected_record_hash,
                             expected_receipt_hash, checks, notes) -> str | None:
    """Receipt signature, key fingerprint and the untrusted-key diagnostic; returns key_source.

    The signed payload is rebuilt from the *recomputed* record and receipt hashes, so a
    signature only verifies when the signer signed exactly this content.
    """
    signature = record.get("receipt_signature")
    algorithm = record.get("receipt_signature_algorithm")
    key_id = record.get("receipt_key_id")
    fingerprint = record.get("receipt_public_key_fingerprint")
    if signature is None and algorithm is None and key_id is None:
        checks["receipt_signature"] = False
        notes.append("record is not signed: it cannot be authenticated")
        return None
    if not isinstance(signature, str) or algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) \
            or not isinstance(key_id, str) or not signature.startswith(algorithm + ":"):
        checks["receipt_signature"] = False
        notes.append("receipt signature fields are malformed")
        return None
    payload = None
    if isinstance(expected_record_hash, str) and isinstance(expected_receipt_hash, str):
        payload = _safe(receipt_signature_payload, record.get("decision_id"), key_id,
                        expected_receipt_hash, expected_record_hash)
    if payload is None:
        checks["receipt_signature"] = False
        notes.append("receipt signature not checked: the record cannot be hashed")
        return None
    body = signature[len(algorithm) + 1:]

    if algorithm == SIG_HMAC_SHA256:
        if fingerprint is not None:
            checks["receipt_public_key_fingerprint"] = False  # HMAC has no public key
        secret = anchors.select_hmac(key_id)
        if secret is None:
            checks["receipt_signature"] = False
            notes.append(f"no trusted HMAC secret for key id {key_id!r}")
            return None
        digest = hmac.new(secret.secret, payload, "sha256").hexdigest()
        checks["receipt_signature"] = _digest_equal(digest, body)
        return secret.source

    raw_signature = _safe(b64url_decode, body)
    if request_public_key is not None:
        untrusted = _safe(raw_public_key_from_pem, request_public_key)
        checks["signature_matches_untrusted_key"] = bool(
            untrusted is not None and raw_signature is not None and len(raw_signature) == 64
            and ed25519_verify(untrusted, payload, raw_signature)
        )
    key = anchors.select_ed25519(key_id, fingerprint)
    if key is None:
        checks["receipt_signature"] = False
        notes.append(f"no trusted Ed25519 key for key id {key_id!r}; request keys are not trust anchors")
        return None
    if fingerprint is not None:
        checks["receipt_public_key_fingerprint"] = isinstance(fingerprint, str) and fingerprint in key.fingerprints
    checks["receipt_signature"] = bool(
        raw_signature is not None and len(raw_signature) == 64
        and ed25519_verify(key.public_key_raw, payload, raw_signature)
    )
    return key.source
