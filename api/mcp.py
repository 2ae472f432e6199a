"""MCP (Model Context Protocol) tools over JSON-RPC 2.0: the policy-check services' protocol layer.

`McpEndpoint(checks, tools, name).handle(message) -> (http_status, body | None)` answers one
parsed JSON-RPC message; the HTTP route (`api.routes.policychecks`) reads and bounds the body,
applies the per-client rate limit and writes the answer. Reference facts §7 is the contract:

- `initialize` negotiates the protocol version: the client's when it is one of
  `PROTOCOL_VERSIONS` (`2025-11-25`, `2024-11-05`), else the newest; `ping` answers `{}`.
- Notifications (no `id`), `notifications/initialized` among them, and JSON-RPC responses sent
  by a client are accepted with HTTP 202 and no body.
- `tools/list` gives each tool's input and output JSON Schemas and read-only annotations.
- `tools/call` answers `{content: [{type: "text", text}], structuredContent, isError}`.
- Errors: −32700 parse error and −32600 invalid request (HTTP 400), −32601 method not found,
  −32602 invalid params (unknown tool, bad arguments, with `data.errors`), −32603 internal error
  (HTTP 200, JSON-RPC errors of a well-formed request), −32000 rate limited (HTTP 429).
- Batches (a JSON array) are refused with one −32600: the handshake-era protocol revisions
  negotiated here (2025-11-25) define no batching. Documented in docs/policy-checks.md.

SECURITY: every refusal is a JSON-RPC error object, never a `result`, so no client can read a
refused, malformed or rate-limited call as a verdict; `isError: true` marks a check that ran
but reached no verdict (its rulebook gave none), and it carries no `structuredContent`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NotRequired, TypedDict, cast

from api.jsonio import dumps
from gate import bodies
from gate.errors import Signal
from gate.services.policychecks import (
    ArgumentsInvalid,
    CheckFailed,
    CheckResult,
    CheckSpec,
    PolicyCheckService,
)
from gate.strict_json import JsonValue
from gate.vocabulary import VERDICTS

log = logging.getLogger("gate.api.mcp")

PROTOCOL_VERSIONS = ("2025-11-25", "2024-11-05")  # newest first
LATEST_PROTOCOL_VERSION = PROTOCOL_VERSIONS[0]
SERVER_VERSION = "1.0.0"

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RATE_LIMITED = -32000  # implementation-defined server error range; HTTP 429
METHOD_NOT_ALLOWED = -32000  # HTTP 405 for GET and other non-POST methods (HTTP status disambiguates)

JSONRPC_ERRORS = {
    PARSE_ERROR: "Parse error",
    INVALID_REQUEST: "Invalid Request",
    METHOD_NOT_FOUND: "Method not found",
    INVALID_PARAMS: "Invalid params",
    INTERNAL_ERROR: "Internal error",
    RATE_LIMITED: "Rate limit exceeded (or, with HTTP 405, method not allowed)",
}


class RpcError(TypedDict):
    """A JSON-RPC error object; `data` only when there is more to say."""

    code: int
    message: str


class RpcErrorWithData(RpcError):
    data: Any


class RpcErrorMessage(TypedDict):
    jsonrpc: str
    id: Any  # the request's id (a string or an integer), or null when it could not be read
    error: RpcError | RpcErrorWithData


class TextContent(TypedDict):
    type: str
    text: str


class ToolResult(TypedDict):
    """`tools/call`'s result: the text for the model; `isError` when the tool ran and reached no
    verdict or refused (then without `structuredContent`)."""

    content: list[TextContent]
    isError: bool


class StructuredToolResult(ToolResult):
    structuredContent: CheckResult | dict[str, object]  # a check's result, or an extra tool's


class ToolAnnotations(TypedDict):
    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class ObjectSchema(TypedDict):
    """A tool's input or output JSON Schema: an object, its members' schemas by name."""

    type: str
    properties: dict[str, dict[str, JsonValue]]
    required: list[str]
    additionalProperties: NotRequired[bool]


class ToolDefinition(TypedDict):
    """One tool of `tools/list`: its input and output JSON Schemas and read-only annotations."""

    name: str
    title: str
    description: str
    inputSchema: ObjectSchema
    outputSchema: ObjectSchema
    annotations: ToolAnnotations


class ToolList(TypedDict):
    tools: list[ToolDefinition]


class ServerInfo(TypedDict):
    name: str
    title: str
    version: str


class InitializeResult(TypedDict):
    protocolVersion: str
    capabilities: dict[str, dict[str, bool]]
    serverInfo: ServerInfo
    instructions: str


class Pong(TypedDict):
    """`ping`'s result: the empty object."""


Result = InitializeResult | Pong | ToolList | ToolResult | StructuredToolResult


