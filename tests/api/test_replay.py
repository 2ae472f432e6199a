"""POST /api/decision/{id}/replay and /diff over HTTP: success, every listed failure, and no writes."""

from __future__ import annotations

import copy

import pytest
from sqlalchemy import text

from api.errors import ERROR_TABLE

TABLES = ("decisions", "chain_links", "chain_heads", "merkle_nodes", "rulebook_snapshots", "usage_counters")


def _h(key, **extra):
    return {"x-api-key": key, **extra}


def decide(client, key, body):
    response = client.post("/api/decide", json=body, headers=_h(key))
    assert response.status_code == 200, response.json
    return response.json


def ledger_state(app) -> dict:
    """Row counts of every table a decide writes, and the chain heads (the write fingerprint)."""
    with app.extensions["gate"].ledger.engine.connect() as connection:
        counts = {t: connection.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar() for t in TABLES}
        heads = connection.execute(text("SELECT chain_id, size, head_link_hash, merkle_root FROM chain_heads "
                                        "ORDER BY chain_id")).all()
        used = connection.execute(text("SELECT key_id, period, used FROM usage_counters ORDER BY key_id")).all()
    return {"counts": counts, "heads": [tuple(r) for r in heads], "usage": [tuple(r) for r in used]}


def sql(app, statement, **params):
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text(statement), params)


def assert_error(response, code):
    assert response.status_code == ERROR_TABLE[code][0], response.get_data(as_text=True)
    assert response.json["error"] == code and response.json["c"] == "unclear"
    assert "verdict" not in response.json and "decision" not in response.json


def test_historical_replay_matches_and_writes_nothing(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    before = ledger_state(app)
    response = client.post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key))
    assert response.status_code == 200, response.json
    body = response.json
    assert body["replay_mode"] == "historical" and body["replay_label"] == "historical_rulebook_replay_v1"
    assert body["replay_against"]["kind"] == "stored_rulebook_snapshot"
    assert body["replay_against"]["rulebook"]["hash"] == record["rulebook"]["hash"]
    assert body["replay_against"]["evaluator_version"] == record["evaluator_version"]
    assert body["compared_fields"] == ["verdict", "evidence", "record_hash", "policy_bundle_hash"]
    assert body["replay_status"] == "matched" and body["drift"] == []
    for name in body["compared_fields"]:
        assert body["compared"][name] == {"stored": record[name], "replayed": record[name], "matched": True}
    # The projection is the replayed record (full view by default): same hashes, never receipt-signed.
    assert body["decision"]["record_hash"] == record["record_hash"]
    assert body["decision"]["receipt_hash"] == record["receipt_hash"]
    assert "receipt_signature" not in body["decision"] and "audit_chain" not in body["decision"]
    assert response.headers["x-decision-id"] == record["decision_id"]
    for path, payload in (("replay", {"replay_mode": "current"}), ("diff", None), ("diff", {"input": {"x": 1}})):
        assert client.post(f"/api/decision/{record['decision_id']}/{path}", json=payload,
                           headers=_h(api_key)).status_code == 200
    assert ledger_state(app) == before


@pytest.mark.parametrize("view", ["minimal", "standard", "full"])
def test_replay_projects_the_requested_view(client, api_key, sample_request, view):
    record = decide(client, api_key, sample_request)
    stored_view = client.get(f"/api/decision/{record['decision_id']}?response_view={view}", headers=_h(api_key)).json
    by_body = client.post(f"/api/decision/{record['decision_id']}/replay", json={"response_view": view},
                          headers=_h(api_key)).json["decision"]
    by_header = client.post(f"/api/decision/{record['decision_id']}/replay",
                            headers=_h(api_key, **{"x-decision-response-view": view})).json["decision"]
    assert by_body == by_header
    # The stored view minus what only an issued record carries (signatures, chain, confidence).
    issued_only = {"receipt_key_id", "receipt_signature", "receipt_signature_algorithm",
                   "receipt_public_key_fingerprint", "audit_chain", "audit_chain_signature",
                   "decision_confidence", "confidence_hash", "confidence_signature"}
    assert set(by_body) == set(stored_view) - issued_only
    assert by_body["record_hash"] == record["record_hash"]


