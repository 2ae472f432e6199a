"""The held action's wait as the MCP tool `hold_resolution` (docs/holds.md): keyed, scoped, the same
answer as the REST route; bad arguments are JSON-RPC errors and a refusal is a tool error, never a state."""

from __future__ import annotations

import pytest

from tests.holds.support import Holds, held_request
from tests.holds.test_hold_request import refund_held


def _call(client, key, arguments):
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "hold_resolution", "arguments": arguments}}
    headers = {"x-api-key": key} if key else {}
    return client.post("/api/mcp", json=message, headers=headers).get_json()


@pytest.fixture
def held(app, issue_key):
    caller = issue_key(permissions="decide")["api_key"]
    reviewer = issue_key(permissions="resolve")["api_key"]
    record = Holds(app.test_client(), caller).decide(held_request()).get_json()
    return app.test_client(), caller, reviewer, record


def test_the_tool_is_listed_and_answers_like_the_route(held):
    client, caller, reviewer, record = held
    tools = client.post("/api/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).get_json()
    assert "hold_resolution" in [t["name"] for t in tools["result"]["tools"]]
    opened = _call(client, caller, {"decision_id": record["decision_id"]})["result"]
    assert opened["isError"] is False and opened["structuredContent"]["state"] == "open"
    assert opened["structuredContent"]["approved"] is False
    Holds(client, reviewer).resolve(record["decision_id"])
    closed = _call(client, caller, {"decision_id": record["decision_id"], "wait_seconds": 2})["result"]
    route = Holds(client, caller).resolution(record["decision_id"]).get_json()
    assert closed["structuredContent"] == route and route["state"] == "approved"


def test_the_tool_states_what_the_held_action_asks(app, issue_key):
    """Issue 65: the held refund's signed request (action, target, amount) in the tool's answer."""
    client = app.test_client()
    caller = issue_key(permissions="decide")["api_key"]
    record = Holds(client, caller).decide(refund_held()).get_json()
    answer = _call(client, caller, {"decision_id": record["decision_id"]})["result"]
    request = answer["structuredContent"]["hold"]["request"]
    assert (request["requested_action"], request["target_object_id"], request["amount"], request["signed"]) == (
        "issue_refund", "ord_7731", 129, True)
    assert "ord_7731" in answer["content"][0]["text"]


def test_it_is_keyed_and_scoped(held, issue_key):
    client, _, _, record = held
    missing = _call(client, None, {"decision_id": record["decision_id"]})["result"]
    assert missing["isError"] is True and "unauthorized" in missing["content"][0]["text"]
    other = issue_key(scope="tenant_b")["api_key"]
    foreign = _call(client, other, {"decision_id": record["decision_id"]})["result"]
    assert foreign["isError"] is True and "HOLD_NOT_FOUND" in foreign["content"][0]["text"]


@pytest.mark.parametrize("arguments", [{}, {"decision_id": 5}, {"decision_id": "dec_x", "wait_seconds": 31},
                                       {"decision_id": "dec_x", "wait_seconds": True}, {"decision_id": "a b"},
                                       {"decision_id": "dec_x", "extra": 1}])
def test_bad_arguments_are_invalid_params(held, arguments):
    client, caller, _, _ = held
    answer = _call(client, caller, arguments)
    assert answer["error"]["code"] == -32602 and "result" not in answer
