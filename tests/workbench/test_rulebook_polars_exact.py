"""Exact answers of `workbench.engines.rulebook_polars` beside the differential test: the paths a
rulebook reads, the columns it adds, the outcome table, the kept rule columns. Each test builds
its own rulebook and facts table."""

from __future__ import annotations

import polars as pl
import pyarrow as pa
import pytest

from gate.protocol.canonical import canonical_text
from workbench.dataset.facts import facts_table
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp


def rule(rule_id, condition, priority=None, **outcome):
    outcome = {"decision": "yes", "verdict": "APPROVE", "action": "go", "reason_code": f"R_{rule_id}",
               **outcome}
    body = {"rule_id": rule_id, "condition": condition, "outcome": outcome}
    if priority is not None:
        body["priority"] = priority
    return body


def book(*rules, input_schema=None):
    default = {"decision": "review", "verdict": "REVIEW", "action": "hold", "reason_code": "NO_MATCH"}
    out = {"schema_version": "rulebook_v1", "rulebook_id": "exact_book", "version": "7", "rules": list(rules),
           "default_outcome": default}
    if input_schema:
        out["input_schema"] = input_schema
    return out


def table(*facts):
    texts = [canonical_text(f) for f in facts]
    ids = [f"d{i}" for i in range(len(texts))]
    batch = pa.table({"decision_id": ids, "facts_json": pa.array(texts, pa.string()),
                      "scope": ["s"] * len(ids), "month": ["2026-01"] * len(ids)})
    return pl.from_arrow(facts_table(batch)).lazy()


def test_referenced_paths_walks_every_combinator_and_the_input_schema():
    rulebook = book(
        rule("a", {"all": [{"field": "z.k", "operator": "exists"},
                           {"any": [{"field": "b", "operator": "eq", "value": 1},
                                    {"not": [{"field": "c", "operator": "gt", "value": 2}]}]}]}),
        rule("b", {"not": {"field": "b", "operator": "lt", "value": 0}}),
        input_schema={"required": ["r"], "properties": {"p": {"type": "string"}, "r": {"type": "number"}}})
    assert rp.referenced_paths(rulebook) == ["b", "c", "p", "r", "z.k"]
    assert rp.referenced_paths(book(rule("a", {"field": "x", "operator": "exists"}))) == ["x"]


def test_compile_keeps_identity_order_outcomes_and_the_columns_of_every_path():
    rulebook = book(rule("low", {"field": "x", "operator": "exists"}),
                    rule("high", {"field": "y", "operator": "exists"}, priority=3, action="act"))
    compiled = rp.compile_rulebook(rulebook, ["high", "low"])
    assert (compiled.rulebook_id, compiled.version) == ("exact_book", "7")
    assert [rule_id for rule_id, _ in compiled.rules] == ["high", "low"]
    assert [o["action"] for o in compiled.outcomes] == ["act", "go"]
    assert compiled.default_outcome == rulebook["default_outcome"]
    assert compiled.needs_input is None and compiled.paths == ("x", "y")
    assert compiled.columns == fc.path_schema(["x", "y"])
    with pytest.raises(ValueError, match="priority"):
        rp.compile_rulebook(rulebook, ["low", "high"])


def test_the_outcome_table_names_every_pick():
    second = rule("second", {"field": "y", "operator": "exists"}, decision="no", verdict="DENY", action="a2")
    rulebook = book(rule("first", {"field": "x", "operator": "exists"}, action="a1"), second)
    compiled = rp.compile_rulebook(rulebook, ["first", "second"])
    assert rp.outcome_table(compiled).to_dicts() == [
        {"_pick": -2, "status": "ok", "verdict": "review", "application_verdict": "REVIEW", "action": "hold",
         "reason_code": "NO_MATCH", "matched_rule_id": None},
        {"_pick": -1, "status": "needs_input", "verdict": "review", "application_verdict": "NEEDS_INPUT",
         "action": "collect_required_input", "reason_code": "INPUT_SCHEMA_FAILED", "matched_rule_id": None},
        {"_pick": 0, "status": "ok", "verdict": "yes", "application_verdict": "APPROVE", "action": "a1",
         "reason_code": "R_first", "matched_rule_id": "first"},
        {"_pick": 1, "status": "ok", "verdict": "no", "application_verdict": "DENY", "action": "a2",
         "reason_code": "R_second", "matched_rule_id": "second"},
    ]
    assert rp.outcome_table(compiled).schema["_pick"] == pl.Int32


