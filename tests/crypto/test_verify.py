"""Round trips, trust anchors, key rotation and per-field tamper detection."""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime

import pytest
from crypto_support import (
    CONTEXT,
    HMAC_KEY_ID,
    HMAC_SECRET,
    REQUEST,
    key_a,
    key_b,
    make_record,
    needs_input_evaluation,
)

from gate.keys.signing import Ed25519ReceiptSigner, generate_keyring, rotate_keyring
from gate.protocol.records import record_hash
from gate.verify import (
    AUTHENTICITY_CHECKS,
    INTEGRITY_CHECKS,
    TrustAnchorError,
    TrustAnchors,
    VerificationInputError,
    verify_record,
    verify_request_body,
)


def ed_anchors(*keys):
    return TrustAnchors.from_registry_entries(
        [{"key_id": k.key_id, "algorithm": "ed25519", "public_key": k.public_key_pem,
          "public_key_fingerprint": k.fingerprint, "status": "active"} for k in (keys or (key_a(),))]
    )


HMAC_ANCHORS = TrustAnchors.from_hmac_secret(HMAC_SECRET, key_id=HMAC_KEY_ID)


# --------------------------------------------------------------------------- round trips


def test_ed25519_round_trip():
    record = make_record()
    result = verify_record(record, anchors=ed_anchors(), original_input=REQUEST)
    assert result.verified is True, result.failed_checks
    assert result.key_source == "server_key_registry"
    assert result.record_kind == "rulebook"
    for name in ("record_hash", "receipt_hash", "receipt_signature", "input_hash", "output_hash",
                 "rulebook_attestation_bundle_hash", "rulebook_attestation_signature",
                 "rulebook_attestation_consistency", "rulebook_attestation_input_hash", "policy_bundle_hash",
                 "registry_attestation_hash", "registry_attestation_signature", "compact_verdict",
                 "integrity_block", "receipt_public_key_fingerprint", "urls", "policy_consistency",
                 "rulebook_registry_consistency"):
        assert result.checks[name] is True, name
    as_dict = result.to_dict()
    assert json.loads(json.dumps(as_dict)) == as_dict
    assert as_dict["verified"] is True and as_dict["failed_checks"] == []


def test_hmac_round_trip_with_signed_attestation():
    record = make_record(signer="hmac")
    result = verify_record(record, anchors=HMAC_ANCHORS + ed_anchors())
    assert result.verified is True, result.failed_checks
    assert result.key_source == "hmac_secret"
    assert result.checks["rulebook_attestation_signature"] is True


def test_hmac_round_trip_without_attestation_key_skips_attestation_signatures():
    record = make_record(signer="hmac", attest=False)
    result = verify_record(record, anchors=HMAC_ANCHORS)
    assert result.verified is True, result.failed_checks
    assert result.checks["rulebook_attestation_signature"] is None
    assert result.checks["registry_attestation_signature"] is None


def test_adapter_and_needs_input_records_verify():
    for record in (make_record(adapter=True), make_record(evaluation=needs_input_evaluation())):
        result = verify_record(record, anchors=ed_anchors())
        assert result.verified is True, result.failed_checks
    adapter_result = verify_record(make_record(adapter=True), anchors=ed_anchors())
    assert adapter_result.checks["rulebook_attestation_input_hash"] is True


def test_unsigned_record_is_intact_but_not_authentic():
    result = verify_record(make_record(signer=None), anchors=ed_anchors())
    assert result.integrity_valid is True
    assert result.authenticity_valid is False and result.verified is False
    assert result.failed_checks == ("receipt_signature",)


def test_full_view_is_verifiable_minimal_is_not():
    from gate.protocol.records import project_view

    record = make_record()
    assert verify_record(project_view(record, "full"), anchors=ed_anchors()).verified is True
    assert verify_record(project_view(record, "minimal"), anchors=ed_anchors()).verified is False


# --------------------------------------------------------------------------- trust


def test_key_in_request_is_never_a_trust_anchor():
    record = make_record()
    result = verify_record(record, anchors=TrustAnchors(), request_public_key=key_a().public_key_pem)
    assert result.verified is False
    assert result.key_source is None
    assert result.integrity_valid is True and result.authenticity_valid is False
    assert result.checks["receipt_signature"] is False
    assert result.checks["signature_matches_untrusted_key"] is True  # diagnostic only
    assert "signature_matches_untrusted_key" not in result.failed_checks
    # The attestation's embedded public key is not trusted either.
    assert result.checks["rulebook_attestation_signature"] is None
    assert result.checks["rulebook_attestation_signature_matches_untrusted_key"] is True


