"""The operational routes over HTTP: runtime config, pilot intake, proof metrics, pilot export,
policy alerts and Prometheus metrics, with their failures."""

from __future__ import annotations

import csv
import io
import json
from datetime import date

import pytest

TOKEN = "metrics-token-0123456789abcdef"
INTAKE = {"company": "Acme GmbH", "contact_name": "Ada Example", "contact_email": "ada@acme.example",
          "use_case": "refund_review", "monthly_decisions": 20000, "notes": "Pilot for the EU helpdesk.",
          "consent": True}


@pytest.fixture
def ops(make_app):
    return make_app({"GATE_METRICS_TOKEN": TOKEN, "GATE_ADVISOR_API_KEY": "sk-must-not-leak-123456"})


def test_runtime_config_is_public_and_holds_no_secret(ops):
    client = ops.test_client()
    response = client.get("/api/runtime-config")
    assert response.status_code == 200
    body = response.json
    assert body["interface_version"] == "1.13.0" and body["modes"]["binding"] == ["rulebook"]
    assert body["modes"]["advisory"] == ["single", "multi", "runtime"] and body["modes"]["default_mode"] == "single"
    assert body["advisory"]["single_advisor"] == "policy_pattern_rulebook"
    assert body["signing"]["receipt_signature_algorithm"] == "ed25519"
    assert body["protections"]["metrics_token_configured"] is True
    text = response.get_data(as_text=True)
    assert TOKEN not in text and "sk-must-not-leak" not in text and "BEGIN" not in text
    assert "database" not in text.lower() and "sqlite" not in text.split('"dialect"')[0]


def test_a_pilot_intake_is_stored_once_and_confirmed(ops, backend):
    client = ops.test_client()
    created = client.post("/api/pilot", json=INTAKE)
    assert created.status_code == 201, created.json
    body = created.json
    assert body["status"] == "submitted" and body["pilot_id"].startswith("pilot_")
    assert created.headers["x-idempotency-status"] == "created" and created.headers["X-RateLimit-Limit"]
    again = client.post("/api/pilot", json=INTAKE)
    assert again.status_code == 200 and again.headers["x-idempotency-status"] == "replayed"
    assert again.json["pilot_id"] == body["pilot_id"] and "confirmation_token" not in again.json
    changed = client.post("/api/pilot", json={**INTAKE, "monthly_decisions": 5})
    assert changed.status_code == 409 and changed.json["error"] == "PILOT_IDEMPOTENCY_CONFLICT"
    other_key = client.post("/api/pilot", json={**INTAKE, "monthly_decisions": 5}, headers={"Idempotency-Key": "k-2"})
    assert other_key.status_code == 201
    wrong = client.post("/api/pilot", json={"pilot_id": body["pilot_id"], "confirmation_token": "pct_wrong"})
    assert wrong.status_code == 404 and wrong.json["error"] == "PILOT_NOT_FOUND"
    unknown = client.post("/api/pilot", json={"pilot_id": "pilot_" + "0" * 24,
                                              "confirmation_token": body["confirmation_token"]})
    assert unknown.status_code == 404
    confirm = {"pilot_id": body["pilot_id"], "confirmation_token": body["confirmation_token"]}
    confirmed = client.post("/api/pilot", json=confirm)
    assert confirmed.status_code == 200 and confirmed.json["status"] == "confirmed"
    twice = client.post("/api/pilot", json=confirm)
    assert twice.status_code == 200 and twice.json["confirmed_at"] == confirmed.json["confirmed_at"]
    metrics = client.get("/api/proof-metrics", headers={"x-metrics-token": TOKEN}).json
    assert metrics["pilots"] == {"total": 2, "submitted": 1, "confirmed": 1}


@pytest.mark.parametrize("change, field", [
    ({"contact_email": "not-an-email"}, "contact_email"),
    ({"use_case": "world_domination"}, "use_case"),
    ({"monthly_decisions": -1}, "monthly_decisions"),
    ({"monthly_decisions": 1.5}, "monthly_decisions"),
    ({"monthly_decisions": True}, "monthly_decisions"),
    ({"consent": False}, "consent"),
    ({"company": ""}, "company"),
    ({"company": "x" * 201}, "company"),
    ({"extra": 1}, "extra"),
    ({"notes": "x" * 2001}, "notes"),
])
def test_invalid_intakes_are_refused_and_store_nothing(ops, change, field):
    client = ops.test_client()
    response = client.post("/api/pilot", json={**INTAKE, **change})
    assert response.status_code == 400 and response.json["error"] == "REQUEST_INVALID"
    assert field in {e["field"] for e in response.json["errors"]}
    assert client.get("/api/proof-metrics", headers={"x-metrics-token": TOKEN}).json["pilots"]["total"] == 0


