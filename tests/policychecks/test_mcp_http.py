"""MCP JSON-RPC over HTTP (Flask test client): every method, every error code, limits, other methods."""

from __future__ import annotations

import json

import pytest

from api.mcp import PROTOCOL_VERSIONS
from tests.policychecks.support import undecided_service

ALL_TOOLS = {"refund_eligibility", "cancellation_penalty", "return_eligibility", "trial_terms"}
PREFIXES = {"/refund": "refund_eligibility", "/cancel": "cancellation_penalty", "/return": "return_eligibility",
            "/trial": "trial_terms"}
ARGS = {"refund_eligibility": {"vendor": "adobe", "days_since_purchase": 2},
        "cancellation_penalty": {"vendor": "netflix"},
        "return_eligibility": {"vendor": "apple", "days_since_purchase": 20},
        "trial_terms": {"vendor": "slack"}}


def rpc(client, method, params=None, *, id=1, path="/api/mcp", **headers):
    message = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        message["params"] = params
    return client.post(path, json=message, headers=headers)


def error_of(response, status, code):
    assert response.status_code == status, response.get_data(as_text=True)
    body = response.json
    assert body["jsonrpc"] == "2.0" and "result" not in body
    assert body["error"]["code"] == code and body["error"]["message"]
    return body


@pytest.mark.parametrize("requested, negotiated", [("2025-11-25", "2025-11-25"), ("2024-11-05", "2024-11-05"),
                                                   ("2025-06-18", "2025-11-25"), ("1999-01-01", "2025-11-25")])
def test_initialize_negotiates_the_protocol_version(client, requested, negotiated):
    response = rpc(client, "initialize", {"protocolVersion": requested, "capabilities": {},
                                          "clientInfo": {"name": "t", "version": "1"}})
    assert response.status_code == 200
    result = response.json["result"]
    assert result["protocolVersion"] == negotiated
    assert result["capabilities"] == {"tools": {"listChanged": False}}
    assert result["serverInfo"]["name"] == "decision-gate-policy-checks"
    assert response.json["id"] == 1


def test_initialize_without_a_protocol_version_is_invalid_params(client):
    error_of(rpc(client, "initialize", {}), 200, -32602)


def test_notifications_and_client_responses_are_accepted_without_a_body(client):
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
                    {"jsonrpc": "2.0", "id": 7, "result": {}}):
        response = client.post("/api/mcp", json=message)
        assert response.status_code == 202 and response.data == b""


def test_ping(client):
    assert rpc(client, "ping", id="p").json == {"jsonrpc": "2.0", "id": "p", "result": {}}


def test_tools_list_on_the_combined_endpoint(client):
    tools = rpc(client, "tools/list").json["result"]["tools"]
    # The combined endpoint also serves the held action's wait (tests/holds/test_mcp_wait.py).
    assert {t["name"] for t in tools} == ALL_TOOLS | {"hold_resolution"}
    tools = [t for t in tools if t["name"] != "hold_resolution"]
    for tool in tools:
        assert tool["annotations"]["readOnlyHint"] is True and tool["annotations"]["destructiveHint"] is False
        assert tool["inputSchema"]["type"] == "object" and "vendor" in tool["inputSchema"]["required"]
        assert tool["inputSchema"]["additionalProperties"] is False
        assert "UNKNOWN" in tool["outputSchema"]["properties"]["verdict"]["enum"]
    refund = next(t for t in tools if t["name"] == "refund_eligibility")
    assert set(refund["outputSchema"]["properties"]["verdict"]["enum"]) == {"ALLOWED", "DENIED", "UNKNOWN"}


@pytest.mark.parametrize("prefix, tool", PREFIXES.items())
def test_each_service_endpoint_lists_and_calls_only_its_tool(client, prefix, tool):
    path = prefix + "/api/mcp"
    assert [t["name"] for t in rpc(client, "tools/list", path=path).json["result"]["tools"]] == [tool]
    assert rpc(client, "tools/call", {"name": tool, "arguments": ARGS[tool]}, path=path).json["result"]["isError"] is False
    other = next(t for t in ALL_TOOLS if t != tool)
    body = error_of(rpc(client, "tools/call", {"name": other, "arguments": ARGS[other]}, path=path), 200, -32602)
    assert body["error"]["data"]["tools"] == [tool]


@pytest.mark.parametrize("tool", sorted(ALL_TOOLS))
def test_tools_call_answers_content_structured_content_and_is_error(client, tool):
    response = rpc(client, "tools/call", {"name": tool, "arguments": ARGS[tool]}, id=42)
    assert response.status_code == 200 and response.json["id"] == 42
    result = response.json["result"]
    assert result["isError"] is False
    structured = result["structuredContent"]
    assert result["content"] == [{"type": "text", "text": json.dumps(structured, ensure_ascii=False,
                                                                     separators=(",", ":"))}]
    for member in ("verdict", "code", "message", "vendor", "rules_version", "policy_version", "sources",
                   "evaluated_at", "rulebook_result"):
        assert member in structured
    assert structured["tool"] == tool and structured["production_verdict"] is False


def test_tools_call_validates_against_the_declared_output_schema(client):
    import jsonschema

    tools = {t["name"]: t for t in rpc(client, "tools/list").json["result"]["tools"]}
    for tool, args in ARGS.items():
        structured = rpc(client, "tools/call", {"name": tool, "arguments": args}).json["result"]["structuredContent"]
        jsonschema.validate(structured, tools[tool]["outputSchema"])
        jsonschema.validate(args, tools[tool]["inputSchema"])


