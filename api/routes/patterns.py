"""`GET /api/decision/policy-patterns`: the public policy pattern registry (spec "Registries and
patterns"; `gate.rulebook.patterns` builds it). `?pattern_id=` (a pattern id or a policy id) answers one
`policy_pattern`, `?tag=` filters the list; an unknown pattern is 404 `POLICY_PATTERN_NOT_FOUND`."""

from __future__ import annotations

import re

from flask import Response, request

from api.errors import json_response
from api.routing import Endpoint, Routes
from gate.errors import GateError
from gate.rulebook.patterns import REGISTRY_VERSION, load_patterns

routes = Routes("patterns", __name__)

_VALUE = re.compile(r"^[A-Za-z0-9_.:-]{1,120}$")
_PARAMS = ("pattern_id", "tag")


def _bad(name: str, message: str) -> GateError:
    return GateError("REQUEST_INVALID", f"{name} {message}",
                          errors=[{"field": name, "code": "invalid_value", "message": message}])


@routes.route(Endpoint(
    "get", "/api/decision/policy-patterns",
    "Policy pattern registry (decision_pattern_registry_v1): pricing_exception, refund_review, "
    "agent_action_gate, crm_writeback_gate, each with pattern_hash, a decision_request_template that is a "
    "valid rulebook-mode request, outcome and CRM sync templates and SDK examples. `?pattern_id=` (pattern "
    "id or policy id) answers one `policy_pattern`; `?tag=` filters the list.",
    False, {200: "registry or one pattern", 400: "unknown or malformed query parameter",
            404: "no pattern has this id (or not with this tag)"},
    errors=("REQUEST_INVALID", "POLICY_PATTERN_NOT_FOUND"),
    query=(("pattern_id", "string", "pattern id or policy id; answers one pattern",
            {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,120}$"}),
           ("tag", "string", "only patterns carrying this tag", {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,120}$"})),
    tags=("registries",), budget="public",
))
def policy_patterns() -> Response:
    for name in request.args:
        if name not in _PARAMS:
            raise _bad(name, "is not a parameter of this registry (accepted: pattern_id, tag)")
    values = {}
    for name in _PARAMS:
        given = request.args.getlist(name)
        if len(given) > 1:
            raise _bad(name, "may be given once")
        if given:
            if not _VALUE.fullmatch(given[0]):
                raise _bad(name, "must be 1 to 120 of A-Z a-z 0-9 _ . : -")
            values[name] = given[0]
    registry = load_patterns()
    wanted = values.get("pattern_id")
    tag = values.get("tag")
    if wanted is None:
        return json_response(200, registry.registry_body(tag), {"Cache-Control": "public, max-age=300"})
    pattern = registry.find(wanted)
    if pattern is None or (tag is not None and tag not in pattern.body["tags"]):
        raise GateError("POLICY_PATTERN_NOT_FOUND", "no policy pattern has this pattern id or policy id"
                              + (" and tag" if tag is not None else ""), pattern_id=wanted)
    return json_response(200, {"ok": True, "decision_pattern_registry_version": REGISTRY_VERSION,
                               "policy_pattern": pattern.body}, {"Cache-Control": "public, max-age=300"})
