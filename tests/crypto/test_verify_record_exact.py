"""`verify_record` step by step: the record kind, the closed member sets, which checks each step
writes (and leaves None), what it reports as expected and actual, and how the verdicts combine.
Each test states the exact checks, so a changed guard, check name or member name is caught."""

from __future__ import annotations

import copy

import pytest
from crypto_support import REQUEST, key_a, key_b, load_vector, make_record

from gate.advisory.advisors import SINGLE_RULE, Combined, Vote
from gate.advisory.record import build_advisory_record
from gate.keys.signing import Ed25519ReceiptSigner
from gate.protocol.advisory_record import ADVISORY_RECORD_ALLOWED, ADVISORY_RECORD_REQUIRED
from gate.protocol.canonical import sha256_hex
from gate.protocol.decision_record import release_arm_part
from gate.verify import (
    AUTHENTICITY_CHECKS,
    DIAGNOSTIC_CHECKS,
    INTEGRITY_CHECKS,
    RULEBOOK_RECORD_ALLOWED,
    RULEBOOK_RECORD_REQUIRED,
    TrustAnchors,
    VerificationInputError,
    input_hash_of,
    verify_record,
    verify_request_body,
)
from gate.vocabulary import BINDING_ADAPTER

ANCHORS = TrustAnchors.from_public_key_pem(key_a().public_key_pem, key_id=key_a().key_id)
NOT_APPLICABLE = {"trusted_adapter_lineage", "confidence_hash", "audit_chain", "audit_chain_signature",
                  "confidence_signature", "release_arm_hash", "release_arm_signature", *DIAGNOSTIC_CHECKS}


def _checks(true=(), false=(), none=()):
    """Every check name: True unless named otherwise."""
    checks = dict.fromkeys((*INTEGRITY_CHECKS, *AUTHENTICITY_CHECKS, *DIAGNOSTIC_CHECKS), True)
    checks.update(dict.fromkeys(false, False))
    checks.update(dict.fromkeys(none))
    checks.update(dict.fromkeys(true, True))
    return checks


def _advisory_record(decision="yes", signer=True):
    vote = Vote(advisor_id="advisor_1", kind="rule", status="ok", decision=decision, rationale="within limits")
    return build_advisory_record(
        decision_id="dec_adv_0001", request_id="req_adv_0001", idempotency_key=None,
        created_at="2026-05-21T00:00:00.000Z", input_hash="9" * 64, mode="runtime", question="Apply it?",
        context={"workflow": "billing"}, facts={"discount_percent": 15}, pattern_id=None,
        policy_id="advisory.general", policy_version="1", identities=[{"advisor_id": "advisor_1"}],
        votes=[vote], combined=Combined(rule=SINGLE_RULE, decision=decision, tally={decision: 1}),
        receipt_signer=Ed25519ReceiptSigner(key_a()) if signer else None)


# --------------------------------------------------------------------------- a valid record


def test_a_valid_rulebook_record_reports_every_check_and_what_it_compared():
    record = make_record()
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks == _checks(none=NOT_APPLICABLE)
    assert (result.verified, result.integrity_valid, result.authenticity_valid) == (True, True, True)
    assert result.failed_checks == () and result.notes == ()
    assert set(result.expected) == set(result.actual) == {
        "record_hash", "receipt_hash", "input_hash", "output_hash", "policy_bundle_hash",
        "rulebook_attestation_bundle_hash", "rulebook_attestation_input_hash", "registry_attestation_hash"}
    assert result.expected == result.actual
    assert result.actual["record_hash"] == record["record_hash"]
    assert result.actual["input_hash"] == sha256_hex(REQUEST)
    assert (result.decision_id, result.record_kind, result.signature_algorithm, result.key_id, result.key_source) \
        == ("dec_test_0001", "rulebook", "ed25519", key_a().key_id, "public_key_pem")


def test_without_the_original_input_its_hash_is_not_checked_and_a_note_says_so():
    result = verify_record(make_record(), anchors=ANCHORS)
    assert result.checks == _checks(none=NOT_APPLICABLE | {"input_hash", "rulebook_attestation_input_hash"})
    assert "input_hash" not in result.expected and "input_hash" not in result.actual
    assert len(result.notes) == 1 and "input_hash" in result.notes[0]
    assert result.verified is True