def test_request_key_diagnostic_reports_mismatch():
    result = verify_record(make_record(), anchors=ed_anchors(), request_public_key=key_b().public_key_pem)
    assert result.verified is True
    assert result.checks["signature_matches_untrusted_key"] is False
    result = verify_record(make_record(), anchors=ed_anchors(), request_public_key="garbage")
    assert result.checks["signature_matches_untrusted_key"] is False


def test_verify_request_body_uses_public_key_only_as_diagnostic():
    body = {"record": make_record(), "input": REQUEST, "public_key": key_a().public_key_pem}
    result = verify_request_body(body, anchors=TrustAnchors())
    assert result.verified is False and result.key_source is None
    assert result.checks["input_hash"] is True
    assert verify_request_body(body, anchors=ed_anchors()).verified is True
    with pytest.raises(VerificationInputError):
        verify_request_body({"record": "x"})


def test_other_trusted_key_does_not_authenticate():
    result = verify_record(make_record(), anchors=ed_anchors(key_b()))
    assert result.verified is False
    assert result.key_source is None
    assert "receipt_signature" in result.failed_checks


def test_key_selected_by_key_id_then_fingerprint():
    key = key_a()
    record = make_record()
    # PEM anchor without a key id: selected by fingerprint.
    by_pem = verify_record(record, anchors=TrustAnchors.from_public_key_pem(key.public_key_pem))
    assert by_pem.verified is True and by_pem.key_source == "public_key_pem"
    # Registry key stored under a different id with the right key: selected by fingerprint.
    renamed = TrustAnchors.from_registry_body(
        {"keys": [{"key_id": "other-id", "public_key": key.public_key_pem, "status": "active"}]}
    )
    result = verify_record(record, anchors=renamed)
    assert result.verified is True and result.key_source == "key_registry_file"
    # Same id, wrong key: selected by id, signature and fingerprint fail.
    impostor = TrustAnchors.from_registry_entries(
        [{"key_id": key.key_id, "public_key": key_b().public_key_pem}]
    )
    result = verify_record(record, anchors=impostor)
    assert result.verified is False
    assert {"receipt_signature", "receipt_public_key_fingerprint"} <= set(result.failed_checks)


def test_registry_body_accepts_json_text_and_escaped_newlines():
    key = key_a()
    text = json.dumps({"keys": [{"key_id": key.key_id, "public_key": key.public_key_pem.replace("\n", "\\n"),
                                 "public_key_fingerprint": key.fingerprint}]})
    anchors = TrustAnchors.from_registry_body(text)
    assert verify_record(make_record(), anchors=anchors).verified is True


def test_bad_trust_anchor_material_raises():
    key = key_a()
    with pytest.raises(TrustAnchorError):
        TrustAnchors.from_registry_body({"keys": [{"key_id": "k", "public_key": "nope"}]})
    with pytest.raises(TrustAnchorError):
        TrustAnchors.from_registry_body({"keys": [{"key_id": "k", "public_key": key.public_key_pem,
                                                   "public_key_fingerprint": "0" * 64}]})
    with pytest.raises(TrustAnchorError):
        TrustAnchors.from_registry_body("{broken")
    with pytest.raises(TrustAnchorError):
        TrustAnchors.from_hmac_secret(b"")


def test_retired_key_still_verifies_old_records(tmp_path):
    path = tmp_path / "keyring.json"
    old = generate_keyring(path, datetime(2026, 1, 1, tzinfo=UTC)).active
    record = make_record(key=old)
    rotated = rotate_keyring(path, datetime(2026, 7, 1, tzinfo=UTC))
    assert rotated.active.key_id != old.key_id
    anchors = TrustAnchors.from_keyring(rotated)
    result = verify_record(record, anchors=anchors)
    assert result.verified is True, result.failed_checks
    assert result.key_source == "server_key_registry"
    new_record = make_record(key=rotated.active)
    assert verify_record(new_record, anchors=anchors).verified is True
    # A registry without the retired key can no longer authenticate the old record.
    only_active = TrustAnchors.from_registry_entries(rotated.registry_entries()[:1])
    assert verify_record(record, anchors=only_active).verified is False


