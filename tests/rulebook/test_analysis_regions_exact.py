"""The cube algebra of the rulebook analysis, to the exact cube (issue 22, item 5): intersection,
difference, containment, absorption and its limits, conditions as cubes, disjoint unions, the
decision-list partition, the merge of neighbouring cubes, and the budget's edge.

A cube is `field index -> atom mask`; in most tests field 0 has four atoms (full mask 0b1111) and
field 1 three (0b111).
"""

from __future__ import annotations

import pytest
from rulebook_support import Build

from gate.rulebook.analysis.regions import (
    ABSORB_LIMIT,
    MAX_CUBES,
    Budget,
    BudgetExceeded,
    absorb,
    condition_cubes,
    disjoint,
    meet,
    merge,
    partition,
    subset,
    subtract,
)
from gate.rulebook.analysis.space import Space

FULL = [0b1111, 0b111]
leaf = Build.leaf


def test_a_budget_allows_exactly_its_operations():
    assert Budget().left == 1_000_000
    budget = Budget(3)
    budget.spend(2)
    budget.spend()
    assert budget.left == 0
    with pytest.raises(BudgetExceeded, match="exceeded its budget of cube operations"):
        budget.spend()
    assert budget.left == -1


@pytest.mark.parametrize(("a", "b", "met"), [
    ({0: 0b0011}, {0: 0b0110}, {0: 0b0010}),
    ({0: 0b0011}, {0: 0b1100}, None),
    ({0: 0b0011}, {1: 0b001}, {0: 0b0011, 1: 0b001}),
    ({0: 0b0011}, {0: 0b0010, 1: 0b001}, {0: 0b0010, 1: 0b001}),
    ({0: 0b0010, 1: 0b011}, {1: 0b110}, {0: 0b0010, 1: 0b010}),
    ({0: 0b0010, 1: 0b001}, {0: 0b0011, 1: 0b110}, None),
    ({}, {}, {}),
])
def test_meet(a, b, met):
    before = (dict(a), dict(b))
    assert meet(a, b) == met
    assert meet(b, a) == met
    assert (a, b) == before  # the operands are not changed


def test_meet_keeps_the_longer_cubes_field_order():
    # equal lengths: a's fields first, then b's new ones (the order later differences iterate in)
    assert list(meet({0: 0b0011, 1: 0b011}, {1: 0b001, 2: 0b1})) == [0, 1, 2]
    assert list(meet({1: 0b001, 2: 0b1}, {0: 0b0011, 1: 0b011})) == [1, 2, 0]
    assert list(meet({2: 0b1}, {0: 0b0011, 1: 0b011})) == [0, 1, 2]


@pytest.mark.parametrize(("a", "b", "pieces"), [
    ({0: 0b1111}, {0: 0b0011}, [{0: 0b1100}]),
    ({}, {0: 0b0011, 1: 0b001}, [{0: 0b1100}, {0: 0b0011, 1: 0b110}]),
    ({0: 0b0100}, {0: 0b0011}, [{0: 0b0100}]),            # apart: a itself
    ({0: 0b0100}, {1: 0b001, 0: 0b0011}, [{0: 0b0100}]),   # apart on a later field of b: still a itself, whole
    ({0: 0b0011}, {0: 0b0011}, []),                         # inside b: nothing left
    ({}, {0: 0b1111}, []),
    ({0: 0b0110, 1: 0b011}, {0: 0b0010}, [{0: 0b0100, 1: 0b011}]),
    ({1: 0b011}, {0: 0b0001, 1: 0b001}, [{0: 0b1110, 1: 0b011}, {0: 0b0001, 1: 0b010}]),
])
def test_subtract(a, b, pieces):
    assert subtract(a, b, FULL) == pieces


@pytest.mark.parametrize(("a", "b", "inside"), [
    ({0: 0b0001}, {0: 0b0011}, True),
    ({}, {0: 0b0011}, False),
    ({0: 0b0001, 1: 0b001}, {}, True),
    ({0: 0b0011}, {0: 0b0011, 1: 0b111}, True),
    ({0: 0b0011}, {0: 0b0011, 1: 0b011}, False),
    ({0: 0b0111}, {0: 0b0011}, False),
])
def test_subset(a, b, inside):
    assert subset(a, b, FULL) is inside


