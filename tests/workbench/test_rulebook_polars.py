"""Differential test: the Polars-compiled rulebook equals the scalar evaluator, row for row.

Generated rulebooks (every operator and combinator, priority ties between collation-sensitive
rule ids, input_schema with every type) are evaluated over a batch of generated facts (the
rulebook's own values and their look-alikes: `1` vs `true` vs `"1"` vs `1.0`, arrays, objects,
nulls, missing and broken nested paths, a field that is a string in one row and a number in the
next). The facts go through the real writer (`workbench.dataset.facts.facts_table`), so the typed
columns are tested with the compiler. Compared per row: status, verdict, application verdict,
action, reason_code and matched rule.
"""

from __future__ import annotations

import json

import polars as pl
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gate import vocabulary as constants
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.rulebook import get_evaluator
from gate.rulebook.compile import rule_order
from gate.rulebook.operators import BY_NAME, OPERATORS, Operand
from tests.rulebook.test_rulebook_properties import (
    SETTINGS,
    facts_strategy,
    rulebooks,
    targeted_facts,
)
from workbench.dataset.facts import facts_table
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp


def polars_results(rulebook, facts_list, max_paths=512):
    """Evaluate through the writer and the compiled expressions; one dict per row."""
    texts = [None if f is _NO_FACTS else canonical_text(f) for f in facts_list]
    ids = [f"d{i}" for i in range(len(texts))]
    batch = pa.table({"decision_id": ids, "facts_json": pa.array(texts, pa.string()), "scope": ["s"] * len(ids),
                      "month": ["2026-01"] * len(ids)})
    table = facts_table(batch, max_paths=max_paths)
    compiled = rp.compile_rulebook(rulebook, [r["rule_id"] for r in rule_order(rulebook["rules"])])
    out = rp.evaluate(pl.from_arrow(table).lazy(), compiled).collect()
    # The dry-run groups by the pick and names it through the outcome table: the same answers.
    picked = rp.with_pick(pl.from_arrow(table).lazy(), compiled).select("replay", rp.PICK).collect()
    named = picked.join(rp.outcome_table(compiled), on=rp.PICK, how="left", maintain_order="left")
    assert named.select(rp.RESULT_COLUMNS).to_dicts() == out.select(rp.RESULT_COLUMNS).to_dicts()
    return out.select(rp.RESULT_COLUMNS).to_dicts()


def scalar_result(rulebook, facts):
    e = get_evaluator(rulebook, sha256_hex(rulebook)).evaluate(json.loads(canonical_text(facts)))
    return {"status": e.status, "verdict": e.decision, "application_verdict": e.application_verdict,
            "action": e.action, "reason_code": e.reason_code, "matched_rule_id": e.matched_rule_id}


_NO_FACTS = object()
_KEYS = ("status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")


def assert_same(rulebook, facts_list, max_paths=512):
    rows = polars_results(rulebook, facts_list, max_paths)
    for facts, row in zip(facts_list, rows, strict=True):
        if facts is _NO_FACTS:
            assert row["replay"] == "unreplayable" and row["verdict"] is None
            continue
        if row["replay"] == "scalar":
            continue  # the dry-run evaluates these rows with the scalar evaluator (tested there)
        assert row["replay"] == "vector"
        assert {k: row[k] for k in _KEYS} == scalar_result(rulebook, facts), (facts, rulebook)


@st.composite
def rulebook_and_batch(draw):
    rulebook = draw(rulebooks())
    batch = draw(st.lists(st.one_of(targeted_facts(rulebook), targeted_facts(rulebook), facts_strategy),
                          min_size=1, max_size=12))
    if draw(st.integers(0, 5)) == 0:
        batch.append(_NO_FACTS)
    return rulebook, batch


@SETTINGS
@given(rulebook_and_batch())
def test_polars_equals_scalar_evaluator(case):
    rulebook, batch = case
    assert_same(rulebook, batch)


@SETTINGS
@given(rulebook_and_batch(), st.integers(0, 3))
def test_path_cap_sends_rows_to_the_scalar_evaluator_never_a_wrong_answer(case, cap):
    rulebook, batch = case
    assert_same(rulebook, batch, max_paths=cap)


def build(condition, priority=None, rule_id="r_one", **outcome):
    rule = {"rule_id": rule_id, "condition": condition,
            "outcome": {"decision": "yes", "verdict": "APPROVE", "action": "go", "reason_code": "MATCHED", **outcome}}
    if priority is not None:
        rule["priority"] = priority
    return rule


def book(*rules, input_schema=None):
    out = {"schema_version": "rulebook_v1", "rulebook_id": "t_book", "version": "1", "rules": list(rules),
           "default_outcome": {"decision": "review", "verdict": "REVIEW", "action": "hold", "reason_code": "NO_MATCH"}}
    if input_schema:
        out["input_schema"] = input_schema
    return out


# One field's values across the rows of a batch: every kind, look-alikes, nested and broken paths.
MIXED_VALUES = [1, 1.0, 0, -0.0, 2**53 - 1, 0.5, True, False, "1", "abc", "", None, [], [1], [1.0, "a", None],
                [[1]], ["b"], {"k": 1}, {"k": [1]}, {"y": {"z": 1}}, {"y": {"z": None}}, {"y": 3}, {"y": []}]