@pytest.mark.parametrize("body, items", [
    # every problem at once: the unknown members first (sorted), then the schema's order
    ({"zz": 1, "aa": 2, "company": "   ", "contact_name": "a\tb", "contact_email": "ada@", "use_case": "Other",
      "notes": None, "monthly_decisions": None, "consent": "yes"},
     [("aa", "unknown_field"), ("zz", "unknown_field"), ("company", "invalid_type"),
      ("contact_name", "invalid_value"), ("contact_email", "invalid_value"), ("use_case", "invalid_value"),
      ("notes", "invalid_type"), ("monthly_decisions", "invalid_value"), ("consent", "required")]),
    ({}, [(name, "required") for name in ("company", "contact_name", "contact_email", "use_case",
                                          "monthly_decisions", "consent")]),
    ([INTAKE], [("body", "invalid_type")]),
    ("confirmation_token", [("body", "invalid_type")]),  # a string naming the member is no confirmation
    ({"confirmation_token": 5, "x": 1}, [("x", "unknown_field"), ("pilot_id", "required"),
                                         ("confirmation_token", "invalid_type")]),
])
def test_every_problem_of_a_pilot_body_is_named_once_in_order(ops, body, items):
    client = ops.test_client()
    response = client.post("/api/pilot", json=body)
    assert response.status_code == 400 and response.json["error"] == "REQUEST_INVALID"
    assert [(item["field"], item["code"]) for item in response.json["errors"]] == items
    first = response.json["errors"][0]
    assert response.json["message"].endswith(f"{first['field']} {first['message']}")
    assert client.get("/api/proof-metrics", headers={"x-metrics-token": TOKEN}).json["pilots"]["total"] == 0


def test_a_pilot_intake_s_text_is_read_stripped(ops):
    client = ops.test_client()
    padded = {**INTAKE, "company": "\u3000 Acme\t", "contact_email": " ada@example.com\n", "use_case": " other ",
              "notes": "\n a note \n", "monthly_decisions": 7.0}
    assert client.post("/api/pilot", json=padded).status_code == 201
    exported = client.get("/api/pilot-export", headers={"x-metrics-token": TOKEN}).get_data(as_text=True)
    row = next(iter(csv.DictReader(io.StringIO(exported))))
    assert (row["company"], row["contact_email"], row["use_case"], row["notes"], row["monthly_decisions"]) == (
        "Acme", "ada@example.com", "other", "a note", "7")


@pytest.mark.parametrize("body", [b"[1]", b"{", {"pilot_id": "p", "confirmation_token": "t", "x": 1},
                                  {"confirmation_token": "t"}])
def test_malformed_pilot_bodies(ops, body):
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    response = ops.test_client().post("/api/pilot", data=data, headers={"content-type": "application/json"})
    assert response.status_code == 400 and response.json["c"] == "unclear"


def test_the_pilot_route_is_rate_limited_per_client(make_app):
    client = make_app({"GATE_POLICYCHECK_RATE_LIMIT": "2"}).test_client()
    statuses = [client.post("/api/pilot", json=INTAKE).status_code for _ in range(3)]
    assert statuses == [201, 200, 429]


@pytest.mark.parametrize("path", ["/api/proof-metrics", "/api/pilot-export"])
def test_metrics_token_reads_fail_closed(make_app, ops, path):
    unconfigured = make_app().test_client().get(path, headers={"x-metrics-token": TOKEN})
    assert unconfigured.status_code == 503 and unconfigured.json["error"] == "METRICS_UNAVAILABLE"
    client = ops.test_client()
    for headers in ({}, {"x-metrics-token": TOKEN + "x"}, {"x-metrics-token": ""}, {"Authorization": "Basic " + TOKEN}):
        response = client.get(path, headers=headers)
        assert response.status_code == 401 and response.json["error"] == "METRICS_UNAUTHORIZED"
    assert client.get(path, headers={"Authorization": "Bearer " + TOKEN}).status_code == 200


