"""Validation details not covered by the fixture corpus: limits at their exact boundaries,
Python-only inputs (schema_violation), path rendering, ordering and robustness."""

from __future__ import annotations

import copy
import math

import pytest

from gate.rulebook import validate_rulebook
from gate.rulebook.contract import ERROR_CODES, MAX_ERRORS


def _codes(errors):
    return [(e["field"], e["code"]) for e in errors]


def _leaf(i=0):
    return {"field": f"f{i}", "operator": "eq", "value": i}


def _rules(build, n, condition=None):
    return [build.rule(f"rule_{i:03d}", condition(i) if condition else _leaf(i)) for i in range(n)]


# --------------------------------------------------------------------------- limits


def test_rule_count_limits(build):
    assert validate_rulebook(build.rulebook(_rules(build, 1))) == []
    assert validate_rulebook(build.rulebook(_rules(build, 100))) == []
    assert _codes(validate_rulebook(build.rulebook(_rules(build, 101)))) == [("rulebook.rules", "too_complex")]
    assert _codes(validate_rulebook(build.rulebook([]))) == [("rulebook.rules", "invalid_value")]


def test_node_budget_256(build):
    def wide(i):
        return {"all": [_leaf(j) for j in range(31)]}  # 32 nodes

    exactly = build.rulebook(_rules(build, 8, wide))  # 256 nodes
    assert validate_rulebook(exactly) == []
    over = build.rulebook(_rules(build, 8, wide) + [build.rule("rule_extra", _leaf())])  # 257
    assert _codes(validate_rulebook(over)) == [("rulebook.rules", "too_complex")]
    assert "257" in validate_rulebook(over)[0]["message"]


def _nested(build, depth, combinator="all"):
    node = _leaf()
    for _ in range(depth - 1):
        node = {"not": node} if combinator == "not" else {combinator: [node]}
    return build.single(node)


@pytest.mark.parametrize("combinator", ["all", "any", "not"])
def test_depth_limit_8(build, combinator):
    assert validate_rulebook(_nested(build, 8, combinator)) == []
    step = ".not" if combinator == "not" else f".{combinator}[0]"
    path = "rulebook.rules[0].condition" + step * 8
    assert _codes(validate_rulebook(_nested(build, 9, combinator))) == [(path, "too_deep")]


def _nested_list_not(build, depth):
    node = _leaf()
    for _ in range(depth - 1):
        node = {"not": [node]}
    return build.single(node)


def test_depth_limit_8_counts_the_list_form_of_not(build, evaluate):
    # Issue 12 gap 4: `not: [c]` adds one level exactly as `not: c` does.
    assert validate_rulebook(_nested_list_not(build, 8)) == []
    path = "rulebook.rules[0].condition" + ".not[0]" * 8
    assert _codes(validate_rulebook(_nested_list_not(build, 9))) == [(path, "too_deep")]
    # 250 nested list-form nots are one too_deep error, never a RecursionError in the evaluator.
    assert _codes(validate_rulebook(_nested_list_not(build, 250))) == [(path, "too_deep")]
    assert evaluate(_nested_list_not(build, 8), {"f0": 0}).matched is False  # 7 nots of a true leaf


def test_depth_limit_reported_once_per_deep_node_without_descending(build):
    errors = validate_rulebook(_nested(build, 500))
    assert _codes(errors) == [("rulebook.rules[0].condition" + ".all[0]" * 8, "too_deep")]


def test_children_limits(build):
    assert validate_rulebook(build.single({"any": [_leaf(i) for i in range(32)]})) == []
    assert _codes(validate_rulebook(build.single({"all": [_leaf(i) for i in range(33)]}))) == [
        ("rulebook.rules[0].condition.all", "too_complex")
    ]
    assert validate_rulebook(build.single({"all": [_leaf()]})) == []


@pytest.mark.parametrize("priority", [-1000, 0, 1000, 10.0, -5])
def test_priority_bounds_accepted(build, priority):
    rulebook = build.rulebook([build.rule("rule_a", _leaf(), priority=priority)])
    assert validate_rulebook(rulebook) == []


@pytest.mark.parametrize("length, ok", [(1, False), (2, True), (120, True), (121, False)])
def test_identifier_length(build, length, ok):
    rulebook = build.rulebook(_rules(build, 1), rulebook_id="r" * length)
    assert (validate_rulebook(rulebook) == []) is ok


