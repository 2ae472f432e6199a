"""`POST /api/v1/workflows/{ticketing_system}/{workflow}`: answers, idempotency, limits, token, refusals."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import decisions, workflow_runs
from tests.policychecks.support import WORKFLOW_BODY, undecided_service

TOKEN = "wf-token-" + "x" * 24


def post(client, system="zendesk", workflow="refund", body=None, **headers):
    return client.post(f"/api/v1/workflows/{system}/{workflow}", json=WORKFLOW_BODY if body is None else body,
                       headers=headers)


def runs(app) -> int:
    with app.extensions["gate"].ledger.read() as connection:
        return connection.execute(select(func.count()).select_from(workflow_runs)).scalar_one()


def test_refund_workflow_answers_request_id_action_policy_class_and_annotations(app):
    response = post(app.test_client())
    assert response.status_code == 200
    body = response.json
    assert body["request_id"].startswith("wfr_") and response.headers["x-request-id"] == body["request_id"]
    assert body["action"] == "issue_refund" and body["policy_class"] == "ALLOWED"
    assert body["decision_contract"] == {"authority": "advisory_only", "production_verdict": False}
    assert body["production_binding_required"] is True
    annotations = body["ticket_annotations"]
    assert "dg_refund_allowed" in annotations["tags"] and "dg_vendor_adobe" in annotations["tags"]
    assert "advisory" in annotations["internal_note"] and "helpx.adobe.com" in annotations["internal_note"]
    assert annotations["macro_suggestion"]["id"] == "dg_approve_refund"
    assert body["idempotency_key"] == "refund:T-1" and body["ticket_id"] == "T-1"
    assert body["check"]["verdict"] == "ALLOWED" and body["check"]["production_verdict"] is False
    assert response.headers["x-idempotency-status"] == "created"
    assert runs(app) == 1


@pytest.mark.parametrize("workflow, body, policy_class, action", [
    ("cancel", {"vendor": "adobe", "region": "US", "plan": "annual-prepaid", "ticket_id": 5}, "LOCKED",
     "explain_commitment_term"),
    ("return", {"vendor": "amazon", "region": "US", "plan": "books", "days_since_purchase": 45, "ticket_id": "r"},
     "EXPIRED", "decline_return"),
    ("trial", {"vendor": "netflix", "region": "US", "plan": "standard", "ticket_id": "t"}, "NO_TRIAL",
     "explain_no_trial"),
    ("refund", {"vendor": "unknown-co", "region": "US", "plan": "x", "days_since_purchase": 1, "ticket_id": "u"},
     "UNKNOWN", "check_vendor_policy_manually"),
])
def test_each_workflow_runs_its_check(client, workflow, body, policy_class, action):
    response = post(client, "freshdesk", workflow, body)
    assert response.status_code == 200, response.json
    assert (response.json["policy_class"], response.json["action"]) == (policy_class, action)
    assert response.json["ticket_id"] == str(body["ticket_id"])
    if policy_class == "UNKNOWN":
        assert response.json["ticket_annotations"]["macro_suggestion"]["id"] == "dg_escalate_policy_check"
        assert response.json["ticket_annotations"]["priority"] == "high"


def test_a_replay_answers_identical_bytes_with_a_replay_header(backend, app):
    client = app.test_client()
    first = post(client)
    second = post(client)
    assert second.status_code == 200 and second.data == first.data
    assert second.headers["x-idempotency-status"] == "replayed"
    assert second.headers["x-request-id"] == first.json["request_id"]
    assert runs(app) == 1


def test_the_default_key_is_per_ticket_workflow_and_ticketing_system(app):
    client = app.test_client()
    ids = {post(client).json["request_id"],
           post(client, body={**WORKFLOW_BODY, "ticket_id": "T-2"}).json["request_id"],
           post(client, "intercom").json["request_id"],
           post(client, workflow="trial", body={"vendor": "canva", "ticket_id": "T-1"}).json["request_id"]}
    assert len(ids) == 4 and runs(app) == 4


def test_another_body_under_the_same_key_is_409_and_changes_nothing(backend, app):
    client = app.test_client()
    first = post(client)
    conflict = post(client, body={**WORKFLOW_BODY, "days_since_purchase": 30})
    assert conflict.status_code == 409 and conflict.json["error"] == "WORKFLOW_IDEMPOTENCY_CONFLICT"
    assert conflict.json["request_id"] == first.json["request_id"] and "policy_class" not in conflict.json
    assert runs(app) == 1


@pytest.mark.parametrize("header", ["Idempotency-Key", "x-idempotency-key"])
def test_an_idempotency_key_header_overrides_the_default(app, header):
    client = app.test_client()
    first = post(client)
    again = post(client, body={**WORKFLOW_BODY, "days_since_purchase": 30}, **{header: "re-evaluate-1"})
    assert again.status_code == 200 and again.json["policy_class"] == "DENIED"
    assert again.json["idempotency_key"] == "re-evaluate-1" and again.json["request_id"] != first.json["request_id"]
    replay = post(client, body={**WORKFLOW_BODY, "days_since_purchase": 30}, **{header: "re-evaluate-1"})
    assert replay.data == again.data and replay.headers["x-idempotency-status"] == "replayed"


@pytest.mark.parametrize("headers", [{"Idempotency-Key": "a b"}, {"Idempotency-Key": "a", "x-idempotency-key": "b"},
                                     {"x-idempotency-key": "k" * 301}])
def test_bad_idempotency_keys_are_400(app, headers):
    response = post(app.test_client(), **headers)
    assert (response.status_code, response.json["error"]) == (400, "REQUEST_INVALID")
    assert runs(app) == 0


def test_concurrent_first_requests_answer_one_stored_result(backend, app):
    client_results = []

    def run():
        client_results.append(post(app.test_client()).data)

    threads = [threading.Thread(target=run) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(client_results)) == 1 and runs(app) == 1


@pytest.mark.parametrize("body, field", [
    ({k: v for k, v in WORKFLOW_BODY.items() if k != "ticket_id"}, "ticket_id"),
    ({k: v for k, v in WORKFLOW_BODY.items() if k != "vendor"}, "vendor"),
    ({k: v for k, v in WORKFLOW_BODY.items() if k != "days_since_purchase"}, "days_since_purchase"),
    ({**WORKFLOW_BODY, "days_since_purchase": "five"}, "days_since_purchase"),
    ({**WORKFLOW_BODY, "ticket_id": ""}, "ticket_id"),
    ({**WORKFLOW_BODY, "ticket_id": -1}, "ticket_id"),
    ({**WORKFLOW_BODY, "ticket_id": "has space"}, "ticket_id"),
    ({**WORKFLOW_BODY, "customer_ssn": "x"}, "customer_ssn"),
    ([WORKFLOW_BODY], "body"),
])
def test_missing_or_bad_fields_are_400_and_store_nothing(app, body, field):
    response = post(app.test_client(), body=body)
    assert (response.status_code, response.json["error"]) == (400, "REQUEST_INVALID")
    assert field in [e["field"] for e in response.json["errors"]]
    assert "policy_class" not in response.json and runs(app) == 0


@pytest.mark.parametrize("workflow, body, items", [
    # every problem at once: the unknown members first (sorted), then the check's members in its
    # schema's order, then the ticket id (the workflow's own member, added after the check's)
    ("refund", {"zz": 1, "aa": 2, "vendor": "", "ticket_id": "a b"},
     [("aa", "unknown_field"), ("zz", "unknown_field"), ("vendor", "invalid_value"),
      ("days_since_purchase", "required"), ("ticket_id", "invalid_value")]),
    ("refund", {}, [("vendor", "required"), ("days_since_purchase", "required"), ("ticket_id", "required")]),
    # the days are the refund's and the return's: another workflow's body refuses them as unknown
    ("cancel", {**WORKFLOW_BODY, "ticket_id": None}, [("days_since_purchase", "unknown_field"),
                                                      ("ticket_id", "invalid_value")]),
    ("trial", {"vendor": "netflix", "ticket_id": 5.5}, [("ticket_id", "invalid_value")]),
    ("trial", {"vendor": "netflix", "ticket_id": -1}, [("ticket_id", "invalid_value")]),
    ("return", ["x"], [("body", "invalid_type")]),
    ("return", "text", [("body", "invalid_type")]),
])
def test_every_problem_of_a_workflow_body_is_named_once_in_order(app, workflow, body, items):
    response = post(app.test_client(), workflow=workflow, body=body)
    assert (response.status_code, response.json["error"]) == (400, "REQUEST_INVALID")
    assert [(item["field"], item["code"]) for item in response.json["errors"]] == items
    assert all(item["message"] for item in response.json["errors"]) and runs(app) == 0


def test_an_unknown_member_of_a_workflow_body_names_every_member_that_workflow_takes(app):
    """`{allowed}` in the check's message is the node's members: a workflow's composed schema
    names the ticket id too, the check's own arguments alone do not."""
    answer = post(app.test_client(), workflow="trial", body={"vendor": "netflix", "ticket_id": "t", "zz": 1}).json
    assert answer["errors"] == [{"field": "zz", "code": "unknown_field",
                                 "message": "unknown argument (allowed: vendor, region, plan, ticket_id)"}]
    check = app.test_client().post("/api/v1/trial/terms", json={"vendor": "netflix", "zz": 1}).json
    assert check["errors"][0]["message"] == "unknown argument (allowed: vendor, region, plan)"