@pytest.mark.parametrize("params, field", [
    ({"name": "refund_eligibility", "arguments": {"vendor": "adobe", "days_since_purchase": -3}}, "days_since_purchase"),
    ({"name": "refund_eligibility", "arguments": {"days_since_purchase": 3}}, "vendor"),
    ({"name": "trial_terms", "arguments": {"vendor": "x", "exec": "rm"}}, "exec"),
    ({"name": "trial_terms", "arguments": "adobe"}, "arguments"),
])
def test_bad_arguments_are_invalid_params_with_the_errors(client, params, field):
    body = error_of(rpc(client, "tools/call", params), 200, -32602)
    assert field in [e["field"] for e in body["error"]["data"]["errors"]]


@pytest.mark.parametrize("params", [{"name": "delete_everything"}, {}, {"name": 3}])
def test_unknown_tool_is_invalid_params(client, params):
    error_of(rpc(client, "tools/call", params), 200, -32602)


def test_unknown_method_is_method_not_found(client):
    body = error_of(rpc(client, "resources/list", id="r"), 200, -32601)
    assert body["id"] == "r"


@pytest.mark.parametrize("raw", [b"{", b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "x": NaN}',
                                 b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', b"\xff\xfe"])
def test_unparseable_bodies_are_parse_errors(client, raw):
    error_of(client.post("/api/mcp", data=raw, content_type="application/json"), 400, -32700)


def test_too_deep_is_a_parse_error_and_too_large_is_413(client):
    deep = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {}}
    node = deep["params"]
    for _ in range(40):
        node["x"] = {}
        node = node["x"]
    error_of(client.post("/api/mcp", json=deep), 400, -32700)
    big = {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"pad": "x" * 70_000}}
    error_of(client.post("/api/mcp", json=big), 413, -32600)
    error_of(client.post("/api/mcp", data=b"{}", content_type="text/plain"), 415, -32600)


@pytest.mark.parametrize("message", [
    {"id": 1, "method": "ping"},
    {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1},
    {"jsonrpc": "2.0", "id": None, "method": "ping"},
    {"jsonrpc": "2.0", "id": True, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1, "method": 5},
    {"jsonrpc": "2.0", "id": 1, "method": ""},
    {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]},
    "ping", 5,
])
def test_invalid_requests(client, message):
    error_of(client.post("/api/mcp", json=message), 400, -32600)


def test_null_is_an_invalid_request_and_an_empty_body_a_parse_error(client):
    error_of(client.post("/api/mcp", data=b"null", content_type="application/json"), 400, -32600)
    error_of(client.post("/api/mcp", data=b"", content_type="application/json"), 400, -32700)


@pytest.mark.parametrize("batch", [[], [{"jsonrpc": "2.0", "id": 1, "method": "ping"}]])
def test_batches_are_refused(client, batch):
    body = error_of(client.post("/api/mcp", json=batch), 400, -32600)
    assert "batch" in body["error"]["message"]


def test_unsupported_protocol_version_header_is_400(client):
    error_of(rpc(client, "tools/list", **{"MCP-Protocol-Version": "2023-01-01"}), 400, -32600)
    assert rpc(client, "tools/list", **{"MCP-Protocol-Version": "2024-11-05"}).status_code == 200
    assert set(PROTOCOL_VERSIONS) == {"2025-11-25", "2024-11-05"}


@pytest.mark.parametrize("method", ["get", "put", "patch", "delete"])
@pytest.mark.parametrize("path", ["/api/mcp", "/trial/api/mcp"])
def test_other_http_methods_are_405_with_allow_post(client, method, path):
    response = getattr(client, method)(path)
    error_of(response, 405, -32000)
    assert response.headers["Allow"] == "POST"


def test_internal_errors_are_32603_never_a_result(app, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(app.extensions["gate"].policychecks, "check", explode)
    body = error_of(rpc(app.test_client(), "tools/call", {"name": "trial_terms", "arguments": {"vendor": "x"}}),
                    200, -32603)
    assert "boom" not in json.dumps(body)


def test_a_check_without_a_verdict_is_a_tool_error_without_structured_content(make_app, tmp_path):
    app = make_app(policychecks=undecided_service(tmp_path))
    result = rpc(app.test_client(), "tools/call", {"name": "refund_eligibility",
                                                   "arguments": {"vendor": "adobe", "days_since_purchase": 1}}).json["result"]
    assert result["isError"] is True and "structuredContent" not in result
    assert result["content"][0]["text"].startswith("no verdict")


def test_rate_limit_per_client_is_32000_and_http_429(make_app):
    client = make_app({"GATE_POLICYCHECK_RATE_LIMIT": "2"}).test_client()
    assert rpc(client, "ping").status_code == 200
    assert rpc(client, "ping", path="/refund/api/mcp").status_code == 200
    response = rpc(client, "tools/call", {"name": "trial_terms", "arguments": {"vendor": "canva"}})
    body = error_of(response, 429, -32000)
    assert int(response.headers["Retry-After"]) >= 1 and response.headers["X-RateLimit-Remaining"] == "0"
    assert body["error"]["data"]["retry_after"] >= 1
    # Another client address has its own window.
    other = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"},
                        environ_base={"REMOTE_ADDR": "10.9.8.7"})
    assert other.status_code == 200


def test_rate_limiter_outage_is_503_and_no_result(app):
    from gate.errors import GateError

    class Down:
        def hit(self, *args):
            raise GateError("RATE_LIMITER_UNAVAILABLE", "down")

    app.extensions["gate"].limiter = Down()
    error_of(rpc(app.test_client(), "ping"), 503, -32603)
