"""Issue 18 item 8: input normalisation and contract drift, through HTTP.

Before the fixes: `?threshold=0.35١` read as 0.351 and `min_sample=१` as 1; a path segment of
percent-encoded bytes that are not UTF-8 was decoded to U+FFFD and served; `null` was read as
an absent member (`{"input": null, "packet": {}}`, MCP `"params": null`, a check's
`"plan": null`, a pilot's `"notes": null`); 405 answers carried no `Allow`.
"""

from __future__ import annotations

import pytest

REPORT = "/api/decision/policies/pol_x/anomalies"


def _refused(response, status=400, code="REQUEST_INVALID"):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.json["error"] == code and response.json["c"] == "unclear"
    return response.json


# ----------------------------------------------------------------- ASCII-only numbers

@pytest.mark.parametrize("query", [
    "threshold=0.35\u0661",  # ARABIC-INDIC DIGIT ONE: float() read 0.351
    "threshold=\u0966.5",  # DEVANAGARI DIGIT ZERO
    "threshold=0.3_5",  # float() reads underscores as digit grouping
    "threshold=%200.35",  # float() strips spaces
    "threshold=\uff10.5",  # FULLWIDTH DIGIT ZERO
    "min_sample=\u0967",  # DEVANAGARI DIGIT ONE: "१" was 1
    "max_items=\u00b2",
])
def test_query_numbers_are_ascii_only(client, api_key, query):
    body = _refused(client.get(f"{REPORT}?{query}", headers={"x-api-key": api_key}))
    assert body["errors"][0]["field"] == query.split("=")[0]
    assert "ASCII" in body["message"]


@pytest.mark.parametrize("query", ["threshold=0.35", "threshold=.5", "threshold=1e-1", "min_sample=12"])
def test_ascii_query_numbers_are_still_read(client, api_key, query):
    response = client.get(f"{REPORT}?{query}", headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    name, value = query.split("=")
    assert response.json["parameters"][name] == float(value)


# ----------------------------------------------------------------- URLs that are not UTF-8

@pytest.mark.parametrize("path", [
    "/api/decision/policies/%FF/effectiveness",  # answered 200 for policy id U+FFFD
    "/api/decision/policies/a%C3/effectiveness",  # a truncated two-byte sequence
    "/api/decision/%ED%A0%80",  # an encoded surrogate (not UTF-8)
    "/schemas/%C0%AF",  # an overlong "/"
])
def test_a_path_that_is_not_utf8_is_refused(client, api_key, path):
    body = _refused(client.get(path, headers={"x-api-key": api_key}))
    assert body["errors"] == [{"field": "path", "code": "invalid_encoding",
                               "message": "percent-encoded bytes must form UTF-8"}]


def test_a_query_that_is_not_utf8_is_refused(client, api_key):
    body = _refused(client.get(f"{REPORT}?policy_version=v%FF1", headers={"x-api-key": api_key}))
    assert body["errors"][0]["field"] == "query"


def test_utf8_paths_and_queries_still_work(client, api_key):
    assert client.get("/api/decision/policies/caf%C3%A9/effectiveness?policy_version=%C3%A9",
                      headers={"x-api-key": api_key}).status_code == 200


# ----------------------------------------------------------------- null is not absent

def test_packet_verify_refuses_null_input(client):
    body = _refused(client.post("/api/decision/packet/verify", json={"input": None, "packet": {}}))
    assert body["errors"][0]["field"] == "input"


@pytest.mark.parametrize("body", [{"record": None}, {"record": {}, "input": None},
                                  {"record": {}, "public_key": None}])
def test_record_verify_refuses_null_members(client, body):
    answer = _refused(client.post("/api/decision/verify", json=body))
    assert answer["errors"][0]["field"] in body


@pytest.mark.parametrize("path", ["/api/v1/trial/terms", "/api/v1/cancel/penalty"])
def test_policy_checks_refuse_a_null_plan(client, path):
    answer = _refused(client.post(path, json={"vendor": "adobe", "plan": None}))
    assert answer["errors"][0]["field"] == "plan"


def test_pilot_intake_refuses_null_notes(client):
    intake = {"company": "Acme", "contact_name": "Ana", "contact_email": "ana@example.com",
              "use_case": "other", "monthly_decisions": 10, "consent": True, "notes": None}
    answer = _refused(client.post("/api/pilot", json=intake))
    assert [problem["field"] for problem in answer["errors"]] == ["notes"]


@pytest.mark.parametrize("method", ["ping", "tools/list", "initialize"])
def test_mcp_params_null_is_an_invalid_request(client, method):
    response = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 7, "method": method, "params": None})
    assert response.status_code == 400
    assert response.json == {"jsonrpc": "2.0", "id": 7,
                             "error": {"code": -32600, "message": "params must be an object"}}