@pytest.mark.parametrize("value", ["a_b", "a.b:c-d", "z9", "rule:v1.2-x_y"])
def test_identifier_charset_accepted(build, value):
    assert validate_rulebook(build.rulebook([build.rule(value, _leaf())], rulebook_id=value)) == []


@pytest.mark.parametrize("value", ["1rule", "_rule", "Rule", "ru le", "rulé", "rule\n", "rule/x", ""])
def test_identifier_charset_rejected(build, value):
    assert _codes(validate_rulebook(build.rulebook([build.rule(value, _leaf())]))) == [
        ("rulebook.rules[0].rule_id", "invalid_value")
    ]


@pytest.mark.parametrize("value, ok", [("AB", True), ("A_1", True), ("A" * 80, True), ("A" * 81, False), ("A", False), ("1A", False), ("Ab", False), ("AB\n", False)])
def test_token_pattern(build, value, ok):
    rulebook = build.rulebook(_rules(build, 1), default=build.outcome("review", value, "hold", value))
    errors = validate_rulebook(rulebook)
    if ok:
        assert errors == []
    else:
        assert _codes(errors) == [("rulebook.default_outcome.verdict", "invalid_value"), ("rulebook.default_outcome.reason_code", "invalid_value")]


@pytest.mark.parametrize("field, ok", [("a", True), ("_a", True), ("A.b-c_d.0", True), ("a" * 160, True), ("a" * 161, False), ("-a", False), (".a", False), ("a b", False), ("a\n", False), ("é", False), ("", False)])
def test_field_path_pattern(build, field, ok):
    errors = validate_rulebook(build.single({"field": field, "operator": "exists"}))
    assert (errors == []) is ok
    if not ok:
        assert _codes(errors) == [("rulebook.rules[0].condition.field", "invalid_value")]


@pytest.mark.parametrize("length, ok", [(1, True), (80, True), (81, False)])
def test_version_length(build, length, ok):
    assert (validate_rulebook(build.rulebook(_rules(build, 1), version="v" * length)) == []) is ok


@pytest.mark.parametrize("length, ok", [(1, True), (160, True), (161, False), (0, False)])
def test_action_length(build, length, ok):
    rulebook = build.rulebook([build.rule("rule_a", _leaf(), action="a" * length)])
    assert (validate_rulebook(rulebook) == []) is ok


@pytest.mark.parametrize("decision", ["yes", "no", "review"])
def test_decisions(build, decision):
    assert validate_rulebook(build.rulebook([build.rule("rule_a", _leaf(), decision=decision)])) == []


@pytest.mark.parametrize("decision", ["Yes", "NO", "unclear", "allow", "", " yes"])
def test_decision_not_case_folded(build, decision):
    errors = validate_rulebook(build.rulebook([build.rule("rule_a", _leaf(), decision=decision)]))
    assert _codes(errors) == [("rulebook.rules[0].outcome.decision", "invalid_value")]


def test_value_optional_only_for_exists_operators(build):
    for operator in ("exists", "not_exists"):
        assert validate_rulebook(build.single({"field": "a", "operator": operator})) == []
    for operator in ("eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in", "contains", "not_contains"):
        assert _codes(validate_rulebook(build.single({"field": "a", "operator": operator}))) == [
            ("rulebook.rules[0].condition.value", "missing_field")
        ]
        assert validate_rulebook(build.single({"field": "a", "operator": operator, "value": None})) == []


def test_input_schema_limits(build):
    names = [f"f{i}" for i in range(257)]
    rulebook = build.rulebook(_rules(build, 1), input_schema={"required": names, "properties": {n: {"type": "string"} for n in names}})
    assert _codes(validate_rulebook(rulebook)) == [
        ("rulebook.input_schema.required", "too_complex"),
        ("rulebook.input_schema.properties", "too_complex"),
    ]


# --------------------------------------------------------------------------- schema_violation and odd inputs


