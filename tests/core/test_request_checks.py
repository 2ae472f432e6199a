"""`gate.protocol.requests.prepare_decision_request`: every refusal with its exact code and members.

The HTTP tests (tests/api/test_decide_refusals.py, test_hardening_input.py) show the refusals
reach the caller; these pin each branch of the checks themselves, fast enough to run for every
mutant of `gate/protocol/requests.py` under `scripts/mutation`.
"""

from __future__ import annotations

import copy

import pytest

from gate import vocabulary as C
from gate.errors import GateError
from gate.protocol.requests import (
    PreparedRequest,
    forbidden_output_fields,
    prepare_decision_request,
)

RULEBOOK = {"schema_version": "rulebook.v1", "rules": []}  # shape is checked later, in gate.rulebook
ADAPTER = {"adapter_id": "crm", "version": "1.0.0", "manifest_hash": "0" * 64, "input": {"id": 1}}


def _body(**members):
    body = {"mode": "rulebook", "rulebook": copy.deepcopy(RULEBOOK), "context": {"inputs": {"amount": 5}}}
    body.update(members)
    return body


def _refusal(body) -> GateError:
    with pytest.raises(GateError) as caught:
        prepare_decision_request(body)
    return caught.value


def _invalid(body, field, code):
    error = _refusal(body)
    assert error.code == "REQUEST_INVALID"
    assert error.details == {"errors": [{"field": field, "code": code, "message": error.message}]}
    assert error.message
    return error


@pytest.mark.parametrize("body", [[], "x", 3, None])
def test_a_body_that_is_not_an_object(body):
    _invalid(body, "$", "invalid_type")


@pytest.mark.parametrize("view", ["MINIMAL", "", 3, "summary"])
def test_a_bad_response_view(view):
    _invalid(_body(response_view=view), "response_view", "invalid_value")


@pytest.mark.parametrize("mode", [1, True, ["rulebook"], {}])
def test_a_mode_that_is_not_a_string(mode):
    _invalid(_body(mode=mode), "mode", "invalid_type")


@pytest.mark.parametrize("mode", ["Rulebook", "", "advisory"])
def test_an_unknown_mode(mode):
    _invalid(_body(mode=mode), "mode", "invalid_value")


@pytest.mark.parametrize("context", [[], "x", 5])
def test_a_context_that_is_not_an_object(context):
    _invalid(_body(context=context), "context", "invalid_type")


@pytest.mark.parametrize("mode", C.LEGACY_MODES)
def test_legacy_modes_answer_unavailable_with_their_name(mode):
    error = _refusal(_body(mode=mode))
    assert (error.code, error.details) == ("LEGACY_MODE_UNAVAILABLE",
                                           {"mode": mode, "supported_modes": ["rulebook"]})


def test_a_missing_mode_is_the_default_single_mode():
    body = _body()
    del body["mode"]
    error = _refusal(body)
    assert (error.code, error.details) == ("LEGACY_MODE_UNAVAILABLE",
                                           {"mode": "single", "supported_modes": ["rulebook"]})
    assert (_refusal(_body(mode=None)).details["mode"]) == "single"


def test_facts_over_the_size_limit_are_refused_before_anything_else():
    error = _refusal(_body(context={"inputs": {"list": [0] * 10_001}}, action="allow"))
    assert (error.code, error.details["limit"]) == ("EVALUATION_INPUT_TOO_LARGE", "array_length")


def test_inputs_that_are_not_an_object_are_a_type_error_not_a_size_error():
    _invalid(_body(context={"inputs": [0] * 10_001}), "context.inputs", "invalid_type")
    _invalid(_body(context={"inputs": "x"}), "context.inputs", "invalid_type")


def test_response_material_at_the_top_and_nested_in_the_facts():
    inputs = {"b": [{"action": 1}], "trusted_adapter": {"action": 2}, "a": {"runtime_binding": None}}
    error = _refusal(_body(action="allow", decision_contract={}, context={"inputs": inputs}))
    assert error.code == "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN"
    assert error.details == {"forbidden_fields": [
        "decision_contract", "action",
        "context.inputs.a.runtime_binding", "context.inputs.b[0].action",
        "context.inputs.trusted_adapter", "context.inputs.trusted_adapter.action",
    ]}


def test_forbidden_output_fields_without_usable_context():
    assert forbidden_output_fields({"action": 1}) == ["action"]
    assert forbidden_output_fields({"context": None, "adapter_facts": 1}) == ["adapter_facts"]
    assert forbidden_output_fields({"context": {"inputs": ["action"]}}) == []
    assert forbidden_output_fields({"context": {"inputs": {"x": [[{"action": 0}]]}}}) == [
        "context.inputs.x[0][0].action"]


