"""`gate.verify.signatures` branch by branch: the receipt signature and the signatures over the
`audit_chain` and `decision_confidence` members, on hand-made records signed with the test keys.
Each test names the exact checks a branch writes, so a changed guard or check name is caught."""

from __future__ import annotations

import pytest
from crypto_support import HMAC_SECRET, key_a, key_b

from gate.keys.detached import signature_holds
from gate.keys.signing import (
    Ed25519ReceiptSigner,
    HmacKey,
    HmacReceiptSigner,
)
from gate.protocol.confidence import (
    ConfidenceCounts,
    confidence_block,
    confidence_signature_payload,
)
from gate.protocol.decision_record import release_arm_part
from gate.protocol.records import audit_chain_signature_payload, receipt_signature_payload
from gate.verify import TrustAnchors
from gate.verify.signatures import (
    check_audit_chain_signature,
    check_confidence_signature,
    check_receipt_signature,
    check_release_arm_signature,
)

RECORD_HASH, RECEIPT_HASH = "a" * 64, "b" * 64
BLOCK = confidence_block(ConfidenceCounts(40, 2, 9, 1), policy_version="2026.05")


def _ed_anchors(*entries):
    """Anchors from (key_id, key) pairs; the key id need not be the key's own."""
    return TrustAnchors.from_registry_entries(
        [{"key_id": key_id, "algorithm": "ed25519", "public_key": key.public_key_pem} for key_id, key in entries])


def _hmac_signer(key_id="k_hmac"):
    return HmacReceiptSigner(HmacKey(key_id, HMAC_SECRET))


def _receipt(record, anchors, hashes=(RECORD_HASH, RECEIPT_HASH), request_public_key=None):
    check = check_receipt_signature(record, anchors, request_public_key, *hashes)
    return dict(check.result.checks), list(check.result.notes), check.key_source


def _signed_receipt(signer, key_id, algorithm, hashes=(RECORD_HASH, RECEIPT_HASH), **members):
    """A record whose receipt signature is made by `signer` over the payload with `key_id`."""
    payload = receipt_signature_payload("dec_1", key_id, hashes[1], hashes[0])
    body = signer.sign_payload(payload).partition(":")[2]
    record = {"decision_id": "dec_1", "receipt_key_id": key_id, "receipt_signature_algorithm": algorithm,
              "receipt_signature": f"{algorithm}:{body}"}
    record.update(members)
    return record


# --------------------------------------------------------------------------- receipt signature


def test_a_good_receipt_signature_on_each_algorithm():
    signer = Ed25519ReceiptSigner(key_a())
    record = _signed_receipt(signer, "k1", "ed25519", receipt_public_key_fingerprint=key_a().fingerprint)
    assert _receipt(record, _ed_anchors(("k1", key_a()))) == (
        {"receipt_signature": True, "receipt_public_key_fingerprint": True}, [], "server_key_registry")
    record = _signed_receipt(_hmac_signer(), "k_hmac", "hmac-sha256")
    assert _receipt(record, TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac")) == (
        {"receipt_signature": True}, [], "hmac_secret")


def test_an_unsigned_record_fails_with_its_own_note():
    checks, notes, source = _receipt({"decision_id": "dec_1"}, _ed_anchors(("k1", key_a())))
    assert (checks, source) == ({"receipt_signature": False}, None)
    assert len(notes) == 1 and "not signed" in notes[0]