def test_absorb_drops_contained_and_repeated_cubes():
    assert absorb([{0: 0b0011}, {0: 0b0001}, {1: 0b001}], FULL, Budget()) == [{0: 0b0011}, {1: 0b001}]
    assert absorb([{0: 0b0001, 1: 0b001}, {0: 0b0011}], FULL, Budget()) == [{0: 0b0011}]
    assert absorb([{0: 0b0001}, {0: 0b0001}], FULL, Budget()) == [{0: 0b0001}]
    assert absorb([{0: 0b0001}, {0: 0b0010}], FULL, Budget()) == [{0: 0b0001}, {0: 0b0010}]
    one = [{0: 0b0001}]
    assert absorb(one, FULL, Budget(0)) is one  # fewer than two: nothing to do, nothing spent
    assert absorb([], FULL, Budget(0)) == []


def test_absorb_spends_half_the_pairs():
    cubes = [{0: 0b0001}, {0: 0b0010}, {0: 0b0100}]
    budget = Budget(4)  # 3 * 3 // 2
    absorb(cubes, FULL, budget)
    assert budget.left == 0
    with pytest.raises(BudgetExceeded):
        absorb(cubes, FULL, Budget(3))


def test_above_the_absorb_limit_only_repeats_are_dropped():
    assert ABSORB_LIMIT == 256 and MAX_CUBES == 4096
    wide = [2, 0b1111, 0b1111]
    many = [{0: i % 2, 1: 1 + i % 7, 2: 1 + i // 14} for i in range(ABSORB_LIMIT)] + [{0: 0, 1: 1, 2: 1}]
    budget = Budget(ABSORB_LIMIT + 1)
    kept = absorb(many, wide, budget)
    assert budget.left == 0
    assert kept == many[:ABSORB_LIMIT]  # the repeat of the first dropped, contained cubes kept
    at_limit = many[:ABSORB_LIMIT]
    spent = Budget()
    absorb(at_limit, wide, spent)
    assert spent.left == 1_000_000 - ABSORB_LIMIT * ABSORB_LIMIT // 2  # at the limit: pairwise


def test_more_than_max_cubes_is_refused():
    cubes = [{0: 1}] * MAX_CUBES
    assert absorb(cubes, FULL, Budget()) == [{0: 1}]
    with pytest.raises(BudgetExceeded, match="a condition needs more than 4096 regions"):
        absorb(cubes + [{0: 1}], FULL, Budget())


def test_disjoint_keeps_the_union_without_overlaps():
    assert disjoint([{0: 0b0011}, {0: 0b0110}], FULL, Budget()) == [{0: 0b0011}, {0: 0b0100}]
    assert disjoint([{0: 0b0011}, {0: 0b0001}, {1: 0b001}], FULL, Budget()) == [
        {0: 0b0011}, {0: 0b1100, 1: 0b001}]
    budget = Budget(2)  # one piece against the first cube, then nothing left against the second
    assert disjoint([{0: 0b0001}, {0: 0b0010}, {0: 0b0001}], FULL, budget) == [{0: 0b0001}, {0: 0b0010}]
    assert budget.left == 0
    with pytest.raises(BudgetExceeded):
        disjoint([{0: 0b0001}, {0: 0b0010}, {0: 0b0100}], FULL, Budget(2))


def test_disjoint_spends_one_per_piece_and_cube_seen():
    budget = Budget(100)
    disjoint([{0: 0b0001}, {0: 0b0010}, {0: 0b0100}], FULL, budget)
    assert budget.left == 100 - (1 + 1 + 1)  # second against first; third against the first two
    budget = Budget(100)
    disjoint([{0: 0b0011}, {0: 0b0011}, {1: 0b001}], FULL, budget)
    # the repeat is gone after one check (1); {1: 1} is one piece against the first cube (1), and the
    # repeat was never kept, so nothing more
    assert budget.left == 100 - 2


def test_partition_runs_the_decision_list():
    items = [("A", [{0: 0b0011}]), ("B", [{0: 0b0110}])]
    assert partition(items, "D", {}, FULL, Budget()) == [({0: 0b0011}, "A"), ({0: 0b0100}, "B"), ({0: 0b1000}, "D")]
    assert partition([("A", [{}]), ("B", [{0: 1}])], "D", {}, FULL, Budget()) == [({}, "A")]
    # an item's cubes are disjoint (its condition through `disjoint`)
    assert partition([("A", [{0: 0b0001}, {0: 0b1110, 1: 0b001}])], "D", {0: 0b0011}, FULL, Budget()) == [
        ({0: 0b0001}, "A"), ({0: 0b0010, 1: 0b001}, "A"), ({0: 0b0010, 1: 0b110}, "D")]
    assert partition([], "D", {1: 0b010}, FULL, Budget()) == [({1: 0b010}, "D")]


def test_partition_spends_per_meet_and_per_piece_left():
    budget = Budget(100)
    partition([("A", [{0: 0b0011}]), ("B", [{0: 0b0110}])], "D", {}, FULL, budget)
    # A: one meet (1) and one piece left (1); B: one meet (1) and one piece left (1)
    assert budget.left == 96
    budget = Budget(100)
    partition([("A", [{0: 0b0001}, {0: 0b0010}])], "D", {1: 0b001}, FULL, budget)
    # two meets, each hits: pieces left 1 after the first, 1 after the second
    assert budget.left == 96


def test_merge_unites_cubes_that_differ_in_one_field():
    assert merge([{0: 0b0001}, {0: 0b0010}], FULL) == [{0: 0b0011}]
    assert merge([{0: 0b0001}, {0: 0b1110}], FULL) == [{}]
    assert merge([{0: 0b0001}, {}], FULL) == [{}]
    assert merge([{0: 0b0001, 1: 0b001}, {0: 0b0010, 1: 0b010}], FULL) == [
        {0: 0b0001, 1: 0b001}, {0: 0b0010, 1: 0b010}]
    assert merge([{0: 0b0001}, {0: 0b0001}], FULL) == [{0: 0b0001}]
    # a second pass unites what the first pass made
    assert merge([{0: 0b0001, 1: 0b001}, {0: 0b0010, 1: 0b010}, {0: 0b0010, 1: 0b001}, {0: 0b0001, 1: 0b010}],
                 FULL) == [{0: 0b0011, 1: 0b011}]
    assert merge([{1: 0b001}, {0: 0b0010, 1: 0b001}], FULL) == [{1: 0b001}]
    original = [{0: 0b0001}, {0: 0b0010}]
    merge(original, FULL)
    assert original == [{0: 0b0001}, {0: 0b0010}]  # the caller's cubes are not changed


def _space():
    # x cut at 5: missing, null, true, false, (-inf, 5), 5, (5, +inf), strings, arrays, objects
    return Space([Build.rulebook([Build.rule("r", leaf("x", "gt", 5)), Build.rule("s", leaf("x", "eq", 5))])])


@pytest.mark.parametrize(("condition", "masks"), [
    (leaf("x", "gt", 5), [0b0001000000]),
    ({"not": leaf("x", "gt", 5)}, [0b1110111111]),
    ({"not": [leaf("x", "gt", 5)]}, [0b1110111111]),
    ({"not": {"not": leaf("x", "gt", 5)}}, [0b0001000000]),
    (leaf("x", "exists"), [0b1111111110]),
    ({"any": [leaf("x", "gt", 5), leaf("x", "eq", 5)]}, [0b0001000000, 0b0000100000]),
    ({"any": [leaf("x", "gt", 5), leaf("x", "gte", 5)]}, [0b0001100000]),
    ({"all": [leaf("x", "gt", 5), leaf("x", "lt", 5)]}, []),
    ({"all": [leaf("x", "gte", 5), leaf("x", "lte", 5)]}, [0b0000100000]),
    ({"not": {"any": [leaf("x", "gt", 5), leaf("x", "lte", 5)]}}, [0b1110001111]),
    ({"not": {"all": [leaf("x", "gt", 5), leaf("x", "exists")]}}, [0b1110111111]),
    (leaf("x", "in", []), []),
    ({"not": leaf("x", "in", [])}, None),  # every value: the whole space
])
def test_condition_cubes(condition, masks):
    space = _space()
    x = space.index["x"]
    assert space.full[x] == 0b1111111111
    cubes = condition_cubes(space, condition, Budget())
    assert cubes == ([{}] if masks is None else [{x: m} for m in masks])


def test_condition_cubes_spend_their_budget():
    space = _space()
    conjunction = {"all": [{"any": [leaf("x", "gt", 5), leaf("x", "eq", 5)]}, leaf("x", "exists")]}
    budget = Budget(100)
    condition_cubes(space, conjunction, budget)
    # the union: 2 cubes (2) and their absorption (2 * 2 // 2 = 2); the meet: 1 x 1 (1), then 1 x 2 (2),
    # and the absorption of its 2 cubes (2)
    assert budget.left == 100 - (2 + 2 + 1 + 2 + 2)
    with pytest.raises(BudgetExceeded):
        condition_cubes(space, conjunction, Budget(8))