def test_another_scopes_decision_is_404_and_keys_are_required(client, api_key, issue_key, sample_request):
    record = decide(client, api_key, sample_request)
    other = issue_key(scope="tenant_b")["api_key"]
    for path in ("replay", "diff"):
        assert_error(client.post(f"/api/decision/{record['decision_id']}/{path}", headers=_h(other)),
                     "DECISION_NOT_FOUND")
        assert_error(client.post(f"/api/decision/dec_unknown/{path}", headers=_h(api_key)), "DECISION_NOT_FOUND")
        response = client.post(f"/api/decision/{record['decision_id']}/{path}")
        assert response.status_code == 401 and response.json["error"] == "SVC_API_UNAUTHORIZED"


@pytest.mark.parametrize("path,payload,code", [
    ("replay", {"replay_mode": "replay_everything"}, "REPLAY_MODE_INVALID"),
    ("replay", {"replay_mode": 1}, "REPLAY_MODE_INVALID"),
    ("diff", {"replay_mode": "historical"}, "REPLAY_MODE_INVALID"),
    ("replay", {"input": {"discount_percent": 30}}, "REPLAY_INPUT_OVERRIDE_FORBIDDEN"),
    ("replay", {"replay_mode": "historical", "input": {}}, "REPLAY_INPUT_OVERRIDE_FORBIDDEN"),
    ("diff", {"input": {"audit": {"trusted_adapter": {}}}}, "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN"),
    ("diff", {"input": {"items": list(range(10_001))}}, "EVALUATION_INPUT_TOO_LARGE"),
    ("replay", {"mode": "current"}, "REQUEST_INVALID"),
    ("replay", {"replay_mode": "current", "input": [1]}, "REQUEST_INVALID"),
    ("replay", {"response_view": "everything"}, "REQUEST_INVALID"),
    ("replay", [1, 2], "REQUEST_INVALID"),
])
def test_bad_replay_requests_are_refused_without_writing(app, client, api_key, sample_request, path, payload, code):
    record = decide(client, api_key, sample_request)
    before = ledger_state(app)
    assert_error(client.post(f"/api/decision/{record['decision_id']}/{path}", json=payload, headers=_h(api_key)), code)
    assert ledger_state(app) == before


def test_forbidden_override_names_its_paths(client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    response = client.post(f"/api/decision/{record['decision_id']}/diff",
                           json={"input": {"a": {"rulebook_attestation": 1}, "action": "x"}}, headers=_h(api_key))
    assert response.json["forbidden_fields"] == ["input.a.rulebook_attestation", "input.action"]


@pytest.mark.parametrize("statement", [
    "UPDATE decisions SET request_json = '' WHERE decision_id = :id",
    "UPDATE decisions SET request_json = '{\"mode\":\"rulebook\"}' WHERE decision_id = :id",
])
def test_unavailable_stored_input_is_422(app, client, api_key, sample_request, statement):
    record = decide(client, api_key, sample_request)
    sql(app, statement, id=record["decision_id"])
    for path, payload in (("replay", None), ("diff", None), ("diff", {"input": {"discount_percent": 1}})):
        assert_error(client.post(f"/api/decision/{record['decision_id']}/{path}", json=payload, headers=_h(api_key)),
                     "REPLAY_INPUT_UNAVAILABLE")


def test_missing_snapshot_is_409_unavailable_lineage(make_app, api_key, sample_request):
    app = make_app()
    record = decide(app.test_client(), api_key, sample_request)
    sql(app, "DELETE FROM rulebook_snapshots")
    client = make_app().test_client()  # a fresh process: no cached snapshot
    response = client.post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key))
    assert_error(response, "REPLAY_LINEAGE_UNAVAILABLE")
    assert response.json["lineage_component"] == "rulebook"
    response = client.post(f"/api/decision/{record['decision_id']}/diff", headers=_h(api_key))
    assert_error(response, "REPLAY_LINEAGE_UNAVAILABLE")


def test_snapshot_body_that_does_not_hash_to_the_record_is_409_mismatch(make_app, api_key, sample_request):
    app = make_app()
    record = decide(app.test_client(), api_key, sample_request)
    changed = copy.deepcopy(sample_request["rulebook"])
    changed["rules"][0]["rule_id"] = "block_deeper_discount"
    from gate.protocol.canonical import canonical_text

    sql(app, "UPDATE rulebook_snapshots SET body_json = :body", body=canonical_text(changed))
    response = make_app().test_client().post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key))
    assert_error(response, "REPLAY_LINEAGE_MISMATCH")
    assert response.json["lineage_component"] == "rulebook"


