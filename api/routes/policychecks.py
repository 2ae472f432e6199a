"""Policy-check services over HTTP: MCP endpoints, REST twins and `/rules/policy-sources.json`.

- `POST /api/mcp`: one MCP server exposing all four tools (the combined endpoint).
- `POST /refund/api/mcp`, `/cancel/api/mcp`, `/return/api/mcp`, `/trial/api/mcp`: one MCP
  server per service, so `{refund_url}` … of the spec can each be this gate under a path prefix
  (or a host whose proxy maps `/api/mcp` to the prefixed path).
- `POST /api/v1/refund/eligibility`, `/api/v1/cancel/penalty`, `/api/v1/return/eligibility`,
  `/api/v1/trial/terms`: the same checks as plain JSON (body = the tool's arguments; answer =
  the tool's `structuredContent`).
- `GET /rules/policy-sources.json`: every vendor row's citation, table and rulebook versions.

All are public and rate-limited per client address (`GATE_POLICYCHECK_RATE_LIMIT` per minute,
shared with the workflow routes' own window name): the limit is taken before the body is read,
and bodies are bounded (`MAX_BODY_BYTES`, `MAX_DEPTH`). SECURITY: a refused call answers an
error object (JSON-RPC error or the gate's error body), never a verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from flask import Response, request

from api.client_limits import client_limit
from api.errors import carry_headers, json_response
from api.jsonio import read_json
from api.mcp import McpEndpoint
from api.mcp_http import MAX_BODY_BYTES, MAX_DEPTH, serve_mcp
from api.routing import BODY_ERRORS, MEDIA, RATE_HEADERS, Endpoint, Routes
from gate.errors import GateError
from gate.services.policychecks import (
    CHECKS,
    ArgumentsInvalid,
    CheckSpec,
    PolicyCheckService,
)

MCP_PREFIXES = {"refund": "/refund", "cancellation": "/cancel", "return": "/return", "trial": "/trial"}
_NOT_POST = ("get", "put", "patch", "delete")

routes = Routes("policychecks", __name__)
CHECK_ERRORS = BODY_ERRORS + ("SVC_API_RATE_LIMITED", "RATE_LIMITER_UNAVAILABLE", "POLICY_CHECK_UNDECIDED")


# ---------------------------------------------------------------------------- MCP

def _mcp_endpoints(path: str) -> tuple[Endpoint, ...]:
    """One MCP endpoint: POST serves JSON-RPC; GET, PUT, PATCH and DELETE answer 405."""
    served = Endpoint(
        "post", path,
        ("MCP JSON-RPC 2.0 (protocol 2025-11-25 or 2024-11-05): initialize, ping, notifications (202), tools/list, "
         "tools/call → {content, structuredContent, isError}. " + ("All four policy-check tools." if path == "/api/mcp"
         else "One service's tool ({…_url}/api/mcp).") + " JSON-RPC errors −32700/−32600 (HTTP 400), −32601, −32602, "
         "−32603 (HTTP 200), −32000 rate limited (HTTP 429). Batches are refused (−32600). Advisory only."),
        False, {200: "JSON-RPC response", 202: "notification or response accepted (no body)",
                400: "parse error or invalid request (JSON-RPC error body)", 413: "body over 64 KiB",
                415: MEDIA, 429: "rate limited (−32000)", 503: "rate limiter unavailable (−32603)"},
        request_body="JsonRpcMessage", response_headers=RATE_HEADERS, tags=("policy-checks",),
        error_schema="JsonRpcError")
    refused = tuple(
        Endpoint(method, path, "Not served: answers 405 with `Allow: POST` and a JSON-RPC error (−32000).", False,
                 {405: "method not allowed (JSON-RPC error body)"}, tags=("policy-checks",), error_schema="JsonRpcError")
        for method in _NOT_POST)
    return (served, *refused)


def _mcp_view(key: str) -> Callable[..., Response]:
    def mcp(*, mcp_servers: Mapping[str, McpEndpoint]) -> Response:
        return serve_mcp(mcp_servers[key])

    return mcp


# The combined endpoint, then one per service under its prefix; each its own blueprint (`mcp_<key>`).
for _key, _prefix in (("all", ""), *((spec.service, MCP_PREFIXES[spec.service]) for spec in CHECKS)):
    routes.add(_mcp_view(_key), *_mcp_endpoints(_prefix + "/api/mcp"), blueprint=f"mcp_{_key}")


# ---------------------------------------------------------------------------- REST twins and sources

def _rest_check(tool: str, policychecks: PolicyCheckService) -> Response:
    headers = client_limit("policycheck")
    carry_headers(headers)  # a refusal answers the rate headers too
    body = read_json(request, MAX_BODY_BYTES, max_depth=MAX_DEPTH)
    try:  # the body is the check's arguments, checked by their schema alone (an array too)
        result = policychecks.check(tool, body)
    except ArgumentsInvalid as invalid:  # a Signal, answered here in REST's words
        raise GateError("REQUEST_INVALID", f"invalid arguments: {invalid}", errors=invalid.errors) from None
    return json_response(200, result, headers)


def _register_rest(spec: CheckSpec) -> None:
    def view(*, policychecks: PolicyCheckService) -> Response:
        return _rest_check(spec.tool, policychecks)

    routes.add(view, Endpoint(
        "post", spec.rest_path, f"REST twin of the `{spec.tool}` MCP tool: the body is its arguments, the answer its "
        "structuredContent (same engine, same result). Advisory only (production_verdict false).",
        False, {200: "check result", 400: "bad arguments or body", 413: "body over 64 KiB", 415: MEDIA,
                429: "rate limited per client", 500: "the rulebook reached no verdict", 503: "rate limiter unavailable"},
        errors=CHECK_ERRORS, request_body=f"PolicyCheckArguments_{spec.tool}", response_headers=RATE_HEADERS,
        tags=("policy-checks",)), name=f"rest_{spec.service}")


for _spec in CHECKS:
    _register_rest(_spec)


@routes.route(Endpoint(
    "get", "/rules/policy-sources.json", "Vendor policy table sources: every row's source URL, notes, "
    "last-verified date and source hash, with table and rulebook versions.", False, {200: "policy sources"},
    tags=("policy-checks",), budget="public"))
def policy_sources(*, policychecks: PolicyCheckService) -> Response:
    return json_response(200, policychecks.sources(), {"Cache-Control": "public, max-age=300"})
