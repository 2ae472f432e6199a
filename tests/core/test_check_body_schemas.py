"""The policy checks', the workflow's and the pilot's body schemas (gate/bodies/).

The policy checks' arguments are checked by their schema alone (`gate.bodies.problems` lists
every problem at once: 400 REQUEST_INVALID, or MCP's invalid params with `data.errors`); what it
accepts must normalize to usable ids. A workflow's body is its check's schema with the workflow
file's `ticket_id` added (`gate.bodies.composed`), checked the same way; the workflow's file (the
OpenAPI component, the union of the four) is held to accept exactly what some workflow accepts.
The pilot's two bodies are each checked by their schema alone too (`pilot#submission`,
`pilot#confirmation`); its file, served with its placeholders resolved, is held to accept,
read by a plain JSON Schema validator, exactly the submissions the gate takes. Both over
generated bodies drawn from values at the edges of each member.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from api.mcp import input_schema
from gate import bodies
from gate.errors import GateError
from gate.services.operations import validate_submission
from gate.services.policychecks import CHECKS, MAX_DAYS, ArgumentsInvalid, validate_arguments
from gate.services.workflows import body_schema

ARGUMENTS: dict[str, tuple[list[Any], list[Any]]] = {  # member: (taken, refused)
    "vendor": (["Adobe", " best buy ", "x" * 100, "\u0130"], ["", "   ", "--", "x" * 101, None, 3]),
    "region": (["US", "de"], ["USA", "U", "1A", "\u00c0B", None, 1]),
    "plan": (["annual", "a" * 64], ["", "---", "a" * 65, None, 2]),
    "days_since_purchase": ([0, 3, 2.5, MAX_DAYS], [-1, MAX_DAYS + 0.5, "3", True, None]),
    "ticket_id": (["T-1", 0, 42, 7.0, "~" * 200], ["", "a b", "~" * 201, -1, 1.5, True, None]),
}
# The use cases the pilot's file states (their one home), as its pattern's alternatives.
_USE_CASES = re.search(r"\(\?:([a-z_|]+)\)",
                       bodies.schema("pilot#submission")["properties"]["use_case"]["allOf"][1]["pattern"])
assert _USE_CASES is not None
PILOT_USE_CASES = _USE_CASES.group(1).split("|")
PILOT: dict[str, tuple[list[Any], list[Any]]] = {
    "company": (["Acme", "x" * 200, " \t" + "x" * 200 + "\u3000\n", "a b", "\u00e9"],
                ["", "   ", "x" * 201, "a\u0000b", "a\tb", "a\u00a0b", None, 1]),
    "contact_name": (["Ada", "\u2028Ada "], ["", "\u200b", "\x1c", None]),
    "contact_email": (["ada@example.com", "a.b@x-y.example.org", " ada@example.com\n"],
                      ["ada", "ada@example", "a@b@c.com", "a b@c.com", "a\u200b@c.com", "", None,
                       "a@" + "b" * 63 + "." + "c" * 190]),
    "use_case": ([*PILOT_USE_CASES, " other\t"], ["pricing", "Other", "", None]),
    "monthly_decisions": ([0, 1000, 1_000_000_000, 7.0], [-1, 1_000_000_001, 2.5, "10", True, None]),
    "notes": (["line\nbreak", " x ", "\x00", "x" * 2000 + "  "], ["", "  ", None, 5, "x" * 2001]),
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
def test_what_a_check_s_schema_accepts_is_usable_and_the_rest_is_refused_item_by_item(spec, data):
    names = _names(spec)
    body = data.draw(_members(ARGUMENTS, names + ("ticket_id",), names[:1] + names[3:]))
    name = f"policy-check-{spec.service}"
    if bodies.first_error(name, body) is None:
        inputs = validate_arguments(spec, body)
        assert inputs["vendor"] and inputs["plan"] and inputs["region"].isupper(), body  # ids, never empty
        return
    with pytest.raises(ArgumentsInvalid) as refused:
        validate_arguments(spec, body)
    fields = [item["field"] for item in refused.value.errors]
    assert len(fields) == len(set(fields)) and set(fields) <= set(body) | set(names), body  # one item a member
    order = [field for field in names if field in fields]
    assert fields == sorted(set(fields) - set(names)) + order, body  # the unknown first, then the schema's order


@pytest.mark.parametrize(("body", "items"), [
    ([], [("arguments", "invalid_type")]),
    ({}, [("vendor", "required"), ("days_since_purchase", "required")]),
    ({"zz": 1, "aa": 2, "vendor": "", "days_since_purchase": "3"},
     [("aa", "unknown_field"), ("zz", "unknown_field"), ("vendor", "invalid_value"),
      ("days_since_purchase", "invalid_value")]),
    # a null is a wrong value, never an absent member (it read as absent for these two alone)
    ({"vendor": None, "days_since_purchase": None},
     [("vendor", "invalid_value"), ("days_since_purchase", "invalid_value")]),
    ({"vendor": "Adobe", "region": "USA", "plan": None, "days_since_purchase": float("nan")},
     [("region", "invalid_value"), ("plan", "invalid_value"), ("days_since_purchase", "invalid_value")]),
])
def test_every_problem_of_the_refund_arguments_is_named_once_in_order(body, items):
    with pytest.raises(ArgumentsInvalid) as refused:
        validate_arguments(CHECKS[0], body)
    assert [(item["field"], item["code"]) for item in refused.value.errors] == items
    assert all(item["message"] for item in refused.value.errors)


def test_the_mcp_tool_s_input_schema_is_the_file():
    for spec in CHECKS:
        stated = bodies.openapi_schema(f"policy-check-{spec.service}")
        assert input_schema(spec) == {key: value for key, value in stated.items() if key not in ("title", "description")}
        assert bodies.schema(f"policy-check-{spec.service}")["properties"].get(
            "days_since_purchase", {"maximum": MAX_DAYS})["maximum"] == MAX_DAYS


def _workflow_accepts(body: Any) -> bool:
    """Whether some workflow takes `body`: its check's schema with the ticket id."""
    return any(not bodies.problems(body_schema(spec.service), body) for spec in CHECKS)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(body=_members(ARGUMENTS, _names(CHECKS[0]) + ("ticket_id",), ("vendor", "ticket_id")))