def test_an_unsigned_record_is_intact_but_not_authentic():
    result = verify_record(make_record(signer=None, attest=False), anchors=ANCHORS, original_input=REQUEST)
    assert result.failed_checks == ("receipt_signature",)
    assert (result.verified, result.integrity_valid, result.authenticity_valid) == (False, True, False)
    assert (result.signature_algorithm, result.key_id, result.key_source) == (None, None, None)


def test_a_change_outside_the_envelope_is_an_integrity_failure_only():
    record = make_record()
    record["c"] = "no"
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.failed_checks == ("compact_verdict",)
    assert (result.verified, result.integrity_valid, result.authenticity_valid) == (False, False, True)


def test_an_attestation_signature_failure_is_an_authenticity_failure_only():
    record = make_record()
    record["rulebook_registry"]["registry_attestation"]["signature"] = "A" * 86
    record = _reseal(record)
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.failed_checks == ("registry_attestation_signature",)
    assert (result.verified, result.integrity_valid, result.authenticity_valid) == (False, True, False)


def _reseal(record):
    from gate.protocol.records import seal_record

    return seal_record(record, receipt_signer=Ed25519ReceiptSigner(key_a()))


def test_a_false_diagnostic_is_reported_but_never_failed():
    result = verify_record(make_record(), anchors=ANCHORS, original_input=REQUEST,
                           request_public_key=key_b().public_key_pem)
    assert result.checks["signature_matches_untrusted_key"] is False
    assert result.failed_checks == () and result.verified is True


# --------------------------------------------------------------------------- record kind and members


@pytest.mark.parametrize("drop, kind", [
    ((), "rulebook"), (("rulebook",), "rulebook"), (("rulebook_attestation",), "rulebook"),
    (("rulebook", "rulebook_attestation"), "legacy"),
])
def test_either_rulebook_member_makes_a_rulebook_record(drop, kind):
    record = make_record()
    for name in drop:
        del record[name]
    result = verify_record(record, anchors=ANCHORS)
    assert result.record_kind == kind
    # Closed member set, output_hash from the evaluation and adapter lineage belong to rulebook records.
    assert result.checks["record_members"] is {0: True, 1: False, 2: None}[len(drop)]
    assert result.checks["output_hash"] is (None if kind == "legacy" else True)


@pytest.mark.parametrize("required, allowed, mode", [
    (RULEBOOK_RECORD_REQUIRED, RULEBOOK_RECORD_ALLOWED, "rulebook"),
    (ADVISORY_RECORD_REQUIRED, ADVISORY_RECORD_ALLOWED, "advisory"),
])
def test_the_member_set_is_closed_both_ways(required, allowed, mode):
    def members(names):
        return verify_record(dict.fromkeys(names), anchors=ANCHORS)

    for names in (required, allowed):
        result = members(names)
        assert result.record_kind == mode
        assert result.checks["record_members"] is True and "record_members" not in result.expected
    for name in sorted(required):
        result = members(required - {name})
        assert result.checks["record_members"] is False, name
        assert (result.expected["record_members"], result.actual["record_members"]) == ([name], [])
    result = members(allowed | {"zz_extra", "aa_extra"})
    assert (result.expected["record_members"], result.actual["record_members"]) == ([], ["aa_extra", "zz_extra"])


def test_a_legacy_record_has_no_member_check():
    record = load_vector("valid-decision-record.json")
    record["extra"] = 1
    result = verify_record(record, anchors=ANCHORS)
    assert result.record_kind == "legacy"
    assert result.checks["record_members"] is None and result.checks["output_hash"] is None


# --------------------------------------------------------------------------- hashes


def test_a_record_that_cannot_be_hashed_has_no_expected_hashes():
    record = make_record()
    record["action"] = float("nan")
    result = verify_record(record, anchors=ANCHORS)
    assert result.expected["record_hash"] is None and result.expected["receipt_hash"] is None
    assert {"record_hash", "receipt_hash", "receipt_signature"} <= set(result.failed_checks)


