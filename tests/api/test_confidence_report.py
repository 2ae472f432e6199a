"""GET /api/decision/policies/{policy_id}/confidence, `gate report confidence` and packet
intelligence over HTTP: the same numbers as the decide-time block, scoped, sealed, verified."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from gate.protocol.canonical import sha256_hex
from tests.cli_in_process import gate_in_process

pytestmark = pytest.mark.usefixtures("backend")
POLICY = "pricing_exception"


def decide(client, api_key, request_body, **inputs):
    body = copy.deepcopy(request_body)
    body["context"]["inputs"].update(inputs)
    response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    return response.json


def outcome(client, api_key, record, status):
    response = client.post(f"/api/decision/{record['decision_id']}/outcome",
                           json={"outcome_status": status, "action_executed": True,
                                 "decision_record_hash": record["record_hash"]},
                           headers={"x-api-key": api_key})
    assert response.status_code == 201, response.json


@pytest.fixture
def history(client, api_key, sample_request):
    records = [decide(client, api_key, sample_request) for _ in range(4)]
    for record, status in zip(records, ("succeeded", "succeeded", "failed", "pending"), strict=True):
        outcome(client, api_key, record, status)
    blocked = decide(client, api_key, sample_request, discount_percent=40)
    outcome(client, api_key, blocked, "succeeded")
    return records


def get(client, api_key, query=""):
    return client.get(f"/api/decision/policies/{POLICY}/confidence{query}", headers={"x-api-key": api_key})


def test_the_report_equals_the_decide_time_block(client, api_key, sample_request, history):
    block = decide(client, api_key, sample_request)["decision_confidence"]
    response = get(client, api_key, "?verdict=yes&action=apply_discount&policy_version=2026-11-01")
    assert response.status_code == 200, response.json
    report = response.json
    for name in ("score", "level", "similar_decisions", "policy_stability", "recommendation"):
        assert report[name] == block[name], name
    assert report["decision_confidence_version"] == "decision_confidence_v1"
    assert report["confidence_hash"] == sha256_hex({k: v for k, v in report.items() if k != "confidence_hash"})
    assert report["based_on"]["successes"] == 2 and report["based_on"]["failures"] == 1
    assert report["sample"]["latest_outcome_counts"] == {"failed": 1, "pending": 1, "succeeded": 2}
    pooled = get(client, api_key).json  # verdicts and actions pooled
    assert pooled["similar_decisions"] == 4
    assert {(b["verdict"], b["similar_decisions"]) for b in pooled["buckets"]} == {("yes", 3), ("no", 1)}


@pytest.mark.parametrize("query", ["?verdict=maybe", "?min_sample=0", "?limit=abc", "?threshold=0.5",
                                   "?action=" + "a" * 200, "?policy_version="])
def test_bad_queries_are_refused(client, api_key, query):
    response = get(client, api_key, query)
    assert response.status_code == 400 and response.json["error"] == "REQUEST_INVALID"


def test_keys_and_scopes(client, api_key, issue_key, history):
    unauthorized = client.get(f"/api/decision/policies/{POLICY}/confidence")
    assert unauthorized.status_code == 401
    assert unauthorized.json["error"] == "SVC_POLICY_CONFIDENCE_UNAUTHORIZED"
    other = get(client, issue_key(scope="tenant_b")["api_key"]).json
    assert other["similar_decisions"] == 0 and other["sample"]["decisions_considered"] == 0


def test_the_cli_prints_the_same_report(client, api_key, gate_env, history):
    """The JSON report is read in this process (`tests.cli_in_process`); the text one from a real
    process, as an operator's shell runs it."""
    api = get(client, api_key, "?verdict=yes&action=apply_discount").json
    done = gate_in_process(["report", "confidence", "--policy", POLICY, "--scope", "tenant_a", "--verdict", "yes",
                            "--action", "apply_discount", "--json"], gate_env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == api
    text = subprocess.run(
        [sys.executable, "-c", "import sys; from gate_cli.main import main; sys.exit(main(sys.argv[1:]))",
         "report", "confidence", "--policy", POLICY, "--scope", "tenant_a"],
        env=gate_env | {"PATH": "/usr/bin:/bin"}, capture_output=True, text=True, timeout=120)
    assert text.returncode == 0 and api["confidence_hash"] not in text.stdout  # pooled: another report
    assert "Confidence" in text.stdout and "policy_stability" in text.stdout


def test_packets_carry_the_policy_intelligence(client, api_key, history):
    record = history[0]
    response = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    packet = response.json
    sections = packet["policy_intelligence"]
    assert set(sections) == {"effectiveness", "anomalies", "confidence"}
    assert packet["packet_manifest"]["components"]["intelligence_reports"] == 3
    # The same reports as the endpoints serve (default parameters; confidence for the record's bucket).
    effectiveness = client.get(f"/api/decision/policies/{POLICY}/effectiveness", headers={"x-api-key": api_key}).json
    assert sections["effectiveness"] == effectiveness
    confidence = get(client, api_key, f"?verdict=yes&action=apply_discount&policy_version={record['policy_version']}")
    assert sections["confidence"] == confidence.json
    verified = client.post("/api/decision/packet/verify", json={"packet": packet}).json
    assert verified["verified"] is True, verified["failed_checks"]
    # A changed number is caught even when the packet hash is recomputed.
    packet["policy_intelligence"]["confidence"]["score"] = 0.99
    packet["packet_hash"] = sha256_hex({k: v for k, v in packet.items() if k != "packet_hash"})
    tampered = client.post("/api/decision/packet/verify", json={"packet": packet}).json
    assert tampered["verified"] is False
    assert "policy_intelligence.confidence.confidence_hash" in tampered["failed_checks"]
    plain = client.get(f"/api/decision/{record['decision_id']}/packet?include_intelligence=false",
                       headers={"x-api-key": api_key}).json
    assert "policy_intelligence" not in plain
