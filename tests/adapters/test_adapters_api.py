"""Trusted adapters through HTTP: the three shipped adapters end to end, the public registry, the
record and attestation lineage, the snapshot's adapter dependency, and every TRUSTED_ADAPTER_* error
(each produced by a test adapter that misbehaves on purpose), none of which stores anything."""

from __future__ import annotations

import copy
import hashlib
import json

import pytest

from gate import vocabulary as C
from gate.keys.signing import raw_public_key_from_pem
from gate.protocol.attestation import verify_hash_text_signature
from gate.protocol.canonical import sha256_hex
from tests.adapters.support import (
    ADAPTER_MODE,
    ROOT,
    TEST_RULEBOOK,
    adapter_request,
    decide,
    generous_time_budget,
    register_test_adapters,
    sample,
)

LINEAGE_MEMBERS = {"manifest_version", "adapter_id", "version", "implementation_revision", "implementation_hash",
                   "manifest_hash", "input_hash", "output_hash", "execution_isolation", "capability_enforcement",
                   "execution_timeout_ms"}

EXPECTED = {
    "refund-window": ("yes", "APPROVE", "WITHIN_WINDOW",
                      {"days_since_purchase": 19, "within_window": True, "days_remaining": 11,
                       "request_before_purchase": False}),
    "pricing-margin": ("yes", "APPROVE", "MARGIN_OK",
                       {"net_price": 10200, "discount_amount": 1800, "margin_amount": 3200, "margin_pct": 31.37,
                        "below_cost": False}),
    "agent-action-risk": ("yes", "APPROVE", "RISK_ACCEPTABLE",
                          {"risk_score": 40, "risk_band": "medium",
                           "risk_factors": ["action_kind:refund", "amount", "environment:production"]}),
}


@pytest.fixture
def test_adapters(app):
    return register_test_adapters(app)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_adapter_decides_and_the_record_carries_the_lineage(client, api_key, name):
    body = sample(name)
    response = decide(client, api_key, body)
    assert response.status_code == 200, response.json
    record = response.json
    verdict, application_verdict, reason, derived = EXPECTED[name]
    assert (record["verdict"], record["application_verdict"], record["reason_code"]) == (verdict, application_verdict, reason)

    invocation = body["adapter"]
    lineage = record["trusted_adapter"]
    assert set(lineage) == LINEAGE_MEMBERS
    assert lineage["adapter_id"] == invocation["adapter_id"] and lineage["manifest_hash"] == invocation["manifest_hash"]
    assert lineage["input_hash"] == sha256_hex(invocation["input"])
    assert record["adapter_facts"] == {**invocation["input"], **derived}
    assert lineage["output_hash"] == sha256_hex(record["adapter_facts"])
    assert lineage["execution_timeout_ms"] == 1000 and lineage["manifest_version"] == C.ADAPTER_MANIFEST_VERSION
    assert record["runtime_binding"]["binding_mode"] == ADAPTER_MODE
    assert record["runtime_binding"]["adapter_authority"] == "facts_only"

    bundle = record["rulebook_attestation"]["bundle"]
    assert bundle["trusted_adapter"] == lineage and bundle["input_hash"] == lineage["output_hash"]
    # Issue 8, item 8: engine equals the evaluator version, in the record and the bundle.
    assert record["engine"] == record["evaluator_version"] == bundle["engine"] == bundle["evaluator_version"] \
        == "svc_rulebook_v1"
    dependency = record["rulebook_registry"]["trusted_adapter_dependency"]
    assert dependency == {k: invocation[k] for k in ("adapter_id", "version", "manifest_hash")}

    verified = client.post("/api/decision/verify", json={"record": record, "input": body}).json
    assert verified["verified"] is True, verified["failed_checks"]
    assert verified["checks"]["trusted_adapter_lineage"] is True
    assert verified["checks"]["rulebook_registry_consistency"] is True
    stored = client.get(f"/api/decision/{record['decision_id']}", headers={"x-api-key": api_key}).json
    assert stored["trusted_adapter"] == lineage and stored["adapter_facts"] == record["adapter_facts"]


def test_direct_mode_engine_equals_evaluator_version(client, api_key, sample_request):
    record = decide(client, api_key, sample_request).json
    assert record["engine"] == record["evaluator_version"] == "svc_rulebook_v1"
    assert record["rulebook_attestation"]["bundle"]["engine"] == "svc_rulebook_v1"
    assert record["rulebook_attestation"]["bundle"]["trusted_adapter"] is None
    assert "trusted_adapter_dependency" not in record["rulebook_registry"]


