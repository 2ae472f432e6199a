"""Record references (mismatch errors) and the action binding match rule."""

from __future__ import annotations

import pytest
from receipts_support import (
    RECORD,
    REPORTED_AT,
    crm_body,
    execution_body,
    outcome_body,
    record,
)

from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.receipts import (
    action_binding_match,
    build_crm_sync_record,
    build_execution_receipt,
    build_outcome_record,
    derived_action_binding,
)

R = RECORD["action_binding"]
ANCHORS = {k: R[k] for k in ("proposed_action", "target_system", "target_object_id", "mutation")}
DERIVING = {"action_taken": "apply_discount", "target_system": "billing",
            "target_object_id": "sub_conformance_1042", "mutation": "discount.create"}


def _execute(body, rec=None):
    return build_execution_receipt(body=body, record=record() if rec is None else rec,
                                   execution_receipt_id="exe_1", idempotency_key=None, reported_at=REPORTED_AT)


def _outcome(body):
    return build_outcome_record(body=body, record=record(), outcome_id="out_1", idempotency_key=None,
                                reported_at=REPORTED_AT)


def _sync(body):
    return build_crm_sync_record(body=body, record=record(), sync_id="s_1", idempotency_key=None,
                                 reported_at=REPORTED_AT)


# --------------------------------------------------------------------------- mismatches

OTHER = "0" * 64


@pytest.mark.parametrize("build, body, code, fields", [
    (_execute, execution_body(decision_record_hash=OTHER), "SVC_EXECUTION_RECORD_MISMATCH", ["decision_record_hash"]),
    (_execute, execution_body(decision_receipt_hash=OTHER), "SVC_EXECUTION_RECORD_MISMATCH", ["decision_receipt_hash"]),
    (_execute, execution_body(decision_id="dec_other", decision_record_hash=OTHER, decision_receipt_hash=OTHER),
     "SVC_EXECUTION_RECORD_MISMATCH", ["decision_id", "decision_record_hash", "decision_receipt_hash"]),
    (_outcome, outcome_body(decision_record_hash=OTHER), "SVC_OUTCOME_RECORD_MISMATCH", ["decision_record_hash"]),
    (_outcome, outcome_body(decision_receipt_hash=OTHER), "SVC_OUTCOME_RECORD_MISMATCH", ["decision_receipt_hash"]),
    (_outcome, outcome_body(decision_id="dec_other"), "SVC_OUTCOME_RECORD_MISMATCH", ["decision_id"]),
    (_sync, crm_body(decision_record_hash=OTHER), "SVC_CRM_SYNC_RECORD_MISMATCH", ["decision_record_hash"]),
    (_sync, crm_body(decision_receipt_hash=OTHER), "SVC_CRM_SYNC_RECORD_MISMATCH", ["decision_receipt_hash"]),
    (_sync, crm_body(decision_verdict="no"), "SVC_CRM_SYNC_RECORD_MISMATCH", ["decision_verdict"]),
    (_sync, crm_body(decision_action="refund"), "SVC_CRM_SYNC_RECORD_MISMATCH", ["decision_action"]),
    (_sync, crm_body(policy_id="other", policy_version="v9"), "SVC_CRM_SYNC_RECORD_MISMATCH",
     ["policy_id", "policy_version"]),
])
def test_supplied_references_must_match_the_record(build, body, code, fields):
    with pytest.raises(GateError) as caught:
        build(body)
    error = caught.value
    assert error.code == code
    assert error.details["fields"] == fields
    source = {"decision_id": "decision_id", "decision_record_hash": "record_hash",
              "decision_receipt_hash": "receipt_hash", "decision_verdict": "verdict",
              "decision_action": "action", "policy_id": "policy_id", "policy_version": "policy_version"}
    assert error.details["expected"] == {name: RECORD[source[name]] for name in fields}
    assert error.details["supplied"] == {name: body[name] for name in fields}