def test_mcp_arguments_null_is_invalid_params(client):
    response = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                                             "params": {"name": "trial_terms", "arguments": None}})
    assert response.status_code == 200 and response.json["error"]["code"] == -32602
    assert "result" not in response.json


# ----------------------------------------------------------------- 405 names what is allowed

@pytest.mark.parametrize("method, path, allowed", [
    ("DELETE", "/api/decision/status", {"GET", "HEAD", "OPTIONS"}),
    ("PUT", "/api/decide", {"POST", "OPTIONS"}),
    ("PATCH", "/api/decision/dec_x/execution", {"GET", "HEAD", "POST", "OPTIONS"}),
])
def test_every_405_carries_allow(client, method, path, allowed):
    response = client.open(path, method=method)
    _refused(response, 405, "METHOD_NOT_ALLOWED")
    assert {name.strip() for name in response.headers["Allow"].split(",")} == allowed


@pytest.fixture
def decision_id(client, api_key, sample_request):
    return client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json["decision_id"]


@pytest.mark.parametrize("path", ["replay", "diff"])
@pytest.mark.parametrize("member", ["input", "response_view", "replay_mode"])
def test_replay_refuses_null_members(client, api_key, decision_id, path, member):
    answer = _refused(client.post(f"/api/decision/{decision_id}/{path}", json={member: None},
                                  headers={"x-api-key": api_key}))
    assert answer["errors"] == [{"field": member, "code": "invalid_type", "message": "null is not accepted"}]


def test_an_invalid_view_header_is_refused_even_when_the_body_names_a_view(client, api_key, sample_request):
    answer = _refused(client.post("/api/decide", json={**sample_request, "response_view": "minimal"},
                                  headers={"x-api-key": api_key, "x-decision-response-view": "_"}))
    assert answer["errors"][0]["field"] == "x-decision-response-view"


# ----------------------------------------------------------------- integers as JSON Schema reads them

def test_an_integral_float_ticket_id_is_the_integer(client):
    body = {"vendor": "adobe", "days_since_purchase": 3, "ticket_id": 5}
    first = client.post("/api/v1/workflows/zendesk/refund", json=body)
    again = client.post("/api/v1/workflows/zendesk/refund", json={**body, "ticket_id": 5.0})
    assert first.status_code == again.status_code == 200
    assert again.headers["x-idempotency-status"] == "replayed"
    assert _refused(client.post("/api/v1/workflows/zendesk/refund", json={**body, "ticket_id": 5.5}))


def test_an_integral_float_jsonrpc_id_is_answered_as_the_integer(client):
    response = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 7.0, "method": "ping"})
    assert response.status_code == 200 and response.json == {"jsonrpc": "2.0", "id": 7, "result": {}}
    assert client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 7.5, "method": "ping"}).status_code == 400


# ----------------------------------------------------------------- the document states the ranges

@pytest.mark.parametrize("path, name", [
    ("/api/decision/{decision_id}/execution", "limit"),
    ("/api/decision/{decision_id}/packet", "chain_limit"),
    ("/api/decision/policies/{policy_id}/anomalies", "max_items"),
])
def test_documented_query_ranges_are_the_enforced_ones(client, api_key, decision_id, path, name):
    # Issue 18: `limit=0` was schema-valid (a bare integer) and refused.
    document = client.get("/openapi.json").json
    schema = next(p["schema"] for p in document["paths"][path]["get"]["parameters"] if p["name"] == name)
    url = path.replace("{decision_id}", decision_id).replace("{policy_id}", "pol_x")
    headers = {"x-api-key": api_key}
    for value in (schema["minimum"], schema["maximum"]):
        assert client.get(f"{url}?{name}={value}", headers=headers).status_code == 200
    for value in (schema["minimum"] - 1, schema["maximum"] + 1):
        _refused(client.get(f"{url}?{name}={value}", headers=headers))


def test_every_body_route_documents_its_body_refusals_and_every_keyed_route_its_401(client):
    """A route that reads a JSON body can refuse it as malformed (400), too large (413) or not
    JSON (415); a keyed route refuses a missing key (401). The contract test found publishing
    answering an undocumented 400; this walks the whole document instead of waiting for the
    generator to find the next one."""
    undocumented = []
    for path, operations in client.get("/openapi.json").json["paths"].items():
        for method, operation in operations.items():
            wanted = ["400", "413", "415"] if "requestBody" in operation else []
            wanted += ["401"] if operation.get("security") else []
            undocumented += [f"{method.upper()} {path} {status}" for status in wanted
                             if status not in operation["responses"]]
    assert undocumented == []