def test_the_same_request_gives_the_same_facts_and_verdict(client, api_key):
    body = sample("pricing-margin")
    first, second = (decide(client, api_key, body).json for _ in range(2))
    assert first["decision_id"] != second["decision_id"]
    for name in ("trusted_adapter", "adapter_facts", "verdict", "output_hash", "policy_bundle_hash"):
        assert first[name] == second[name]


def test_tampered_adapter_facts_fail_verification(client, api_key):
    body = sample("refund-window")
    record = decide(client, api_key, body).json
    forged = copy.deepcopy(record)
    forged["adapter_facts"]["within_window"] = False
    result = client.post("/api/decision/verify", json={"record": forged, "input": body}).json
    assert result["verified"] is False
    assert {"record_hash", "trusted_adapter_lineage"} <= set(result["failed_checks"])
    other_input = copy.deepcopy(body)
    other_input["adapter"]["input"]["window_days"] = 10
    result = client.post("/api/decision/verify", json={"record": record, "input": other_input}).json
    assert "trusted_adapter_lineage" in result["failed_checks"] and "input_hash" in result["failed_checks"]


# ---------------------------------------------------------------------------- registry


def test_adapter_registry_lists_manifests_whose_hashes_recompute(client):
    body = client.get("/api/decision/adapters").json
    assert body["ok"] is True and body["trusted_adapter_registry_version"] == C.ADAPTER_REGISTRY_VERSION
    assert body["entry_point_group"] == "decision_gate.adapters"
    listed = {(m["adapter_id"], m["version"]): m for m in body["adapters"]}
    assert {("refund_window", "1.0.0"), ("pricing_margin", "1.0.0"), ("agent_action_risk", "1.0.0")} <= set(listed)
    for (adapter_id, _), manifest in listed.items():
        source = (ROOT / "gate" / "adapters" / "builtin" / f"{adapter_id}.py").read_bytes()
        assert manifest["implementation_hash"] == hashlib.sha256(source).hexdigest()
        hashed = {k: manifest[k] for k in ("manifest_version", "adapter_id", "version", "description",
                                           "implementation_revision", "implementation_hash", "input_schema",
                                           "output_schema")}
        assert manifest["manifest_hash"] == sha256_hex(hashed)
        assert manifest["input_schema"]["additionalProperties"] is False
        assert manifest["output_schema"]["additionalProperties"] is False
        assert manifest["execution"]["execution_timeout_ms"] == 1000 and manifest["origin"] == "builtin"
    for name in EXPECTED:  # the shipped sample requests pin the current manifests
        invocation = sample(name)["adapter"]
        assert invocation["manifest_hash"] == listed[(invocation["adapter_id"], invocation["version"])]["manifest_hash"]
        rulebook_file = json.loads((ROOT / "gate" / "data" / "rulebooks" / f"{name}.json").read_text())
        assert sample(name)["rulebook"] == rulebook_file


def test_adapter_registry_lookup_by_id_and_version(client, test_adapters):
    one = client.get("/api/decision/adapters?adapter_id=refund_window&version=1.0.0")
    assert one.status_code == 200 and one.json["adapter"]["adapter_id"] == "refund_window"
    by_id = client.get("/api/decision/adapters?adapter_id=test.probe").json
    assert by_id["count"] == 1 and by_id["adapters"][0]["origin"] == "registered"
    missing = client.get("/api/decision/adapters?adapter_id=refund_window&version=9.9.9")
    assert missing.status_code == 404 and missing.json["error"] == "TRUSTED_ADAPTER_NOT_FOUND"
    assert client.get("/api/decision/adapters?adapter_id=nope").status_code == 404
    for query in ("?version=1.0.0", "?adapter_id=refund_window&version=1"):
        bad = client.get("/api/decision/adapters" + query)
        assert bad.status_code == 400 and bad.json["error"] == "REQUEST_INVALID"
    assert client.get("/api/decision/status").json["registries"]["adapters"] == "/api/decision/adapters"