@pytest.mark.parametrize("members", [
    {"receipt_signature": "ed25519:x", "receipt_signature_algorithm": "ed25519"},  # no key id
    {"receipt_signature_algorithm": "ed25519", "receipt_key_id": "k1"},  # no signature
    {"receipt_signature": "ed25519:x"},
    {"receipt_signature_algorithm": "ed25519"},
    {"receipt_key_id": "k1"},
    {"receipt_signature": "junk", "receipt_signature_algorithm": "ed25519", "receipt_key_id": "k1"},
    {"receipt_signature": 5, "receipt_signature_algorithm": "ed25519", "receipt_key_id": "k1"},
    {"receipt_signature": "rsa:x", "receipt_signature_algorithm": "rsa", "receipt_key_id": "k1"},
])
def test_partly_signed_or_malformed_signature_members_are_malformed_not_unsigned(members):
    checks, notes, source = _receipt(dict(members, decision_id="dec_1"), _ed_anchors(("k1", key_a())))
    assert (checks, source) == ({"receipt_signature": False}, None)
    assert len(notes) == 1 and "malformed" in notes[0]


def test_a_key_id_that_is_not_a_string_is_malformed_even_when_the_signature_matches():
    # SECURITY: fail closed. A wildcard HMAC secret would otherwise check the signature made
    # over the payload with key id 5.
    record = _signed_receipt(_hmac_signer(), 5, "hmac-sha256")
    checks, notes, _ = _receipt(record, TrustAnchors.from_hmac_secret(HMAC_SECRET))
    assert checks == {"receipt_signature": False} and "malformed" in notes[0]


def test_an_unknown_algorithm_is_malformed_even_when_its_body_is_a_good_ed25519_signature():
    record = _signed_receipt(Ed25519ReceiptSigner(key_a()), "k1", "rsa")
    checks, notes, _ = _receipt(record, _ed_anchors(("k1", key_a())))
    assert checks == {"receipt_signature": False} and "malformed" in notes[0]


@pytest.mark.parametrize("signer, algorithm, anchors", [
    (Ed25519ReceiptSigner(key_a()), "ed25519", _ed_anchors(("k1", key_a()))),
    (_hmac_signer("k1"), "hmac-sha256", TrustAnchors.from_hmac_secret(HMAC_SECRET, "k1")),
])
@pytest.mark.parametrize("hashes", [(None, None), (RECORD_HASH, None), (None, RECEIPT_HASH)])
def test_without_both_recomputed_hashes_the_signature_is_not_checked(signer, algorithm, anchors, hashes):
    # Signed over exactly the payload the missing hash would give: still not checked.
    record = _signed_receipt(signer, "k1", algorithm, hashes=hashes)
    checks, notes, source = _receipt(record, anchors, hashes=hashes)
    assert (checks, source) == ({"receipt_signature": False}, None)
    assert len(notes) == 1 and "cannot be hashed" in notes[0]


