"""The operator table (gate/rulebook/operators.py) against everything that reads it.

Every declared operator must be the schema's (same names, same order, the same valueless ones),
compile to an evaluator that agrees with its meaning (`holds`), be cut exactly by the analysis
(every atom of its field is all in or all out of the leaf), and cost what its class says. Its
other declarations (negation, comparison, threshold) are checked against its meaning. The vector
evaluator's coverage is tested beside it (tests/workbench/test_rulebook_polars.py).
"""

from __future__ import annotations

import json

import pytest
from rulebook_support import Build

from gate.protocol.canonical import sha256_hex
from gate.rulebook import contract, schema_bytes, validate_rulebook
from gate.rulebook.analysis.space import Space
from gate.rulebook.budget import evaluation_work
from gate.rulebook.compile import compile_rulebook
from gate.rulebook.operators import BY_NAME, OPERATORS, Cost, Operand
from gate.rulebook.semantics import MISSING

NAMES = [operator.name for operator in OPERATORS]

# Rulebook constants of every JSON kind, and look-alikes of each other.
VALUES = [None, True, False, 0, 1, 1.0, 2.5, -3, "", "a", "ab", "1", "True",
          [], [1], [1, 2], ["a", 1], [True], [None, "b"], {}, {"k": 1}, {"k": [1.0]}]
# Field values: the constants, more look-alikes, and a path that does not resolve.
FACTS = [*VALUES, MISSING, 2, 0.5, -3.5, "xaby", "b", ["ab"], [[1]], [{"k": 1}], {"k": True}, {"j": 1}]


def _values(operator):
    """The constants a leaf of `operator` is tried with (none for a valueless operator)."""
    return [None] if operator.operand is Operand.NONE else VALUES


def _book(operator, value):
    leaf = Build.leaf("f", operator.name) if operator.operand is Operand.NONE else Build.leaf("f", operator.name, value)
    book = Build.single(leaf)
    assert validate_rulebook(book) == []
    return book


def _facts(x):
    return {} if x is MISSING else {"f": x}


def test_the_table_is_the_schemas_operator_enum():
    leaf = json.loads(schema_bytes())["$defs"]["leaf"]
    assert leaf["properties"]["operator"]["enum"] == NAMES
    assert len(set(NAMES)) == len(NAMES) and set(BY_NAME) == set(NAMES)
    assert all(BY_NAME[name].name == name for name in NAMES)
    valueless = [o.name for o in OPERATORS if o.operand is Operand.NONE]
    assert valueless == leaf["if"]["properties"]["operator"]["enum"]
    assert tuple(NAMES) == contract.OPERATORS and frozenset(valueless) == contract.VALUELESS_OPERATORS


@pytest.mark.parametrize("name", NAMES)
def test_the_compiled_evaluator_agrees_with_the_meaning(name):
    operator = BY_NAME[name]
    for value in _values(operator):
        evaluate = compile_rulebook(_book(operator, value), "0" * 64).evaluate
        for x in FACTS:
            expected = operator.holds(x, value)
            assert type(expected) is bool, (name, value, x)
            evaluation = evaluate(_facts(x))
            assert evaluation.matched is expected, (name, value, x)
            assert evaluation.checks == ({"rule_id": "r_one", "field": "f", "operator": name, "passed": expected},)


@pytest.mark.parametrize("name", NAMES)
def test_the_analysis_cuts_every_operator_exactly(name):
    operator = BY_NAME[name]
    for value in _values(operator):
        book = _book(operator, value)
        space = Space([book])
        assert space.exact
        leaf = book["rules"][0]["condition"]
        mask = space.leaf_mask(leaf)
        for x in FACTS:
            atom = space.atom_of(space.index["f"], x)
            assert atom >= 0
            assert bool((mask >> atom) & 1) is operator.holds(x, value), (name, value, x)


@pytest.mark.parametrize("name", NAMES)
def test_each_operator_costs_its_class(name):
    operator = BY_NAME[name]
    value = [1, [2], {"k": 3}]  # 6 JSON values: the array, 1, [2], 2, the object, 3
    if operator.operand is Operand.NONE:
        leaf = Build.leaf("a.b", name)
    elif operator.operand is Operand.NUMBER:
        leaf = Build.leaf("a.b", name, 7)
    else:
        leaf = Build.leaf("a.b", name, value)
    book = Build.single(leaf)
    walked = {"a": {"b": [0] * 11}}
    size = 1 if operator.operand is Operand.NUMBER else 6
    expected = {Cost.PATH: 2 + 1, Cost.VALUE: 2 + size, Cost.ARRAY: 2 + 11 * size}[operator.cost]
    assert evaluation_work(book, sha256_hex(book), walked) == expected
    flat = {Cost.PATH: 2 + 1, Cost.VALUE: 2 + size, Cost.ARRAY: 2 + 1}[operator.cost]
    assert evaluation_work(book, sha256_hex(book), {"a": {"b": "not an array"}}) == flat


def test_negations_are_the_negation_of_their_operator():
    for negated in OPERATORS:
        if negated.negates is None:
            continue
        base = BY_NAME[negated.negates]
        assert base.negates is None and base.operand is negated.operand and base.cost is negated.cost
        for value in _values(negated):
            if base.operand is Operand.OPTIONS and not isinstance(value, list):
                assert not any(o.holds(x, value) for o in (negated, base) for x in FACTS)
                continue  # neither holds for a constant that is not an array
            for x in FACTS:
                if x is MISSING and negated.operand is not Operand.NONE:
                    assert not negated.holds(x, value) and not base.holds(x, value)
                else:
                    assert negated.holds(x, value) is not base.holds(x, value), (negated.name, value, x)


def test_comparisons_and_thresholds_are_their_meaning():
    numbers = [-3, -0.5, 0, 1, 1.0, 2.5]
    for operator in OPERATORS:
        assert (operator.threshold is not None) is (operator.operand is Operand.NUMBER)
        if operator.compare is None:
            assert operator.threshold is None
            continue
        kinds = [numbers] if operator.threshold else [numbers, ["", "a", "b"], [True, False]]
        for kind in kinds:
            for x in kind:
                for value in kind:
                    assert operator.holds(x, value) is bool(operator.compare(x, value)), (operator.name, x, value)
        if operator.threshold is not None:
            rising, strict = operator.threshold.rising, operator.threshold.strict
            assert operator.holds(1, 0) is rising and operator.holds(0, 1) is not rising
            assert operator.holds(0, 0) is not strict
            assert not any(operator.holds(x, v) for x, v in ((True, 0), (1, False), ("1", 0), (1, "0"), (None, 0)))