def test_not_an_object_raises_clear_error():
    for bad in (None, [], "record", 3):
        with pytest.raises(VerificationInputError) as info:
            verify_record(bad, anchors=TrustAnchors())
        assert info.value.code == "VERIFY_RECORD_INVALID"


def test_garbage_object_is_a_value_not_an_exception():
    result = verify_record({"record_hash": 5, "rulebook_attestation": "x", "integrity": [],
                            "receipt_signature": "ed25519:@@", "receipt_signature_algorithm": "ed25519",
                            "receipt_key_id": "k", "weird": float("nan")}, anchors=ed_anchors())
    assert result.verified is False
    assert "record_hash" in result.failed_checks


def test_every_check_name_is_always_reported():
    result = verify_record({}, anchors=TrustAnchors())
    assert set(INTEGRITY_CHECKS) | set(AUTHENTICITY_CHECKS) <= set(result.checks)


# --------------------------------------------------------------------------- tamper detection


def _set(record, path, value):
    target = record
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value


def _get(record, path):
    for step in path:
        record = record[step]
    return record


def _flip(text):
    last = text[-1]
    return text[:-1] + ("0" if last != "0" else "1")


# A change inside the record_hash envelope also breaks the receipt hash and the receipt
# signature, which are recomputed from the content (never taken from the stated record_hash).
ENVELOPE = {"record_hash", "receipt_hash", "receipt_signature"}

TAMPER_CASES = [
    (("action",), ENVELOPE | {"record_hash", "receipt_signature", "output_hash", "rulebook_attestation_consistency"}),
    (("verdict",), ENVELOPE | {"record_hash", "compact_verdict", "output_hash", "rulebook_attestation_consistency"}),
    (("decision_id",), ENVELOPE | {"record_hash", "receipt_hash", "receipt_signature", "urls"}),
    (("request_id",), ENVELOPE | {"record_hash"}),
    (("idempotency_key",), ENVELOPE | {"record_hash"}),
    (("created_at",), ENVELOPE | {"record_hash"}),
    (("policy_id",), ENVELOPE | {"record_hash", "policy_consistency"}),
    (("policy_version",), ENVELOPE | {"record_hash", "policy_consistency"}),
    (("policy_hash",), ENVELOPE | {"record_hash", "receipt_hash", "integrity_block", "policy_consistency"}),
    (("input_hash",), ENVELOPE | {"record_hash", "receipt_hash", "integrity_block", "input_hash"}),
    (("output_hash",), ENVELOPE | {"record_hash", "receipt_hash", "output_hash", "integrity_block"}),
    (("replay_url",), ENVELOPE | {"record_hash", "integrity_block"}),
    (("verify_url",), ENVELOPE | {"record_hash", "integrity_block"}),
    (("evidence", 0), ENVELOPE | {"record_hash", "output_hash"}),
    (("evidence_manifest", "codes", 0), ENVELOPE | {"record_hash", "receipt_hash"}),
    (("evidence_manifest", "sources", 0, "id"), ENVELOPE | {"record_hash", "receipt_hash"}),
    (("action_binding", "system"), ENVELOPE | {"record_hash", "receipt_hash"}),
    (("policy_bundle", "source"), ENVELOPE | {"record_hash"}),
    (("policy_bundle", "hash"), ENVELOPE | {"record_hash", "policy_consistency"}),
    (("policy_bundle_hash",), ENVELOPE | {"record_hash", "receipt_hash", "policy_bundle_hash", "integrity_block"}),
    (("application_verdict",), ENVELOPE | {"record_hash", "compact_verdict", "output_hash",
                                         "rulebook_attestation_consistency"}),
    (("reason_code",), ENVELOPE | {"record_hash", "output_hash", "rulebook_attestation_consistency"}),
    (("matched_rule_id",), ENVELOPE | {"record_hash", "output_hash", "rulebook_attestation_consistency"}),
    (("rulebook", "hash"), ENVELOPE | {"record_hash", "rulebook_attestation_consistency", "policy_consistency",
                            "rulebook_registry_consistency"}),
    (("rulebook_contract", "schema_url"), ENVELOPE | {"record_hash"}),
    (("evaluator_version",), ENVELOPE | {"record_hash", "rulebook_attestation_consistency", "policy_consistency",
                                       "rulebook_registry_consistency"}),
    (("runtime_binding", "binding_mode"), ENVELOPE | {"record_hash", "rulebook_attestation_consistency"}),
    (("rulebook_registry", "scope_hash"), ENVELOPE | {"record_hash", "registry_attestation_hash",
                                           "registry_attestation_signature"}),
    (("rulebook_registry", "registry_attestation", "signature"), ENVELOPE | {"record_hash", "registry_attestation_signature"}),
    (("rulebook_attestation", "bundle", "input_hash"), ENVELOPE | {"record_hash", "rulebook_attestation_bundle_hash",
                                                        "policy_bundle_hash", "rulebook_attestation_signature",
                                                                   "rulebook_attestation_input_hash"}),
    (("rulebook_attestation", "bundle_hash"), ENVELOPE | {"record_hash", "rulebook_attestation_bundle_hash"}),
    (("rulebook_attestation", "signature", "signature"), ENVELOPE | {"record_hash", "rulebook_attestation_signature"}),
    # Members outside the envelope are caught by their own checks.
    (("c",), {"compact_verdict"}),
    (("v",), {"compact_verdict"}),
    (("status",), {"output_hash", "rulebook_attestation_consistency"}),
    (("engine",), {"rulebook_attestation_consistency"}),
    (("source_hash",), {"policy_consistency"}),
    (("decision_url",), {"urls"}),
    (("evaluation", "checks", 0, "field"), {"output_hash"}),
    (("integrity", "record_hash"), {"integrity_block"}),
    (("integrity", "canonicalization"), {"integrity_block"}),
    (("integrity", "signature", "key_id"), {"integrity_block"}),
    (("record_hash",), {"record_hash", "integrity_block"}),
    (("receipt_hash",), {"receipt_hash", "integrity_block"}),
    (("receipt_signature",), {"receipt_signature"}),
    (("receipt_key_id",), {"receipt_signature", "integrity_block"}),
    (("receipt_public_key_fingerprint",), {"receipt_public_key_fingerprint", "integrity_block"}),
]