@pytest.mark.parametrize(
    "value, path",
    [
        (math.nan, "rulebook.rules[0].condition.value"),
        (math.inf, "rulebook.rules[0].condition.value"),
        ([1, -math.inf], "rulebook.rules[0].condition.value[1]"),
        ({"a": {1: "x"}}, "rulebook.rules[0].condition.value.a[1]"),
        ({1, 2}, "rulebook.rules[0].condition.value"),
        ((1, 2), "rulebook.rules[0].condition.value"),
        (b"bytes", "rulebook.rules[0].condition.value"),
        (2**53, "rulebook.rules[0].condition.value"),
        ({"k": [object()]}, "rulebook.rules[0].condition.value.k[0]"),
    ],
)
def test_schema_violation_for_non_json_values(build, value, path):
    errors = validate_rulebook(build.single({"field": "a", "operator": "eq", "value": value}))
    assert _codes(errors) == [(path, "schema_violation")]


def test_non_string_keys(build):
    rulebook = build.rulebook(_rules(build, 1))
    rulebook[7] = "x"
    assert _codes(validate_rulebook(rulebook)) == [("rulebook[7]", "schema_violation")]


def test_odd_key_paths_are_quoted(build):
    rulebook = build.single({"field": "a", "operator": "eq", "value": {"a.b": {"code": 1}}, "my key": 1})
    assert _codes(validate_rulebook(rulebook)) == [
        ('rulebook.rules[0].condition["my key"]', "unknown_field"),
        ('rulebook.rules[0].condition.value["a.b"].code', "unknown_field"),
    ]


@pytest.mark.parametrize("obj", [None, 1, "rulebook", [], True, 1.5, {}, object()])
def test_never_raises_on_any_python_value(obj):
    errors = validate_rulebook(obj)
    assert errors and all(e["code"] in ERROR_CODES for e in errors)


def test_empty_object_lists_every_missing_member():
    assert _codes(validate_rulebook({})) == [
        ("rulebook.schema_version", "missing_field"),
        ("rulebook.rulebook_id", "missing_field"),
        ("rulebook.version", "missing_field"),
        ("rulebook.rules", "missing_field"),
        ("rulebook.default_outcome", "missing_field"),
    ]


def test_base_path(build):
    rulebook = build.single({"field": "a", "operator": "regex", "value": 1})
    assert _codes(validate_rulebook(rulebook, base_path="request.rulebook")) == [
        ("request.rulebook.rules[0].condition.operator", "unsupported_operator")
    ]


def test_order_does_not_depend_on_key_insertion_order(build):
    rulebook = build.single({"field": "a", "operator": "eq", "value": 1, "wasm": 1, "code": 2})
    rulebook["zz"] = 1
    rulebook["aa"] = 1
    rulebook["input_schema"] = {"properties": {"b": {"type": "x"}, "a": {"type": "y"}}}
    reordered = {key: copy.deepcopy(rulebook[key]) for key in reversed(list(rulebook))}
    reordered["rules"][0]["condition"] = dict(reversed(list(rulebook["rules"][0]["condition"].items())))
    reordered["input_schema"]["properties"] = dict(reversed(list(rulebook["input_schema"]["properties"].items())))
    expected = [
        ("rulebook.aa", "unknown_field"),
        ("rulebook.zz", "unknown_field"),
        ("rulebook.input_schema.properties.a.type", "invalid_value"),
        ("rulebook.input_schema.properties.b.type", "invalid_value"),
        ("rulebook.rules[0].condition.code", "unknown_field"),
        ("rulebook.rules[0].condition.wasm", "unknown_field"),
    ]
    assert _codes(validate_rulebook(rulebook)) == expected
    assert _codes(validate_rulebook(reordered)) == expected


def test_every_error_has_field_code_message(build):
    rulebook = build.single({"field": 1, "operator": "x", "all": 3})
    for error in validate_rulebook(rulebook):
        assert set(error) == {"field", "code", "message"}
        assert error["code"] in ERROR_CODES


def test_error_list_is_bounded(build):
    rules = [build.rule("R", {"function": 1}) for _ in range(100)]
    errors = validate_rulebook(build.rulebook(rules))
    assert len(errors) == MAX_ERRORS


def test_every_error_code_is_exercised_somewhere():
    """Each documented code is produced by at least one fixture or test input above."""
    import json
    from pathlib import Path

    corpus = json.loads((Path(__file__).parent / "fixtures" / "invalid-rulebooks.json").read_text())["cases"]
    seen = {error["code"] for case in corpus for error in case["errors"]}
    assert set(ERROR_CODES) - seen == {"too_deep", "schema_violation"}  # covered in this module