def test_proof_metrics_count_binding_and_advisory_decisions_apart(ops, issue_key, sample_request, backend):
    client = ops.test_client()
    key = issue_key()["api_key"]
    assert client.post("/api/decide", json=sample_request, headers={"x-api-key": key}).json["verdict"] == "yes"
    advisory = {"question": "Approve?", "context": {"workflow": "billing_discount_gate",
                                                   "inputs": sample_request["context"]["inputs"]}}
    assert client.post("/api/decide", json=advisory, headers={"x-api-key": key}).json["advisory_verdict"] == "yes"
    body = client.get("/api/proof-metrics", headers={"x-metrics-token": TOKEN}).json
    assert body["decisions"]["total"] == 2
    assert body["decisions"]["binding"]["by_verdict"] == {"yes": 1, "no": 0, "review": 0}
    assert body["decisions"]["advisory"]["by_verdict"] == {"yes": 0, "no": 0, "review": 1}
    assert body["audit_chains"] == {"chains": 1, "links": 2}
    assert "tenant_a" not in json.dumps(body)


def test_the_pilot_export_is_csv_and_defuses_formulas(ops):
    client = ops.test_client()
    client.post("/api/pilot", json={**INTAKE, "company": "=HYPERLINK(\"http://evil\")"})
    client.post("/api/pilot", json={**INTAKE, "contact_email": "bob@b.example", "company": "Beta"})
    response = client.get("/api/pilot-export", headers={"x-metrics-token": TOKEN})
    assert response.status_code == 200 and response.mimetype == "text/csv"
    assert "attachment" in response.headers["Content-Disposition"]
    rows = list(csv.DictReader(io.StringIO(response.get_data(as_text=True))))
    assert [r["company"] for r in rows] == ["'=HYPERLINK(\"http://evil\")", "Beta"]
    assert rows[0]["contact_email"] == "ada@acme.example" and rows[0]["status"] == "submitted"
    assert len(list(csv.DictReader(io.StringIO(client.get("/api/pilot-export?limit=1", headers={
        "x-metrics-token": TOKEN}).get_data(as_text=True))))) == 1
    for query in ("limit=0", "limit=10001", "limit=x", "other=1"):
        assert client.get("/api/pilot-export?" + query, headers={"x-metrics-token": TOKEN}).status_code == 400


def test_policy_alerts_raise_anomalies_and_stale_vendor_sources(make_app, issue_key, sample_request):
    from tests.operations.alerts_support import seed_failure_shift

    client = make_app({"GATE_POLICY_SOURCE_MAX_AGE_DAYS": "1"}).test_client()
    key = issue_key()["api_key"]
    seed_failure_shift(client, key, sample_request)
    response = client.get("/api/policy-alerts", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    body = response.json
    anomalies = [a for a in body["alerts"] if a["source"] == "anomaly_engine"]
    assert anomalies and all(a["policy_id"] == "pricing_exception" for a in anomalies)
    report = client.get("/api/decision/policies/pricing_exception/anomalies", headers={"x-api-key": key}).json
    assert body["checked"]["anomaly_reports"][0]["anomaly_hash"] == report["anomaly_hash"]
    assert {a["anomaly_id"] for a in anomalies} == {a["anomaly_id"] for a in report["anomalies"]}
    stale = [a for a in body["alerts"] if a["source"] == "vendor_policy_table"]
    assert stale and all(date.fromisoformat(a["last_verified"]) < date.today() for a in stale)
    assert body["count"] == len(body["alerts"])
    # Another scope sees no anomaly of this one.
    other = issue_key(scope="tenant_b")["api_key"]
    theirs = client.get("/api/policy-alerts", headers={"x-api-key": other}).json
    assert not [a for a in theirs["alerts"] if a["source"] == "anomaly_engine"]
    assert theirs["checked"]["anomaly_reports"] == []


def test_policy_alerts_with_fresh_sources_and_bad_queries(make_app, api_key):
    client = make_app({"GATE_POLICY_SOURCE_MAX_AGE_DAYS": "3650"}).test_client()
    body = client.get("/api/policy-alerts", headers={"x-api-key": api_key}).json
    assert body["alerts"] == [] and body["checked"]["vendor_tables"]["rows"] > 0
    assert client.get("/api/policy-alerts").status_code == 401
    assert client.get("/api/policy-alerts?limit=1", headers={"x-api-key": api_key}).status_code == 400
    assert client.get("/api/policy-alerts?policy_id=" + "x" * 121, headers={"x-api-key": api_key}).status_code == 400


def test_prometheus_metrics(client, api_key, sample_request):
    client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key})
    client.get("/api/decision/dec_does_not_exist", headers={"x-api-key": api_key})
    client.get("/no/such/route")
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert 'gate_http_requests_total{method="POST",route="/api/decide",status="200"}' in text
    assert 'route="/api/decision/<decision_id>",status="404"' in text
    assert 'route="unmatched",status="404"' in text
    assert 'gate_http_request_duration_seconds_bucket{le="0.001",method="POST",route="/api/decide"}' in text
    assert 'gate_decisions_total{authority="binding",verdict="yes"}' in text
    assert "gate_ledger_ready 1.0" in text and "gate_signing_ready 1.0" in text
    # SECURITY: no label carries tenant data.
    assert "tenant_a" not in text and "dec_does_not_exist" not in text and api_key not in text