def test_rulebook_metadata_names_the_bound_adapter_dependency_and_its_signed_attestation(client, api_key):
    body = sample("agent-action-risk")
    record = decide(client, api_key, body).json
    headers = {"x-api-key": api_key}
    metadata = client.get(f"/api/decision/rulebooks?hash={record['rulebook']['hash']}", headers=headers).json["rulebook"]
    assert metadata["trusted_adapter_dependency"] == record["rulebook_registry"]["trusted_adapter_dependency"]
    assert metadata["adapter_dependency_registered"] is True
    assert metadata["snapshot"]["body_disclosed"] is False and "rules" not in json.dumps(metadata)
    attestation = metadata["registry_attestation"]
    assert attestation["status"] == "signed"
    entry = {k: v for k, v in metadata.items()
             if k not in ("registry_attestation", "snapshot", "adapter_dependency_registered")}
    assert attestation["attestation_hash"] == sha256_hex(entry)
    keys = {k["key_id"]: k for k in client.get("/api/decision/receipt-keys").json["keys"]}
    public = raw_public_key_from_pem(keys[attestation["key_id"]]["public_key"])
    assert verify_hash_text_signature(attestation["attestation_hash"], attestation["signature"], public)


def test_an_adapter_dependency_change_needs_a_new_rulebook_version(client, api_key, test_adapters):
    body = sample("refund-window")
    assert decide(client, api_key, body).status_code == 200
    direct = {k: v for k, v in body.items() if k not in ("adapter", "binding_mode")}
    direct["context"] = {**body["context"], "inputs": {"days_since_purchase": 3, "within_window": True,
                                                       "request_before_purchase": False}}
    refused = decide(client, api_key, direct)
    assert refused.status_code == 409 and refused.json["error"] == "RULEBOOK_VERSION_CONFLICT"
    assert refused.json["registered_adapter_dependency"]["adapter_id"] == "refund_window"
    assert refused.json["supplied_adapter_dependency"] is None
    renamed = copy.deepcopy(direct)
    renamed["rulebook"]["version"] = "2026-06-01-direct"
    assert decide(client, api_key, renamed).status_code == 200


def test_policy_bundles_mark_active_and_historical_versions(client):
    body = client.get("/api/decision/policy-bundles").json
    refund = [b for b in body["policy_bundles"] if b["id"] == "refund_approval"]
    assert [(b["version"], b["status"]) for b in refund] == [("2026-05-01", "historical"), ("2026-08-01", "active")]
    assert refund[0]["superseded_by"] == {"version": "2026-08-01", "hash": refund[1]["hash"]}
    assert body["active_count"] + body["historical_count"] == body["count"]
    assert {b["id"] for b in body["policy_bundles"] if b["status"] == "active"} >= {
        "refund_window_gate", "pricing_margin_gate", "agent_action_risk_gate"}


# ---------------------------------------------------------------------------- errors (nothing stored)


def _nothing_stored(client, api_key, key):
    """The idempotency key used by a refused request is still free: nothing was stored."""
    again = decide(client, api_key, sample("pricing-margin"), **{"x-idempotency-key": key})
    assert again.status_code == 200 and again.headers["x-idempotency-status"] == "created"


def _invocation(adapter, payload):
    return adapter_request(adapter, payload)


@pytest.mark.parametrize("case,status,code", [
    ("timeout", 504, "TRUSTED_ADAPTER_EXECUTION_TIMEOUT"),
    ("bad_output", 500, "TRUSTED_ADAPTER_OUTPUT_INVALID"),
    ("raise", 500, "TRUSTED_ADAPTER_OUTPUT_INVALID"),
    ("socket", 500, "TRUSTED_ADAPTER_CAPABILITY_DENIED"),
    ("write_file", 500, "TRUSTED_ADAPTER_CAPABILITY_DENIED"),
    ("subprocess", 500, "TRUSTED_ADAPTER_CAPABILITY_DENIED"),
    ("memory", 500, "TRUSTED_ADAPTER_CAPABILITY_DENIED"),
])
def test_misbehaving_adapters_fail_closed(app, client, api_key, test_adapters, tmp_path, case, status, code):
    misbehaving, _ = test_adapters
    if case != "timeout":
        generous_time_budget(app)  # the limit under test strikes, never the 1,000 ms budget first
    payload = {"mode": "spin" if case == "timeout" else case}
    if case == "write_file":
        payload["path"] = str(tmp_path / "leak")
    key = f"adapter-{case}"
    response = decide(client, api_key, adapter_request(misbehaving, payload), **{"x-idempotency-key": key})
    assert response.status_code == status and response.json["error"] == code
    assert response.json["c"] == "unclear" and response.json["adapter_id"] == "test.misbehaving"
    assert "record_hash" not in response.json
    assert not (tmp_path / "leak").exists()
    _nothing_stored(client, api_key, key)


