"""Minimal flips to the exact value (issue 22, item 5): for each field, the nearest increase and
decrease (the value, its distance and the threshold crossed), the preference for a valid input,
the other changes (same kind first, then any value, then removing the fact), the flip's JSON and
when a flip is exact."""

from __future__ import annotations

import math

import pytest
from rulebook_support import Build

from gate.rulebook.analysis import minimal_flips
from gate.rulebook.analysis.flips import _with
from gate.rulebook.semantics import MISSING

leaf, rule = Build.leaf, Build.rule
BLOCK = {"decision": "no", "verdict": "BLOCK", "action": "block", "reason_code": "TOO_BIG"}
UP = math.nextafter(25, math.inf)


def _book(schema_type=None):
    schema = None if schema_type is None else {"required": ["amount"], "properties": {"amount": {"type": schema_type}}}
    return Build.rulebook([rule("big", leaf("amount", "gt", 25), priority=20, **BLOCK),
                           rule("ok", leaf("amount", "lte", 20), priority=10)], input_schema=schema)


def _flips(book, facts, compare="outcome"):
    return [(f.field, f.change, f.old_value, f.new_value, f.distance, f.threshold, f.new.rule_id, f.new.status, f.exact)
            for f in minimal_flips(book, facts, compare)]


def test_an_integer_field_crosses_to_the_next_integer():
    assert _flips(_book("integer"), {"amount": 22}) == [
        ("amount", "decrease", 22, 20, 2, {"value": 20, "inclusive": True}, "ok", "ok", True),
        ("amount", "increase", 22, 26, 4, {"value": 25, "inclusive": False}, "big", "ok", True)]
    assert _flips(_book("integer"), {"amount": 10}) == [
        ("amount", "increase", 10, 21, 11, {"value": 20, "inclusive": False}, None, "ok", True)]


def test_a_number_field_crosses_to_the_next_float():
    assert _flips(_book(), {"amount": 22}) == [
        ("amount", "decrease", 22, 20, 2, {"value": 20, "inclusive": True}, "ok", "ok", True),
        ("amount", "increase", 22, UP, UP - 22, {"value": 25, "inclusive": False}, "big", "ok", True)]
    assert _flips(_book(), {"amount": 22.5}) == [
        ("amount", "decrease", 22.5, 20, 2.5, {"value": 20, "inclusive": True}, "ok", "ok", True),
        ("amount", "increase", 22.5, UP, UP - 22.5, {"value": 25, "inclusive": False}, "big", "ok", True)]
    assert _flips(_book(), {"amount": 30}) == [
        ("amount", "decrease", 30, 25, 5, {"value": 25, "inclusive": True}, None, "ok", True)]
    below = _flips(_book(), {"amount": 10})
    assert below == [("amount", "increase", 10, math.nextafter(20, math.inf), math.nextafter(20, math.inf) - 10,
                      {"value": 20, "inclusive": False}, None, "ok", True)]


def test_a_valid_flip_beats_a_nearer_one_into_needs_input():
    # From 30 (blocked), 30.000000000000004 is nearer than 25 but not an integer: needs input.
    # The decrease to 25 stays valid; the increase only reaches needs_input and is still reported.
    assert _flips(_book("integer"), {"amount": 30}) == [
        ("amount", "decrease", 30, 25, 5, {"value": 25, "inclusive": True}, None, "ok", True),
        ("amount", "increase", 30, math.nextafter(30, math.inf), math.nextafter(30, math.inf) - 30, None, None,
         "needs_input", True)]
    # From a non-integer (needs input), the nearest integer in the same gap is valid again.
    assert _flips(_book("integer"), {"amount": 22.5}) == [
        ("amount", "decrease", 22.5, 22, 0.5, None, None, "ok", True),
        ("amount", "increase", 22.5, 25, 2.5, {"value": 25, "inclusive": True}, None, "ok", True)]
    # the nearest integer of the same gap may be above: 23 from 22.75 (and 22 from 22.5, a tie, below)
    assert _flips(_book("integer"), {"amount": 22.75})[1][:5] == ("amount", "increase", 22.75, 23, 0.25)