@pytest.mark.parametrize("binding_mode", ["python", "", 0, C.BINDING_DIRECT.upper()])
def test_an_unsupported_binding_mode(binding_mode):
    error = _refusal(_body(binding_mode=binding_mode))
    assert error.code == "RULEBOOK_BINDING_MODE_UNSUPPORTED"
    assert error.details == {"binding_mode": binding_mode,
                             "supported_binding_modes": [C.BINDING_DIRECT, C.BINDING_ADAPTER]}


@pytest.mark.parametrize("binding_mode", [None, C.BINDING_ADAPTER, C.BINDING_DIRECT])
def test_both_fact_sources_are_a_conflict(binding_mode):
    body = _body(adapter=copy.deepcopy(ADAPTER))
    if binding_mode:
        body["binding_mode"] = binding_mode
    error = _refusal(body)
    assert error.code == "RULEBOOK_BINDING_MODE_CONFLICT"
    assert error.details == {"binding_mode": binding_mode or C.BINDING_ADAPTER,
                             "inferred_binding_mode": C.BINDING_ADAPTER}


def test_a_binding_mode_that_contradicts_the_facts_source():
    error = _refusal(_body(binding_mode=C.BINDING_ADAPTER))
    assert (error.code, error.details) == ("RULEBOOK_BINDING_MODE_CONFLICT", {
        "binding_mode": C.BINDING_ADAPTER, "inferred_binding_mode": C.BINDING_DIRECT})
    error = _refusal(_body(binding_mode=C.BINDING_DIRECT, context={}, adapter=copy.deepcopy(ADAPTER)))
    assert (error.code, error.details) == ("RULEBOOK_BINDING_MODE_CONFLICT", {
        "binding_mode": C.BINDING_DIRECT, "inferred_binding_mode": C.BINDING_ADAPTER})


@pytest.mark.parametrize("adapter", ["crm", [ADAPTER], 1])
def test_an_adapter_that_is_not_an_object(adapter):
    error = _refusal(_body(context={}, adapter=adapter))
    assert error.code == "TRUSTED_ADAPTER_INVALID"
    assert error.details == {"errors": [
        {"field": "adapter", "code": "invalid_type", "message": "adapter must be an object"}]}


@pytest.mark.parametrize(("rulebook", "code"), [(None, "missing_field"), ("{}", "invalid_type"),
                                                ([], "invalid_type")])
def test_a_missing_or_non_object_rulebook(rulebook, code):
    error = _refusal(_body(rulebook=rulebook))
    assert error.code == "RULEBOOK_INVALID"
    [detail] = error.details["errors"]
    assert (detail["field"], detail["code"]) == ("rulebook", code)
    assert error.message == f"Rulebook v1 validation failed: {detail['message']}"
    assert set(error.details) == {"errors"}


def test_a_direct_request_is_prepared_without_its_response_view():
    body = _body(response_view="minimal")
    prepared = prepare_decision_request(body)
    assert prepared == PreparedRequest(
        request={key: value for key, value in body.items() if key != "response_view"},
        rulebook=RULEBOOK, facts={"amount": 5}, adapter=None, binding_mode=C.BINDING_DIRECT,
        context={"inputs": {"amount": 5}}, response_view="minimal")


def test_an_adapter_request_is_prepared_with_its_adapter():
    prepared = prepare_decision_request(_body(context={"inputs": None, "k": 1}, adapter=copy.deepcopy(ADAPTER),
                                              binding_mode=C.BINDING_ADAPTER))
    assert (prepared.adapter, prepared.facts, prepared.binding_mode) == (ADAPTER, None, C.BINDING_ADAPTER)
    assert (prepared.context, prepared.response_view) == ({"inputs": None, "k": 1}, None)


@pytest.mark.parametrize("context", [None, {}])
def test_an_empty_or_null_context_is_a_direct_request_without_facts(context):
    prepared = prepare_decision_request(_body(context=context))
    assert (prepared.context, prepared.facts, prepared.binding_mode) == ({}, None, C.BINDING_DIRECT)


def test_a_null_adapter_member_is_no_adapter():
    prepared = prepare_decision_request(_body(adapter=None))
    assert (prepared.adapter, prepared.facts, prepared.binding_mode) == (None, {"amount": 5}, C.BINDING_DIRECT)
