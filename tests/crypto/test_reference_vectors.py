"""The reference implementation's published legacy-mode record: valid and tampered copies."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from crypto_support import HMAC_KEY_ID, HMAC_SECRET, load_vector

from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.protocol.records import (
    action_binding_from_context,
    receipt_hash,
    receipt_signature_payload,
    record_envelope,
    record_hash,
)
from gate.verify import TrustAnchors, verify_record


@pytest.fixture(scope="module")
def valid():
    return load_vector("valid-decision-record.json")


@pytest.fixture(scope="module")
def tampered():
    return load_vector("tampered-record.json")


@pytest.fixture(scope="module")
def original_input():
    return load_vector("decision-input.json")


@pytest.fixture(scope="module")
def anchors():
    return TrustAnchors.from_hmac_secret(HMAC_SECRET, key_id=HMAC_KEY_ID)


def test_record_hash_matches_published_value(valid):
    assert record_hash(valid) == "ceb82c2dffe7f6b69fdf3b9fa9e528f4c90f66ed7349c82d7126e42279907848"
    assert record_hash(valid) == valid["record_hash"]


def test_receipt_hash_matches_published_value(valid):
    assert receipt_hash(valid) == "b1056f6d48bedd0b493f907fbe1e36f04863f36445f1df3ef00396a867e27437"


def test_hmac_signature_matches_published_value(valid):
    payload = receipt_signature_payload(
        valid["decision_id"], valid["receipt_key_id"], valid["receipt_hash"], valid["record_hash"]
    )
    digest = hmac.new(HMAC_SECRET, payload, hashlib.sha256).hexdigest()
    assert valid["receipt_signature"] == "hmac-sha256:" + digest


def test_input_hash_matches_published_value(valid, original_input):
    assert sha256_hex(original_input) == valid["input_hash"]


def test_envelope_selection_for_legacy_record(valid):
    envelope = record_envelope(valid)
    # Not hashed: compact verdict, integrity, receipt, legacy-only extras.
    for absent in ("c", "v", "integrity", "receipt_signature", "receipt_key_id", "evidence_sources",
                   "replay", "record_hash", "receipt_hash"):
        assert absent not in envelope
    assert envelope["policy_bundle"] == valid["policy_bundle"]
    assert envelope["policy_bundle_hash"] == valid["policy_bundle_hash"]
    assert set(envelope["evidence_manifest"]) == {"codes", "sources"}


def test_action_binding_is_derived_from_the_input_context(valid, original_input):
    assert action_binding_from_context(original_input["context"]) == valid["action_binding"]


def test_valid_record_verifies(valid, original_input, anchors):
    result = verify_record(valid, anchors=anchors, original_input=original_input)
    assert result.verified is True
    assert result.integrity_valid and result.authenticity_valid
    assert result.key_source == "hmac_secret"
    checks = result.checks
    for name in ("record_hash", "receipt_hash", "receipt_signature", "input_hash", "compact_verdict",
                 "integrity_block"):
        assert checks[name] is True, name
    # Rulebook-only checks are skipped, not failed.
    for name in ("rulebook_attestation_bundle_hash", "rulebook_attestation_signature",
                 "rulebook_attestation_consistency", "registry_attestation_hash",
                 "registry_attestation_signature", "output_hash", "policy_bundle_hash"):
        assert checks[name] is None, name
    assert result.failed_checks == ()
    assert result.expected["record_hash"] == result.actual["record_hash"]


def test_tampered_record_fails_exactly_on_hashes_and_signature(tampered, original_input, anchors):
    result = verify_record(tampered, anchors=anchors, original_input=original_input)
    assert result.verified is False
    assert result.failed_checks == ("receipt_hash", "receipt_signature", "record_hash")
    assert result.expected["record_hash"] != result.actual["record_hash"]
    assert result.checks["input_hash"] is True


def test_wrong_hmac_secret_is_not_authentic(valid):
    wrong = TrustAnchors.from_hmac_secret(b"not-the-secret", key_id=HMAC_KEY_ID)
    result = verify_record(valid, anchors=wrong)
    assert result.integrity_valid is True
    assert result.authenticity_valid is False
    assert result.verified is False
    assert result.failed_checks == ("receipt_signature",)


def test_without_any_secret_hmac_record_is_not_authentic(valid):
    result = verify_record(valid, anchors=TrustAnchors())
    assert result.verified is False
    assert result.key_source is None
    assert result.checks["receipt_signature"] is False


def test_hmac_secret_without_key_id_applies_to_the_record_key(valid):
    result = verify_record(valid, anchors=TrustAnchors.from_hmac_secret(HMAC_SECRET))
    assert result.verified is True


def test_wrong_original_input_fails_input_hash(valid, original_input):
    other = dict(original_input, question="something else")
    result = verify_record(valid, anchors=TrustAnchors.from_hmac_secret(HMAC_SECRET), original_input=other)
    assert result.failed_checks == ("input_hash",)
    assert result.verified is False


def test_response_view_is_not_part_of_input_hash(valid, original_input):
    with_view = dict(original_input, response_view="minimal")
    result = verify_record(valid, anchors=TrustAnchors.from_hmac_secret(HMAC_SECRET), original_input=with_view)
    assert result.checks["input_hash"] is True


def test_canonical_payload_bytes_are_sorted_and_compact(valid):
    payload = receipt_signature_payload("d", "k", "r2", "r1")
    assert payload == b'{"decision_id":"d","key_id":"k","receipt_hash":"r2","record_hash":"r1"}'
    assert payload == canonical_bytes({"record_hash": "r1", "receipt_hash": "r2", "key_id": "k", "decision_id": "d"})