def test_other_changes_prefer_the_same_kind_then_a_value_then_removal():
    book = Build.rulebook([rule("gold", leaf("tier", "in", ["gold", "plat"])),
                           rule("tag", leaf("tags", "contains", "vip"), **BLOCK)])
    assert _flips(book, {"tier": "silver", "tags": ["a"]}) == [
        ("tags", "set", ["a"], ["vip", "|||"], None, None, "tag", "ok", True),
        ("tier", "set", "silver", "gold", None, None, "gold", "ok", True)]
    assert _flips(book, {"tier": "gold"}) == [("tier", "set", "gold", "||", None, None, None, "ok", True)]
    assert _flips(book, {"tier": 5}) == [
        ("tags", "set", MISSING, "|vip|", None, None, "tag", "ok", True),
        ("tier", "set", 5, "gold", None, None, "gold", "ok", True)]
    present = Build.rulebook([rule("has", leaf("x", "exists"))])
    assert _flips(present, {"x": 1}) == [("x", "remove", 1, MISSING, None, None, None, "ok", True)]
    assert _flips(present, {}) == [("x", "set", MISSING, None, None, None, "has", "ok", True)]


def test_a_missing_required_fact_is_set_to_a_valid_value():
    assert _flips(_book("integer"), {}) == [("amount", "set", MISSING, 19, None, None, "ok", "ok", True)]
    assert _flips(_book("integer"), "not facts") == [("amount", "set", MISSING, 19, None, None, "ok", "ok", True)]


def test_the_compare_mode_decides_what_counts_as_a_change():
    # every result has the same outcome: only the rule that gives it changes
    book = Build.rulebook([rule("aa", leaf("x", "eq", 1)), rule("bb", leaf("x", "eq", 2))], default=Build.outcome())
    assert _flips(book, {"x": 1}) == []
    below, above = math.nextafter(1, -math.inf), math.nextafter(1, math.inf)
    assert _flips(book, {"x": 1}, "rule") == [
        ("x", "decrease", 1, below, 1 - below, {"value": 1, "inclusive": False}, None, "ok", True),
        ("x", "increase", 1, above, above - 1, {"value": 1, "inclusive": False}, None, "ok", True)]


def test_the_flip_json():
    flip = minimal_flips(Build.rulebook([rule("has", leaf("x", "exists"))]), {"x": 1, "y": 2})[0]
    assert flip.to_json() == {
        "field": "x", "change": "remove", "from_missing": False, "to_missing": True, "from": 1, "to": None,
        "distance": None, "threshold": None, "old": flip.old.to_json(), "new": flip.new.to_json(),
        "facts": {"y": 2}, "exact": True}
    assert flip.old.to_json()["rule_id"] == "has" and flip.new.to_json()["rule_id"] is None
    added = minimal_flips(Build.rulebook([rule("has", leaf("x", "exists"))]), {})[0].to_json()
    assert (added["from_missing"], added["to_missing"], added["from"], added["to"], added["facts"]) == (
        True, False, None, None, {"x": None})


def test_nested_fields_make_flips_inexact():
    book = Build.rulebook([rule("aa", {"all": [leaf("a", "exists"), leaf("a.b", "eq", 2)]})])
    flips = minimal_flips(book, {"a": {"b": 2}})
    assert flips and all(not f.exact for f in flips)
    assert {(f.field, f.change) for f in flips} == {("a", "set"), ("a.b", "decrease"), ("a.b", "increase")}


def test_sampled_candidates_are_not_exact():
    needles = [f"w{i}" for i in range(12)]
    book = Build.rulebook([rule("aa", {"any": [leaf("note", "contains", n) for n in needles]})])
    flips = minimal_flips(book, {"note": "plain"})
    assert [(f.field, f.change, f.new.rule_id) for f in flips] == [("note", "set", "aa")]
    assert any(n in flips[0].new_value for n in needles)


def test_with_sets_and_removes_a_path_in_a_copy():
    facts = {"a": {"b": 1}, "c": 2}
    assert _with(facts, "a.b", 5) == {"a": {"b": 5}, "c": 2}
    assert _with(facts, "a.x.y", [1]) == {"a": {"b": 1, "x": {"y": [1]}}, "c": 2}
    assert _with(facts, "c.d", 1) == {"a": {"b": 1}, "c": {"d": 1}}
    assert _with(facts, "a.b", MISSING) == {"a": {}, "c": 2}
    assert _with(facts, "c.d", MISSING) == {"a": {"b": 1}, "c": 2}
    assert _with(facts, "z", MISSING) == {"a": {"b": 1}, "c": 2}
    value = {"k": [1]}
    out = _with(facts, "n", value)
    value["k"].append(2)
    assert out["n"] == {"k": [1]} and facts == {"a": {"b": 1}, "c": 2}


