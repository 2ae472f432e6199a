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
