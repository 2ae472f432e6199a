"""Packet verification step 3: every hashed member is covered and every link is named."""

from __future__ import annotations

import copy

import pytest
from receipts_support import RECORD, golden, record

from gate.receipts import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    SYNC_HASH_MEMBERS,
    LinkFailure,
    execution_hash_of,
    outcome_hash_of,
    sync_hash_of,
    verify_receipt_links,
)

EXECUTION = golden("execution-receipt.json")["receipt"]
UNMATCHED = golden("execution-receipt-unmatched.json")["receipt"]
OUTCOME = golden("outcome-record.json")["receipt"]
SYNC = golden("crm-sync.json")["receipt"]

KINDS = [
    ("execution_receipts", EXECUTION, EXECUTION_HASH_MEMBERS, "execution_hash", execution_hash_of),
    ("outcome_records", OUTCOME, OUTCOME_HASH_MEMBERS, "outcome_hash", outcome_hash_of),
    ("crm_syncs", SYNC, SYNC_HASH_MEMBERS, "sync_hash", sync_hash_of),
]
RECORD_LINKED = {"decision_id", "decision_record_hash", "decision_receipt_hash", "decision_verdict",
                 "decision_action", "policy_id", "policy_version", "policy_bundle_hash"}


def links(artifact, receipt, rec=None):
    lists = {"execution_receipts": [], "outcome_records": [], "crm_syncs": []}
    lists[artifact] = [receipt]
    return verify_receipt_links(RECORD if rec is None else rec, lists["execution_receipts"],
                                lists["outcome_records"], lists["crm_syncs"])


def names(failures):
    return {failure.name for failure in failures}


def _flipped(value):
    if value is True or value is False:
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, list):
        return value + ["x"]
    if isinstance(value, dict):
        return {**value, "flipped": "x"}
    raise AssertionError(value)


def test_intact_receipts_have_no_failures():
    assert verify_receipt_links(RECORD, [EXECUTION, UNMATCHED], [OUTCOME], [SYNC]) == []
    assert verify_receipt_links(RECORD) == []


@pytest.mark.parametrize("artifact, receipt, members, hash_member, hash_of", KINDS)
def test_every_preimage_member_is_hashed_and_a_flip_is_named(artifact, receipt, members, hash_member, hash_of):
    present = [name for name in members if name in receipt]
    assert len(present) >= len(members) - 1  # the golden vectors use (almost) every member
    for name in present:
        tampered = copy.deepcopy(receipt)
        tampered[name] = _flipped(tampered[name])
        assert hash_of(tampered) != receipt[hash_member], name
        found = names(links(artifact, tampered))
        assert f"{artifact}[0].{hash_member}" in found, name
        if name in RECORD_LINKED:
            assert f"{artifact}[0].{name}" in found, name


@pytest.mark.parametrize("artifact, receipt, members, hash_member, hash_of", KINDS)
def test_adding_or_removing_a_preimage_member_changes_the_hash(artifact, receipt, members, hash_member, hash_of):
    for name in members:
        tampered = copy.deepcopy(receipt)
        if name in tampered:
            del tampered[name]
        else:
            tampered[name] = "added"
        assert hash_of(tampered) != receipt[hash_member], name


@pytest.mark.parametrize("artifact, receipt, members, hash_member, hash_of", KINDS)
def test_members_outside_the_preimage_are_not_hashed_and_are_refused(artifact, receipt, members, hash_member, hash_of):
    tampered = {**receipt, "approved_by": "cfo"}
    assert hash_of(tampered) == receipt[hash_member]  # not in the preimage ...
    failures = links(artifact, tampered)
    assert [f.name for f in failures] == [f"{artifact}[0].unhashed_members"]  # ... so refused
    assert failures[0].actual == ["approved_by"]


@pytest.mark.parametrize("artifact, receipt, members, hash_member, hash_of", KINDS)
def test_null_and_empty_members_do_not_change_the_hash(artifact, receipt, members, hash_member, hash_of):
    absent = [name for name in members if name not in receipt]
    tampered = {**receipt, **dict.fromkeys(absent)}
    assert hash_of(tampered) == receipt[hash_member]
    tampered = {**receipt, **dict.fromkeys(absent, "")}
    assert hash_of(tampered) == receipt[hash_member]