def test_a_decrease_past_a_closed_threshold_lands_below_it():
    # gte 25 blocks 25 itself: from 30 the nearest unblocked value is below 25
    for schema_type, below in (("integer", 24), ("number", math.nextafter(25, -math.inf))):
        book = Build.rulebook([rule("big", leaf("amount", "gte", 25), **BLOCK)], input_schema={
            "required": ["amount"], "properties": {"amount": {"type": schema_type}}})
        assert _flips(book, {"amount": 30})[0] == (
            "amount", "decrease", 30, below, 30 - below, {"value": 25, "inclusive": False}, None, "ok", True)


def test_the_nearest_integer_of_the_same_gap_stays_inside_the_gap():
    book = Build.rulebook([rule("mid", {"all": [leaf("n", "gt", 2), leaf("n", "lt", 5)]})],
                          input_schema={"required": ["n"], "properties": {"n": {"type": "integer"}}})
    # 2.5 needs input; its nearest integer is 2 (a tie goes down), the gap's edge: the gap's own
    # integer 3 is tried instead, and 2 is reached as the point
    assert _flips(book, {"n": 2.5}) == [
        ("n", "decrease", 2.5, 2, 0.5, {"value": 2, "inclusive": True}, None, "ok", True),
        ("n", "increase", 2.5, 3, 0.5, None, "mid", "ok", True)]
    # 4.75: its nearest integer 5 is the gap's edge: the gap's own integer 3, below, and 5 as the point
    assert _flips(book, {"n": 4.75}) == [
        ("n", "decrease", 4.75, 3, 1.75, None, "mid", "ok", True),
        ("n", "increase", 4.75, 5, 0.25, {"value": 5, "inclusive": True}, None, "ok", True)]


@pytest.mark.parametrize(("threshold", "value", "kind"), [
    (2**52, 2**52 + 1, int),               # a whole float below 2^53 from an integer: written as an integer
    (2**53 - 1, 2**53, float),             # from 2^53 on (the largest constant a rulebook takes) a float stays a float
])
def test_a_whole_float_past_a_threshold_is_an_integer_below_2_53(threshold, value, kind):
    book = Build.rulebook([rule("big", leaf("amount", "gt", threshold), **BLOCK)])
    flip = minimal_flips(book, {"amount": 0})[0]
    assert (flip.change, flip.new_value, type(flip.new_value)) == ("increase", value, kind)
    from_float = minimal_flips(book, {"amount": 0.0})[0]
    assert type(from_float.new_value) is float


def test_the_flip_json_names_the_new_value():
    flip = minimal_flips(_book("integer"), {"amount": 22})[0]
    body = flip.to_json()
    assert (body["from"], body["to"], body["from_missing"], body["to_missing"]) == (22, 20, False, False)


# rule `zz` reads a needle past the exact limit (ten per field): only the sampled values can hold it
NEEDLES = [f"w{i}" for i in range(11)]
SAMPLED = Build.rulebook([
    rule("never", {"all": [leaf("gate", "exists"), *(leaf("note", "contains", n) for n in NEEDLES)]}, priority=10),
    rule("zz", leaf("note", "contains", "zz"), **BLOCK)])


def test_a_needle_past_the_exact_limit_is_reached_by_a_sampled_value():
    flips = minimal_flips(SAMPLED, {"note": "plain"})
    assert [(f.field, f.change, f.new.rule_id, f.exact, f.threshold) for f in flips] == [
        ("note", "set", "zz", False, None)]
    assert isinstance(flips[0].new_value, (str, list)) and "zz" in flips[0].new_value


def test_a_sampled_number_is_tried_as_it_is(monkeypatch):
    """A sampled value has no interval: it is tried as it is (it raised TypeError before)."""
    from gate.rulebook.analysis import flips as module

    book = Build.rulebook([rule("aa", {"any": [*(leaf("note", "contains", n) for n in NEEDLES + ["zz"])]}),
                           rule("big", leaf("note", "gt", 5), **BLOCK)])
    monkeypatch.setattr(module, "_sampled_values", lambda space: {0: [math.nextafter(5, math.inf), 9]})
    flips = minimal_flips(book, {"note": 1})
    # the atom's member and the equal sampled value tie: the atom's, with its threshold, is kept
    assert [(f.change, f.new_value, f.threshold, f.new.rule_id, f.exact) for f in flips] == [
        ("increase", math.nextafter(5, math.inf), {"value": 5, "inclusive": False}, "big", False)]
