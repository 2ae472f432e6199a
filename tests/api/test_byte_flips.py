"""Tamper evidence at the byte level: flip one bit of any byte of an exported record or packet.

Either the text no longer parses as strict JSON (an unreadable export, refused before any
verdict), or verification fails and names at least one check. Nothing flipped ever verifies.
"""

from __future__ import annotations

import json
import random

import pytest

from gate.packets import verify_packet
from gate.protocol.canonical import CanonicalJSONError, parse_strict
from gate.verify import verify_record


def _flips(data: bytes, positions):
    for position in positions:
        flipped = bytearray(data)
        flipped[position] ^= 0x01
        yield position, bytes(flipped)


def _outcome(verify, data: bytes, anchors):
    try:
        document = parse_strict(data)
    except CanonicalJSONError:
        return "unparseable", []
    if not isinstance(document, dict):
        return "unparseable", []
    result = verify(document, anchors=anchors)
    return ("verified" if result.verified else "failed"), list(result.failed_checks)


def test_every_byte_of_a_record(app, client, api_key, sample_request):
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    anchors = app.extensions["gate"].signing.trust_anchors()
    data = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode()
    assert verify_record(parse_strict(data), anchors=anchors).verified
    for position, flipped in _flips(data, range(len(data))):
        outcome, failed = _outcome(verify_record, flipped, anchors)
        assert outcome != "verified", (position, data[max(0, position - 30):position + 30])
        assert outcome == "unparseable" or failed, position


@pytest.mark.slow
def test_sampled_bytes_of_a_packet(app, client, api_key, sample_request):
    records = [client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json for _ in range(5)]
    record = records[1]
    for status in ("executed", "reverted"):
        client.post(f"/api/decision/{record['decision_id']}/execution", headers={"x-api-key": api_key}, json={
            "execution_status": status, "decision_record_hash": record["record_hash"],
            "decision_receipt_hash": record["receipt_hash"]})
    client.post(f"/api/decision/{record['decision_id']}/outcome", headers={"x-api-key": api_key},
                json={"outcome_status": "succeeded"})
    packet = client.get(f"/api/decision/{record['decision_id']}/packet?include_input=true",
                        headers={"x-api-key": api_key}).json
    anchors = app.extensions["gate"].signing.trust_anchors()
    data = json.dumps(packet, ensure_ascii=False, separators=(",", ":")).encode()
    assert verify_packet(parse_strict(data), anchors=anchors).verified
    positions = random.Random(20261121).sample(range(len(data)), min(len(data), 2500))
    for position, flipped in _flips(data, positions):
        outcome, failed = _outcome(verify_packet, flipped, anchors)
        assert outcome != "verified", (position, data[max(0, position - 30):position + 30])
        assert outcome == "unparseable" or failed, position
