"""Decision Packets over HTTP: export options and headers, verification, tampering, 503."""

from __future__ import annotations

import copy
import threading
from unittest import mock

import pytest
from sqlalchemy import text

from gate.keys.signing import rotate_keyring
from gate.protocol.canonical import sha256_hex

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def populated(client, api_key, sample_request):
    records = [client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json for _ in range(4)]
    record = records[1]
    url = f"/api/decision/{record['decision_id']}"
    headers = {"x-api-key": api_key}
    for index in range(3):
        client.post(url + "/execution", headers=headers, json={
            "execution_status": "executed", "external_ref": f"run-{index}",
            "decision_record_hash": record["record_hash"], "decision_receipt_hash": record["receipt_hash"]})
    client.post(url + "/outcome", headers=headers, json={"outcome_status": "succeeded", "observed_metrics": {"margin": 30}})
    client.post(url + "/crm-sync", headers=headers, json={"sync_status": "written", "crm_provider": "salesforce",
                                                          "crm_object_id": "006xx", "field_mapping": {"verdict": "Gate__c"}})
    return record


def export(client, api_key, record, query=""):
    return client.get(f"/api/decision/{record['decision_id']}/packet{query}", headers={"x-api-key": api_key})


def verify(client, packet, **extra):
    return client.post("/api/decision/packet/verify", json={"packet": packet, **extra}).json


def test_packet_exports_every_part_and_verifies(client, api_key, populated, sample_request):
    response = export(client, api_key, populated)
    assert response.status_code == 200
    packet = response.json
    assert response.headers["x-decision-packet-version"] == "decision_packet_v1"
    assert response.headers["x-decision-packet-hash"] == packet["packet_hash"]
    assert packet["packet_hash"] == sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    assert packet["record_hash"] == populated["record_hash"] and packet["receipt_hash"] == populated["receipt_hash"]
    assert "original_input" not in packet
    components = packet["packet_manifest"]["components"]
    assert (components["execution_receipts"], components["outcome_records"], components["crm_sync_records"]) == (3, 1, 1)
    assert [r["external_ref"] for r in packet["execution_receipts"]] == ["run-2", "run-1", "run-0"]
    chain = packet["audit_chain"]
    assert chain["record_position"] == 2 and chain["chain_size"] == 4
    assert chain["checkpoint"]["tree_size"] == 4
    result = verify(client, packet, input=sample_request)
    assert result["verified"] is True, result["failed_checks"]
    assert result["checks"]["audit_chain.inclusion_proof"] is True
    assert result["checks"]["audit_chain.checkpoint"] is True


def test_options_limits_and_input(client, api_key, populated, sample_request):
    packet = export(client, api_key, populated, "?include_input=true&execution_limit=2&chain_limit=1&include_chain=true").json
    assert packet["original_input"] == sample_request
    assert len(packet["execution_receipts"]) == 2
    manifest = packet["packet_manifest"]
    assert manifest["truncated"]["execution_receipts"] is True and manifest["totals"]["execution_receipts"] == 3
    assert len(packet["audit_chain"]["links"]) == 1
    assert verify(client, packet)["verified"] is True
    no_chain = export(client, api_key, populated, "?include_chain=false").json
    assert "audit_chain" not in no_chain and verify(client, no_chain)["verified"] is True
    for query in ("?execution_limit=0", "?outcome_limit=1001", "?chain_limit=x", "?include_input=maybe",
                  "?chain_limit=1&chain_limit=2"):
        bad = export(client, api_key, populated, query)
        assert bad.status_code == 400 and bad.json["error"] == "REQUEST_INVALID", query


@pytest.mark.parametrize(
    "mutate, check",
    [
        (lambda p: p["decision_record"].update(verdict="no"), "record"),
        (lambda p: p["execution_receipts"][0].update(execution_status="failed"), "execution_receipts"),
        (lambda p: p["outcome_records"][0].update(outcome_status="failed"), "outcome_records"),
        (lambda p: p["crm_sync_records"][0].update(crm_object_id="006yy"), "crm_sync_records"),
        (lambda p: p["audit_chain"]["links"][0].update(policy_version="forged"), "audit_chain.links"),
        (lambda p: p["audit_chain"]["inclusion_proof"]["proof"].__setitem__(0, "0" * 64), "audit_chain.inclusion_proof"),
        (lambda p: p["audit_chain"]["checkpoint"].update(root_hash="1" * 64), "audit_chain.checkpoint"),
        (lambda p: p.update(exported_at="2020-01-01T00:00:00.000Z"), "packet_hash"),
    ],
)
def test_tampering_is_named(client, api_key, populated, mutate, check):
    packet = copy.deepcopy(export(client, api_key, populated).json)
    mutate(packet)
    result = verify(client, packet)
    assert result["verified"] is False
    assert check in result["failed_checks"], result["failed_checks"]