def test_a_path_no_fact_has_is_added_as_null_columns():
    compiled = rp.compile_rulebook(book(rule("a", {"field": "never", "operator": "not_exists"})), ["a"])
    frame = table({"x": 1}, {"x": 2})
    added = rp.with_fact_columns(frame, compiled).collect()
    for name, dtype in fc.path_schema(["never"]).items():
        assert added.schema[name] == dtype and added[name].null_count() == 2
    kept = rp.compile_rulebook(book(rule("a", {"field": "x", "operator": "exists"})), ["a"])
    assert rp.with_fact_columns(frame, kept).collect_schema().names() == frame.collect_schema().names()
    out = rp.evaluate(frame, compiled).collect()
    assert out["matched_rule_id"].to_list() == ["a", "a"] and out["replay"].to_list() == ["vector", "vector"]


def test_rule_columns_are_kept_on_request_only():
    rulebook = book(rule("big", {"field": "x", "operator": "gt", "value": 5}, priority=2),
                    rule("any", {"field": "x", "operator": "exists"}, priority=1))
    compiled = rp.compile_rulebook(rulebook, ["big", "any"])
    frame = table({"x": 9}, {"x": 1}, {})
    kept = rp.evaluate(frame, compiled, keep_rule_columns=True).collect()
    assert kept["rule::big"].to_list() == [True, False, False]
    assert kept["rule::any"].to_list() == [True, True, False]
    assert kept["matched_rule_id"].to_list() == ["big", "any", None]
    plain = rp.evaluate(frame, compiled).collect()
    assert not [name for name in plain.columns if name.startswith("rule::")]
    assert "_pick" not in plain.columns
    assert plain.select(rp.RESULT_COLUMNS).to_dicts() == kept.select(rp.RESULT_COLUMNS).to_dicts()


def test_the_pick_is_int32_and_null_off_the_vector_path():
    compiled = rp.compile_rulebook(book(rule("a", {"field": "x", "operator": "eq", "value": 1})), ["a"])
    picked = rp.with_pick(table({"x": 1}, {"x": 2}, {"x": 2**60}), compiled).collect()
    assert picked.schema[rp.PICK] == pl.Int32
    assert picked[rp.PICK].to_list() == [0, -2, None]
    assert picked["replay"].to_list() == ["vector", "vector", "scalar"]


KINDS = [1, 1.5, "s", True, [1], {"k": 1}, None]  # then a row without the path


@pytest.mark.parametrize(("kind", "fits"), [
    ("number", [1, 1.5]), ("integer", [1]), ("string", ["s"]), ("boolean", [True]), ("array", [[1]]),
    ("object", [{"k": 1}]), ("null", [None])])
def test_each_declared_type_admits_its_own_kind_only(kind, fits):
    rulebook = book(rule("ra", {"field": "x", "operator": "not_exists"}),
                    input_schema={"properties": {"v": {"type": kind}}})
    compiled = rp.compile_rulebook(rulebook, ["ra"])
    out = rp.evaluate(table(*({"v": value} for value in KINDS), {}), compiled).collect()
    expected = ["ok" if value in fits and type(value) in {type(f) for f in fits} else "needs_input" for value in KINDS]
    assert out["status"].to_list() == [*expected, "ok"]  # an undeclared missing path is no failure
    assert out["matched_rule_id"].to_list() == [("ra" if s == "ok" else None) for s in expected] + ["ra"]


def test_an_input_schema_with_only_required_only_properties_or_neither():
    only_required = book(rule("ra", {"field": "x", "operator": "exists"}), input_schema={"required": ["r"]})
    out = rp.evaluate(table({"x": 1, "r": "any"}, {"x": 1}), rp.compile_rulebook(only_required, ["ra"])).collect()
    assert out["status"].to_list() == ["ok", "needs_input"]
    assert rp.referenced_paths(only_required) == ["r", "x"]
    only_properties = book(rule("ra", {"field": "x", "operator": "exists"}),
                           input_schema={"properties": {"p": {"type": "string"}}})
    assert rp.referenced_paths(only_properties) == ["p", "x"]
    out = rp.evaluate(table({"x": 1, "p": 2}, {"x": 1}), rp.compile_rulebook(only_properties, ["ra"])).collect()
    assert out["status"].to_list() == ["needs_input", "ok"]
    for schema in ({"required": []}, {"properties": {}}):
        rulebook = book(rule("ra", {"field": "x", "operator": "exists"}))
        rulebook["input_schema"] = schema
        compiled = rp.compile_rulebook(rulebook, ["ra"])
        assert compiled.needs_input is None and compiled.paths == ("x",)
        assert rp.evaluate(table({"x": 1}, {}), compiled).collect()["status"].to_list() == ["ok", "ok"]