def test_prometheus_metrics_need_the_token_once_configured(ops):
    client = ops.test_client()
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"x-metrics-token": TOKEN}).status_code == 200


@pytest.mark.parametrize("env, message", [
    ({"GATE_METRICS_TOKEN": "short"}, "at least 16"),
    ({"GATE_METRICS_TOKEN": TOKEN, "GATE_METRICS_TOKEN_FILE": "/x"}, "not both"),
    ({"GATE_METRICS_TOKEN_FILE": "/nonexistent"}, "unreadable"),
    ({"GATE_POLICY_SOURCE_MAX_AGE_DAYS": "0"}, "GATE_POLICY_SOURCE_MAX_AGE_DAYS"),
    ({"GATE_POLICY_SOURCE_MAX_AGE_DAYS": "ten"}, "GATE_POLICY_SOURCE_MAX_AGE_DAYS"),
    # Issue 65: an address without the app's path landed every Inbox link on "Pick a scope".
    ({"GATE_WORKBENCH_URL": "https://gate.example"}, "ending in /workbench .for example https://gate.example/workbench"),
    ({"GATE_WORKBENCH_URL": "https://gate.example/"}, "ending in /workbench"),
    ({"GATE_WORKBENCH_URL": "https://gate.example/workbench?scope=a"}, "with no query"),
    ({"GATE_WORKBENCH_URL": "https://gate.example/workbenches"}, "ending in /workbench"),
    ({"GATE_WORKBENCH_URL": "ftp://gate.example/workbench"}, "http:// or https://"),
])
def test_unusable_operations_settings_refuse_to_start(tmp_path, env, message):
    from gate.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"GATE_HOME": str(tmp_path), **env})


@pytest.mark.parametrize("url", ["https://gate.example/workbench", "https://gate.example/tools/workbench/",
                                 "http://127.0.0.1:5006/workbench"])
def test_the_workbench_address_may_sit_behind_a_path_prefix(tmp_path, url):
    from gate.settings import Settings

    assert Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_WORKBENCH_URL": url}).workbench_url == url


def test_the_metrics_token_comes_from_a_file(tmp_path):
    from gate.settings import Settings

    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    settings = Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_METRICS_TOKEN_FILE": str(path)})
    assert settings.metrics_token == TOKEN and TOKEN not in repr(settings)


def test_prometheus_labels_are_a_closed_set_whatever_method_a_client_invents(client):
    # review: the method label was the request's method verbatim, so each invented method
    # (`QZ0`, `QZ1`, ...) added series to every scrape for the life of the process.
    before = client.get("/metrics").get_data(as_text=True).count("gate_http_requests_total{")
    for index in range(40):
        assert client.open("/api/decision/status", method=f"QZ{index}").status_code == 405
        assert client.open(f"/no/such/{index}", method=f"ZQ{index}").status_code in (404, 405)
    text = client.get("/metrics").get_data(as_text=True)
    assert "QZ" not in text and "ZQ" not in text
    assert 'method="other",route="unmatched"' in text
    assert text.count("gate_http_requests_total{") - before <= 4  # other × {404, 405}, /metrics GET
    methods = {line.split('method="', 1)[1].split('"', 1)[0] for line in text.splitlines()
               if line.startswith("gate_http_requests_total{")}
    assert methods <= {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "other"}
