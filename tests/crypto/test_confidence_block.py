"""The signed `decision_confidence` block: hash, top-level copy and its own receipt-key signature
(issue 12 item 5), on Ed25519 and HMAC records; record_hash and receipt_hash are unchanged."""

from __future__ import annotations

import pytest
from crypto_support import hmac_key, key_a, key_b, make_record

from gate.keys.signing import Ed25519ReceiptSigner, HmacReceiptSigner
from gate.protocol.confidence import (
    ConfidenceCounts,
    confidence_block,
    confidence_hash,
)
from gate.protocol.decision_record import confidence_part
from gate.protocol.records import receipt_hash, record_hash
from gate.verify import TrustAnchors, verify_record


def ed_anchors():
    key = key_a()
    return TrustAnchors.from_registry_entries([{
        "key_id": key.key_id, "algorithm": "ed25519", "public_key": key.public_key_pem,
        "public_key_fingerprint": key.fingerprint, "status": "active"}])


BLOCK = confidence_block(ConfidenceCounts(40, 2, 9, 1), policy_version="2026.05")


def with_confidence(signer: str = "ed25519") -> dict:
    record = make_record(signer=signer)
    receipt_signer = {"ed25519": lambda: Ed25519ReceiptSigner(key_a()),
                      "hmac": lambda: HmacReceiptSigner(hmac_key()), None: lambda: None}[signer]()
    return {**record, **confidence_part(record["decision_id"], BLOCK, receipt_signer)}


def anchors_for(signer: str) -> TrustAnchors:
    return TrustAnchors.from_hmac_key(hmac_key()) if signer == "hmac" else ed_anchors()


@pytest.mark.parametrize("signer", ["ed25519", "hmac"])
def test_a_record_with_a_signed_block_verifies(signer):
    plain = make_record(signer=signer)
    record = with_confidence(signer)
    result = verify_record(record, anchors=anchors_for(signer))
    assert result.verified is True, result.failed_checks
    assert result.checks["confidence_hash"] is True and result.checks["confidence_signature"] is True
    # Outside the envelope: the reference rules see the same record_hash and receipt_hash.
    assert record["record_hash"] == plain["record_hash"] == record_hash(record)
    assert record["receipt_hash"] == plain["receipt_hash"] == receipt_hash(record)
    assert record["confidence_hash"] == BLOCK["confidence_hash"] == confidence_hash(BLOCK)


def test_records_without_a_block_have_no_confidence_checks():
    result = verify_record(make_record(), anchors=ed_anchors())
    assert result.verified is True
    assert result.checks["confidence_hash"] is None and result.checks["confidence_signature"] is None


@pytest.mark.parametrize("signer", ["ed25519", "hmac"])
def test_an_edited_block_fails_its_hash_and_its_signature(signer):
    record = with_confidence(signer)
    record["decision_confidence"]["score"] = 0.99
    result = verify_record(record, anchors=anchors_for(signer))
    assert result.verified is False
    assert set(result.failed_checks) == {"confidence_hash", "confidence_signature"}
    assert result.integrity_valid is False and result.authenticity_valid is False


@pytest.mark.parametrize("signer", ["ed25519", "hmac"])
def test_a_consistently_rehashed_forgery_fails_only_the_signature(signer):
    record = with_confidence(signer)
    assert record["decision_confidence"]["level"] == "high"
    forged = dict(record["decision_confidence"], level="low", recommendation="low_confidence_review")
    forged["confidence_hash"] = confidence_hash(forged)
    record["decision_confidence"] = forged
    record["confidence_hash"] = forged["confidence_hash"]
    result = verify_record(record, anchors=anchors_for(signer))
    assert result.failed_checks == ("confidence_signature",)
    assert result.integrity_valid is True and result.authenticity_valid is False and result.verified is False


def test_the_top_level_copy_must_equal_the_block_hash():
    record = with_confidence()
    record["confidence_hash"] = "0" * 64
    result = verify_record(record, anchors=ed_anchors())
    assert result.failed_checks == ("confidence_hash",)
    assert result.expected["confidence_hash"] == BLOCK["confidence_hash"]
    assert result.actual["confidence_hash"] == "0" * 64


def test_the_block_member_hash_must_equal_the_recomputed_hash():
    record = with_confidence()
    record["decision_confidence"]["confidence_hash"] = "0" * 64
    assert verify_record(record, anchors=ed_anchors()).failed_checks == ("confidence_hash",)


@pytest.mark.parametrize("change", ["drop_signature", "drop_block", "drop_copy", "junk_signature",
                                    "other_key", "block_not_object", "other_decision"])
def test_every_way_of_breaking_the_block_is_caught(change):
    record = with_confidence()
    if change == "drop_signature":
        del record["confidence_signature"]
        expected = ("confidence_signature",)
    elif change == "drop_block":
        del record["decision_confidence"]
        expected = ("confidence_hash",)
    elif change == "drop_copy":
        del record["confidence_hash"]
        expected = ("confidence_hash",)
    elif change == "junk_signature":
        record["confidence_signature"] = "junk"
        expected = ("confidence_signature",)
    elif change == "other_key":
        other = Ed25519ReceiptSigner(key_b())
        record["confidence_signature"] = confidence_part(record["decision_id"], BLOCK, other)["confidence_signature"]
        expected = ("confidence_signature",)
    elif change == "block_not_object":
        record["decision_confidence"] = "high"
        expected = ("confidence_hash", "confidence_signature")
    else:  # a block signed for another decision is not this record's
        other = make_record(decision_id="dec_test_0002")
        record["confidence_signature"] = confidence_part(
            other["decision_id"], BLOCK, Ed25519ReceiptSigner(key_a()))["confidence_signature"]
        expected = ("confidence_signature",)
    assert verify_record(record, anchors=ed_anchors()).failed_checks == expected


def test_without_a_trusted_key_the_block_signature_is_not_checkable():
    record = with_confidence("hmac")
    result = verify_record(record, anchors=TrustAnchors())
    assert result.checks["confidence_signature"] is None
    assert result.checks["confidence_hash"] is True


def test_an_unsigned_record_cannot_carry_an_authentic_block():
    record = with_confidence(None)
    assert "confidence_signature" not in record
    result = verify_record(record, anchors=ed_anchors())
    assert result.checks["confidence_signature"] is False
    assert result.authenticity_valid is False
