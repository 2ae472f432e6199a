"""Worked examples of the rulebook analysis: each semantic corner of Rulebook v1, by hand."""

from __future__ import annotations

import copy
import json

import pytest
from rulebook_support import Build

from gate.errors import RulebookInvalid
from gate.rulebook.analysis import lint, minimal_flips, semantic_diff
from gate.rulebook.analysis.common import evaluator

leaf, rule, outcome = Build.leaf, Build.rule, Build.outcome
BLOCK = {"decision": "no", "verdict": "BLOCK", "action": "block", "reason_code": "TOO_DEEP"}


def book(*rules, input_schema=None, version="1"):
    return Build.rulebook(list(rules), input_schema=input_schema, version=version)


def pricing(threshold=25, schema_type="number"):
    return book(
        rule("block", leaf("discount", "gt", threshold), priority=100, **BLOCK),
        rule("approve", {"all": [leaf("margin", "gte", 20), leaf("discount", "lte", 20)]}, priority=10),
        input_schema={"required": ["discount"], "properties": {"discount": {"type": schema_type},
                                                               "margin": {"type": "number"}}},
        version=str(threshold),
    )


def only(report):
    assert len(report.differences) == 1, [d.to_json() for d in report.differences]
    return report.differences[0]


def test_threshold_change_is_one_region_with_open_and_closed_ends():
    report = semantic_diff(pricing(25), pricing(30))
    difference = only(report)
    assert report.verdict == "different" and report.exact
    assert (difference.old.rule_id, difference.new.rule_id) == ("block", None)
    where = difference.to_json()["where"]
    assert where[0]["field"] == "discount" and where[0]["text"] == "number in (25, 30]"
    assert where[0]["allows"]["numbers"] == [{"min": 25, "min_inclusive": False, "max": 30, "max_inclusive": True}]
    assert 25 < difference.witness["discount"] <= 30
    for inside, value in ((True, 30), (True, 25.5), (False, 25), (False, 30.5)):
        assert difference.contains({"discount": value}) is inside


def test_equivalent_versions_and_json_shape():
    old = pricing(25)
    new = copy.deepcopy(old)
    new["rules"].reverse()  # order in the file does not matter, priority does
    body = semantic_diff(old, new).to_json()
    assert body["verdict"] == "equivalent" and body["differences"] == [] and body["exact"] is True
    assert set(body) == {"kind", "old", "new", "compare", "verdict", "exact", "method", "inexact", "samples",
                         "difference_count", "differences"}
    json.dumps(body)


def test_not_of_eq_holds_for_a_missing_field_but_neq_does_not():
    with_not = book(rule("r1", {"not": leaf("tier", "eq", "gold")}))
    with_neq = book(rule("r1", leaf("tier", "neq", "gold")))
    difference = only(semantic_diff(with_not, with_neq))
    assert difference.witness == {}  # tier missing: not(eq) matches, neq does not
    assert difference.old.rule_id == "r1" and difference.new.rule_id is None


def test_booleans_are_not_numbers_and_one_equals_one_point_zero():
    ints = book(rule("r1", leaf("n", "in", [1, 2])))
    floats = book(rule("r1", leaf("n", "in", [1.0, 2.0])))
    assert semantic_diff(ints, floats).equivalent
    with_true = book(rule("r1", leaf("n", "in", [1, 2, True])))
    difference = only(semantic_diff(ints, with_true))
    assert difference.witness == {"n": True}
    assert not semantic_diff(book(rule("r1", leaf("n", "gte", 1))), book(rule("r1", leaf("n", "eq", True)))).equivalent