@pytest.mark.parametrize("system, workflow, field", [("fax", "refund", "ticketing_system"),
                                                     ("zendesk", "warranty", "workflow"),
                                                     ("Zendesk", "refund", "ticketing_system")])
def test_unsupported_ticketing_system_or_workflow_is_400(app, system, workflow, field):
    response = post(app.test_client(), system, workflow)
    assert (response.status_code, response.json["error"]) == (400, "WORKFLOW_UNSUPPORTED")
    assert response.json["field"] == field and response.json["supported"]
    assert runs(app) == 0


def test_malformed_json_is_400(client):
    response = client.post("/api/v1/workflows/zendesk/refund", data=b"{", content_type="application/json")
    assert (response.status_code, response.json["error"]) == (400, "JSON_INVALID")


def test_bearer_token_when_configured(make_app):
    app = make_app({"GATE_WORKFLOW_TOKEN": TOKEN})
    client = app.test_client()
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN},
                    {"Authorization": "Basic " + TOKEN}, {"Authorization": "Bearer " + TOKEN[:-1]}):
        response = post(client, **headers)
        assert (response.status_code, response.json["error"]) == (401, "WORKFLOW_UNAUTHORIZED")
        assert response.headers["WWW-Authenticate"].startswith("Bearer realm=")
    assert runs(app) == 0
    ok = post(client, Authorization="Bearer " + TOKEN)
    assert ok.status_code == 200 and ok.json["policy_class"] == "ALLOWED"


