"""Validation of an advisory Decision Request (`mode` omitted, `single`, `multi` or `runtime`).

Runs before anything is hashed or stored; the first failing check answers:
1. body a JSON object, `mode` a legacy mode (or absent), `response_view` known (400);
2. `question` a non-empty string of at most 2,000 characters (400);
3. `context` an object; `context.inputs` an object when present, and required and non-empty in
   `runtime` (the caller-supplied structured context) (400); `context.policy_pattern` names a
   known pattern or policy id when present (400);
4. the whole `context` within the evaluation size limits (422 `EVALUATION_INPUT_TOO_LARGE`);
5. response-only material anywhere the rulebook mode refuses it (422
   `RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN`, same fields and order);
6. rulebook-mode members (`rulebook`, `binding_mode`, `adapter`) are refused (400): a caller who
   sends a rulebook wants a binding verdict and must say `mode: "rulebook"`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.fact_limits import check_facts
from gate.protocol.requests import forbidden_output_fields
from gate.rulebook.patterns import Pattern, PatternRegistry
from gate.strict_json import JsonValue

MAX_QUESTION = 2000
DEFAULT_MODE = "single"
RULEBOOK_ONLY = ("rulebook", "binding_mode", "adapter")


@dataclass(frozen=True)
class AdvisoryRequest:
    request: dict[str, JsonValue]  # the body without `response_view`: what `input_hash` covers
    mode: str
    question: str
    context: dict[str, JsonValue]
    facts: dict[str, JsonValue]
    pattern: Pattern | None
    response_view: str | None


def is_advisory_body(body: Any) -> bool:
    """Whether `body` asks for an advisory mode (so `DecisionService.decide` dispatches here)."""
    return isinstance(body, dict) and (body.get("mode") is None or body.get("mode") in C.LEGACY_MODES)


def _invalid(field: str, code: str, message: str) -> GateError:
    return GateError("REQUEST_INVALID", message, errors=[{"field": field, "code": code, "message": message}])


def prepare_advisory_request(body: Any, patterns: PatternRegistry) -> AdvisoryRequest:
    if not is_advisory_body(body):
        raise _invalid("mode", "invalid_value", "not an advisory request")
    view = body.get("response_view")
    if view is not None and view not in C.VIEWS:
        raise _invalid("response_view", "invalid_value", f"response_view must be one of {', '.join(C.VIEWS)}")
    mode = body.get("mode") or DEFAULT_MODE
    question = body.get("question")
    if not isinstance(question, str) or not question.strip():
        raise _invalid("question", "required" if question is None else "invalid_value",
                       "question is required in the advisory modes: a non-empty string")
    if len(question) > MAX_QUESTION:
        raise _invalid("question", "too_long", f"question must be at most {MAX_QUESTION} characters")
    context = body.get("context", {})
    if context is None:
        context = {}
    if not isinstance(context, dict):
        raise _invalid("context", "invalid_type", "context must be an object")
    inputs = context.get("inputs")
    if inputs is not None and not isinstance(inputs, dict):
        raise _invalid("context.inputs", "invalid_type", "context.inputs must be an object")
    if mode == "runtime" and not inputs:
        raise _invalid("context.inputs", "required",
                       "runtime mode needs the caller's structured context as a non-empty context.inputs object")
    pattern = None
    if "policy_pattern" in context:
        wanted = context["policy_pattern"]
        pattern = patterns.find(wanted) if isinstance(wanted, str) else None
        if pattern is None:
            raise _invalid("context.policy_pattern", "invalid_value",
                           "context.policy_pattern must name a policy pattern (pattern id or policy id) of "
                           "GET /api/decision/policy-patterns")
    else:
        pattern = patterns.for_workflow(context.get("workflow"))
    # SECURITY: bounded context (422 EVALUATION_INPUT_TOO_LARGE) before any walk over it.
    check_facts(context)
    forbidden = forbidden_output_fields(body)
    if forbidden:
        raise GateError("RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
                        "the request carries response-only decision material; remove it",
                        forbidden_fields=forbidden)
    present = [name for name in RULEBOOK_ONLY if name in body]
    if present:
        raise _invalid(present[0], "unknown_field",
                       f"{', '.join(present)} belong to mode 'rulebook'; send mode 'rulebook' for a binding verdict "
                       "(advisory modes never evaluate a caller's rulebook)")
    request = {k: v for k, v in body.items() if k != "response_view"}
    return AdvisoryRequest(request, mode, question, context, dict(inputs or {}), pattern, view)


__all__ = [
    "DEFAULT_MODE",
    "MAX_QUESTION",
    "RULEBOOK_ONLY",
    "AdvisoryRequest",
    "is_advisory_body",
    "prepare_advisory_request",
]