def test_matching_references_are_accepted_everywhere():
    refs = {"decision_id": RECORD["decision_id"], "decision_record_hash": RECORD["record_hash"],
            "decision_receipt_hash": RECORD["receipt_hash"]}
    # Accepted means bound: each receipt carries the matching references back (issue 12 gap 7).
    stated = {"decision_id": RECORD["decision_id"], "decision_record_hash": RECORD["record_hash"]}
    execution = _execute(execution_body(**refs))
    assert execution == {**execution, **stated, "decision_receipt_hash": RECORD["receipt_hash"]}
    outcome = _outcome(outcome_body(**refs))
    assert outcome == {**outcome, **stated}
    sync = _sync(crm_body(**refs, decision_verdict="yes", decision_action="apply_discount",
                          policy_id="pricing_exception", policy_version="v3"))
    assert sync == {**sync, **stated, "decision_verdict": "yes", "decision_action": "apply_discount",
                    "policy_id": "pricing_exception", "policy_version": "v3"}


def test_validation_comes_before_the_mismatch_check():
    with pytest.raises(GateError) as caught:
        _execute(execution_body(decision_record_hash=OTHER, execution_status="nope"))
    assert caught.value.code == "REQUEST_INVALID"


def test_missing_record_is_decision_not_found_before_anything_else():
    for build, kwargs in ((build_execution_receipt, {"execution_receipt_id": "e"}),
                          (build_outcome_record, {"outcome_id": "o"}),
                          (build_crm_sync_record, {"sync_id": "s"})):
        with pytest.raises(GateError) as caught:
            build(body={}, record=None, idempotency_key=None, reported_at=REPORTED_AT, **kwargs)
        assert caught.value.code == "DECISION_NOT_FOUND"


# --------------------------------------------------------------------------- binding rule

@pytest.mark.parametrize("binding, expected", [
    ({**ANCHORS}, True),
    ({**R}, True),
    ({**R, "note": "extra members are ignored"}, True),
    ({**R, "amount": "20"}, False),
    ({**ANCHORS, "actor": "someone_else"}, False),
    ({k: v for k, v in ANCHORS.items() if k != "mutation"}, False),
    ({**ANCHORS, "target_object_id": "sub_other"}, False),
    ({}, False),
    ({"note": "nothing comparable"}, False),
])
def test_match_rule_against_the_reference_binding(binding, expected):
    assert action_binding_match(R, binding) is expected


@pytest.mark.parametrize("record_binding, binding, expected", [
    ({}, {"proposed_action": "x"}, False),                # record binds nothing: no proof
    (None, {"proposed_action": "x"}, False),
    ({"system": "crm", "resource": "acct_1"}, {"proposed_action": "x"}, False),  # no anchor, no overlap
    ({"system": "crm", "resource": "acct_1"}, {"system": "crm"}, True),         # overlap compared
    ({"system": "crm", "resource": "acct_1"}, {"system": "erp"}, False),
    ({"system": "crm", "proposed_action": "close"}, {"proposed_action": "close"}, True),
    ({"proposed_action": "close"}, {"proposed_action": "close "}, False),        # exact equality
    ({"amount": "15"}, {"amount": 15}, False),                                   # canonical equality: types differ
    ({"proposed_action": "close"}, "not an object", False),
])
def test_match_rule_edges(record_binding, binding, expected):
    assert action_binding_match(record_binding, binding) is expected


def test_derived_binding_uses_only_present_fields():
    assert derived_action_binding(DERIVING) == ANCHORS
    assert derived_action_binding({"action_taken": "x", "mutation": ""}) == {"proposed_action": "x"}
    assert derived_action_binding({}) == {}


def test_receipt_derives_the_binding_when_none_is_supplied():
    receipt = _execute(execution_body(**DERIVING))
    assert receipt["action_binding"] == ANCHORS
    assert receipt["action_binding_hash"] == sha256_hex(ANCHORS)
    assert receipt["action_binding_match"] is True


def test_receipt_uses_the_supplied_binding_over_the_derived_one():
    supplied = {**ANCHORS, "amount": "20"}
    receipt = _execute(execution_body(**DERIVING, action_binding=supplied))
    assert receipt["action_binding"] == supplied
    assert receipt["action_binding_hash"] == sha256_hex(supplied)
    assert receipt["action_binding_match"] is False


def test_receipt_without_any_binding_hashes_the_empty_object_and_does_not_match():
    receipt = _execute(execution_body())
    assert "action_binding" not in receipt
    assert receipt["action_binding_hash"] == sha256_hex({})
    assert receipt["action_binding_match"] is False


def test_mismatching_binding_is_recorded_not_refused():
    receipt = _execute(execution_body(**{**DERIVING, "target_object_id": "sub_other"}))
    assert receipt["action_binding_match"] is False