def test_a_rulebook_record_without_its_evaluation_has_no_output_hash_check():
    record = make_record()
    del record["evaluation"]
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks["output_hash"] is None and "output_hash" not in result.expected
    assert result.failed_checks == ("record_members",)


def test_input_hash_leaves_out_only_the_response_view_and_hashes_other_json_as_is():
    assert input_hash_of(dict(REQUEST, response_view="minimal")) == sha256_hex(REQUEST)
    assert input_hash_of(dict(REQUEST, response_views="minimal")) != sha256_hex(REQUEST)
    assert input_hash_of([1, {"response_view": 2}]) == sha256_hex([1, {"response_view": 2}])


# --------------------------------------------------------------------------- compact verdict


@pytest.mark.parametrize("drop", [("c",), ("v",)])
def test_a_compact_verdict_with_one_half_missing_fails(drop):
    record = make_record()
    for name in drop:
        del record[name]
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert set(result.failed_checks) == {"record_members", "compact_verdict"}


def test_a_record_without_a_compact_verdict_has_no_compact_check():
    record = make_record()
    del record["c"], record["v"]
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks["compact_verdict"] is None and result.failed_checks == ("record_members",)


def test_a_verdict_that_is_not_text_fails_the_compact_check_without_raising():
    record = make_record()
    record["verdict"] = ["APPROVE"]
    result = verify_record(record, anchors=ANCHORS)
    assert result.checks["compact_verdict"] is False


def test_a_rulebook_record_binds_v_to_the_application_verdict_even_without_one():
    record = make_record()
    del record["application_verdict"]
    result = verify_record(record, anchors=ANCHORS)
    assert result.checks["compact_verdict"] is False  # v no longer has its application verdict


# --------------------------------------------------------------------------- advisory records


def test_a_valid_advisory_record():
    result = verify_record(_advisory_record(), anchors=ANCHORS)
    assert result.record_kind == "advisory"
    assert result.checks["record_members"] is True and result.checks["output_hash"] is True
    assert result.checks["compact_verdict"] is True
    assert result.expected["output_hash"] == result.actual["output_hash"] is not None
    assert result.verified is True, result.failed_checks


def test_an_advisory_member_outside_the_envelope_is_bound_by_output_hash():
    record = _advisory_record()
    record["advisory"]["question"] = "Refund everything?"
    assert verify_record(record, anchors=ANCHORS).failed_checks == ("output_hash",)


def test_an_advisory_approval_that_reads_as_binding_fails_the_compact_verdict():
    # Rewritten consistently (compact pair and output_hash) and resealed: only the reading is wrong.
    from gate.protocol.advisory_record import advisory_output_hash

    record = _advisory_record()
    record["production_binding_required"] = False
    record["output_hash"] = advisory_output_hash(record)
    result = verify_record(_reseal(record), anchors=ANCHORS)
    assert result.failed_checks == ("compact_verdict",)


def test_an_unsigned_advisory_record_has_its_kind_and_members():
    result = verify_record(_advisory_record(signer=False), anchors=ANCHORS)
    assert result.record_kind == "advisory" and result.failed_checks == ("receipt_signature",)


# --------------------------------------------------------------------------- the verify body


def test_the_verify_body_passes_its_input_and_only_a_text_public_key():
    record = make_record()
    result = verify_request_body({"record": record, "input": REQUEST, "public_key": key_b().public_key_pem},
                                 anchors=ANCHORS)
    assert result.checks["input_hash"] is True and result.checks["signature_matches_untrusted_key"] is False
    result = verify_request_body({"record": record, "public_key": 5}, anchors=ANCHORS)
    assert result.checks["input_hash"] is None and result.checks["signature_matches_untrusted_key"] is None
    assert result.verified is True


@pytest.mark.parametrize("body", ["junk", {"record": "junk"}, {}])
def test_a_verify_body_without_a_record_object_raises(body):
    with pytest.raises(VerificationInputError) as raised:
        verify_request_body(body)
    assert raised.value.code == "VERIFY_RECORD_INVALID"


def test_a_record_that_is_not_an_object_raises_with_its_code():
    with pytest.raises(VerificationInputError) as raised:
        verify_record(["junk"])
    assert raised.value.code == "VERIFY_RECORD_INVALID" and raised.value.message == str(raised.value)


