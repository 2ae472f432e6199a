"""Reads and verification over HTTP: stored record, hosted verify, exported verify, tampering."""

from __future__ import annotations

import copy
import threading
from unittest import mock

import pytest

from gate.keys.signing import Ed25519Key

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def record(client, api_key, sample_request):
    return client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json


def test_get_decision_returns_the_full_stored_record(client, api_key, record):
    response = client.get(f"/api/decision/{record['decision_id']}", headers={"x-api-key": api_key})
    assert response.status_code == 200
    assert response.json == record
    assert response.headers["x-decision-record-hash"] == record["record_hash"]
    minimal = client.get(f"/api/decision/{record['decision_id']}?response_view=minimal", headers={"x-api-key": api_key})
    assert "integrity" not in minimal.json and minimal.json["record_hash"] == record["record_hash"]
    assert client.get("/api/decision/dec_unknown", headers={"x-api-key": api_key}).status_code == 404


def test_exported_record_verifies_with_the_gates_keys(client, record, sample_request):
    response = client.post("/api/decision/verify", json={"record": record, "input": sample_request})
    assert response.status_code == 200
    result = response.json
    assert result["verified"] is True
    assert result["integrity_valid"] is True and result["authenticity_valid"] is True
    assert result["key_source"] == "server_key_registry"
    assert result["checks"]["record_hash"] is True
    assert result["checks"]["receipt_hash"] is True
    assert result["checks"]["receipt_signature"] is True
    assert result["checks"]["input_hash"] is True
    assert result["failed_checks"] == []


@pytest.mark.parametrize(
    "mutate, failed",
    [
        (lambda r: r.update(verdict="no"), "record_hash"),
        (lambda r: r.update(action="apply_discount_25_percent"), "record_hash"),
        (lambda r: r["action_binding"].update(resource="sub_9999"), "record_hash"),
        (lambda r: r.update(receipt_hash="0" * 64), "receipt_hash"),
        (lambda r: r.update(receipt_signature="ed25519:" + "A" * 86), "receipt_signature"),
        (lambda r: r["rulebook_attestation"]["bundle"]["outcome"].update(verdict="no"), "rulebook_attestation_bundle_hash"),
    ],
)
def test_tampered_exports_fail_on_the_named_check(client, record, mutate, failed):
    tampered = copy.deepcopy(record)
    mutate(tampered)
    result = client.post("/api/decision/verify", json={"record": tampered}).json
    assert result["verified"] is False
    assert failed in result["failed_checks"]


@pytest.mark.parametrize("member", ["evaluation", "engine", "integrity", "decision_url", "source_hash"])
def test_deleting_or_renaming_an_unhashed_member_is_named(client, record, member):
    dropped = {k: v for k, v in record.items() if k != member}
    result = client.post("/api/decision/verify", json={"record": dropped}).json
    assert result["verified"] is False and "record_members" in result["failed_checks"]
    renamed = dict(dropped, **{member + "_x": record[member]})
    assert "record_members" in client.post("/api/decision/verify", json={"record": renamed}).json["failed_checks"]


def test_wrong_input_fails_input_hash(client, record, sample_request):
    sample_request["context"]["inputs"]["discount_percent"] = 5
    result = client.post("/api/decision/verify", json={"record": record, "input": sample_request}).json
    assert result["verified"] is False
    assert result["failed_checks"] == ["input_hash", "rulebook_attestation_input_hash"]


def test_a_key_in_the_request_is_never_a_trust_anchor(make_app, client, api_key, sample_request):
    # A record signed by some other gate's key, with that key offered in the request.
    from gate.keys.signing import receipt_signer_for
    from gate.protocol.records import seal_record

    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    forged_key = Ed25519Key.generate()
    forged = seal_record(record, receipt_signer=receipt_signer_for(forged_key))
    result = client.post("/api/decision/verify", json={"record": forged, "public_key": forged_key.public_key_pem}).json
    assert result["verified"] is False
    assert result["authenticity_valid"] is False
    assert result["key_source"] is None


def test_hosted_verify_of_a_stored_decision(client, api_key, record):
    for method in ("get", "post"):
        response = getattr(client, method)(f"/api/decision/{record['decision_id']}/verify", headers={"x-api-key": api_key})
        assert response.status_code == 200
        body = response.json
        assert body["verified"] is True, body["failed_checks"]
        assert body["source"] == "ledger"
        assert body["checks"]["input_hash"] is True
        assert body["checks"]["ledger_record_hash"] is True


