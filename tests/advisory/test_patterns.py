"""`GET /api/decision/policy-patterns` over HTTP, and every pattern's templates through the real
decide, outcome and CRM-sync routes."""

from __future__ import annotations

import json

import pytest

from gate.protocol.canonical import sha256_hex
from gate.rulebook.patterns import load_patterns, pattern_hash_valid

PATTERN_IDS = ["pricing_exception", "refund_review", "agent_action_gate", "crm_writeback_gate"]
FIELDS = {"decision_pattern_version", "pattern_id", "name", "version", "category", "status", "summary", "policy_id",
          "recommended_policy_version", "tags", "use_cases", "required_context_fields", "evidence_codes",
          "decision_request_template", "outcome_template", "crm_sync_template", "sdk_examples", "pattern_hash"}


def test_the_registry_lists_the_four_patterns_with_the_reference_fields(client):
    response = client.get("/api/decision/policy-patterns")
    assert response.status_code == 200
    body = response.json
    assert body["ok"] is True and body["decision_pattern_registry_version"] == "decision_pattern_registry_v1"
    assert [p["pattern_id"] for p in body["patterns"]] == PATTERN_IDS and body["count"] == 4
    for pattern in body["patterns"]:
        assert set(pattern) == FIELDS
        assert pattern["decision_pattern_version"] == "decision_pattern_v1"
        assert pattern["pattern_hash"] == sha256_hex({k: v for k, v in pattern.items() if k != "pattern_hash"})
        rulebook = pattern["decision_request_template"]["rulebook"]
        assert pattern["policy_id"] == rulebook["rulebook_id"]
        assert pattern["recommended_policy_version"] == rulebook["version"]
        assert set(pattern["evidence_codes"]) == {r["outcome"]["reason_code"] for r in rulebook["rules"]} | {
            rulebook["default_outcome"]["reason_code"]}
        for name in rulebook["input_schema"]["required"]:
            assert f"context.inputs.{name}" in pattern["required_context_fields"]
        assert json.loads(pattern["sdk_examples"]["request_json"]) == pattern["decision_request_template"]


def test_a_tampered_pattern_no_longer_matches_its_hash(client):
    pattern = client.get("/api/decision/policy-patterns?pattern_id=refund_review").json["policy_pattern"]
    assert pattern_hash_valid(pattern)
    pattern["recommended_policy_version"] = "2026-05-01"
    assert not pattern_hash_valid(pattern)


@pytest.mark.parametrize("wanted, expected", [("refund_review", "refund_review"), ("refund_approval", "refund_review"),
                                              ("crm_writeback_gate", "crm_writeback_gate")])
def test_lookup_by_pattern_id_or_policy_id(client, wanted, expected):
    response = client.get(f"/api/decision/policy-patterns?pattern_id={wanted}")
    assert response.status_code == 200
    assert response.json["policy_pattern"]["pattern_id"] == expected
    assert "patterns" not in response.json


def test_the_tag_filter(client):
    body = client.get("/api/decision/policy-patterns?tag=refund").json
    assert [p["pattern_id"] for p in body["patterns"]] == ["refund_review"] and body["count"] == 1
    assert client.get("/api/decision/policy-patterns?tag=nothing_has_this").json["count"] == 0
    assert client.get("/api/decision/policy-patterns?pattern_id=refund_review&tag=refund").status_code == 200
    assert client.get("/api/decision/policy-patterns?pattern_id=refund_review&tag=crm").status_code == 404


@pytest.mark.parametrize("query, status, code", [
    ("pattern_id=unknown_pattern", 404, "POLICY_PATTERN_NOT_FOUND"),
    ("pattern_id=", 400, "REQUEST_INVALID"),
    ("pattern_id=a%20b", 400, "REQUEST_INVALID"),
    ("pattern_id=a&pattern_id=b", 400, "REQUEST_INVALID"),
    ("limit=3", 400, "REQUEST_INVALID"),
    ("tag=" + "x" * 121, 400, "REQUEST_INVALID"),
])
def test_bad_lookups(client, query, status, code):
    response = client.get("/api/decision/policy-patterns?" + query)
    assert response.status_code == status
    assert response.json["error"] == code and response.json["c"] == "unclear"


def test_the_registry_is_public(client):
    assert client.get("/api/decision/policy-patterns", headers={"x-api-key": "wrong"}).status_code == 200


def _fill(template, record):
    text = json.dumps(template)
    for name in ("record_hash", "receipt_hash", "verdict", "action", "policy_id", "policy_version"):
        text = text.replace("{{" + name + "}}", str(record[name]))
    return json.loads(text)


@pytest.mark.parametrize("pattern_id", PATTERN_IDS)
def test_every_template_is_a_valid_request_through_the_real_routes(client, api_key, pattern_id):
    pattern = client.get(f"/api/decision/policy-patterns?pattern_id={pattern_id}").json["policy_pattern"]
    headers = {"x-api-key": api_key}
    response = client.post("/api/decide", json=pattern["decision_request_template"], headers=headers)
    assert response.status_code == 200, response.json
    record = response.json
    assert record["policy_id"] == pattern["policy_id"]
    assert record["policy_version"] == pattern["recommended_policy_version"]
    assert record["reason_code"] in pattern["evidence_codes"]
    assert record["verdict"] == "yes"  # each pattern's example is its approving path
    decision = record["decision_id"]
    outcome = client.post(f"/api/decision/{decision}/outcome", json=_fill(pattern["outcome_template"], record),
                          headers=headers)
    assert outcome.status_code == 201, outcome.json
    sync = client.post(f"/api/decision/{decision}/crm-sync", json=_fill(pattern["crm_sync_template"], record),
                       headers=headers)
    assert sync.status_code == 201, sync.json


def test_the_registry_refuses_a_broken_pattern_file(tmp_path):
    from gate.rulebook.patterns import PATTERNS_FILE, PatternError

    (tmp_path / "patterns").mkdir()
    (tmp_path / "rulebooks").symlink_to(PATTERNS_FILE.parent.parent / "rulebooks")
    path = tmp_path / "patterns" / "policy-patterns.json"
    source = json.loads(PATTERNS_FILE.read_text())
    broken = json.loads(json.dumps(source))
    broken["patterns"][0]["rulebook_file"] = "missing.json"
    path.write_text(json.dumps(broken))
    with pytest.raises(PatternError, match="unreadable"):
        load_patterns(path)
    twice = json.loads(json.dumps(source))
    twice["patterns"].append(dict(twice["patterns"][0]))
    path.write_text(json.dumps(twice))
    load_patterns.__globals__["_load"].cache_clear()
    with pytest.raises(PatternError, match="listed twice"):
        load_patterns(path)
    unknown = json.loads(json.dumps(source))
    unknown["patterns"][1]["code"] = "return true"
    path.write_text(json.dumps(unknown))
    load_patterns.__globals__["_load"].cache_clear()
    with pytest.raises(PatternError, match="exactly the members"):
        load_patterns(path)