def test_records_of_another_evaluator_are_never_reinterpreted(make_app, api_key, sample_request):
    app = make_app()
    record = decide(app.test_client(), api_key, sample_request)
    sql(app, "UPDATE rulebook_snapshots SET evaluator_version = 'svc_rulebook_v0'")
    response = make_app().test_client().post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key))
    assert_error(response, "REPLAY_LINEAGE_UNAVAILABLE")
    assert response.json["lineage_component"] == "evaluator"
    assert response.json["expected"] == "svc_rulebook_v1" or response.json["actual"] == "svc_rulebook_v1"


def test_current_mode_and_diff_follow_the_scopes_current_rulebook(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    newer = copy.deepcopy(sample_request["rulebook"])
    newer["version"] = "2026-12-01"
    newer["rules"][2]["condition"]["all"][1]["value"] = 10  # 15 % is no longer approvable
    app.extensions["gate"].service.register_rulebook("tenant_a", newer)
    before = ledger_state(app)

    historical = client.post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key)).json
    assert historical["replay_status"] == "matched"
    assert historical["replay_against"]["rulebook"]["version"] == "2026-11-01"

    for path, payload in (("replay", {"replay_mode": "current"}), ("diff", None), ("diff", {"replay_mode": "current"})):
        body = client.post(f"/api/decision/{record['decision_id']}/{path}", json=payload, headers=_h(api_key)).json
        assert body["replay_mode"] == "current" and body["replay_against"]["kind"] == "current_rulebook"
        assert body["replay_against"]["rulebook"]["version"] == "2026-12-01"
        assert body["replay_status"] == "drifted"
        assert [d["field"] for d in body["drift"]] == ["verdict", "evidence", "record_hash", "policy_bundle_hash"]
        assert body["compared"]["verdict"] == {"stored": "yes", "replayed": "review", "matched": False}
        assert body["decision"]["policy_version"] == "2026-12-01"
        assert body["decision"]["rulebook_registry"]["version"] == "2026-12-01"
    assert ledger_state(app) == before


def test_current_replay_without_changes_matches(client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    body = client.post(f"/api/decision/{record['decision_id']}/diff", headers=_h(api_key)).json
    assert body["replay_status"] == "matched" and body["drift"] == []
    assert body["input_source"] == "stored"


def test_diff_with_an_input_override(client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    facts = dict(sample_request["context"]["inputs"], discount_percent=30)
    body = client.post(f"/api/decision/{record['decision_id']}/diff", json={"input": facts}, headers=_h(api_key)).json
    assert body["input_source"] == "override" and body["replay_status"] == "drifted"
    assert body["compared"]["verdict"]["replayed"] == "no"
    assert body["compared"]["evidence"]["replayed"] == ["DISCOUNT_ABOVE_CEILING"]
    assert body["decision"]["input_hash"] != record["input_hash"]
    # The override is the facts: the same facts as stored give the stored outcome.
    same = client.post(f"/api/decision/{record['decision_id']}/diff",
                       json={"input": sample_request["context"]["inputs"]}, headers=_h(api_key)).json
    assert same["compared"]["verdict"]["matched"] and same["compared"]["policy_bundle_hash"]["matched"]


def test_needs_input_decisions_replay(client, api_key, sample_request):
    body = copy.deepcopy(sample_request)
    del body["context"]["inputs"]["margin_percent"]
    record = decide(client, api_key, body)
    assert record["status"] == "needs_input"
    replayed = client.post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key)).json
    assert replayed["replay_status"] == "matched"
    assert replayed["decision"]["missing_fields"] == ["margin_percent"]


def test_replay_of_an_unsigned_gate_matches(make_app, api_key, sample_request):
    client = make_app({"GATE_SIGNING_KEY_FILE": "/nonexistent/keys.json"}, require_signing=False).test_client()
    record = decide(client, api_key, sample_request)
    assert record["rulebook_attestation"]["signature"]["status"] == "unsigned"
    body = client.post(f"/api/decision/{record['decision_id']}/replay", headers=_h(api_key)).json
    assert body["replay_status"] == "matched"
