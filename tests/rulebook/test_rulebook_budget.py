"""The evaluation budget (gate/rulebook/budget.py): what it counts, and that it bounds real work."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.protocol.fact_limits import check_facts
from gate.rulebook import get_evaluator, semantics
from gate.rulebook.budget import evaluation_work


def _rulebook(conditions: list[dict]) -> dict:
    return {
        "schema_version": "rulebook_v1", "rulebook_id": "budget_test", "version": "1",
        "rules": [{"rule_id": f"r{i}", "condition": c,
                   "outcome": {"decision": "no", "verdict": "BLOCK", "action": "stop", "reason_code": "HIT"}}
                  for i, c in enumerate(conditions)],
        "default_outcome": {"decision": "yes", "verdict": "APPROVE", "action": "go", "reason_code": "CLEAR"},
    }


def test_check_facts_counts_every_value():
    assert check_facts({}) == 1
    assert check_facts({"a": [1, "x", None, {"b": True}]}) == 7


def test_work_counts_paths_arrays_times_needles_and_constants():
    rulebook = _rulebook([
        {"field": "a.b", "operator": "contains", "value": [1, 2]},  # 2 parts + len(a.b) × 3
        {"field": "n", "operator": "in", "value": [1, 2, 3]},       # 1 part + 4
        {"not": {"field": "m", "operator": "exists"}},              # 1 part + 1
        {"field": "s", "operator": "contains", "value": "x"},       # 1 part + 1 (not an array)
    ])
    facts = {"a": {"b": [[1, 2]] * 10}, "s": "xyz"}
    assert evaluation_work(rulebook, sha256_hex(rulebook), facts) == (2 + 30) + (1 + 4) + (1 + 1) + (1 + 1)


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "b"]), st.none(), st.booleans(),
                                st.lists(st.integers(0, 2), max_size=2)), max_size=40),
       needles=st.lists(st.one_of(st.integers(-3, 3), st.sampled_from(["a", "z"]),
                                  st.lists(st.integers(0, 2), max_size=2)), min_size=1, max_size=5))
def test_the_estimate_bounds_the_comparisons_contains_really_makes(items, needles):
    rulebook = _rulebook([{"any": [{"field": "items", "operator": "contains", "value": n} for n in needles]}])
    rulebook_hash = sha256_hex(rulebook)
    calls = []
    real = semantics.strict_equal

    def counting(left, right):
        calls.append(1)
        return real(left, right)

    semantics.strict_equal = counting  # contains reads the module global at each call
    try:
        for needle in needles:
            semantics.contains(items, needle)
    finally:
        semantics.strict_equal = real
    assert len(calls) <= evaluation_work(rulebook, rulebook_hash, {"items": items})
    get_evaluator(rulebook, rulebook_hash).evaluate({"items": items})  # and it evaluates


def test_a_facts_walk_stops_at_the_value_limit():
    with pytest.raises(GateError) as caught:
        check_facts({"rows": [[0] * 10_000 for _ in range(11)]})
    assert caught.value.code == "EVALUATION_INPUT_TOO_LARGE" and caught.value.details["limit"] == "values"
