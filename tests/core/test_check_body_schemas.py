"""The policy checks', the workflow's and the pilot's body schemas (gate/bodies/) against their hand checks.

Each of these bodies is checked by hand, which lists every problem of a body at once (400
REQUEST_INVALID, or MCP's invalid params with `data.errors`); one `jsonschema` failure cannot
say that. The files are the bodies' one home (the OpenAPI components, the MCP tools'
inputSchema); this holds each to accept exactly the bodies its check accepts, over generated
bodies drawn from values at the edges of each member.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from api.mcp import input_schema
from api.openapi_params import resolve_printable
from gate import bodies
from gate.errors import GateError
from gate.services.operations import PILOT_USE_CASES, validate_submission
from gate.services.policychecks import CHECKS, MAX_DAYS, ArgumentsInvalid, validate_arguments
from gate.services.workflows import ticket_id

ARGUMENTS: dict[str, tuple[list[Any], list[Any]]] = {  # member: (taken, refused)
    "vendor": (["Adobe", " best buy ", "x" * 100, "\u0130"], ["", "   ", "--", "x" * 101, None, 3]),
    "region": (["US", "de"], ["USA", "U", "1A", "\u00c0B", None, 1]),
    "plan": (["annual", "a" * 64], ["", "---", "a" * 65, None, 2]),
    "days_since_purchase": ([0, 3, 2.5, MAX_DAYS], [-1, MAX_DAYS + 0.5, "3", True, None]),
    "ticket_id": (["T-1", 0, 42, "~" * 200], ["", "a b", "~" * 201, -1, 1.5, True, None]),
}
PILOT: dict[str, tuple[list[Any], list[Any]]] = {
    "company": (["Acme", "x" * 200], ["", "   ", "x" * 201, "a\u0000b", None, 1]),
    "contact_name": (["Ada"], ["", "\u200b", None]),
    "contact_email": (["ada@example.com", "a.b@x-y.example.org"], ["ada", "ada@example", "a@b@c.com", "", None]),
    "use_case": (list(PILOT_USE_CASES), ["pricing", "", None]),
    "monthly_decisions": ([0, 1000, 1_000_000_000], [-1, 1_000_000_001, 2.5, "10", True, None]),
    "notes": (["line\nbreak"], ["", "  ", None, 5, "x" * 2001]),
    "consent": ([True], [False, "true", None, 1]),
}


@st.composite
def _members(draw: st.DrawFn, pool: dict[str, tuple[list[Any], list[Any]]], names: tuple[str, ...],
             required: tuple[str, ...]) -> dict[str, Any]:
    chosen = set(draw(st.lists(st.sampled_from(names), unique=True)))
    if draw(st.integers(0, 4)):
        chosen |= set(required)
    wrong = set(draw(st.lists(st.sampled_from(names), max_size=1)))
    body = {name: draw(st.sampled_from(pool[name][name in wrong])) for name in names if name in chosen}
    if draw(st.integers(0, 10)) == 0:
        body["unknown"] = "x"
    return body


def _arguments_accepted(spec: Any, body: Any) -> bool:
    try:
        validate_arguments(spec, body)
    except ArgumentsInvalid:
        return False
    return True


def _names(spec: Any) -> tuple[str, ...]:
    return ("vendor", "region", "plan") + (("days_since_purchase",) if spec.uses_days else ())


@pytest.mark.parametrize("spec", CHECKS, ids=lambda spec: spec.service)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_check_s_schema_accepts_exactly_the_arguments_it_accepts(spec, data):
    names = _names(spec)
    body = data.draw(_members(ARGUMENTS, names + ("ticket_id",), names[:1] + names[3:]))
    name = f"policy-check-{spec.service}"
    assert (bodies.first_error(name, body) is None) == _arguments_accepted(spec, body), body


def test_the_mcp_tool_s_input_schema_is_the_file():
    for spec in CHECKS:
        stated = bodies.openapi_schema(f"policy-check-{spec.service}")
        assert input_schema(spec) == {key: value for key, value in stated.items() if key not in ("title", "description")}
        assert bodies.schema(f"policy-check-{spec.service}")["properties"].get(
            "days_since_purchase", {"maximum": MAX_DAYS})["maximum"] == MAX_DAYS


def _workflow_accepts(body: Any) -> bool:
    """Whether some workflow takes `body`: its ticket id, then its check's arguments."""
    try:
        ticket_id(body)
    except ArgumentsInvalid:
        return False
    arguments = {key: value for key, value in body.items() if key != "ticket_id"}
    return any(_arguments_accepted(spec, arguments) for spec in CHECKS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_members(ARGUMENTS, _names(CHECKS[0]) + ("ticket_id",), ("vendor", "ticket_id")))
def test_the_workflow_schema_accepts_exactly_what_some_workflow_accepts(body):
    assert (bodies.first_error("workflow", body) is None) == _workflow_accepts(body), body


@cache
def _pilot_validator() -> Draft202012Validator:
    return Draft202012Validator(resolve_printable(bodies.openapi_schema("pilot")))


def _pilot_accepts(body: dict[str, Any]) -> bool:
    try:
        validate_submission(body)
    except GateError:
        return False
    return True


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_members(PILOT, tuple(PILOT), ("company", "contact_name", "contact_email", "use_case",
                                           "monthly_decisions", "consent")))
def test_the_pilot_schema_accepts_exactly_the_submissions_the_intake_accepts(body):
    assert _pilot_validator().is_valid(body) == _pilot_accepts(body), body


@pytest.mark.parametrize(("body", "valid"), [
    ({"pilot_id": "pilot_" + "a" * 24, "confirmation_token": "pct_x"}, True),
    ({"pilot_id": "p", "confirmation_token": "x" * 201}, False),
    ({"pilot_id": "p"}, False),
    ({"pilot_id": 1, "confirmation_token": "t"}, False),
])
def test_the_pilot_schema_states_the_confirmation_s_shape(body, valid):
    assert _pilot_validator().is_valid(body) is valid