@pytest.fixture(scope="module")
def signed_record():
    return make_record()


@pytest.mark.parametrize("path, expected", TAMPER_CASES, ids=lambda v: ".".join(map(str, v)) if isinstance(v, tuple) else "")
def test_tampering_is_reported_under_the_right_check(signed_record, path, expected):
    record = copy.deepcopy(signed_record)
    _set(record, path, _flip(_get(record, path)))
    result = verify_record(record, anchors=ed_anchors(), original_input=REQUEST)
    assert result.verified is False
    assert set(result.failed_checks) == expected


@pytest.mark.parametrize("path", [p for p, names in TAMPER_CASES if "record_hash" in names and p != ("record_hash",)])
def test_every_hashed_member_changes_record_hash(signed_record, path):
    record = copy.deepcopy(signed_record)
    _set(record, path, _flip(_get(record, path)))
    assert record_hash(record) != signed_record["record_hash"]


def test_removing_a_hashed_member_fails():
    for name in ("rulebook_registry", "rulebook_attestation", "action_binding", "idempotency_key"):
        record = make_record()
        del record[name]
        result = verify_record(record, anchors=ed_anchors())
        assert result.verified is False, name
        assert "record_hash" in result.failed_checks


def test_resigning_with_untrusted_key_does_not_help():
    """An attacker who edits the record and re-seals it with their own key is not authentic."""
    from gate.protocol.records import seal_record

    record = make_record()
    record["action"] = "refund_everything"
    resealed = seal_record(record, receipt_signer=Ed25519ReceiptSigner(key_b()))
    result = verify_record(resealed, anchors=ed_anchors(), request_public_key=key_b().public_key_pem)
    assert result.verified is False
    assert result.checks["signature_matches_untrusted_key"] is True
    assert result.key_source is None


def test_context_inputs_mismatch_detected_via_original_input():
    bad_input = copy.deepcopy(REQUEST)
    bad_input["context"]["inputs"]["discount_percent"] = 99
    result = verify_record(make_record(), anchors=ed_anchors(), original_input=bad_input)
    assert set(result.failed_checks) == {"input_hash", "rulebook_attestation_input_hash"}
    assert CONTEXT["inputs"]["discount_percent"] == 15