def test_contains_reads_a_string_needle_literally():
    compiled = rp.compile_rulebook(book(rule("ra", {"field": "x", "operator": "contains", "value": "a.c"})), ["ra"])
    out = rp.evaluate(table({"x": "abc"}, {"x": "za.cz"}, {"x": "A.C"}, {"x": ["a.c"]}, {"x": ["abc"]}), compiled)
    assert out.collect()["matched_rule_id"].to_list() == [None, "ra", None, "ra", None]
    bracket = rp.compile_rulebook(book(rule("ra", {"field": "x", "operator": "not_contains", "value": "(["})), ["ra"])
    out = rp.evaluate(table({"x": "x(["}, {"x": "x"}, {}), bracket).collect()
    assert out["matched_rule_id"].to_list() == [None, "ra", None]


def test_in_and_not_in_an_empty_list():
    compiled = rp.compile_rulebook(book(rule("in", {"field": "x", "operator": "in", "value": []}, priority=2),
                                        rule("out", {"field": "x", "operator": "not_in", "value": []}, priority=1)),
                                   ["in", "out"])
    out = rp.evaluate(table({"x": 1}, {"x": None}, {}), compiled).collect()
    assert out["matched_rule_id"].to_list() == ["out", "out", None]


def test_an_order_of_the_right_length_naming_a_rule_twice_is_refused():
    rulebook = book(rule("aa", {"field": "x", "operator": "exists"}), rule("bb", {"field": "x", "operator": "exists"}))
    with pytest.raises(ValueError, match="exactly once"):
        rp.compile_rulebook(rulebook, ["aa", "aa"])
    with pytest.raises(ValueError, match="exactly once"):
        rp.compile_rulebook(rulebook, ["aa", "bb", "bb"])


def test_a_rule_without_a_priority_ranks_as_priority_zero():
    rulebook = book(rule("ra", {"field": "x", "operator": "exists"}, priority=0),
                    rule("rb", {"field": "x", "operator": "exists"}),
                    rule("rc", {"field": "x", "operator": "exists"}, priority=-1))
    compiled = rp.compile_rulebook(rulebook, ["ra", "rb", "rc"])
    assert [rule_id for rule_id, _ in compiled.rules] == ["ra", "rb", "rc"]
    assert [rule_id for rule_id, _ in rp.compile_rulebook(rulebook, ["rb", "ra", "rc"]).rules] == ["rb", "ra", "rc"]
    with pytest.raises(ValueError, match="priority"):
        rp.compile_rulebook(rulebook, ["rc", "ra", "rb"])


def test_eq_false_matches_the_boolean_false_only():
    compiled = rp.compile_rulebook(book(rule("ra", {"field": "x", "operator": "eq", "value": False})), ["ra"])
    out = rp.evaluate(table({"x": False}, {"x": True}, {"x": 0}, {"x": None}, {"x": {}}, {}), compiled).collect()
    assert out["matched_rule_id"].to_list() == ["ra", None, None, None, None, None]


def test_in_a_list_holding_false_matches_the_boolean_false():
    compiled = rp.compile_rulebook(book(rule("ra", {"field": "x", "operator": "in", "value": [False, "a"]})), ["ra"])
    out = rp.evaluate(table({"x": False}, {"x": True}, {"x": 0}, {"x": "a"}, {}), compiled).collect()
    assert out["matched_rule_id"].to_list() == ["ra", None, None, "ra", None]


@pytest.mark.parametrize(("operator", "matches"), [
    ("gt", [None, None, "ra", None, None]), ("gte", [None, "ra", "ra", None, None]),
    ("lt", ["ra", None, None, None, None]), ("lte", ["ra", "ra", None, None, None]),
])
def test_each_comparison_at_its_bound(operator, matches):
    compiled = rp.compile_rulebook(book(rule("ra", {"field": "x", "operator": operator, "value": 5})), ["ra"])
    out = rp.evaluate(table({"x": 4.5}, {"x": 5.0}, {"x": 6}, {"x": "5"}, {}), compiled).collect()
    assert out["matched_rule_id"].to_list() == matches
