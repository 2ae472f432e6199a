"""Policy report endpoints over HTTP on both ledgers: sealed reports from the live ledger equal to
the engines' result, caller scoping, opt-in benchmarks, parameter refusals, 401 / 403."""

from __future__ import annotations

import copy
import json

import pytest

from gate.ledger.reports import set_benchmark_opt_in
from gate.protocol.report_envelopes import verify
from workbench.dataset.load import from_ledger
from workbench.reports.policy import ReportParams, effectiveness_report

pytestmark = pytest.mark.usefixtures("backend")
POLICY = "pricing_exception"
BASE = f"/api/decision/policies/{POLICY}"


def _decide(client, key, sample, discount: float, margin: float) -> dict:
    body = copy.deepcopy(sample)
    body["context"]["inputs"].update(discount_percent=discount, margin_percent=margin)
    response = client.post("/api/decide", json=body, headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def _outcome(client, key, record, status: str) -> None:
    response = client.post(f"/api/decision/{record['decision_id']}/outcome", headers={"x-api-key": key},
                           json={"outcome_status": status, "action_executed": True,
                                 "decision_record_hash": record["record_hash"]})
    assert response.status_code == 201, response.json


def _seed(client, key, sample, n: int, statuses: list[str]) -> list[dict]:
    records = []
    for i in range(n):
        thin = i % 3 == 0  # margin below 20: rule review_thin_margin
        record = _decide(client, key, sample, discount=10 + i % 5, margin=15 if thin else 30)
        status = "failed" if thin else statuses[i % len(statuses)]
        _outcome(client, key, record, status)
        records.append(record)
    return records


def test_effectiveness_and_anomalies_from_the_live_ledger(app, client, issue_key, sample_request):
    key = issue_key("tenant_a")["api_key"]
    _seed(client, key, sample_request, 12, ["succeeded", "succeeded", "pending"])
    response = client.get(BASE + "/effectiveness", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    report = response.json
    assert verify("effectiveness", report)
    assert report["decision_effectiveness_report_version"] == "decision_effectiveness_report_v1"
    assert report["parameters"] == {"policy_version": None, "limit": 1000, "min_sample": 10}
    assert report["sample"]["decisions_considered"] == 12
    assert report["sample"]["latest_outcome_counts"] == {"failed": 4, "pending": 4, "succeeded": 4}
    assert report["effectiveness_score"] == 0.5 and report["recommendation"] == "insufficient_data"
    # the same engines over the same loader give the same report, hash included
    frames = from_ledger(app.extensions["gate"].ledger, "tenant_a", POLICY, limit=1000)
    assert effectiveness_report(frames, POLICY, ReportParams()) == report
    limited = client.get(BASE + "/effectiveness?limit=5&min_sample=2", headers={"x-api-key": key}).json
    assert limited["sample"]["decisions_considered"] == 5 and limited["parameters"]["limit"] == 5

    anomalies = client.get(BASE + "/anomalies?min_sample=3&threshold=0.2&max_items=3",
                           headers={"x-api-key": key}).json
    assert verify("anomaly", anomalies) and anomalies["decision_anomaly_report_version"] == "decision_anomaly_report_v1"
    found = {a["anomaly_id"]: a for a in anomalies["anomalies"]}
    thin = found["failure_rate_shift:matched_rule_id:review_thin_margin"]
    assert thin["observed"]["failures"] == 4 and len(thin["decision_ids"]) == 4
    assert anomalies["recommendation"] in ("monitor", "investigate")


def test_reports_only_ever_read_the_callers_scope(client, issue_key, sample_request):
    a, b = issue_key("tenant_a")["api_key"], issue_key("tenant_b")["api_key"]
    _seed(client, a, sample_request, 6, ["succeeded"])
    for kind in ("effectiveness", "anomalies", "benchmarks"):
        other = client.get(f"{BASE}/{kind}", headers={"x-api-key": b})
        assert other.status_code == 200
        assert other.json["sample"]["decisions_considered"] == 0
        assert other.json["sample"]["latest_outcome_counts"] == {}
    nowhere = client.get("/api/decision/policies/never_seen/effectiveness", headers={"x-api-key": b}).json
    assert {k: v for k, v in nowhere.items() if k not in ("policy_id", "effectiveness_hash")} == \
        {k: v for k, v in client.get(f"{BASE}/effectiveness", headers={"x-api-key": b}).json.items()
         if k not in ("policy_id", "effectiveness_hash")}


def test_benchmarks_compare_only_opted_in_scopes(app, client, issue_key, sample_request):
    ledger = app.extensions["gate"].ledger
    keys = {scope: issue_key(scope)["api_key"] for scope in ("own", "peer_x", "peer_y", "peer_z")}
    mixes = {"own": ["succeeded"], "peer_x": ["failed"], "peer_y": ["succeeded", "failed"],
             "peer_z": ["succeeded", "succeeded", "failed"]}
    for scope, key in keys.items():
        _seed(client, key, sample_request, 10, mixes[scope])
    url = BASE + "/benchmarks"
    lonely = client.get(url, headers={"x-api-key": keys["own"]}).json
    assert verify("benchmark", lonely) and lonely["decision_benchmark_version"] == "decision_benchmark_v1"
    assert lonely["cross_customer"]["status"] == "not_opted_in" and lonely["cross_customer"]["percentiles"] == {}
    assert lonely["your_metrics"]["success_rate"] == round(6 / 10, 4)
    for scope in keys:
        set_benchmark_opt_in(ledger, scope, True, "2026-11-22T00:00:00.000Z")
    shared = client.get(url, headers={"x-api-key": keys["own"]})
    assert shared.status_code == 200
    body = shared.json
    assert body["cross_customer"]["status"] == "available"
    assert body["cross_customer"]["cohort"]["scopes"] == 3 and body["cross_customer"]["cohort"]["decisions"] == 30
    # peers' success rates: 0/6 → 0.0 (thin margins fail: 4 of 10), 3/6, 4/6 … computed from their own outcomes
    assert set(body["cross_customer"]["percentiles"]["success_rate"]) == {"p25", "p50", "p75"}
    p50 = body["cross_customer"]["percentiles"]["success_rate"]["p50"]
    assert body["comparison"]["success_rate_delta_vs_p50"] == round(body["your_metrics"]["success_rate"] - p50, 4)
    assert "peer" not in json.dumps(body)
    set_benchmark_opt_in(ledger, "peer_z", False, "2026-11-22T00:00:01.000Z")  # revocable
    revoked = client.get(url, headers={"x-api-key": keys["own"]}).json
    assert revoked["cross_customer"]["status"] == "insufficient_cohort"
    assert revoked["cross_customer"]["percentiles"] == {} and revoked["comparison"]["success_rate_delta_vs_p50"] is None
    stricter = client.get(url + "?min_cohort_scopes=2", headers={"x-api-key": keys["own"]})
    assert stricter.status_code == 400  # the anonymity floor cannot be lowered


@pytest.mark.parametrize("query", [
    "effectiveness?limit=0", "effectiveness?limit=10001", "effectiveness?min_sample=x", "effectiveness?threshold=0.3",
    "anomalies?threshold=2", "anomalies?max_items=0", "anomalies?limit=1.5", "benchmarks?min_cohort_decisions=10",
    "benchmarks?min_cohort_scopes=abc", "effectiveness?policy_version=" + "v" * 81,
])
def test_bad_query_values_are_400_request_invalid(client, api_key, query):
    response = client.get(f"{BASE}/{query}", headers={"x-api-key": api_key})
    assert response.status_code == 400
    body = response.json
    assert body["c"] == "unclear" and body["v"] == "invalid_request" and body["error"] == "REQUEST_INVALID"
    assert body["errors"][0]["field"] == query.split("?")[1].split("=")[0]


def test_policy_id_too_long_is_400(client, api_key):
    response = client.get("/api/decision/policies/" + "p" * 121 + "/effectiveness", headers={"x-api-key": api_key})
    assert response.status_code == 400 and response.json["errors"][0]["field"] == "policy_id"


@pytest.mark.parametrize("kind", ["effectiveness", "anomalies", "benchmarks"])
def test_missing_key_is_401_and_disabled_key_403(app, client, issue_key, kind):
    code = f"SVC_POLICY_{kind.upper()}_UNAUTHORIZED"
    missing = client.get(f"{BASE}/{kind}")
    assert missing.status_code == 401 and missing.json["error"] == code
    assert missing.headers["WWW-Authenticate"].startswith("Bearer realm=")
    issued = issue_key("tenant_a")
    app.extensions["gate"].ledger.set_api_key_status(issued["key_id"], "disabled", "2026-11-22T00:00:00.000Z")
    disabled = client.get(f"{BASE}/{kind}", headers={"x-api-key": issued["api_key"]})
    assert disabled.status_code == 403 and disabled.json["error"] == code and disabled.json["c"] == "unclear"


def test_a_fact_that_is_a_number_here_and_an_object_there_does_not_break_the_anomaly_report(
        client, issue_key, sample_request):
    """Facts are the caller's: a path whose kind changes between decisions is simply not numeric."""
    key = issue_key("tenant_a")["api_key"]
    for i, basket in enumerate([3, {"items": 2}, True, 5]):
        body = copy.deepcopy(sample_request)
        body["context"]["inputs"].update(discount_percent=10 + i, margin_percent=30, basket=basket)
        assert client.post("/api/decide", json=body, headers={"x-api-key": key}).status_code == 200
    response = client.get(BASE + "/anomalies?min_sample=1&threshold=0", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    assert verify("anomaly", response.json)
    assert not any(a["value"] == "basket" for a in response.json["anomalies"])


def test_effectiveness_health_is_not_healthy_beside_an_anomaly_to_investigate(client, issue_key, sample_request):
    key = issue_key("tenant_a")["api_key"]
    for i in range(24):  # every thin-margin decision fails, every other one succeeds
        record = _decide(client, key, sample_request, discount=10 + i % 5, margin=15 if i % 3 == 0 else 30)
        _outcome(client, key, record, "failed" if i % 3 == 0 else "succeeded")
    effectiveness = client.get(BASE + "/effectiveness?min_sample=3", headers={"x-api-key": key}).json
    anomalies = client.get(BASE + "/anomalies?min_sample=3", headers={"x-api-key": key}).json
    assert verify("effectiveness", effectiveness)
    assert effectiveness["recommendation"] == "monitor" and anomalies["recommendation"] == "investigate"
    health = effectiveness["health"]
    assert health["state"] == "investigate" and health["anomalies"] == anomalies["recommendation"]
    assert health["because"][1] == anomalies["anomalies"][0]["reasons"][0]
    assert health["window"]["decisions"] == 24 and health["window"]["limit"] == 1000
