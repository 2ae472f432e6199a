"""Every leaf operator with its type edge cases (reference facts §2), through get_evaluator.

Each case is (operator, facts, value, expected match) for a one-rule rulebook whose rule
tests field `f` (or a dotted path) against `value`.

This is the one test file a new operator adds to (docs/architecture.md, "Where a change goes"):
its cases (`CASES`), its reference meaning (`REFERENCE`, which the property tests' interpreter
evaluates leaves with) and its declaration in `gate.rulebook.operators`, pinned (`DECLARED`).
The checks that read the table and need no entry are in test_operator_table.py, the vector
evaluator's in tests/workbench/test_rulebook_polars.py.
"""

from __future__ import annotations

import operator as op

import pytest

from gate.rulebook.operators import OPERATORS, Cost, Operand, Threshold

UNSET = object()

CASES = [
    # exists / not_exists: a present null resolves; a missing key does not.
    ("exists", {"f": 0}, UNSET, True),
    ("exists", {"f": None}, UNSET, True),
    ("exists", {"f": False}, UNSET, True),
    ("exists", {}, UNSET, False),
    ("not_exists", {}, UNSET, True),
    ("not_exists", {"f": None}, UNSET, False),
    ("not_exists", {"g": 1}, UNSET, True),
    # eq: strict, no coercion; 1 equals 1.0; bool is not a number.
    ("eq", {"f": 1}, 1, True),
    ("eq", {"f": 1.0}, 1, True),
    ("eq", {"f": 1}, 1.0, True),
    ("eq", {"f": True}, 1, False),
    ("eq", {"f": 1}, True, False),
    ("eq", {"f": 0}, False, False),
    ("eq", {"f": False}, 0, False),
    ("eq", {"f": True}, True, True),
    ("eq", {"f": "1"}, 1, False),
    ("eq", {"f": 1}, "1", False),
    ("eq", {"f": "us"}, "us", True),
    ("eq", {"f": "US"}, "us", False),
    ("eq", {"f": None}, None, True),
    ("eq", {}, None, False),
    ("eq", {"f": 0}, None, False),
    ("eq", {"f": [1, 2]}, [1, 2], True),
    ("eq", {"f": [1.0, 2]}, [1, 2], True),
    ("eq", {"f": [2, 1]}, [1, 2], False),
    ("eq", {"f": [True]}, [1], False),
    ("eq", {"f": [1]}, [True], False),
    ("eq", {"f": [1, 2]}, [1, 2, 3], False),
    ("eq", {"f": {"a": 1, "b": [None]}}, {"b": [None], "a": 1.0}, True),
    ("eq", {"f": {"a": 1}}, {"a": True}, False),
    ("eq", {"f": {"a": 1}}, {"a": 1, "b": 2}, False),
    ("eq", {"f": {"a": 1}}, {"b": 1}, False),
    ("eq", {"f": [1]}, 1, False),
    ("eq", {"f": 1}, [1], False),
    ("eq", {"f": "x"}, ["x"], False),
    ("eq", {"f": {}}, [], False),
    # neq: negation of eq for a resolved field; unresolved is false.
    ("neq", {"f": 2}, 1, True),
    ("neq", {"f": 1.0}, 1, False),
    ("neq", {"f": True}, 1, True),
    ("neq", {"f": 1}, True, True),
    ("neq", {"f": "a"}, "a", False),
    ("neq", {"f": None}, None, False),
    ("neq", {"f": None}, 0, True),
    ("neq", {"f": [1]}, [True], True),
    ("neq", {}, 1, False),
    ("neq", {}, None, False),
    # gt / gte / lt / lte: both sides numbers, booleans are not numbers.
    ("gt", {"f": 26}, 25, True),
    ("gt", {"f": 25}, 25, False),
    ("gt", {"f": 25.5}, 25, True),
    ("gt", {"f": 2}, 1.5, True),
    ("gt", {"f": -1}, -2, True),
    ("gt", {"f": True}, 0, False),
    ("gt", {"f": 1}, False, False),
    ("gt", {"f": "26"}, 25, False),
    ("gt", {"f": 26}, "25", False),
    ("gt", {"f": "b"}, "a", False),
    ("gt", {"f": [30]}, 25, False),
    ("gt", {"f": None}, 0, False),
    ("gt", {}, 0, False),
    ("gte", {"f": 25}, 25, True),
    ("gte", {"f": 25.0}, 25, True),
    ("gte", {"f": 24.999}, 25, False),
    ("gte", {"f": True}, 1, False),
    ("gte", {"f": 1}, True, False),
    ("lt", {"f": 24}, 25, True),
    ("lt", {"f": 25}, 25, False),
    ("lt", {"f": False}, 1, False),
    ("lt", {"f": 0}, None, False),
    ("lt", {"f": "a"}, "b", False),
    ("lte", {"f": 20}, 20, True),
    ("lte", {"f": 20.0001}, 20, False),
    ("lte", {"f": -0.0}, 0, True),
    ("lte", {"f": None}, 20, False),
    ("lte", {"f": {"v": 1}}, 20, False),
    # in / not_in: value must be an array; membership is strict.
    ("in", {"f": "gold"}, ["gold", "silver"], True),
    ("in", {"f": "bronze"}, ["gold", "silver"], False),
    ("in", {"f": 1}, [1.0, 2], True),
    ("in", {"f": 2.0}, [1, 2], True),
    ("in", {"f": True}, [1, 2], False),
    ("in", {"f": 1}, [True], False),
    ("in", {"f": True}, [True, "x"], True),
    ("in", {"f": None}, [None], True),
    ("in", {"f": "1"}, [1], False),
    ("in", {"f": [1]}, [[1], [2]], True),
    ("in", {"f": [1]}, [[True]], False),
    ("in", {"f": {"a": 1}}, [{"a": 1.0}], True),
    ("in", {"f": ["gold"]}, ["gold"], False),
    ("in", {"f": {"a": 1}}, ["a"], False),
    ("in", {"f": "gold"}, "gold", False),
    ("in", {"f": "gold"}, {"gold": 1}, False),
    ("in", {"f": 1}, [], False),
    ("in", {}, [None], False),
    ("not_in", {"f": "bronze"}, ["gold", "silver"], True),
    ("not_in", {"f": "gold"}, ["gold", "silver"], False),
    ("not_in", {"f": True}, [1, 2], True),
    ("not_in", {"f": 1.0}, [1, 2], False),
    ("not_in", {"f": [1]}, ["x"], True),
    ("not_in", {"f": 1}, [], True),
    ("not_in", {"f": "gold"}, "silver", False),
    ("not_in", {"f": "gold"}, None, False),
    ("not_in", {}, ["gold"], False),
    # contains: array element strict equality, or substring of a string.
    ("contains", {"f": ["vip", "eu"]}, "vip", True),
    ("contains", {"f": ["vip"]}, "vi", False),
    ("contains", {"f": [1, 2]}, 1.0, True),
    ("contains", {"f": [1, 2]}, True, False),
    ("contains", {"f": [True]}, 1, False),
    ("contains", {"f": [[1, 2]]}, [1, 2], True),
    ("contains", {"f": [{"a": 1}]}, {"a": 1}, True),
    ("contains", {"f": [None]}, None, True),
    ("contains", {"f": []}, None, False),
    ("contains", {"f": "premium plan"}, "plan", True),
    ("contains", {"f": "premium"}, "", True),
    ("contains", {"f": "premium"}, "Plan", False),
    ("contains", {"f": "123"}, 2, False),
    ("contains", {"f": {"vip": True}}, "vip", False),
    ("contains", {"f": 12}, 1, False),
    ("contains", {"f": None}, None, False),
    ("contains", {}, "x", False),
    ("not_contains", {"f": ["eu"]}, "vip", True),
    ("not_contains", {"f": ["vip"]}, "vip", False),
    ("not_contains", {"f": [1]}, True, True),
    ("not_contains", {"f": "premium plan"}, "plan", False),
    ("not_contains", {"f": "premium"}, "basic", True),
    ("not_contains", {"f": 12}, 1, True),
    ("not_contains", {"f": {"vip": 1}}, "vip", True),
    ("not_contains", {"f": None}, "x", True),
    ("not_contains", {}, "x", False),
]