def test_no_token_by_default(client):
    assert post(client, Authorization="Bearer anything").status_code == 200


def test_token_setting_is_validated():
    from gate.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match="GATE_WORKFLOW_TOKEN"):
        Settings.from_env({"GATE_WORKFLOW_TOKEN": "short"})
    with pytest.raises(SettingsError, match="GATE_POLICYCHECK_RATE_LIMIT"):
        Settings.from_env({"GATE_POLICYCHECK_RATE_LIMIT": "0"})


def test_rate_limited_per_client_before_anything_else(make_app):
    app = make_app({"GATE_POLICYCHECK_RATE_LIMIT": "1"})
    client = app.test_client()
    assert post(client).status_code == 200
    limited = post(client, body={**WORKFLOW_BODY, "ticket_id": "T-9"})
    assert (limited.status_code, limited.json["error"]) == (429, "SVC_API_RATE_LIMITED")
    assert int(limited.headers["Retry-After"]) >= 1 and runs(app) == 1
    other = client.post("/api/v1/workflows/zendesk/refund", json={**WORKFLOW_BODY, "ticket_id": "T-9"},
                        environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert other.status_code == 200


def test_never_a_decision_record(app):
    post(app.test_client())
    with app.extensions["gate"].ledger.read() as connection:
        assert connection.execute(select(func.count()).select_from(decisions)).scalar_one() == 0


def test_no_verdict_is_500_and_stores_nothing(make_app, tmp_path):
    app = make_app(policychecks=undecided_service(tmp_path))
    response = post(app.test_client())
    assert (response.status_code, response.json["error"]) == (500, "POLICY_CHECK_UNDECIDED")
    assert runs(app) == 0


def test_ledger_outage_is_503(app):
    from sqlalchemy import text

    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text("DROP TABLE workflow_runs"))
    response = post(app.test_client())
    assert (response.status_code, response.json["error"]) == (503, "LEDGER_UNAVAILABLE")
    assert "policy_class" not in response.json
