"""Interoperability: the official `mcp` Python SDK as the client of a live `gate serve`.

The SDK's streamable-HTTP client talks to a real server on an ephemeral port: the initialize
handshake, tools/list (schemas and annotations), tools/call of each tool (its structured
result validated by the SDK against our outputSchema), bad arguments and an unknown tool.
"""

from __future__ import annotations

import os

import anyio
import pytest

from tests.server.support import Server

mcp = pytest.importorskip("mcp")
from mcp import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

pytestmark = pytest.mark.slow

CALLS = {
    "refund_eligibility": ({"vendor": "Adobe", "days_since_purchase": 3, "region": "US"}, "ALLOWED"),
    "cancellation_penalty": ({"vendor": "adobe", "region": "US", "plan": "annual-monthly"}, "PENALTY"),
    "return_eligibility": ({"vendor": "Best Buy", "days_since_purchase": 40}, "EXPIRED"),
    "trial_terms": ({"vendor": "netflix", "region": "US"}, "NO_TRIAL"),
}


@pytest.fixture
def live(gate_env, tmp_path):
    server = Server({**os.environ, **gate_env}, tmp_path / "server.log", workers=1).start()
    yield server.base
    server.stop()


async def _session_run(url: str, body):
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write) as session:
            return await body(session)


def run(url: str, body):
    """The SDK session in a thread of its own: another test of this worker process (a browser
    test's Playwright sync API) may have left an event loop marked running in the main thread."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, _session_run, url, body).result(timeout=120)


def test_sdk_initializes_lists_and_calls_every_tool_on_the_combined_endpoint(live):
    async def body(session):
        init = await session.initialize()
        tools = await session.list_tools()
        results = {name: await session.call_tool(name, args) for name, (args, _) in CALLS.items()}
        results["hold_resolution"] = await session.call_tool("hold_resolution", {"decision_id": "dec_unknown"})
        return init, tools, results

    init, tools, results = run(live + "/api/mcp", body)
    assert init.protocol_version == "2025-11-25"
    assert init.server_info.name == "decision-gate-policy-checks"
    listed = {tool.name: tool for tool in tools.tools}
    # The held action's wait is keyed (docs/holds.md): without x-api-key it is a tool error, never a state.
    assert set(listed) == set(CALLS) | {"hold_resolution"}
    assert results["hold_resolution"].is_error is True
    assert "unauthorized" in results["hold_resolution"].content[0].text
    for tool in listed.values():
        assert tool.annotations.read_only_hint is True
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
    for name, (_, verdict) in CALLS.items():
        result = results[name]
        assert result.is_error is False
        assert result.structured_content["verdict"] == verdict
        assert result.structured_content["production_verdict"] is False
        assert result.content[0].type == "text"


def test_sdk_per_service_endpoints_expose_their_one_tool(live):
    for prefix, tool in [("/refund", "refund_eligibility"), ("/cancel", "cancellation_penalty"),
                         ("/return", "return_eligibility"), ("/trial", "trial_terms")]:
        async def body(session, tool=tool):
            init = await session.initialize()
            listed = await session.list_tools()
            result = await session.call_tool(tool, CALLS[tool][0])
            return init, listed, result

        init, listed, result = run(live + prefix + "/api/mcp", body)
        assert init.server_info.name.startswith("decision-gate-")
        assert [t.name for t in listed.tools] == [tool]
        assert result.structured_content["verdict"] == CALLS[tool][1]


def test_sdk_sees_invalid_params_for_bad_arguments_and_unknown_tools(live):
    from mcp.shared.exceptions import MCPError

    async def body(session):
        await session.initialize()
        await session.list_tools()
        errors = []
        for name, args in [("refund_eligibility", {"vendor": "adobe", "days_since_purchase": -1}),
                           ("refund_eligibility", {"vendor": "adobe"}),
                           ("trial_terms", {"vendor": "adobe", "shell": "rm -rf /"}),
                           ("no_such_tool", {})]:
            try:
                await session.call_tool(name, args)
            except MCPError as error:
                errors.append(error.error)
        return errors

    errors = run(live + "/api/mcp", body)
    assert [e.code for e in errors] == [-32602] * 4
    assert errors[0].data["errors"][0]["field"] == "days_since_purchase"
    assert errors[3].data["tools"]