@pytest.mark.parametrize("condition", [
    {"field": "x", "operator": "eq", "value": 1},
    {"field": "x", "operator": "eq", "value": True},
    {"field": "x", "operator": "eq", "value": "1"},
    {"field": "x", "operator": "eq", "value": None},
    {"field": "x", "operator": "eq", "value": [1, "a", None]},
    {"field": "x", "operator": "eq", "value": {"k": [1.0]}},
    {"field": "x", "operator": "neq", "value": 0},
    {"field": "x", "operator": "gt", "value": 0.5},
    {"field": "x", "operator": "lte", "value": 1},
    {"field": "x", "operator": "gt", "value": True},
    {"field": "x", "operator": "in", "value": [1, "1", True, None, [1], {"k": 1}, 0]},
    {"field": "x", "operator": "not_in", "value": [0, "a"]},
    {"field": "x", "operator": "in", "value": "not an array"},
    {"field": "x", "operator": "contains", "value": "b"},
    {"field": "x", "operator": "contains", "value": 1},
    {"field": "x", "operator": "contains", "value": [1]},
    {"field": "x", "operator": "not_contains", "value": ""},
    {"field": "x.y.z", "operator": "exists"},
    {"field": "x.y", "operator": "not_exists"},
])
def test_each_operator_on_mixed_types(condition):
    """One field that is a number, a string, a boolean, null, an array, an object, missing, or a
    broken path across the rows of one batch (a type-mismatched column)."""
    batch = [{"x": value} for value in MIXED_VALUES] + [{}, {"y": 1}, []]
    assert_same(book(build(condition)), batch)


def test_every_declared_operator_has_a_vector_leaf():
    assert list(rp.LEAVES) == [operator.name for operator in OPERATORS]


@pytest.mark.parametrize("name", [operator.name for operator in OPERATORS])
def test_each_declared_operator_equals_the_scalar_evaluator(name):
    """Every operator of the table (gate.rulebook.operators), with a constant of every kind,
    over one field of every kind (and missing) across the rows of one batch."""
    constants = [None, True, 0, 1, 2.5, "a", "", [], [1, "a"], ["b"], {"k": 1}]
    batch = [{"x": value} for value in MIXED_VALUES] + [{}, {"y": 1}]
    if BY_NAME[name].operand is Operand.NONE:
        assert_same(book(build({"field": "x", "operator": name})), batch)
        return
    for value in constants:
        assert_same(book(build({"field": "x", "operator": name, "value": value})), batch)


def test_priority_ties_follow_collation_order_and_first_match_wins():
    always = {"field": "x", "operator": "not_exists"}
    rules = [build(always, 5, "a_b", reason_code="R_AB"), build(always, 5, "ab", reason_code="R_PLAIN"),
             build(always, 5, "a-b", reason_code="R_DASH"), build(always, 9, "zz", reason_code="R_TOP")]
    assert_same(book(*rules), [{}, {"x": 1}])
    rows = polars_results(book(*rules[:3]), [{}])
    assert rows[0]["matched_rule_id"] == rule_order(rules[:3])[0]["rule_id"]


def test_needs_input_and_integer_type():
    schema = {"required": ["amount", "a.b"], "properties": {"amount": {"type": "integer"}, "tier": {"type": "string"}}}
    rulebook = book(build({"field": "amount", "operator": "gt", "value": 10}), input_schema=schema)
    batch = [{"amount": 11, "a": {"b": 1}}, {"amount": 11.0, "a": {"b": None}}, {"amount": 11.5, "a": {"b": 1}},
             {"amount": "11", "a": {"b": 1}}, {"a": {"b": 1}}, {"amount": 11, "a": 1}, {"amount": 11, "a": {"b": 1}, "tier": 3}]
    assert_same(rulebook, batch)
    assert [r["status"] for r in polars_results(rulebook, batch)] == \
        ["ok", "ok", "needs_input", "needs_input", "needs_input", "needs_input", "needs_input"]


def test_rows_the_columns_cannot_hold_exactly_go_to_the_scalar_evaluator():
    rulebook = book(build({"field": "x", "operator": "eq", "value": 1}))
    rows = polars_results(rulebook, [{"x": 2**60}, {"x": "\ud800"}, {"x": 1}, _NO_FACTS])
    assert [r["replay"] for r in rows] == ["scalar", "scalar", "vector", "unreplayable"]


def test_needs_input_constants_are_the_evaluators():
    assert (rp.NEEDS_INPUT_STATUS, rp.NEEDS_INPUT_VERDICT, rp.NEEDS_INPUT_ACTION, rp.NEEDS_INPUT_REASON) == (
        constants.NEEDS_INPUT_STATUS, constants.NEEDS_INPUT_VERDICT, constants.NEEDS_INPUT_ACTION,
        constants.NEEDS_INPUT_REASON)


def test_order_must_be_a_priority_respecting_permutation():
    rulebook = book(build({"field": "x", "operator": "exists"}, 1, "aa"), build({"field": "x", "operator": "exists"}, 2, "bb"))
    with pytest.raises(ValueError):
        rp.compile_rulebook(rulebook, ["aa"])
    with pytest.raises(ValueError):
        rp.compile_rulebook(rulebook, ["aa", "bb"])
    assert rp.compile_rulebook(rulebook, ["bb", "aa"]).rules[0][0] == "bb"


def test_strict_key_matches_strict_equality():
    from gate.rulebook.semantics import strict_equal

    values = [1, 1.0, True, "1", None, [1], [1.0], [True], {"a": 1}, {"a": 1.0}, {"a": True}, 0, -0.0, False, "", [], {}]
    for a in values:
        for b in values:
            assert (fc.strict_key(a) == fc.strict_key(b)) == strict_equal(a, b), (a, b)


def test_many_rules_compile_flat():
    rules = [build({"field": f"f{i}", "operator": "eq", "value": i}, rule_id=f"rule{i:03d}", reason_code=f"R{i:03d}")
             for i in range(100)]
    batch = [{f"f{i}": i} for i in range(0, 100, 7)] + [{}]
    assert_same(book(*rules), batch)
