"""REST twins (same engine, same result as the MCP tools) and `/rules/policy-sources.json`."""

from __future__ import annotations

import pytest

from gate.policychecks.tables import SERVICES, load_tables
from tests.policychecks.support import undecided_service

TWINS = [
    ("/api/v1/refund/eligibility", "refund_eligibility", {"vendor": "Target", "days_since_purchase": 91}, "DENIED"),
    ("/api/v1/cancel/penalty", "cancellation_penalty", {"vendor": "adobe", "plan": "monthly"}, "FREE_CANCEL"),
    ("/api/v1/return/eligibility", "return_eligibility", {"vendor": "ikea", "plan": "opened",
                                                          "days_since_purchase": 100}, "RETURNABLE"),
    ("/api/v1/trial/terms", "trial_terms", {"vendor": "Microsoft 365"}, "TRIAL_AVAILABLE"),
]


def _without_time(result):
    return {k: v for k, v in result.items() if k != "evaluated_at"}


@pytest.mark.parametrize("path, tool, arguments, verdict", TWINS)
def test_rest_twin_answers_what_the_mcp_tool_answers(client, path, tool, arguments, verdict):
    rest = client.post(path, json=arguments)
    assert rest.status_code == 200
    assert rest.json["verdict"] == verdict and rest.json["production_verdict"] is False
    assert rest.headers["X-RateLimit-Limit"] == "600"
    mcp = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                                        "params": {"name": tool, "arguments": arguments}})
    assert _without_time(rest.json) == _without_time(mcp.json["result"]["structuredContent"])


@pytest.mark.parametrize("path, tool, arguments, verdict", TWINS)
def test_rest_twin_refuses_bad_arguments(client, path, tool, arguments, verdict):
    response = client.post(path, json={**arguments, "vendor": 7})
    assert response.status_code == 400
    assert response.json["error"] == "REQUEST_INVALID" and response.json["c"] == "unclear"
    assert response.json["errors"][0]["field"] == "vendor"
    assert "verdict" not in response.json


@pytest.mark.parametrize("data, code, status", [
    (b"[1]", "REQUEST_INVALID", 400), (b"{", "JSON_INVALID", 400), (b'{"vendor": "a", "vendor": "b"}',
                                                                     "JSON_DUPLICATE_KEY", 400),
])
def test_rest_twin_refuses_malformed_bodies(client, data, code, status):
    response = client.post("/api/v1/trial/terms", data=data, content_type="application/json")
    assert (response.status_code, response.json["error"]) == (status, code)


@pytest.mark.parametrize("data", [b"[1]", b"null", b'"vendor"', b"7"])
def test_a_body_that_is_not_an_object_is_refused_by_the_check_s_schema(client, data):
    response = client.post("/api/v1/refund/eligibility", data=data, content_type="application/json")
    assert (response.status_code, response.json["error"]) == (400, "REQUEST_INVALID")
    assert response.json["errors"] == [{"field": "arguments", "code": "invalid_type", "message": "must be an object"}]
    assert response.json["message"] == "invalid arguments: arguments: must be an object"


def test_every_problem_is_named_once_in_order_and_a_null_is_a_wrong_value(client):
    response = client.post("/api/v1/refund/eligibility",
                           json={"zz": 1, "vendor": None, "region": "USA", "days_since_purchase": None})
    assert (response.status_code, response.json["error"]) == (400, "REQUEST_INVALID")
    assert [(item["field"], item["code"]) for item in response.json["errors"]] == [
        ("zz", "unknown_field"), ("vendor", "invalid_value"), ("region", "invalid_value"),
        ("days_since_purchase", "invalid_value")]
    missing = client.post("/api/v1/refund/eligibility", json={}).json["errors"]
    assert [(item["field"], item["code"]) for item in missing] == [("vendor", "required"),
                                                                  ("days_since_purchase", "required")]


def test_rest_twin_bounds_the_body_and_media_type(client):
    big = client.post("/api/v1/trial/terms", json={"vendor": "x" * 70_000})
    assert (big.status_code, big.json["error"]) == (413, "REQUEST_TOO_LARGE")
    text = client.post("/api/v1/trial/terms", data=b"{}", content_type="text/plain")
    assert (text.status_code, text.json["error"]) == (415, "UNSUPPORTED_MEDIA_TYPE")
    assert client.get("/api/v1/trial/terms").status_code == 405


def test_rest_twin_rate_limit_shares_the_client_window_with_mcp(make_app):
    client = make_app({"GATE_POLICYCHECK_RATE_LIMIT": "1"}).test_client()
    assert client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}).status_code == 200
    response = client.post("/api/v1/trial/terms", json={"vendor": "canva"})
    assert (response.status_code, response.json["error"]) == (429, "SVC_API_RATE_LIMITED")
    assert response.json["retry_after"] >= 1 and "Retry-After" in response.headers


def test_rest_twin_without_a_verdict_is_500_never_a_result(make_app, tmp_path):
    app = make_app(policychecks=undecided_service(tmp_path))
    response = app.test_client().post("/api/v1/refund/eligibility", json={"vendor": "adobe", "days_since_purchase": 1})
    assert (response.status_code, response.json["error"]) == (500, "POLICY_CHECK_UNDECIDED")
    assert response.json["c"] == "unclear"


def test_policy_sources_lists_every_row_with_its_citation(client):
    response = client.get("/rules/policy-sources.json")
    assert response.status_code == 200
    body = response.json
    assert set(body["services"]) == set(SERVICES)
    tables = load_tables()
    for service, entry in body["services"].items():
        table = tables[service]
        assert entry["policy_version"] == table.policy_version() and entry["policy_table_hash"] == table.table_hash
        assert entry["illustrative"] is True and entry["notice"]
        assert len(entry["sources"]) == len(table.rows)
        for source in entry["sources"]:
            assert source["source_url"].startswith("https://")
            assert len(source["source_hash"]) == 64 and source["last_verified"]


def test_the_table_schema_is_served(client):
    response = client.get("/schemas/vendor-policy-table-v1.schema.json")
    assert response.status_code == 200 and response.json["title"] == "Vendor policy table v1"