class RpcResultMessage(TypedDict):
    jsonrpc: str
    id: Any  # the request's id, a string or an integer
    result: Result


RpcMessage = RpcResultMessage | RpcErrorMessage


def error_message(code: int, message: str, request_id: Any = None, data: Any = None) -> RpcErrorMessage:
    error: RpcError | RpcErrorWithData = (RpcError(code=code, message=message) if data is None
                                          else RpcErrorWithData(code=code, message=message, data=data))
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def _valid_id(value: Any) -> bool:
    # MCP: a request id is a string or an integer, never null.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


class McpEndpoint:
    """One MCP server: a name and the tools it exposes (one service, or all four)."""

    def __init__(self, checks: PolicyCheckService, tools: tuple[str, ...], name: str, title: str,
                 extra: Mapping[str, ExtraTool] | None = None) -> None:
        self.checks = checks
        self.extra = dict(extra or {})
        self.tools = tools + tuple(self.extra)
        self.name = name
        self.title = title
        self._tool_list = [tool_definition(checks, checks.spec_for_tool(tool)) for tool in tools]
        self._tool_list += [tool.definition for tool in self.extra.values()]

    def handle(self, message: Any) -> tuple[int, RpcMessage | None]:
        """(HTTP status, JSON body or None for 202) for one parsed JSON-RPC message."""
        if isinstance(message, list):
            return 400, error_message(INVALID_REQUEST, "batch requests are not supported; send one JSON-RPC "
                                      "message per POST")
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return 400, error_message(INVALID_REQUEST, 'a JSON-RPC 2.0 message object with "jsonrpc": "2.0" is '
                                      "required")
        has_id = "id" in message
        request_id = message.get("id")
        if isinstance(request_id, float) and request_id.is_integer():
            request_id = int(request_id)  # JSON has one number type: 7.0 is the integer id 7
        if "method" not in message:
            if has_id and ("result" in message or "error" in message):
                return 202, None  # a client's response (to no request of ours): accepted, ignored
            return 400, error_message(INVALID_REQUEST, "method is required",
                                      request_id if _valid_id(request_id) else None)
        method = message["method"]
        # JSON-RPC 2.0 §4.2: params, when present, is a structured value; `"params": null` is
        # not one, so it is -32600 like any other non-object (it was read as absent).
        params = message.get("params", {})
        if has_id and not _valid_id(request_id):
            return 400, error_message(INVALID_REQUEST, "id must be a string or an integer")
        if not isinstance(method, str) or not method:
            return 400, error_message(INVALID_REQUEST, "method must be a non-empty string",
                                      request_id if has_id else None)
        if not isinstance(params, dict):
            return 400, error_message(INVALID_REQUEST, "params must be an object", request_id if has_id else None)
        if not has_id:
            return 202, None  # notifications (notifications/initialized, cancelled, …) get no answer
        try:
            if method == "initialize":
                return 200, self._result(request_id, self._initialize(params))
            if method == "ping":
                return 200, self._result(request_id, Pong())
            if method == "tools/list":
                return 200, self._result(request_id, {"tools": self._tool_list})
            if method == "tools/call":
                return 200, self._call(request_id, params)
        except _InvalidParams as invalid:
            return 200, error_message(INVALID_PARAMS, invalid.message, request_id, invalid.data)
        except Exception:  # SECURITY: a crash is an error object, never a result
            log.exception("MCP %s failed on %s", method, self.name)
            return 200, error_message(INTERNAL_ERROR, "internal error; no verdict was given", request_id)
        return 200, error_message(METHOD_NOT_FOUND, f"method not found: {method[:100]}", request_id)

    @staticmethod
    def _result(request_id: Any, result: Result) -> RpcResultMessage:
        return {"jsonrpc": "2.0", "id": request_id, "result": result}

    def _initialize(self, params: dict[str, JsonValue]) -> InitializeResult:
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise _InvalidParams("initialize needs params.protocolVersion (a string)")
        version = requested if requested in PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": self.name, "title": self.title, "version": SERVER_VERSION},
            "instructions": (
                "Read-only policy checks over illustrative vendor policy tables, each decided by a Rulebook v1. "
                "Results are advisory (production_verdict false); UNKNOWN means check the vendor's terms manually."
            ),
        }

    def _call(self, request_id: Any, params: dict[str, JsonValue]) -> RpcResultMessage:
        name = params.get("name")
        if not isinstance(name, str) or name not in self.tools:
            raise _InvalidParams(f"unknown tool: {str(name)[:100]}", {"tools": list(self.tools)})
        arguments = params.get("arguments", {})  # absent means none; `null` is refused as a non-object
        if name in self.extra:
            return self._extra_call(request_id, self.extra[name], arguments, params)
        try:
            structured = self.checks.check(name, arguments)
        except ArgumentsInvalid as invalid:
            raise _InvalidParams(f"invalid arguments for {name}: {invalid}", {"errors": invalid.errors}) from invalid
        except CheckFailed as failed:
            # The tool ran but reached no verdict: a tool error the model can see, never a verdict.
            return self._result(request_id, {"content": [{"type": "text", "text": f"no verdict: {failed}"}],
                                             "isError": True})
        return self._result(request_id, {
            "content": [{"type": "text", "text": dumps(structured)}],
            "structuredContent": structured,
            "isError": False,
        })


    def _extra_call(self, request_id: Any, tool: ExtraTool, arguments: Any,
                    params: dict[str, JsonValue]) -> RpcResultMessage:
        message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}
        try:
            structured = tool.call(arguments, message)
        except ValueError as invalid:
            raise _InvalidParams(f"invalid arguments for {tool.definition['name']}: {invalid}") from invalid
        except tool.refused as refused:
            return self._result(request_id, {"content": [{"type": "text", "text": str(refused)}], "isError": True})
        return self._result(request_id, {"content": [{"type": "text", "text": dumps(structured)}],
                                         "structuredContent": structured, "isError": False})