def test_without_anchors_nothing_is_authentic():
    result = verify_record(copy.deepcopy(make_record()))
    assert result.checks["receipt_signature"] is False and result.integrity_valid is True


def test_the_original_request_reaches_the_adapter_lineage():
    record = make_record(adapter=True)
    invocation = {"adapter_id": "another_adapter", "version": "1.0.0", "manifest_hash": "2" * 64, "input": {}}
    result = verify_record(record, anchors=ANCHORS, original_input=dict(REQUEST, adapter=invocation))
    assert result.checks["trusted_adapter_lineage"] is False
    result = verify_record(record, anchors=ANCHORS)
    assert result.checks["trusted_adapter_lineage"] is True
    assert any("adapter" in note for note in result.notes)


# --------------------------------------------------------------------------- parts outside record_hash

ARM = {"arm": "canary", "release_seq": 4, "rulebook_version": "2026.06", "percent": 10.0}


def _with_arm(record, block=ARM, key=None):
    return {**record, **release_arm_part(record["decision_id"], block, Ed25519ReceiptSigner(key or key_a()))}


def test_a_release_arm_is_checked_by_its_hash_and_its_signature():
    record = _with_arm(make_record())
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks == _checks(none=NOT_APPLICABLE - {"release_arm_hash", "release_arm_signature"})
    assert result.verified
    stated = record["release_arm"]["release_arm_hash"]
    assert result.expected["release_arm_hash"] == result.actual["release_arm_hash"] == stated


def test_a_changed_release_arm_fails_its_hash_and_its_signature():
    record = _with_arm(make_record())
    record["release_arm"] = {**record["release_arm"], "arm": "active"}
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert (result.checks["release_arm_hash"], result.checks["release_arm_signature"]) == (False, False)
    assert result.actual["release_arm_hash"] == record["release_arm"]["release_arm_hash"]
    assert result.expected["release_arm_hash"] != result.actual["release_arm_hash"]
    assert not result.integrity_valid and not result.authenticity_valid and not result.verified
    other = verify_record(_with_arm(make_record(), key=key_b()), anchors=ANCHORS, original_input=REQUEST)
    assert (other.checks["release_arm_hash"], other.checks["release_arm_signature"]) == (True, False)


@pytest.mark.parametrize("arm", ["canary", None, 5])
def test_a_release_arm_signature_without_an_arm_object_fails_the_hash(arm):
    record = _with_arm(make_record())
    record["release_arm"] = arm
    if arm is None:
        del record["release_arm"]
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks["release_arm_hash"] is False
    assert result.expected["release_arm_hash"] is None and result.actual["release_arm_hash"] is None


def test_a_malformed_audit_chain_is_a_failed_check_not_a_skipped_one():
    record = make_record()
    record["audit_chain"] = {"chain_id": "tenant", "position": "one"}
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks["audit_chain"] is False


def test_an_advisory_record_has_no_adapter_lineage_even_when_it_states_a_binding():
    record = dict(_advisory_record())
    record["runtime_binding"] = {"binding_mode": BINDING_ADAPTER}
    assert verify_record(record, anchors=ANCHORS).checks["trusted_adapter_lineage"] is None


def test_an_adapter_binding_without_its_blocks_fails_the_lineage():
    record = make_record()
    record["runtime_binding"] = {"binding_mode": BINDING_ADAPTER}  # no adapter_authority: not the direct-mode refusal
    assert verify_record(record, anchors=ANCHORS, original_input=REQUEST).checks["trusted_adapter_lineage"] is False


def test_an_unsigned_records_release_arm_is_still_hashed():
    record = make_record(signer=None)
    record.update(release_arm_part(record["decision_id"], ARM, None))
    assert "release_arm_signature" not in record
    result = verify_record(record, anchors=ANCHORS, original_input=REQUEST)
    assert result.checks["release_arm_hash"] is True
    record["release_arm"] = {**record["release_arm"], "percent": 50.0}
    assert verify_record(record, anchors=ANCHORS, original_input=REQUEST).checks["release_arm_hash"] is False
