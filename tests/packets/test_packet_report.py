"""`gate_cli.packet_report`: telling packets from records, and a report naming each failure."""

from __future__ import annotations

import copy

from packet_support import anchors, scenario

from gate.packets import verify_packet
from gate.protocol.canonical import sha256_hex
from gate_cli.packet_report import is_packet, packet_report

BASE = scenario()


def test_is_packet():
    assert is_packet(BASE.packet)
    assert not is_packet(BASE.record)
    assert not is_packet({"packet": BASE.packet})
    assert not is_packet([BASE.packet]) and not is_packet(None)
    legacy = {k: v for k, v in BASE.packet.items() if k != "decision_packet_version"}
    assert is_packet(legacy)


def test_report_of_a_valid_packet():
    text = packet_report(verify_packet(BASE.packet, anchors=anchors()).to_dict())
    assert text.splitlines()[0].endswith(": VERIFIED")
    assert "authenticity valid (record: server_key_registry; checkpoint: server_key_registry)" in text
    assert "[ok  ] audit_chain.inclusion_proof" in text
    assert "failed checks" not in text


def test_report_names_each_failed_check():
    packet = copy.deepcopy(BASE.packet)
    packet["execution_receipts"][1]["execution_status"] = "failed"
    packet["packet_manifest"]["components"]["outcome_records"] = 5
    packet["decision_record"]["action"] = "apply_bigger_discount"
    packet["audit_chain"]["checkpoint"]["signature"]["signature"] = "A" * 86
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    result = verify_packet(packet, anchors=anchors()).to_dict()
    text = packet_report(result)
    assert "NOT VERIFIED" in text.splitlines()[0]
    assert result["failed_checks"]
    for name in result["failed_checks"]:
        assert f"  {name}" in text, name
    assert "execution_receipts[1].execution_hash: expected" in text
    assert "packet_manifest: components.outcome_records is 5, the packet has 2" in text
    assert "record.record_hash: expected" in text
    assert "[FAIL] audit_chain.checkpoint_signature" in text


def test_report_without_trust_anchors():
    text = packet_report(verify_packet(BASE.packet).to_dict())
    assert "authenticity NOT PROVEN (record: no trusted key; checkpoint: no trusted key)" in text
    assert "[skip] audit_chain.checkpoint_signature" in text
    assert "notes:" in text
