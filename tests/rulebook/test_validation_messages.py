"""Exact validator output (field, code and message) for each kind of error, and the name limits.

The messages name what is wrong in the caller's terms ("a property declaration must be an
object"); they are part of the documented error body, so they are pinned here once. These cases
also kill the mutants of `gate/rulebook/validate.py` that only the message would reveal.
"""

from __future__ import annotations

import copy

import pytest

from gate.rulebook.contract import MAX_INPUT_NAMES
from gate.rulebook.validate import validate_rulebook

BASE = {
    "schema_version": "rulebook_v1", "rulebook_id": "demo", "version": "1",
    "rules": [{"rule_id": "r1", "priority": 1, "condition": {"field": "a", "operator": "eq", "value": 1},
               "outcome": {"decision": "yes", "verdict": "OK", "action": "go", "reason_code": "OK"}}],
    "default_outcome": {"decision": "no", "verdict": "NO", "action": "stop", "reason_code": "NO"},
}
FIELD_SHAPE = "[A-Za-z_][A-Za-z0-9_.-]{0,159}"


def _with_schema(schema):
    return validate_rulebook(dict(copy.deepcopy(BASE), input_schema=schema))


def _e(field, code, message):
    return {"field": "rulebook." + field, "code": code, "message": message}


def test_the_base_is_valid():
    assert validate_rulebook(copy.deepcopy(BASE)) == []


def test_input_schema_errors_in_order_with_their_messages():
    schema = {
        "properties": {"zeta": {"type": 1}, "1bad": {"type": "string"}, "code": {"type": "string"}, "beta": "x",
                       "alpha": {"type": "text", "extra": 1}},
        "required": ["a", "a", "9x", 3],
    }
    assert _with_schema(schema) == [
        _e("input_schema.required[1]", "duplicate_value", "field is listed twice in required"),
        _e("input_schema.required[2]", "invalid_value", f"a required field name must match {FIELD_SHAPE}"),
        _e("input_schema.required[3]", "invalid_type", "a required field name must be a string"),
        _e('input_schema.properties["1bad"]', "invalid_value", f"property names must match {FIELD_SHAPE}"),
        _e("input_schema.properties.alpha.extra", "unknown_field",
           "unknown member; property declaration objects are closed"),
        _e("input_schema.properties.alpha.type", "invalid_value",
           "type must be one of string, number, integer, boolean, array, object, null"),
        _e("input_schema.properties.beta", "invalid_type", "a property declaration must be an object"),
        _e("input_schema.properties.code", "unknown_field",
           "'code' looks like executable content; customer-supplied code is rejected"),
        _e("input_schema.properties.zeta.type", "invalid_type", "type must be a string"),
    ]


def test_input_schema_members_of_the_wrong_type():
    assert _with_schema({"properties": []}) == [
        _e("input_schema.properties", "invalid_type", "properties must be an object")]
    assert _with_schema({"required": "a"}) == [
        _e("input_schema.required", "invalid_type", "required must be an array of field names")]
    assert _with_schema({"properties": {"a": {"type": "string"}}, "required": ["a"]}) == []


@pytest.mark.parametrize("count", [MAX_INPUT_NAMES, MAX_INPUT_NAMES + 1])
def test_at_most_256_input_names(count):
    names = [f"f{i}" for i in range(count)]
    errors = _with_schema({"properties": {name: {"type": "number"} for name in names}, "required": names})
    if count <= MAX_INPUT_NAMES:
        assert errors == []
    else:
        assert errors == [
            _e("input_schema.required", "too_complex", f"required may list at most {MAX_INPUT_NAMES} fields"),
            _e("input_schema.properties", "too_complex", f"properties may declare at most {MAX_INPUT_NAMES} fields"),
        ]


def test_unknown_members_say_whether_they_look_executable():
    rulebook = dict(copy.deepcopy(BASE), script="x", extra=1)
    assert validate_rulebook(rulebook) == [
        _e("extra", "unknown_field", "unknown member; rulebook objects are closed"),
        _e("script", "unknown_field", "'script' looks like executable content; customer-supplied code is rejected"),
    ]


def test_each_member_names_itself_in_its_message():
    rulebook = {"schema_version": 1, "rulebook_id": "Bad", "version": "", "rules": [
        "x",
        {"rule_id": 5, "priority": 1, "condition": {"all": ["c", {"field": "9", "operator": 7}]},
         "outcome": {"decision": 3, "verdict": "ok", "action": 5, "reason_code": 4}},
    ], "default_outcome": []}
    assert validate_rulebook(rulebook) == [
        _e("schema_version", "invalid_type", "schema_version must be a string"),
        _e("rulebook_id", "invalid_value", "rulebook_id must match [a-z][a-z0-9_.:-]{1,119}"),
        _e("version", "invalid_value", "version must be 1 to 80 characters"),
        _e("rules[0]", "invalid_type", "a rule must be an object"),
        _e("rules[1].rule_id", "invalid_type", "rule_id must be a string"),
        _e("rules[1].condition.all[0]", "invalid_type", "a condition must be an object"),
        _e("rules[1].condition.all[1].field", "invalid_value", f"field must match {FIELD_SHAPE}"),
        _e("rules[1].condition.all[1].operator", "invalid_type", "operator must be a string"),
        _e("rules[1].outcome.decision", "invalid_type", "decision must be a string"),
        _e("rules[1].outcome.verdict", "invalid_value", "verdict must match [A-Z][A-Z0-9_]{1,79}"),
        _e("rules[1].outcome.action", "invalid_type", "action must be a string"),
        _e("rules[1].outcome.reason_code", "invalid_type", "reason_code must be a string"),
        _e("default_outcome", "invalid_type", "default_outcome must be an object"),
    ]
    assert validate_rulebook([]) == [
        {"field": "rulebook", "code": "invalid_type", "message": "the rulebook must be an object"}]


