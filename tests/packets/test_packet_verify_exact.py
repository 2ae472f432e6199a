"""`verify_packet` reports exactly what failed: the full failed-check set, the record's summary
and its recomputed hashes, and the supplied original input when the packet carries none."""

from __future__ import annotations

import copy

from packet_support import anchors, scenario

from gate.packets import verify_packet
from gate.packets.verify import verify_packet_body

ANCHORS = anchors()
BASE = scenario()


def _rehash(packet):
    from gate.protocol.canonical import sha256_hex

    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    return packet


def test_an_intact_packet_fails_nothing_and_records_both_hashes():
    result = verify_packet(copy.deepcopy(BASE.packet), anchors=ANCHORS)
    assert (result.verified, result.failed_checks) == (True, ())
    assert "record" not in result.details
    record = BASE.packet["decision_record"]
    for name in ("record_hash", "receipt_hash"):
        assert result.expected[f"record.{name}"] == record[name]
        assert result.actual[f"record.{name}"] == record[name]
    for name in ("packet_hash", "packet_members", "packet_version", "packet_manifest", "exported_at", "record",
                 "record_audit_chain"):
        assert result.checks[name] is True, name


def test_a_changed_record_is_summarised_and_its_own_checks_listed():
    packet = copy.deepcopy(BASE.packet)
    packet["decision_record"]["verdict"] = "no"
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    record_failed = result.record["failed_checks"]
    assert record_failed and result.checks["record"] is False
    assert result.details["record"] == ["the embedded record fails: " + ", ".join(record_failed)]
    assert {f"record.{name}" for name in record_failed} <= set(result.failed_checks)
    stated = BASE.packet["decision_record"]["record_hash"]
    assert result.actual["record.record_hash"] == stated != result.expected["record.record_hash"]
    assert result.actual["record.receipt_hash"] == BASE.packet["decision_record"]["receipt_hash"]
    assert isinstance(result.expected["record.receipt_hash"], str)
    assert (result.verified, result.integrity_valid) == (False, False)


def test_a_packet_without_a_record_object_fails_the_record_and_every_listed_part():
    packet = copy.deepcopy(BASE.packet)
    packet["decision_record"] = ["not", "an", "object"]
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert result.checks["record"] is False
    assert result.details["record"] == ["decision_record is not an object"]
    assert result.record is None and result.verified is False


def test_the_body_form_passes_the_supplied_input_on():
    packet = copy.deepcopy(BASE.packet)
    same = verify_packet_body({"packet": packet, "input": packet["original_input"]}, anchors=ANCHORS)
    assert (same.checks["original_input"], same.verified) == (True, True)
    other = verify_packet_body({"packet": packet, "input": {"other": 1}}, anchors=ANCHORS)
    assert other.checks["original_input"] is False
    assert other.details["original_input"] == ["the supplied input differs from the packet's original_input"]


def test_without_a_record_object_the_exact_failures():
    from gate.packets.verify import _LISTED

    packet = copy.deepcopy(BASE.packet)
    packet["decision_record"] = ["x"]
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert result.failed_checks == (
        "audit_chain.inclusion_proof", "audit_chain.record_link", "crm_sync_records", "execution_receipts",
        "intelligence_reports", "outcome_records", "packet_manifest", "policy_intelligence.anomalies.policy_id",
        "policy_intelligence.effectiveness.policy_id", "record")
    assert _LISTED == ("execution_receipts", "outcome_records", "crm_sync_records")
    for part in _LISTED:
        assert result.details[part] == ["no decision record to link to"]


def test_identity_and_the_records_notes_are_reported():
    packet = copy.deepcopy(BASE.packet)
    result = verify_packet(packet)  # no trust anchors: the record cannot be authenticated
    assert (result.decision_id, result.packet_hash) == (packet["decision_id"], packet["packet_hash"])
    record_notes = tuple(result.record["notes"])
    assert record_notes and result.notes[-len(record_notes):] == record_notes
    assert result.notes[0].startswith("checkpoint signature not checked")


def test_a_packet_without_an_audit_chain_has_no_checkpoint_key_source():
    packet = copy.deepcopy(BASE.packet)
    del packet["audit_chain"]
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert result.checkpoint_key_source is None
    assert result.failed_checks == ("packet_manifest",)


import pytest  # noqa: E402

import gate.packets.verify as packet_verify  # noqa: E402

# Each guarded step of verify_packet, and the check name it must fail under when it raises.
GUARDED = [("_check_packet_hash", "packet_hash"), ("_check_members", "packet_members"),
           ("_check_manifest", "packet_manifest"), ("_check_exported_at", "exported_at"),
           ("verify_record", "record"), ("_check_record_audit_chain", "record_audit_chain"),
           ("_check_receipts", "execution_receipts"), ("_check_receipt_head", "receipt_chain_head"),
           ("_check_intelligence", "intelligence_reports"), ("_check_chain", "audit_chain"),
           ("check_chain_consistency", "chain_consistency")]


@pytest.mark.parametrize("function,check", GUARDED)
def test_a_step_that_raises_fails_closed_under_its_own_name(monkeypatch, function, check):
    """Any surprise inside a step (content no check foresaw) is a failure of that step, named,
    never a crash and never a pass."""
    def explode(*_args, **_kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(packet_verify, function, explode)
    result = verify_packet(copy.deepcopy(BASE.packet), anchors=ANCHORS)
    assert result.verified is False
    assert check in result.failed_checks, (check, result.failed_checks)
    assert result.checks[check] is False


def test_a_checkpoint_log_reaches_its_check():
    """A held checkpoint of the packet's own tree: the packet extends it (`checkpoint_log` holds)."""
    held = [copy.deepcopy(BASE.packet["audit_chain"]["checkpoint"])]
    result = verify_packet(copy.deepcopy(BASE.packet), anchors=ANCHORS, checkpoint_log=held)
    assert result.checks["checkpoint_log"] is True
    assert result.verified is True


def test_a_checkpoint_log_step_that_raises_fails_closed_under_its_own_name(monkeypatch):
    def explode(*_args, **_kwargs):
        raise RuntimeError("surprise")

    monkeypatch.setattr(packet_verify, "check_checkpoint_log", explode)
    held = [copy.deepcopy(BASE.packet["audit_chain"]["checkpoint"])]
    result = verify_packet(copy.deepcopy(BASE.packet), anchors=ANCHORS, checkpoint_log=held)
    assert result.failed_checks == ("checkpoint_log",)
    assert result.details["checkpoint_log"] == ["could not be checked (RuntimeError)"]


def test_a_chain_consistency_member_is_checked_by_its_own_step_not_lost_to_a_crash():
    """The step runs on the packet's own verification state: a malformed member is named by its
    check, never 'could not be checked'."""
    packet = copy.deepcopy(BASE.packet)
    packet["chain_consistency"] = {"first": 1}
    result = verify_packet(_rehash(packet), anchors=ANCHORS)
    assert result.checks["chain_consistency"] is False and "chain_consistency" in result.failed_checks
    assert result.details["chain_consistency"] and not any(
        "could not be checked" in detail for detail in result.details["chain_consistency"])
