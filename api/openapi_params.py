"""The JSON Schemas of path, query and header parameters, as the server enforces them.

`api.openapi` used to document every parameter as a bare `string` or `integer`: a request
valid by the document could still be refused (`limit=0`, a control character in a path, a
`pattern_id` with a space), and a client generator had no way to know. Each schema here states
the check its route makes, exactly, so a request the document accepts is accepted and one it
refuses is refused (`tests/api/test_schemathesis.py` runs both directions over the document).

Patterns are written for both Python `re` and ECMA-262 (no look-behind, no `\\p{…}`); the
printable-text pattern is built from the running interpreter's own `str.isprintable`, the
check the routes make, so the two cannot drift (`gate.bodies.PRINTABLE_RUN`, resolved when the
document is first served).
"""

from __future__ import annotations

from typing import TypedDict

from gate import vocabulary as C
from gate.bodies import PRINTABLE_RUN
from gate.packets.common import LIMIT_MAX, LIMIT_MIN
from gate.reports.params import PARAMS as REPORT_PARAMS
from gate.services.workflows import TICKETING_SYSTEMS, WORKFLOWS

# A parameter's schema, as the routes state their checks: the JSON Schema keywords they use, no
# others. `x-required` marks a required query parameter; `api.openapi` moves it to the parameter.
ParameterSchema = TypedDict("ParameterSchema", {
    "type": str, "format": str, "description": str, "enum": list[str], "pattern": str,
    "minLength": int, "maxLength": int, "minimum": float, "maximum": float,
    "allOf": list["ParameterSchema"], "not": "ParameterSchema", "x-required": bool,
}, total=False)

# Every route refuses these in path and query values (api.app, issue 6 defect 10).
NO_CONTROL = "[^\\u0000-\\u001f\\u007f-\\u009f]"
# Python's str.strip() removes these (and control characters, which are refused before).
SPACES = "[ \\u00a0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]"
# A path segment names one segment: never "/", never a dot segment (clients resolve those).
_SEGMENT: ParameterSchema = {"not": {"enum": [".", ".."]}}
# api.query.int_arg: at most 18 ASCII digits.
INT_ARG_MAX = 10**18 - 1
MAX_POLICY_ID = 120  # api.routes.reports and api.routes.operations (policy-alerts)


PRINTABLE_FORMAT = "printable"


def printable(low: int, high: int, description: str) -> ParameterSchema:
    """`low`…`high` characters, each printable by `str.isprintable` (no controls, format or
    separator characters other than the space, no unassigned code points). The pattern is
    exact; `format: printable` names it for people and generators."""
    return {"type": "string", "format": PRINTABLE_FORMAT, "minLength": low, "maxLength": high,
            "pattern": PRINTABLE_RUN, "description": description}


def text(description: str = "") -> ParameterSchema:
    schema: ParameterSchema = {"type": "string", "pattern": f"^{NO_CONTROL}*$"}
    return {**schema, "description": description} if description else schema


def integer(low: int, high: int, description: str = "") -> ParameterSchema:
    schema: ParameterSchema = {"type": "integer", "minimum": low, "maximum": high}
    return {**schema, "description": description} if description else schema


def report_param(name: str) -> ParameterSchema:
    """A policy report's query parameter (gate.reports.registry.parse_params)."""
    p = REPORT_PARAMS[name]
    if name == "verdict":
        return {"type": "string", "enum": list(C.VERDICTS), "description": p.describe()}
    if p.type is str:
        return printable(int(p.low or 0), int(p.high or 0), p.describe())
    if p.type is int:
        return {"type": "integer", "minimum": int(p.low or 0), "maximum": int(p.high or 0),
                "description": p.describe()}
    return {"type": "number", "minimum": p.low, "maximum": p.high, "description": p.describe()}


HEX64 = "^[0-9a-f]{64}$"
SEMVER = "^[0-9]+\\.[0-9]+\\.[0-9]+$"
BOOLEAN_TEXT: ParameterSchema = {"type": "boolean", "description": "true, false, 1 or 0"}


def packet_limit(description: str) -> ParameterSchema:
    return integer(LIMIT_MIN, LIMIT_MAX, description)


def view(description: str) -> ParameterSchema:
    return {"type": "string", "enum": list(C.VIEWS), "description": description}


def _any_case(word: str) -> str:
    return "".join(f"[{char.lower()}{char.upper()}]" if char.isalpha() else char for char in word)


# api.runtime.requested_view: trimmed, any letter case.
VIEW_HEADER: ParameterSchema = {"type": "string", "pattern": "^[ \\t]*(" + "|".join(_any_case(v) for v in C.VIEWS) + ")[ \\t]*$"}
# api.runtime.idempotency_key_header and the workflow and pilot routes: trimmed, 1-300 visible ASCII.
IDEMPOTENCY_KEY: ParameterSchema = {"type": "string", "pattern": "^[ \\t]*[!-~]{1,300}[ \\t]*$"}
HEADER_PARAMS: dict[str, ParameterSchema] = {
    "x-idempotency-key": IDEMPOTENCY_KEY,
    "Idempotency-Key": IDEMPOTENCY_KEY,
    "x-decision-response-view": VIEW_HEADER,
}


def header_param(name: str) -> ParameterSchema:
    schema: ParameterSchema = {**HEADER_PARAMS.get(name, {"type": "string"})}
    return schema


def path_param(name: str) -> ParameterSchema:
    if name == "policy_id":
        return {**printable(1, MAX_POLICY_ID, "policy id: 1 to 120 printable characters, no /"),
                "allOf": [{"pattern": "^[^/]*$"}], **_SEGMENT}
    if name in ("ticketing_system", "workflow"):  # anything else is 400 WORKFLOW_UNSUPPORTED
        return {"type": "string", "enum": list(TICKETING_SYSTEMS if name == "ticketing_system" else WORKFLOWS)}
    return {"type": "string", "minLength": 1, "pattern": "^[^/\\u0000-\\u001f\\u007f-\\u009f]+$", **_SEGMENT}
