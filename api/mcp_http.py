"""The MCP endpoints' HTTP transport: one JSON-RPC message in, one out (streamable HTTP without a
server-to-client stream). A refusal here is answered as a JSON-RPC error, not the gate's error
body: this module is MCP's translator of the limiter's and the body reader's refusals, as
`api.errors.refusal` is the REST routes'."""

from __future__ import annotations

from flask import Response, request

from api.client_limits import hit_client_limit
from api.jsonio import dumps, read_json
from api.mcp import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_ALLOWED,
    PARSE_ERROR,
    PROTOCOL_VERSIONS,
    RATE_LIMITED,
    McpEndpoint,
    RpcMessage,
    error_message,
)
from gate.errors import GateError

MAX_BODY_BYTES = 65_536
MAX_DEPTH = 32


def _jsonrpc(status: int, body: RpcMessage | None, headers: dict[str, str] | None = None) -> Response:
    if body is None:
        response = Response(status=status)
    else:
        response = Response(dumps(body), status=status, mimetype="application/json")
    if headers:
        response.headers.update(headers)
    return response


_BODY_ERRORS = {"REQUEST_TOO_LARGE": 413, "UNSUPPORTED_MEDIA_TYPE": 415, "REQUEST_TIMEOUT": 408}


def serve_mcp(endpoint: McpEndpoint) -> Response:
    if request.method != "POST":
        # MCP streamable HTTP: a server without a server-to-client stream answers GET with 405.
        return _jsonrpc(405, error_message(METHOD_NOT_ALLOWED, "Method not allowed: send JSON-RPC messages with POST"),
                        {"Allow": "POST"})
    try:
        rate = hit_client_limit("policycheck")
    except GateError as error:
        return _jsonrpc(503, error_message(INTERNAL_ERROR, error.message))
    headers = rate.headers()
    if not rate.allowed:
        return _jsonrpc(429, error_message(RATE_LIMITED, f"rate limit of {rate.limit} requests per minute exceeded",
                                           data={"retry_after": rate.retry_after}), headers)
    try:
        message = read_json(request, MAX_BODY_BYTES, max_depth=MAX_DEPTH)
    except GateError as error:
        if error.code in _BODY_ERRORS:
            return _jsonrpc(_BODY_ERRORS[error.code], error_message(INVALID_REQUEST, error.message), headers)
        return _jsonrpc(400, error_message(PARSE_ERROR, f"Parse error: {error.message}"), headers)
    version = request.headers.get("MCP-Protocol-Version")
    if (version is not None and version.strip() not in PROTOCOL_VERSIONS
            and not (isinstance(message, dict) and message.get("method") == "initialize")):
        return _jsonrpc(400, error_message(INVALID_REQUEST, f"unsupported MCP-Protocol-Version {version[:40]!r}",
                                           data={"supported": list(PROTOCOL_VERSIONS)}), headers)
    status, body = endpoint.handle(message)
    return _jsonrpc(status, body, headers)


__all__ = ["MAX_BODY_BYTES", "MAX_DEPTH", "serve_mcp"]