def test_the_workflow_schema_accepts_exactly_what_some_workflow_accepts(body):
    assert (bodies.first_error("workflow", body) is None) == _workflow_accepts(body), body


@cache
def _pilot_validator() -> Draft202012Validator:
    return Draft202012Validator(bodies.resolved(bodies.schema("pilot")))


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


def test_a_failure_whose_node_states_no_error_item_is_still_named():
    """Fail closed: `problems` never answers a failing body with no problem. The pilot's top level
    (one of its two bodies) states no `x-error`, so each of its failures is named in `jsonschema`'s
    words."""
    assert bodies.problems("pilot", {"pilot_id": "p"})  # a confirmation without its token
    assert bodies.problems("pilot", []) and bodies.problems("pilot", {}) and not bodies.problems("pilot", {
        "pilot_id": "pilot_" + "a" * 24, "confirmation_token": "pct_x"})


def test_a_missing_member_is_answered_alike_by_check_and_by_problems():
    """One rule for a missing member's item: its own node's `x-error` by `required`, whether the
    refusal names the first problem (`check`) or every problem (`problems`)."""
    with pytest.raises(GateError) as refused:
        bodies.check("policy-check-trial", {}, "REQUEST_INVALID")
    stated = [{"field": "vendor", "code": "required", "message": "vendor is required"}]
    assert refused.value.details["errors"] == stated == bodies.problems("policy-check-trial", {})
    assert refused.value.message == "vendor: a vendor name of 1 to 100 characters with a letter or digit"


def test_a_composed_schema_adds_only_new_members_its_source_states():
    """`gate.bodies.composed`: a member the base already has, or one its source does not state, is
    a programming error; a composition adds the source's members after the base's, required where
    the source requires them, and takes the source's top-level refusals by keyword."""
    for members in (("vendor",), ("nowhere",), ("",)):
        with pytest.raises(ValueError, match="must be new"):
            bodies.schema(bodies.composed("policy-check-trial", "workflow", members))
    document = bodies.schema(body_schema("trial"))
    assert list(document["properties"]) == ["vendor", "region", "plan", "ticket_id"]
    assert document["required"] == ["vendor", "ticket_id"] and document["additionalProperties"] is False
    assert document["x-error"]["type"]["field"] == "body"  # the workflow's, in place of the check's
    assert document["x-error"]["additionalProperties"]["code"] == "unknown_field"  # the check's, kept
    assert "ticket_id" not in bodies.schema("policy-check-trial")["properties"]  # the base is not changed