@dataclass(frozen=True)
class ExtraTool:
    """A tool beside the policy checks (the held action's wait, api.mcp_holds)."""

    definition: ToolDefinition
    call: Callable[[Any, dict[str, object]], dict[str, object]]
    refused: type[Exception]


class _InvalidParams(Signal):
    """JSON-RPC invalid params (-32602): `handle` answers it as an error object."""

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


# ---------------------------------------------------------------------------- tool schemas

# The document's words about a body, not part of the rules a tool's caller is given.
_DOCUMENT_ONLY = ("title", "description")


def input_schema(spec: CheckSpec) -> ObjectSchema:
    """The tool's arguments as `gate/bodies/policy-check-<service>.schema.json` states them, its
    one home (the REST twin's OpenAPI component is the same file), less the document's title and
    description and the refusal annotations: the same file is the arguments' one check
    (`validate_arguments`, which lists every problem)."""
    stated = bodies.openapi_schema(f"policy-check-{spec.service}")
    return cast(ObjectSchema, {key: value for key, value in stated.items() if key not in _DOCUMENT_ONLY})


_NULLABLE_STRING: dict[str, JsonValue] = {"type": ["string", "null"]}


def output_schema(checks: PolicyCheckService, spec: CheckSpec) -> ObjectSchema:
    """The JSON Schema of `structuredContent` (clients such as the MCP SDK validate against it)."""
    source: dict[str, JsonValue] = {
        "type": "object",
        "required": ["vendor", "region", "plan", "source_url", "notes", "last_verified", "source_hash"],
        "properties": {name: {"type": "string"} for name in
                       ("vendor", "region", "plan", "source_url", "notes", "last_verified", "source_hash")},
    }
    strings = ("tool", "service", "code", "action", "message", "vendor", "rulebook_id", "rules_version",
               "rulebook_hash", "policy_version", "policy_table_hash", "evaluated_at")
    properties: dict[str, dict[str, JsonValue]] = {name: {"type": "string"} for name in strings}
    properties.update({
        "verdict": {"type": "string", "enum": list(checks.verdicts(spec.tool))},
        "decision": {"type": "string", "enum": list(VERDICTS)},
        "vendor_name": _NULLABLE_STRING,
        "inputs": {"type": "object"},
        "terms": {"type": ["object", "null"]},
        "sources": {"type": "array", "items": source},
        "illustrative": {"type": "boolean"},
        "production_verdict": {"const": False},
        "rulebook_result": {
            "type": "object",
            "required": ["status", "decision", "application_verdict", "action", "reason_code", "matched_rule_id",
                         "evaluation"],
            "properties": {
                "status": {"type": "string"}, "decision": {"type": "string"},
                "application_verdict": {"type": "string"}, "action": {"type": "string"},
                "reason_code": {"type": "string"}, "matched_rule_id": _NULLABLE_STRING,
                "evaluation": {"type": "object"},
            },
        },
    })
    return {"type": "object", "properties": properties, "required": sorted(properties)}


def tool_definition(checks: PolicyCheckService, spec: CheckSpec) -> ToolDefinition:
    return {
        "name": spec.tool,
        "title": spec.title,
        "description": spec.description + " Advisory: never a production verdict.",
        "inputSchema": input_schema(spec),
        "outputSchema": output_schema(checks, spec),
        "annotations": {"title": spec.title, "readOnlyHint": True, "destructiveHint": False,
                        "idempotentHint": True, "openWorldHint": False},
    }
