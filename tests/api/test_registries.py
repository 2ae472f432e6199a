"""Registries and readiness: receipt keys (rotation keeps old records verifying), policy bundles,
rulebook metadata lookups, status, schemas."""

from __future__ import annotations

import hashlib

import pytest

from gate.keys.signing import rotate_keyring
from gate.protocol.canonical import sha256_hex

pytestmark = pytest.mark.usefixtures("backend")


def decide(client, key, body):
    return client.post("/api/decide", json=body, headers={"x-api-key": key}).json


def test_rotation_keeps_old_records_verifying(make_app, gate_env, api_key, sample_request):
    old_app = make_app()
    old_record = decide(old_app.test_client(), api_key, sample_request)
    rotate_keyring(gate_env["GATE_SIGNING_KEY_FILE"], "2026-11-15T00:00:00.000Z")
    new_app = make_app()
    client = new_app.test_client()
    registry = client.get("/api/decision/receipt-keys").json
    statuses = [(k["key_id"], k["status"]) for k in registry["keys"]]
    assert statuses[0][1] == "active" and statuses[1] == (old_record["receipt_key_id"], "retired")
    assert registry["keys"][1]["not_after"] == "2026-11-15T00:00:00.000Z"
    assert all("private" not in name for key in registry["keys"] for name in key)
    new_record = decide(client, api_key, sample_request)
    assert new_record["receipt_key_id"] != old_record["receipt_key_id"]
    for record in (old_record, new_record):
        result = client.post("/api/decision/verify", json={"record": record}).json
        assert result["verified"] is True, result["failed_checks"]
    fingerprint = registry["keys"][0]["public_key_fingerprint"]
    assert fingerprint == hashlib.sha256(registry["keys"][0]["public_key"].encode()).hexdigest()


def test_policy_bundles_registry_and_hash_lookup(client, api_key, sample_request, sample_rulebook):
    body = client.get("/api/decision/policy-bundles").json
    published = {b["id"]: b for b in body["policy_bundles"]}
    assert published["pricing_exception"]["hash"] == sha256_hex(sample_rulebook)
    one = client.get(f"/api/decision/policy-bundles?hash={sha256_hex(sample_rulebook)}")
    assert one.status_code == 200 and one.json["policy_bundle"]["id"] == "pricing_exception"
    record = decide(client, api_key, sample_request)
    attested = client.get(f"/api/decision/policy-bundles?hash={record['policy_bundle_hash']}").json
    assert attested["policy_bundle"]["kind"] == "rulebook_attestation_bundle"
    assert attested["policy_bundle"]["rulebook_hash"] == record["rulebook"]["hash"]
    assert client.get("/api/decision/policy-bundles?hash=zz").status_code == 400


def test_rulebook_lookup_by_hash_or_pair_never_returns_the_body(client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    headers = {"x-api-key": api_key}
    by_hash = client.get(f"/api/decision/rulebooks?hash={record['rulebook']['hash']}", headers=headers)
    by_pair = client.get("/api/decision/rulebooks?rulebook_id=pricing_exception&version=2026-11-01", headers=headers)
    assert by_hash.status_code == by_pair.status_code == 200
    assert by_hash.json == by_pair.json
    metadata = by_hash.json["rulebook"]
    assert by_hash.json["ok"] is True
    assert metadata["hash"] == record["rulebook"]["hash"]
    assert metadata["registry_attestation"] == record["rulebook_registry"]["registry_attestation"]
    assert "rules" not in str(by_hash.json) and metadata["snapshot"]["body_disclosed"] is False
    for query in ("", "?rulebook_id=pricing_exception", "?version=1", f"?hash={record['rulebook']['hash']}&version=1"):
        assert client.get("/api/decision/rulebooks" + query, headers=headers).status_code == 400
    assert client.get("/api/decision/rulebooks?rulebook_id=pricing_exception&version=9", headers=headers).status_code == 404


def test_status_is_ready_and_reports_its_wiring(client):
    response = client.get("/api/decision/status")
    assert response.status_code == 200
    body = response.json
    assert body["status"] == "ready" and body["ok"] is True
    assert body["signing"]["receipt_signature_algorithm"] == "ed25519"
    assert body["rulebook_contract"]["schema_version"] == "rulebook_v1"
    assert body["ledger"]["ready"] is True and body["rate_limits"]["backend"] == "memory"


def test_status_is_503_with_the_same_shape_when_degraded(make_app, client, tmp_path):
    ready = client.get("/api/decision/status").json
    degraded_app = make_app({"GATE_SIGNING_KEY_FILE": str(tmp_path / "none.json")})
    response = degraded_app.test_client().get("/api/decision/status")
    assert response.status_code == 503
    assert set(response.json) == set(ready)
    assert response.json["status"] == "degraded" and response.json["problems"]


def test_schema_is_served_byte_for_byte(client):
    from gate.rulebook import schema_bytes, schema_hash

    response = client.get("/schemas/rulebook-v1.schema.json")
    assert response.data == schema_bytes()
    assert hashlib.sha256(response.data).hexdigest() == schema_hash()
    assert client.get("/schemas/..%2Fpyproject.toml").status_code == 404
    assert client.get("/schemas/missing.json").status_code == 404


def test_anchored_patterns_refuse_a_trailing_newline(client, api_key, sample_request):
    del sample_request["context"]["inputs"]
    sample_request["binding_mode"] = "trusted_adapter_facts_then_declarative_rulebook"
    sample_request["adapter"] = {"adapter_id": "crm_facts", "version": "1.0.0", "manifest_hash": "a" * 64 + "\n",
                                 "input": {}}
    body = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    assert body["error"] == "TRUSTED_ADAPTER_INVALID"
    assert {"field": "adapter.manifest_hash", "code": "invalid_value"}.items() <= body["errors"][0].items()