def test_invocation_errors(client, api_key, test_adapters):
    misbehaving, _ = test_adapters
    good = adapter_request(misbehaving, {"mode": "ok"})
    assert decide(client, api_key, good).json["verdict"] == "yes"

    cases = []
    wrong_hash = copy.deepcopy(good)
    wrong_hash["adapter"]["manifest_hash"] = "b" * 64
    cases.append((wrong_hash, "TRUSTED_ADAPTER_MANIFEST_MISMATCH"))
    unknown = copy.deepcopy(good)
    unknown["adapter"]["version"] = "2.0.0"
    cases.append((unknown, "TRUSTED_ADAPTER_NOT_REGISTERED"))
    malformed = copy.deepcopy(good)
    malformed["adapter"]["code"] = "print(1)"
    cases.append((malformed, "TRUSTED_ADAPTER_INVALID"))
    bad_input = copy.deepcopy(good)
    bad_input["adapter"]["input"] = {"mode": "ok", "script": "x"}
    cases.append((bad_input, "TRUSTED_ADAPTER_INPUT_INVALID"))
    for index, (body, code) in enumerate(cases):
        response = decide(client, api_key, body, **{"x-idempotency-key": f"inv-{index}"})
        assert response.status_code == 422 and response.json["error"] == code, response.json
        _nothing_stored(client, api_key, f"inv-{index}")
    mismatch = decide(client, api_key, wrong_hash).json
    assert mismatch["expected_manifest_hash"] == "b" * 64
    assert mismatch["registered_manifest_hash"] == misbehaving.manifest_hash
    invalid = decide(client, api_key, bad_input).json
    assert invalid["errors"] == [{"field": "adapter.input.script", "code": "unknown_field",
                                  "message": "script is not declared by the adapter's closed schema"}]


def test_shipped_adapter_input_errors_are_per_field(client, api_key):
    body = sample("refund-window")
    body["adapter"]["input"] = {"purchase_date": "2026-02-30", "request_date": 20260520, "window_days": 0}
    response = decide(client, api_key, body)
    assert response.status_code == 422 and response.json["error"] == "TRUSTED_ADAPTER_INPUT_INVALID"
    assert [(e["field"], e["code"]) for e in response.json["errors"]] == [
        ("adapter.input.purchase_date", "invalid_value"), ("adapter.input.request_date", "invalid_type"),
        ("adapter.input.window_days", "invalid_value")]


def test_adapter_facts_missing_a_required_rulebook_input_need_input(client, api_key, test_adapters):
    _, probe = test_adapters
    rulebook = copy.deepcopy(TEST_RULEBOOK)
    rulebook["rulebook_id"] = "test_probe_gate"
    record = decide(client, api_key, adapter_request(probe, {}, rulebook)).json
    assert record["status"] == "needs_input" and record["missing_fields"] == ["result"]
    assert record["adapter_facts"]["env_count"] == 0


def test_gate_verify_offline_checks_the_adapter_lineage(client, api_key, tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    gate = str(Path(sys.executable).parent / "gate")
    body = sample("agent-action-risk")
    record = decide(client, api_key, body).json
    (tmp_path / "reg.json").write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    (tmp_path / "in.json").write_text(json.dumps(body))
    for name, content in (("ok.json", record), ("bad.json", {**record, "adapter_facts": {
            **record["adapter_facts"], "risk_band": "low"}})):
        (tmp_path / name).write_text(json.dumps(content))
    command = [gate, "verify", "--key-registry", str(tmp_path / "reg.json"), "--input", str(tmp_path / "in.json"),
               "--json"]
    good = subprocess.run(command[:2] + [str(tmp_path / "ok.json")] + command[2:], capture_output=True, text=True)
    assert good.returncode == 0 and json.loads(good.stdout)["checks"]["trusted_adapter_lineage"] is True
    bad = subprocess.run(command[:2] + [str(tmp_path / "bad.json")] + command[2:], capture_output=True, text=True)
    assert bad.returncode == 1 and "trusted_adapter_lineage" in json.loads(bad.stdout)["failed_checks"]