def test_packets_keep_verifying_after_key_rotation(make_app, gate_env, client, api_key, populated):
    packet = export(client, api_key, populated).json
    rotate_keyring(gate_env["GATE_SIGNING_KEY_FILE"], "2026-11-20T00:00:00.000Z")
    rotated = make_app().test_client()
    assert verify(rotated, packet)["verified"] is True


def test_packet_scope_auth_and_not_found(client, issue_key, populated):
    stranger = issue_key("scope_b")["api_key"]
    assert export(client, stranger, populated).status_code == 404
    response = client.get(f"/api/decision/{populated['decision_id']}/packet")
    assert response.status_code == 401 and response.json["error"] == "SVC_API_UNAUTHORIZED"


def test_unreadable_source_is_503_never_partial(app, client, api_key, populated):
    engine = app.extensions["gate"].ledger.engine
    with engine.begin() as connection:
        connection.execute(text("ALTER TABLE merkle_nodes RENAME TO merkle_nodes_away"))
    try:
        response = export(client, api_key, populated)
    finally:
        with engine.begin() as connection:
            connection.execute(text("ALTER TABLE merkle_nodes_away RENAME TO merkle_nodes"))
    assert response.status_code == 503
    assert response.json["error"] == "PACKET_SOURCE_UNAVAILABLE" and response.json["c"] == "unclear"
    assert "decision_record" not in response.json


def test_packet_verify_endpoint_describes_and_refuses_bad_bodies(client):
    assert client.get("/api/decision/packet/verify").json["method"] == "POST"
    for body in ({}, {"packet": 1}, {"packet": {}, "extra": 1}, {"packet": {}, "input": 3}):
        response = client.post("/api/decision/packet/verify", json=body)
        assert response.status_code == 400 and response.json["error"] == "REQUEST_INVALID"


def test_a_receipt_written_while_a_packet_is_read_is_not_half_in_it(app, client, api_key, populated, sample_request):
    """The packet's receipt head and its receipt lists are read in one snapshot: an execution
    receipt committed between reading the head and reading the lists (forced here, from another
    thread, run to its commit, each time the list is read) is in neither, and the packet
    verifies. (Re-reading while the head moved, as before, gave up after three tries.)"""
    lifecycle = app.extensions["gate"].lifecycle
    original, raced = type(lifecycle).all_for, []
    url = f"/api/decision/{populated['decision_id']}"

    def a_receipt_first(self, kind, *args, **kwargs):
        if kind.list_name == "execution_receipts" and len(raced) < 3:  # each time the list is read
            answer: dict = {}
            writer = threading.Thread(target=lambda: answer.update(status=app.test_client().post(
                url + "/execution", headers={"x-api-key": api_key}, json={
                    "execution_status": "executed", "external_ref": f"run-mid-export-{len(raced)}",
                    "decision_record_hash": populated["record_hash"],
                    "decision_receipt_hash": populated["receipt_hash"]}).status_code))
            writer.start()
            writer.join(30)
            raced.append(answer["status"])
        return original(self, kind, *args, **kwargs)

    with mock.patch.object(type(lifecycle), "all_for", a_receipt_first):
        packet = export(client, api_key, populated).json
    assert raced and set(raced) <= {200, 201}
    result = verify(client, packet, input=sample_request)
    assert result["verified"] is True, result["failed_checks"]
    assert packet["packet_manifest"]["components"]["execution_receipts"] == 3  # as of the head it was read under
    assert [r["external_ref"] for r in packet["execution_receipts"]] == ["run-2", "run-1", "run-0"]
    later = export(client, api_key, populated).json
    assert later["packet_manifest"]["components"]["execution_receipts"] == 3 + len(raced)
    assert verify(client, later, input=sample_request)["verified"] is True