def test_an_hmac_record_with_a_public_key_fingerprint_fails_the_fingerprint():
    record = _signed_receipt(_hmac_signer(), "k_hmac", "hmac-sha256", receipt_public_key_fingerprint="f" * 64)
    checks, notes, _ = _receipt(record, TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac"))
    assert checks == {"receipt_public_key_fingerprint": False, "receipt_signature": True} and notes == []


# --------------------------------------------------------------------------- member signatures


def _with_confidence(signer, key_id, algorithm, fingerprint=None):
    signature = signer.sign_payload(confidence_signature_payload("dec_1", key_id, BLOCK["confidence_hash"]))
    record = {"decision_id": "dec_1", "receipt_key_id": key_id, "receipt_signature_algorithm": algorithm,
              "decision_confidence": dict(BLOCK), "confidence_signature": signature}
    if fingerprint is not None:
        record["receipt_public_key_fingerprint"] = fingerprint
    return record


def _confidence(record, anchors):
    value = check_confidence_signature(record, anchors)
    return {"confidence_signature": value} if record.get("decision_confidence") is not None else {}


def test_the_member_signature_is_made_with_the_receipt_key():
    record = _with_confidence(Ed25519ReceiptSigner(key_a()), "k1", "ed25519", key_a().fingerprint)
    assert _confidence(record, _ed_anchors(("k1", key_a()))) == {"confidence_signature": True}
    assert _confidence(record, _ed_anchors(("k1", key_b()))) == {"confidence_signature": False}


def test_the_member_key_is_chosen_by_key_id_before_fingerprint():
    # The record names key id k1 (key A) and B's fingerprint: A is the key, and A signed.
    record = _with_confidence(Ed25519ReceiptSigner(key_a()), "k1", "ed25519", key_b().fingerprint)
    anchors = _ed_anchors(("k1", key_a()), ("k2", key_b()))
    assert _confidence(record, anchors) == {"confidence_signature": True}


def test_among_keys_sharing_a_key_id_the_fingerprint_chooses():
    record = _with_confidence(Ed25519ReceiptSigner(key_b()), "shared", "ed25519", key_b().fingerprint)
    anchors = _ed_anchors(("shared", key_a()), ("shared", key_b()))
    assert _confidence(record, anchors) == {"confidence_signature": True}


def test_an_unknown_key_id_falls_back_to_the_fingerprint():
    record = _with_confidence(Ed25519ReceiptSigner(key_a()), "unknown", "ed25519", key_a().fingerprint)
    assert _confidence(record, _ed_anchors(("k1", key_a()))) == {"confidence_signature": True}


def test_an_ed25519_member_without_a_trusted_key_is_not_checkable():
    record = _with_confidence(Ed25519ReceiptSigner(key_a()), "k1", "ed25519", key_a().fingerprint)
    assert _confidence(record, TrustAnchors()) == {"confidence_signature": None}
    record["confidence_signature"] = "ed25519:junk"
    assert _confidence(record, TrustAnchors()) == {"confidence_signature": None}


def test_a_member_signature_must_carry_the_receipt_algorithm_prefix():
    record = _with_confidence(_hmac_signer(), "k_hmac", "hmac-sha256")
    anchors = TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac")
    assert _confidence(record, anchors) == {"confidence_signature": True}
    # Same length of prefix, same digest after it: the prefix itself is checked.
    record["confidence_signature"] = "hmac-sha257:" + record["confidence_signature"].partition(":")[2]
    assert _confidence(record, anchors) == {"confidence_signature": False}


def test_a_confidence_block_that_is_not_an_object_fails_its_signature_on_hmac():
    record = _with_confidence(_hmac_signer(), "k_hmac", "hmac-sha256")
    record["decision_confidence"] = "high"
    anchors = TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac")
    assert _confidence(record, anchors) == {"confidence_signature": False}


def test_an_audit_chain_that_is_not_an_object_fails_its_signature_even_if_signed():
    # A list of pairs would turn into a dict inside the payload; it is refused before that.
    member = [["chain_id", "chain_1"], ["chain_position", 1]]
    signer = Ed25519ReceiptSigner(key_a())
    record = {"decision_id": "dec_1", "receipt_key_id": "k1", "receipt_signature_algorithm": "ed25519",
              "audit_chain": member,
              "audit_chain_signature": signer.sign_payload(audit_chain_signature_payload("dec_1", "k1", member))}
    assert check_audit_chain_signature(record, _ed_anchors(("k1", key_a()))) is False
    record["audit_chain"] = dict(member)  # the same content as an object verifies
    assert check_audit_chain_signature(record, _ed_anchors(("k1", key_a()))) is True


def test_an_hmac_record_with_a_fingerprint_and_no_trusted_secret_fails_both():
    record = _signed_receipt(_hmac_signer(), "k_hmac", "hmac-sha256", receipt_public_key_fingerprint="f" * 64)
    checks, notes, source = _receipt(record, TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_other"))
    assert checks == {"receipt_public_key_fingerprint": False, "receipt_signature": False}
    assert notes == ["no trusted HMAC secret for key id 'k_hmac'"] and source is None


# --------------------------------------------------------------------------- the release arm


ARM = {"arm": "canary", "release_seq": 4, "rulebook_version": "2026.06", "percent": 10.0}


def _with_arm(signer, key_id, block=ARM, decision_id="dec_1"):
    """A record carrying a release arm part sealed for `decision_id` by `signer` under `key_id`."""
    signer.key_id = key_id
    return {"decision_id": decision_id, "receipt_key_id": key_id,
            "receipt_signature_algorithm": signer.algorithm, **release_arm_part(decision_id, block, signer)}


def test_the_release_arm_signature_holds_over_the_recomputed_block():
    anchors = _ed_anchors(("k1", key_a()))
    record = _with_arm(Ed25519ReceiptSigner(key_a()), "k1")
    assert check_release_arm_signature(record, anchors) is True
    assert check_release_arm_signature({k: v for k, v in record.items() if k != "release_arm"}, anchors) is None
    hmac_record = _with_arm(_hmac_signer(), "k_hmac")
    assert check_release_arm_signature(hmac_record, TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac")) is True


@pytest.mark.parametrize("change", ["block", "rehashed", "decision", "key_id", "other_key", "not_object"])
def test_a_changed_release_arm_fails_its_signature(change):
    anchors = _ed_anchors(("k1", key_a()), ("k2", key_b()))
    record = _with_arm(Ed25519ReceiptSigner(key_a()), "k1")
    if change == "block":
        record["release_arm"] = {**record["release_arm"], "percent": 90.0}
    elif change == "rehashed":  # the forger recomputes the stated hash: the signature still covers the old one
        forged = {k: v for k, v in record["release_arm"].items() if k != "release_arm_hash"} | {"percent": 90.0}
        record["release_arm"] = release_arm_part("dec_1", forged, None)["release_arm"]
    elif change == "decision":
        record["decision_id"] = "dec_2"
    elif change == "key_id":
        record["receipt_key_id"] = "k2"
    elif change == "other_key":
        record = _with_arm(Ed25519ReceiptSigner(key_b()), "k1")
    else:
        record["release_arm"] = "canary"
    assert check_release_arm_signature(record, anchors) is False


def test_signature_holds_checks_a_detached_signature_by_a_trusted_key():
    payload = b'{"event_hash":"e","key_id":"k1"}'
    body = Ed25519ReceiptSigner(key_a()).sign_payload(payload)
    anchors = _ed_anchors(("k1", key_a()))
    assert signature_holds(anchors, "ed25519", "k1", key_a().fingerprint, body, payload) is True
    assert signature_holds(anchors, "ed25519", "k1", None, body, payload) is True
    assert signature_holds(anchors, "ed25519", "k1", key_a().fingerprint, body, payload + b" ") is False
    assert signature_holds(anchors, "ed25519", "k1", key_a().fingerprint, None, payload) is False
    assert signature_holds(anchors, "ed25519", "k9", None, body, payload) is None  # no key named by id or fingerprint
    assert signature_holds(_ed_anchors(("k1", key_b())), "ed25519", "k1", None, body, payload) is False
    secret = _hmac_signer().sign_payload(payload)
    assert signature_holds(TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac"), "hmac-sha256", "k_hmac", None,
                           secret, payload) is True


def test_the_stated_fingerprint_picks_the_signing_key_among_twins_under_one_key_id():
    payload = b'{"event_hash":"e","key_id":"k1"}'
    body = Ed25519ReceiptSigner(key_b()).sign_payload(payload)
    twins = _ed_anchors(("k1", key_a()), ("k1", key_b()))
    assert signature_holds(twins, "ed25519", "k1", key_b().fingerprint, body, payload) is True
    assert signature_holds(twins, "ed25519", "k1", key_a().fingerprint, body, payload) is False


def test_an_hmac_release_arm_that_is_not_an_object_fails_without_raising():
    record = _with_arm(_hmac_signer(), "k_hmac")
    record["release_arm"] = "canary"
    assert check_release_arm_signature(record, TrustAnchors.from_hmac_secret(HMAC_SECRET, "k_hmac")) is False