def test_substring_contains_is_exact():
    old = book(rule("r1", leaf("note", "contains", "ab")))
    new = book(rule("r1", {"all": [leaf("note", "contains", "a"), leaf("note", "contains", "b")]}))
    report = semantic_diff(old, new)
    assert report.exact and len(report.differences) == 2
    strings = next(d for d in report.differences if isinstance(d.witness["note"], str))
    assert strings.old.rule_id is None and strings.new.rule_id == "r1"  # "a…b" without "ab": new only
    note = strings.witness["note"]
    assert "a" in note and "b" in note and "ab" not in note
    arrays = next(d for d in report.differences if isinstance(d.witness["note"], list))
    assert arrays.old.rule_id == "r1" and arrays.new.rule_id is None  # ["ab"] holds "ab", not "a"
    assert "ab" in arrays.witness["note"] and "a" not in arrays.witness["note"]
    strings_only = {"required": ["note"], "properties": {"note": {"type": "string"}}}
    typed = book(rule("r1", leaf("note", "contains", "ab")), input_schema=strings_only)
    implied = book(rule("r1", {"all": [leaf("note", "contains", "ab"), leaf("note", "contains", "b")]}),
                   input_schema=strings_only)
    assert semantic_diff(typed, implied).equivalent  # a string holding "ab" holds "b"


def test_array_contains_and_array_equality():
    old = book(rule("r1", leaf("tags", "contains", "vip")))
    new = book(rule("r1", {"any": [leaf("tags", "contains", "vip"), leaf("tags", "eq", ["x"])]}))
    difference = only(semantic_diff(old, new))
    assert difference.witness == {"tags": ["x"]}


def test_nested_paths_are_solved_together():
    old = book(rule("r1", {"all": [leaf("a", "eq", {"b": 1}), leaf("a.b", "eq", 2)]}))
    assert lint(old).findings[-1]["code"] == "unsatisfiable" or any(
        f["code"] == "unsatisfiable" for f in lint(old).findings)
    new = book(rule("r1", {"all": [leaf("a", "exists"), leaf("a.b", "eq", 2)]}))
    difference = only(semantic_diff(old, new))
    assert difference.witness["a"]["b"] == 2
    scalar_parent = book(rule("r1", {"all": [leaf("a", "eq", 5), leaf("a.b", "exists")]}))
    assert semantic_diff(scalar_parent, book(rule("r1", leaf("z", "eq", "never-set-here")))).verdict == "different"
    assert any(f["code"] == "unsatisfiable" for f in lint(scalar_parent).findings)


def test_integer_input_schema_makes_fractions_need_input():
    report = semantic_diff(pricing(25, "number"), pricing(25, "integer"))
    assert {d.old.rule_id for d in report.differences} == {"block", "approve", None}
    for difference in report.differences:
        assert difference.new.status == "needs_input" and difference.old.status == "ok"
        assert not float(difference.witness["discount"]).is_integer()


def test_compare_modes():
    old = book(rule("ra", leaf("x", "eq", 1)), rule("rb", leaf("x", "eq", 2)))
    renamed = book(rule("rc", leaf("x", "eq", 1)), rule("rb", leaf("x", "eq", 2)))
    assert semantic_diff(old, renamed).equivalent
    assert only(semantic_diff(old, renamed, compare="rule")).new.rule_id == "rc"
    blocked = book(rule("ra", leaf("x", "eq", 1), **BLOCK), rule("rb", leaf("x", "eq", 2)))
    assert not semantic_diff(old, blocked, compare="decision").equivalent
    with pytest.raises(ValueError):
        semantic_diff(old, renamed, compare="verdict")


def test_invalid_rulebook_is_refused():
    bad = pricing()
    bad["rules"][0]["condition"]["operator"] = "matches"
    with pytest.raises(RulebookInvalid) as caught:
        semantic_diff(bad, pricing())
    assert caught.value.details["errors"][0]["field"] == "rulebook.rules[0].condition.operator"
    with pytest.raises(RulebookInvalid):
        lint(bad)


def test_many_contains_values_fall_back_to_sampling_and_say_so():
    needles = [f"w{i}" for i in range(12)]
    old = book(rule("r1", {"any": [leaf("note", "contains", n) for n in needles]}))
    new = book(rule("r1", {"any": [leaf("note", "contains", n) for n in needles[:-1]]}))
    report = semantic_diff(old, new)
    body = report.to_json()
    assert body["exact"] is False and body["method"] == "sampling" and body["samples"] > 0
    assert body["inexact"][0]["field"] == "note" and "contains" in body["inexact"][0]["operators"]
    for difference in report.differences:  # sampled differences are still real
        assert evaluator(old)(difference.witness).matched and not evaluator(new)(difference.witness).matched
    same = semantic_diff(old, copy.deepcopy(old))
    assert same.verdict == "no_difference_found" and not same.equivalent
    assert lint(old).exact is False