@pytest.mark.parametrize("artifact, receipt, members, hash_member, hash_of", KINDS)
def test_receipt_of_another_record_is_named_even_with_a_valid_hash(artifact, receipt, members, hash_member, hash_of):
    other = record()
    other.update(decision_id="dec_other", record_hash="1" * 64, receipt_hash="2" * 64, verdict="no",
                 action="deny", policy_id="p2", policy_version="v9", policy_bundle_hash="3" * 64)
    found = names(links(artifact, receipt, other))
    assert found >= {f"{artifact}[0].{name}" for name in RECORD_LINKED}
    assert f"{artifact}[0].{hash_member}" not in found


def test_execution_binding_hash_and_match_are_recomputed():
    forged = copy.deepcopy(UNMATCHED)
    forged["action_binding_match"] = True
    forged["execution_hash"] = execution_hash_of(forged)  # re-hashed by the forger
    assert names(verify_receipt_links(RECORD, [forged])) == {"execution_receipts[0].action_binding_match"}

    forged = copy.deepcopy(EXECUTION)
    forged["action_binding"] = {**forged["action_binding"], "target_object_id": "sub_other"}
    forged["execution_hash"] = execution_hash_of(forged)
    assert names(verify_receipt_links(RECORD, [forged])) == {
        "execution_receipts[0].action_binding_hash", "execution_receipts[0].action_binding_match"}


def test_outcome_binding_must_be_the_record_binding():
    forged = copy.deepcopy(OUTCOME)
    forged["action_binding"] = {"proposed_action": "other"}
    forged["outcome_hash"] = outcome_hash_of(forged)
    assert names(verify_receipt_links(RECORD, [], [forged])) == {"outcome_records[0].action_binding"}


@pytest.mark.parametrize("artifact, member, value, check", [
    ("execution_receipts", "execution_status", "approved", "execution_status"),
    ("outcome_records", "outcome_status", "partial", "outcome_status"),
    ("crm_syncs", "sync_status", "done", "sync_status"),
    ("crm_syncs", "sync_direction", "both", "sync_direction"),
    ("execution_receipts", "decision_execution_version", "decision_execution_v2", "versions"),
    ("outcome_records", "decision_protocol_version", "decision_protocol_v0", "versions"),
    ("crm_syncs", "decision_found", False, "decision_found"),
])
def test_rehashed_forgeries_outside_the_contract_are_named(artifact, member, value, check):
    receipt, hash_member, hash_of = {
        "execution_receipts": (EXECUTION, "execution_hash", execution_hash_of),
        "outcome_records": (OUTCOME, "outcome_hash", outcome_hash_of),
        "crm_syncs": (SYNC, "sync_hash", sync_hash_of),
    }[artifact]
    forged = {**receipt, member: value}
    forged[hash_member] = hash_of(forged)
    assert names(links(artifact, forged)) == {f"{artifact}[0].{check}"}


def test_failures_are_values_with_index_and_details():
    broken = {**OUTCOME, "outcome_hash": "0" * 64}
    failures = verify_receipt_links(RECORD, [EXECUTION], [OUTCOME, broken, "junk"], [])
    assert [f.name for f in failures] == ["outcome_records[1].outcome_hash", "outcome_records[2].shape"]
    first = failures[0]
    assert isinstance(first, LinkFailure)
    assert first.expected == OUTCOME["outcome_hash"] and first.actual == "0" * 64
    assert first.to_dict()["name"] == "outcome_records[1].outcome_hash"
    assert "outcome_records[1].outcome_hash" in str(first)


def test_unhashable_content_is_a_failure_not_a_crash():
    broken = {**EXECUTION, "executor": {"type": float("nan"), "id": "x"}}
    assert "execution_receipts[0].execution_hash" in names(verify_receipt_links(RECORD, [broken]))


def test_record_must_be_an_object():
    with pytest.raises(TypeError):
        verify_receipt_links(["not a record"], [EXECUTION])