def test_closed_objects_name_their_kind_and_odd_keys_sort_last():
    rulebook = copy.deepcopy(BASE)
    rulebook["input_schema"] = {"x": 1}
    rulebook["rules"][0]["x"] = 1
    rulebook["rules"][0]["condition"]["x"] = 1
    rulebook[1] = "k"
    rulebook["é x"] = 1
    assert validate_rulebook(rulebook) == [
        {"field": 'rulebook["é x"]', "code": "unknown_field", "message": "unknown member; rulebook objects are closed"},
        {"field": "rulebook[1]", "code": "schema_violation", "message": "object keys must be strings"},
        _e("input_schema.x", "unknown_field", "unknown member; input_schema objects are closed"),
        _e("rules[0].x", "unknown_field", "unknown member; rule objects are closed"),
        _e("rules[0].condition.x", "unknown_field", "unknown member; condition objects are closed"),
    ]
    assert _with_schema([]) == [_e("input_schema", "invalid_type", "input_schema must be an object")]


def test_value_data_is_walked_to_the_end_with_the_safe_integer_bounds():
    from gate.vocabulary import MAX_SAFE_INTEGER

    rulebook = copy.deepcopy(BASE)
    rulebook["rules"][0]["condition"]["value"] = [
        None, "s", True, {"b": MAX_SAFE_INTEGER, "a": -MAX_SAFE_INTEGER - 1, 2: 0, "code": 1},
        MAX_SAFE_INTEGER + 1, float("inf"), -MAX_SAFE_INTEGER, 1.5]
    value = "rules[0].condition.value"
    assert validate_rulebook(rulebook) == [
        _e(f"{value}[3].code", "unknown_field",
           "'code' looks like executable content; customer-supplied code is rejected"),
        _e(f"{value}[3][2]", "schema_violation", "object keys must be strings"),
        _e(f"{value}[3].a", "schema_violation", "integers must lie within ±(2^53−1)"),
        _e(f"{value}[4]", "schema_violation", "integers must lie within ±(2^53−1)"),
        _e(f"{value}[5]", "schema_violation", "numbers must be finite"),
    ]


def test_duplicates_name_the_first_rule_and_outcomes_their_own_members():
    rulebook = copy.deepcopy(BASE)
    rulebook["version"] = "a\x01"
    rulebook["rules"] += [copy.deepcopy(rulebook["rules"][0]),
                          {"rule_id": "r1", "condition": {"field": "a", "operator": "exists"}, "outcome": "x"},
                          {"rule_id": "r4", "condition": {"field": "a", "operator": "exists"}}]
    rulebook["default_outcome"]["x"] = 1
    rulebook["default_outcome"]["action"] = "go\n"
    assert validate_rulebook(rulebook) == [
        _e("version", "invalid_value", "version must not contain control characters"),
        _e("rules[1].rule_id", "duplicate_value", "rule_id is already used by rules[0]"),
        _e("rules[2].rule_id", "duplicate_value", "rule_id is already used by rules[0]"),
        _e("rules[2].outcome", "invalid_type", "outcome must be an object"),
        _e("rules[3].outcome", "missing_field", "outcome is required"),
        _e("default_outcome.x", "unknown_field", "unknown member; outcome objects are closed"),
        _e("default_outcome.action", "invalid_value", "action must not contain control characters"),
    ]


def test_token_and_identifier_shapes_are_named_and_odd_property_names_sort_last():
    rulebook = copy.deepcopy(BASE)
    rulebook["rules"][0]["rule_id"] = "Bad"
    rulebook["rules"][0]["outcome"]["reason_code"] = "ok"
    rulebook["input_schema"] = {"properties": {1: {"type": "string"}, "b": {"type": "string"}, "a": 1}}
    assert validate_rulebook(rulebook) == [
        _e("input_schema.properties.a", "invalid_type", "a property declaration must be an object"),
        _e("input_schema.properties[1]", "schema_violation", "object keys must be strings"),
        _e("rules[0].rule_id", "invalid_value", "rule_id must match [a-z][a-z0-9_.:-]{1,119}"),
        _e("rules[0].outcome.reason_code", "invalid_value", "reason_code must match [A-Z][A-Z0-9_]{1,79}"),
    ]