def test_hosted_verify_of_a_supplied_record_must_match_the_ledger(client, api_key, record):
    url = f"/api/decision/{record['decision_id']}/verify"
    same = client.post(url, json={"record": record}, headers={"x-api-key": api_key}).json
    assert same["verified"] is True and same["checks"]["matches_ledger"] is True
    other = copy.deepcopy(record)
    other["verdict"] = "no"
    result = client.post(url, json={"record": other}, headers={"x-api-key": api_key}).json
    assert result["verified"] is False
    assert {"record_hash", "matches_ledger"} <= set(result["failed_checks"])


def test_editing_a_stored_row_is_reported_by_hosted_verify(app, client, api_key, record):
    import json

    from sqlalchemy import update

    from gate.ledger.tables import decisions

    stored = copy.deepcopy(record)
    stored["verdict"] = "no"
    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        connection.execute(update(decisions).where(decisions.c.decision_id == record["decision_id"])
                           .values(record_json=json.dumps(stored)))
    body = client.get(f"/api/decision/{record['decision_id']}/verify", headers={"x-api-key": api_key}).json
    assert body["verified"] is False
    assert "record_hash" in body["failed_checks"] and "ledger_record_hash" in body["failed_checks"]


@pytest.mark.parametrize(
    "payload, code",
    [
        (b"{not json", "JSON_INVALID"),
        (b"[]", "REQUEST_INVALID"),
        (b'{"record": 1}', "REQUEST_INVALID"),
        (b'{"input": {}}', "REQUEST_INVALID"),
        (b'{"record": {}, "extra": 1}', "REQUEST_INVALID"),
        (b'{"record": {"a": NaN}}', "JSON_NON_FINITE_NUMBER"),
    ],
)
def test_malformed_verify_requests_are_400(client, payload, code):
    response = client.post("/api/decision/verify", data=payload, content_type="application/json")
    assert response.status_code == 400
    assert response.json["error"] == code and response.json["c"] == "unclear"


def test_verify_describes_itself(client):
    body = client.get("/api/decision/verify").json
    assert body["method"] == "POST" and "record" in body["request"]


OUTCOME = {"outcome_status": "succeeded", "action_executed": True, "observed_metrics": {"margin": 31.5}}


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("race", ["a decide before the newest link is read", "an outcome before the receipt head is read"])
def test_hosted_verify_reads_the_ledger_as_of_one_instant(app, api_key, sample_request, race):
    """Hosted verify compares a chain head with the chain's newest link, and a decision's receipts
    with their head. A write committed between two such reads (forced here, from another thread,
    run to its commit) must not fail a check of a ledger that is whole."""
    client = app.test_client()
    headers = {"x-api-key": api_key}
    record = client.post("/api/decide", json=sample_request, headers=headers).json
    decision_id = record["decision_id"]
    assert client.post(f"/api/decision/{decision_id}/outcome", headers=headers,
                       json={**OUTCOME, "decision_record_hash": record["record_hash"]}).status_code in (200, 201)
    ledger, lifecycle = app.extensions["gate"].ledger, app.extensions["gate"].lifecycle
    if race.startswith("a decide"):
        owner, name = type(ledger), "chain_last_link"
        def write():
            return app.test_client().post("/api/decide", json=sample_request, headers=headers)
    else:
        owner, name = type(lifecycle.store), "receipt_head"
        def write():
            return app.test_client().post(f"/api/decision/{decision_id}/outcome", headers=headers, json={
                **OUTCOME, "outcome_status": "failed", "decision_record_hash": record["record_hash"]})
    original, raced = getattr(owner, name), []

    def a_write_first(self, *args):
        if not raced:
            answer: dict = {}
            writer = threading.Thread(target=lambda: answer.update(status=write().status_code))
            writer.start()
            writer.join(30)
            raced.append(answer["status"])
        return original(self, *args)

    with mock.patch.object(owner, name, a_write_first):
        body = client.get(f"/api/decision/{decision_id}/verify", headers=headers).json
    assert raced and raced[0] in (200, 201)
    assert body["verified"] is True, (body["failed_checks"], body["chain_failures"], body["receipt_failures"])
    again = client.get(f"/api/decision/{decision_id}/verify", headers=headers).json
    assert again["verified"] is True, again["failed_checks"]