@pytest.mark.parametrize(
    "operator, facts, value, expected",
    CASES,
    ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)],
)
def test_operator(build, evaluate, operator, facts, value, expected):
    leaf = build.leaf("f", operator) if value is UNSET else build.leaf("f", operator, value)
    evaluation = evaluate(build.single(leaf), facts)
    assert evaluation.matched is expected
    assert evaluation.checks == ({"rule_id": "r_one", "field": "f", "operator": operator, "passed": expected},)
    assert type(evaluation.checks[0]["passed"]) is bool


def test_every_operator_is_covered():
    names = {operator.name for operator in OPERATORS}
    assert {case[0] for case in CASES} == names
    assert set(REFERENCE) == names and set(DECLARED) == names


# --------------------------------------------------------------------------- the reference meaning

# Each operator's meaning, written straight from reference facts §2 and sharing no code with
# gate.rulebook (its own equality, recursive): the property tests' interpreter
# (test_rulebook_properties.py) evaluates every leaf with `ref_leaf`, and it must give every case.
REF_MISSING = object()  # the value of a path that does not resolve


def ref_is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def ref_equal(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if ref_is_number(a) or ref_is_number(b):
        return ref_is_number(a) and ref_is_number(b) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return isinstance(a, str) and isinstance(b, str) and a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(ref_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return set(a) == set(b) and all(ref_equal(a[k], b[k]) for k in a)
    return False


def ref_contains(container, needle):
    if isinstance(container, list):
        return any(ref_equal(item, needle) for item in container)
    return isinstance(container, str) and isinstance(needle, str) and needle in container


# The operators that ask whether the path resolves; every other is false where it does not.
ASKS_PRESENCE = {"exists", "not_exists"}
REFERENCE = {
    "exists": lambda x, value: x is not REF_MISSING,
    "not_exists": lambda x, value: x is REF_MISSING,
    "eq": lambda x, value: ref_equal(x, value),
    "neq": lambda x, value: not ref_equal(x, value),
    "gt": lambda x, value: ref_is_number(x) and ref_is_number(value) and x > value,
    "gte": lambda x, value: ref_is_number(x) and ref_is_number(value) and x >= value,
    "lt": lambda x, value: ref_is_number(x) and ref_is_number(value) and x < value,
    "lte": lambda x, value: ref_is_number(x) and ref_is_number(value) and x <= value,
    "in": lambda x, value: isinstance(value, list) and any(ref_equal(x, v) for v in value),
    "not_in": lambda x, value: isinstance(value, list) and not any(ref_equal(x, v) for v in value),
    "contains": lambda x, value: ref_contains(x, value),
    "not_contains": lambda x, value: not ref_contains(x, value),
}


def ref_leaf(operator, x, value):
    """One leaf by the reference meaning; an operator without one fails the test that meets it."""
    if x is REF_MISSING and operator not in ASKS_PRESENCE:
        return False
    return REFERENCE[operator](x, value)


@pytest.mark.parametrize("operator, facts, value, expected", CASES, ids=[f"{i}-{c[0]}" for i, c in enumerate(CASES)])
def test_the_reference_meaning_gives_every_case(operator, facts, value, expected):
    x = facts.get("f", REF_MISSING)
    assert ref_leaf(operator, x, None if value is UNSET else value) is expected


# --------------------------------------------------------------------------- the declarations

# Each operator's declaration in gate.rulebook.operators, in the schema's order: what its value
# is, its cost class, how the rule table reads it, the operator it negates, its comparison and
# its threshold (test_operator_table.py checks each against the operator's meaning).
DECLARED = {
    "exists": (Operand.NONE, Cost.PATH, "exists", None, None, None),
    "not_exists": (Operand.NONE, Cost.PATH, "is absent", "exists", None, None),
    "eq": (Operand.VALUE, Cost.VALUE, "=", None, op.eq, None),
    "neq": (Operand.VALUE, Cost.VALUE, "≠", "eq", op.ne, None),
    "gt": (Operand.NUMBER, Cost.PATH, ">", None, op.gt, Threshold(rising=True, strict=True)),
    "gte": (Operand.NUMBER, Cost.PATH, "≥", None, op.ge, Threshold(rising=True, strict=False)),
    "lt": (Operand.NUMBER, Cost.PATH, "<", None, op.lt, Threshold(rising=False, strict=True)),
    "lte": (Operand.NUMBER, Cost.PATH, "≤", None, op.le, Threshold(rising=False, strict=False)),
    "in": (Operand.OPTIONS, Cost.VALUE, "in", None, None, None),
    "not_in": (Operand.OPTIONS, Cost.VALUE, "not in", "in", None, None),
    "contains": (Operand.NEEDLE, Cost.ARRAY, "contains", None, None, None),
    "not_contains": (Operand.NEEDLE, Cost.ARRAY, "not contains", "contains", None, None),
}


def test_each_operator_is_declared_as_pinned():
    declared = {o.name: (o.operand, o.cost, o.words, o.negates, o.compare, o.threshold) for o in OPERATORS}
    assert declared == DECLARED and list(declared) == list(DECLARED)


# --------------------------------------------------------------------------- dotted paths

PATH_CASES = [
    ("a.b", {"a": {"b": 1}}, True),
    ("a.b.c", {"a": {"b": {"c": 1}}}, True),
    ("a.b", {"a": {"b": None}}, True),
    ("a.b", {"a": {"c": 1}}, False),
    ("a.b", {"a": None}, False),
    ("a.b", {"a": 5}, False),
    ("a.b", {"a": "bee"}, False),
    ("a.b", {"a": [{"b": 1}]}, False),
    ("a.0", {"a": [1]}, False),
    ("a.0", {"a": {"0": 1}}, True),
    ("a.b", {"a.b": 1}, False),
    ("a", {"a": {"b": 1}}, True),
    ("a_b-c", {"a_b-c": 1}, True),
]


@pytest.mark.parametrize("path, facts, resolves", PATH_CASES)
def test_dotted_path_resolution(build, matches, path, facts, resolves):
    assert matches(build.leaf(path, "exists"), facts) is resolves
    assert matches(build.leaf(path, "not_exists"), facts) is (not resolves)


UNRESOLVED_LEAVES = [
    ("eq", None),
    ("neq", 1),
    ("neq", None),
    ("gt", 0),
    ("gte", 0),
    ("lt", 0),
    ("lte", 0),
    ("in", [None]),
    ("not_in", [1]),
    ("contains", "x"),
    ("not_contains", "x"),
    ("exists", None),
]


@pytest.mark.parametrize("operator, value", UNRESOLVED_LEAVES)
@pytest.mark.parametrize("facts", [{}, {"a": [1]}, {"a": 3}, {"a": {"x": 1}}, [], "text", None, 5])
def test_unresolved_path_makes_every_leaf_false_except_not_exists(build, matches, operator, value, facts):
    assert matches(build.leaf("a.b", operator, value), facts) is False
    assert matches(build.leaf("a.b", "not_exists"), facts) is True


def test_same_field_in_nested_objects(build, matches):
    facts = {"order": {"customer": {"tier": "gold", "tags": ["vip"]}, "total": 120.5}}
    assert matches(build.leaf("order.customer.tier", "eq", "gold"), facts)
    assert matches(build.leaf("order.customer.tags", "contains", "vip"), facts)
    assert matches(build.leaf("order.total", "gte", 120), facts)
    assert not matches(build.leaf("order.customer.tier.name", "exists"), facts)