def test_budget_exhaustion_falls_back_to_sampling():
    report = semantic_diff(pricing(25), pricing(30), budget=3)
    assert not report.exact and report.inexact[-1]["reason"].startswith("the exact analysis exceeded")
    assert report.differences and all(d.region is None for d in report.differences)


def test_lint_findings():
    rb = book(
        rule("block", leaf("discount", "gt", 25), priority=100, **BLOCK),
        rule("never", {"all": [leaf("discount", "gt", 5), leaf("discount", "lt", 5)]}, priority=50),
        rule("hidden", leaf("discount", "gt", 30), priority=5),
        rule("tier", leaf("customer.tier", "in", ["gold"]), priority=1),
        input_schema={"required": ["discount"], "properties": {"discount": {"type": "integer"}}},
    )
    report = lint(rb)
    codes = {(f["code"], f.get("rule_id")) for f in report.findings}
    assert ("unsatisfiable", "never") in codes and ("shadowed", "hidden") in codes
    assert ("undeclared_field", "tier") in codes
    shadow = next(f for f in report.findings if f["code"] == "shadowed")
    assert shadow["by"] == ["block"]
    overlap = next(f for f in report.findings if f["code"] == "overlap" and f["rule_ids"] == ["block", "tier"])
    assert overlap["winner"] == "block" and evaluator(rb)(overlap["witness"]).matched_rule_id == "block"
    falls = [f for f in report.findings if f["code"] == "falls_through"]
    assert falls and all(evaluator(rb)(f["witness"]).matched_rule_id is None for f in falls)
    assert "discount: number in (-inf, 25] (integers)" in falls[0]["text"]
    assert {w["severity"] for w in report.warnings} == {"warning"}
    clean = lint(book(rule("r1", leaf("x", "eq", 1)), input_schema={"properties": {"x": {"type": "number"}}}))
    assert clean.warnings == []


def test_minimal_flips_cross_the_nearest_threshold():
    rb = pricing(25, "integer")
    flips = {(f.field, f.change): f for f in minimal_flips(rb, {"discount": 22, "margin": 30})}
    down = flips[("discount", "decrease")]
    assert (down.new_value, down.distance, down.new.rule_id) == (20, 2, "approve")
    assert down.threshold == {"value": 20, "inclusive": True}
    up = flips[("discount", "increase")]
    assert (up.new_value, up.new.rule_id, up.threshold) == (26, "block", {"value": 25, "inclusive": False})
    body = up.to_json()
    assert body["facts"] == {"discount": 26, "margin": 30} and body["exact"] is True
    real = minimal_flips(pricing(25, "number"), {"discount": 22, "margin": 30})
    up_real = next(f for f in real if f.change == "increase")
    assert 25 < up_real.new_value < 25.001 and up_real.new.rule_id == "block"


def test_minimal_flips_for_categories_and_missing_facts():
    rb = book(rule("gold", leaf("tier", "eq", "gold")), rule("vip", leaf("flags", "contains", "vip")))
    flips = {f.field: f for f in minimal_flips(rb, {"tier": "silver"})}
    assert flips["tier"].new_value == "gold" and flips["tier"].change == "set"
    assert flips["flags"].to_json()["from_missing"] is True and "vip" in flips["flags"].new_value
    removed = {f.field: f for f in minimal_flips(rb, {"tier": "gold"})}["tier"]
    assert removed.new.rule_id is None


def test_a_condition_with_too_many_regions_falls_back_to_sampling():
    blowup = {"all": [{"any": [leaf(f"f{i}_{j}", "gt", j) for j in range(4)]} for i in range(7)]}
    old = book(rule("r1", blowup, **BLOCK))
    new = copy.deepcopy(old)
    new["rules"][0]["condition"]["all"][0]["any"][0]["value"] = 7
    report = semantic_diff(old, new)
    assert not report.exact and report.inexact[-1]["reason"] == "a condition needs more than 4096 regions"
    assert report.verdict == "different"
    for difference in report.differences:
        assert evaluator(old)(difference.witness).matched and not evaluator(new)(difference.witness).matched
