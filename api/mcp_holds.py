"""The held action's wait as an MCP tool, `hold_resolution`, on the combined endpoint `POST /api/mcp`
(docs/holds.md, "The caller learns the answer"). An agent whose tool call was held asks for the
resolution of its decision and may wait up to 30 seconds for it, exactly like
`GET /api/decision/{id}/resolution?wait=N`: the same service, the same answer, parked by the served
worker so no thread waits. Unlike the policy checks this tool is keyed (`x-api-key`, scoped: another
scope's hold is not found). Its answer is the gate's state of the hold and the signed resolution;
the agent proceeds only after verifying that resolution offline (gate_client.resolution_route): an
open or expired hold, or any error, is never approval.
"""

from __future__ import annotations

import re
from typing import Any

from flask import request

from api.auth import AuthFailure
from api.jsonio import dumps
from api.mcp import ToolDefinition
from api.parking import PARK
from api.runtime import runtime
from gate.errors import GateError, Signal
from gate.privacy.datamap import MCP
from gate.strict_json import JsonValue

TOOL = "hold_resolution"
_TEXT: dict[str, JsonValue] = {"type": ["string", "null"]}
# What the held action asks (gate.holds.request.HoldRequest): `signed` when read from the stored
# request bound to the record's input_hash; otherwise every member is null.
REQUEST_SCHEMA: dict[str, JsonValue] = {"type": "object", "required": ["requester", "signed"], "properties": {
    "question": _TEXT, "requested_action": _TEXT, "target_system": _TEXT, "target_object_id": _TEXT,
    "amount": {"type": ["number", "string", "null"]}, "currency": _TEXT, "source_record_id": _TEXT,
    "workflow": _TEXT, "requester": {"type": "string"}, "signed": {"type": "boolean"}}}
MAX_WAIT_SECONDS = 30
_DECISION_ID = re.compile(r"^[A-Za-z0-9_.:-]{1,64}$")
_IN_THREAD = object()

DEFINITION: ToolDefinition = {
    "name": TOOL,
    "title": "Resolution of a held action",
    "description": ("The state of a held decision (open, approved, denied, expired) and its signed resolution, "
                    "waiting up to wait_seconds (0-30) for a reviewer, with the hold and what it asks (hold.request: "
                    "the requested action, target, amount, read from the signed request). Needs the x-api-key header "
                    "of the decision's scope. Proceed only after verifying the resolution offline; open or expired "
                    "never approves."),
    "inputSchema": {"type": "object", "required": ["decision_id"], "additionalProperties": False,
                    "properties": {"decision_id": {"type": "string", "maxLength": 64},
                                   "wait_seconds": {"type": "integer", "minimum": 0, "maximum": MAX_WAIT_SECONDS}}},
    "outputSchema": {"type": "object", "required": ["state", "approved"],
                     "properties": {"state": {"type": "string", "enum": ["open", "approved", "denied", "expired"]},
                                    "approved": {"type": "boolean"}, "decision_id": {"type": "string"},
                                    "resolution": {"type": ["object", "null"]},
                                    "hold": {"type": "object", "properties": {"request": REQUEST_SCHEMA}},
                                    "ok": {"type": "boolean"}}},
    "annotations": {"title": "Resolution of a held action", "readOnlyHint": True, "destructiveHint": False,
                    "idempotentHint": True, "openWorldHint": False},
}


class ToolRefused(Signal):
    """The tool ran and refused (`api.mcp` shows it to the model as a tool error, never as a state)."""


def _arguments(arguments: Any) -> tuple[str, int]:
    if not isinstance(arguments, dict) or set(arguments) - {"decision_id", "wait_seconds"}:
        raise ValueError("arguments are {decision_id, wait_seconds?}")
    decision_id, wait = arguments.get("decision_id"), arguments.get("wait_seconds", 0)
    if not isinstance(decision_id, str) or not _DECISION_ID.fullmatch(decision_id):
        raise ValueError("decision_id must be a decision id")
    if type(wait) is not int or not 0 <= wait <= MAX_WAIT_SECONDS:
        raise ValueError(f"wait_seconds must be a whole number from 0 to {MAX_WAIT_SECONDS}")
    return decision_id, wait


def call(arguments: Any, message: dict[str, object]) -> dict[str, object]:
    """The tool's structured answer; ValueError for bad arguments, ToolRefused for a refusal."""
    decision_id, wait = _arguments(arguments)
    try:
        caller = runtime().auth.authenticate(request)
    except AuthFailure as failure:
        raise ToolRefused(f"unauthorized: {failure.message}") from failure
    service = runtime().holds
    try:
        answer = service.resolution(caller.scope, decision_id)
        park = request.environ.get(PARK, _IN_THREAD)
        if answer["state"] == "open" and wait > 0 and park is not None:
            if park is not _IN_THREAD and park(decision_id, float(wait), dumps(message).encode("utf-8")):
                return {**answer}  # never sent: the worker runs this request again when the hold closes
            answer = service.wait_closed(caller.scope, decision_id, float(wait))
    except GateError as error:
        raise ToolRefused(f"{error.code}: {error.message}") from error
    # the tool's structured content: a JSON object, the hold's personal members masked by the
    # scope's `mcp` rule (docs/privacy.md)
    return runtime().privacy.hold_answer(caller.scope, answer, MCP)
