"""The input space of the rulebook analysis to the exact atom (issue 22, item 5): which atoms a
field is cut into (kind, representative, point, interval, integrality, needle signature), the
separator and sentinel, nested fields, the inexact limit, a value's atom, the witness of a cube,
the leaf semantics and type checks the atoms are computed with, and the numbers chosen inside a gap.
"""

from __future__ import annotations

import math

import pytest
from rulebook_support import Build

from gate.rulebook.analysis.space import (
    MAX_NEEDLES,
    Atom,
    Space,
    _gap_rep,
    _subsets,
    leaf_holds,
    leaves_of,
    resolve,
    set_path,
    type_ok,
)
from gate.rulebook.semantics import MISSING

leaf, rule = Build.leaf, Build.rule
BOOK = Build.rulebook([
    rule("aa", {"all": [leaf("n", "gte", 2), leaf("n", "lt", 3.5), leaf("s", "in", ["x|y", "b"]),
                        leaf("s", "contains", "b"), leaf("s", "not_contains", "ab"), leaf("t", "contains", 1),
                        leaf("t", "eq", [1, 2]), leaf("o", "neq", {"k": "v"}), leaf("o.k", "exists")]}),
], input_schema={"required": ["n"], "properties": {"n": {"type": "integer"}, "q.r": {"type": "string"}}})
BASE = [("missing", MISSING, False, None, None, ()), ("null", None, True, None, None, ()),
        ("boolean", True, True, None, None, ()), ("boolean", False, True, None, None, ())]


def _atoms(space, path):
    return [(a.kind, a.rep, a.point, a.interval, a.integral, a.signature)
            for a in space.fields[space.index[path]].atoms]


def test_fields_in_path_order_with_their_nesting():
    space = Space([BOOK])
    assert (space.separator, space.sentinel) == ("~", "~~~")  # "|" is in a constant ("x|y")
    assert [f.path for f in space.fields] == ["n", "o", "o.k", "q.r", "s", "t"]
    assert space.index == {"n": 0, "o": 1, "o.k": 2, "q.r": 3, "s": 4, "t": 5}
    assert space.full == [2**15 - 1, 2**9 - 1, 2**8 - 1, 2**8 - 1, 2**15 - 1, 2**10 - 1]
    assert space.parent == [-1, -1, 1, -1, -1, -1]
    assert space.children == {-1: [0, 1, 3, 4, 5], 1: [2]}
    assert space.exact and space.inexact == []


def test_an_integer_field_is_cut_at_its_constants_and_by_integrality():
    space = Space([BOOK])
    assert _atoms(space, "n") == BASE + [
        ("number", 1, False, (None, False, 2, False), True, ()), ("number", 1.5, False, (None, False, 2, False), False, ()),
        ("number", 2, True, (2, True, 2, True), None, ()),
        ("number", 3, False, (2, False, 3.5, False), True, ()), ("number", 2.75, False, (2, False, 3.5, False), False, ()),
        ("number", 3.5, True, (3.5, True, 3.5, True), None, ()),
        ("number", 4, False, (3.5, False, None, False), True, ()), ("number", 4.5, False, (3.5, False, None, False), False, ()),
        ("string", "~~", False, None, None, ()), ("array", ["~~~"], False, None, None, ()),
        ("object", {"~~~": 0}, False, None, None, ())]
    n = space.fields[0]
    assert n.points == [2, 3.5]
    assert n.number_atoms == [(-1, 4, 5), (6, -1, -1), (-1, 7, 8), (9, -1, -1), (-1, 10, 11)]
    assert n.other_object == 14 and n.sample_needles == []


def test_strings_arrays_and_objects_are_cut_by_constants_and_needles():
    space = Space([BOOK])
    s = space.fields[space.index["s"]]
    assert _atoms(space, "s") == BASE + [
        ("number", 0, False, (None, False, None, False), None, ()),
        ("string", "x|y", True, None, None, ()), ("string", "b", True, None, None, ()),
        ("string", "~~", False, None, None, ()), ("string", "~ab~", False, None, None, (0, 1)),
        ("string", "~b~", False, None, None, (1,)),
        ("array", ["~~~"], False, None, None, ()), ("array", ["b", "~~~"], False, None, None, (0,)),
        ("array", ["ab", "~~~"], False, None, None, (1,)), ("array", ["b", "ab", "~~~"], False, None, None, (0, 1)),
        ("object", {"~~~": 0}, False, None, None, ())]
    assert s.strings == {"x|y": 5, "b": 6} and s.string_needles == ["ab", "b"]
    # a string holding "ab" holds "b": no string holds "ab" alone
    assert s.string_sigs == {frozenset(): 7, frozenset({0, 1}): 8, frozenset({1}): 9}
    assert s.array_needles == ["b", "ab"] == s.sample_needles
    assert s.array_sigs == {frozenset(): 10, frozenset({0}): 11, frozenset({1}): 12, frozenset({0, 1}): 13}
    assert _atoms(space, "t") == BASE + [
        ("number", 0, False, (None, False, None, False), None, ()), ("string", "~~", False, None, None, ()),
        ("array", [1, 2], True, None, None, ()), ("array", ["~~~"], False, None, None, ()),
        ("array", [1, "~~~"], False, None, None, (0,)), ("object", {"~~~": 0}, False, None, None, ())]
    t = space.fields[space.index["t"]]
    assert t.arrays == [([1, 2], 6)] and t.string_needles == [] and t.array_needles == [1]
    assert _atoms(space, "o")[4:] == [
        ("number", 0, False, (None, False, None, False), None, ()), ("string", "~~", False, None, None, ()),
        ("array", ["~~~"], False, None, None, ()), ("object", {"k": "v"}, True, None, None, ()),
        ("object", {"~~~": 0}, False, None, None, ())]
    o = space.fields[space.index["o"]]
    assert o.objects == [({"k": "v"}, 7)] and o.other_object == 8


def test_constants_from_every_operator_and_every_rulebook():
    one = Build.rulebook([rule("aa", {"any": [leaf("x", "not_in", [5, "a", [1], {"b": 2}, True, None]),
                                              leaf("x", "neq", 7), leaf("x", "in", "not a list"),
                                              leaf("x", "eq", 5.0), leaf("x", "not_contains", "zz")]})])
    two = Build.rulebook([rule("bb", {"all": [leaf("x", "gt", 1), leaf("x", "contains", [3])]})])
    x = Space([one, two]).fields[0]
    assert x.points == [1, 5, 7]
    # numbers: (-inf, 1), 1, (1, 5), 5, (5, 7), 7, (7, +inf) are atoms 4 to 10 (5.0 is 5; "not a list" is no constant)
    assert x.strings == {"a": 11} and x.arrays == [([1], 14)] and x.objects == [({"b": 2}, 19)]
    assert [a.rep for a in x.atoms[4:11]] == [0, 1, 2, 5, 6, 7, 8] and len(x.atoms) == 21
    assert x.string_needles == ["zz"] and x.array_needles == ["zz", [3]]


def test_the_separator_avoids_every_text_of_the_rulebook():
    book = Build.rulebook([rule("aa", {"all": [leaf("p|q", "eq", "~"), leaf("r", "eq", {"#": ["^"]})]})])
    space = Space([book])
    assert space.separator == chr(0x2500) and space.sentinel == chr(0x2500) * 3
    plain = Space([Build.rulebook([rule("aa", leaf("x", "eq", 1))])])
    assert plain.separator == "|" and plain.sentinel == "|||"


def test_too_many_needles_make_the_space_inexact():
    needles = [f"w{i:02d}" for i in range(MAX_NEEDLES + 1)]
    book = Build.rulebook([rule("aa", {"any": [leaf("note", "contains", n) for n in needles]})])
    space = Space([book])
    assert not space.exact
    assert space.inexact == [
        {"field": "note", "operators": ["contains", "not_contains"],
         "reason": "11 distinct contains values on strings (exact analysis handles at most 10)"},
        {"field": "note", "operators": ["contains", "not_contains"],
         "reason": "11 distinct contains values on arrays (exact analysis handles at most 10)"}]
    note = space.fields[0]
    assert note.string_needles == needles[:MAX_NEEDLES] and note.array_needles == needles[:MAX_NEEDLES]
    assert note.sample_needles == needles
    exact = Space([Build.rulebook([rule("aa", {"any": [leaf("note", "contains", n) for n in needles[:10]]})])])
    assert exact.exact


def test_the_atom_of_a_value():
    space = Space([BOOK])
    n, s, t, o = (space.index[p] for p in ("n", "s", "t", "o"))
    assert [space.atom_of(n, v) for v in (MISSING, None, True, False, 0, 1.5, 2, 2.0, 3, 3.25, 3.5, 9, 9.5)] == [
        0, 1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 10, 11]
    assert [space.atom_of(n, v) for v in ("2", [2], {"a": 1})] == [12, 13, 14]
    assert [space.atom_of(s, v) for v in ("x|y", "b", "zzz", "cab", "abc", "bb")] == [5, 6, 7, 8, 8, 9]
    assert [space.atom_of(s, v) for v in ([], ["b"], ["ab", 1], ["ab", "b"], ["x", "abc"])] == [10, 11, 12, 13, 10]
    assert [space.atom_of(t, v) for v in ([1, 2], [2, 1], [1], [1.0, 3], [True], [[1]])] == [6, 8, 8, 8, 7, 7]
    assert [space.atom_of(o, v) for v in ({"k": "v"}, {"k": "w"}, {})] == [7, 8, 8]
    assert space.atom_of(n, object()) == -1
    x = Space([Build.rulebook([rule("aa", leaf("x", "gt", 1))])])
    assert [x.atom_of(0, v) for v in (0, 1, 1.5, True)] == [4, 5, 6, 2]
    assert x.locate({"x": 1}) == [5] and x.locate("not an object") == [0] and x.locate({}) == [0]


def test_a_cube_contains_the_atoms_of_a_fact_set():
    space = Space([Build.rulebook([rule("aa", {"all": [leaf("x", "gt", 1), leaf("y", "eq", "a")]})])])
    atoms = space.locate({"x": 2, "y": "a"})
    assert atoms == [6, 5]
    assert space.contains({0: 1 << 6}, atoms) and space.contains({}, atoms)
    assert not space.contains({0: 1 << 6, 1: 1 << 6}, atoms)
    assert not space.contains({0: 1 << 5}, atoms)
    assert not space.contains({0: space.full[0]}, [-1, 5])


def test_a_witness_solves_nested_fields():
    space = Space([BOOK])
    o, ok, n = space.index["o"], space.index["o.k"], space.index["n"]
    assert space.witness({}) == {}
    assert space.witness({n: 1 << 7}) == {"n": 3}
    # o.k must be present: o is an object, the constant {"k": "v"} first, else another object holding k
    assert space.witness({ok: space.full[ok] & ~1}) == {"o": {"k": "v"}}
    assert space.witness({o: 1 << 8, ok: space.full[ok] & ~1}) == {"o": {"~~~": 0, "k": None}}
    # o.k present but o a number: no fact set
    assert space.witness({o: 1 << 4, ok: space.full[ok] & ~1}) is None
    # o.k missing: o may be missing, or any object without k
    assert space.witness({ok: 1}) == {}
    assert space.witness({o: (1 << 7) | (1 << 8), ok: 1}) == {"o": {"~~~": 0}}
    assert space.witness({o: 1 << 7, ok: 1}) is None
    assert space.witness({o: 1 << 7, ok: 1 << 5}) == {"o": {"k": "v"}}  # {"k": "v"} holds a string at k ...
    assert space.witness({o: 1 << 7, ok: 1 << 4}) is None  # ... not a number
    assert space.witness({o: 1 << 2}) == {"o": True}
    assert space.witness({ok: 1 << 4}) == {"o": {"~~~": 0, "k": 0}}
    deep = Space([Build.rulebook([rule("aa", {"all": [leaf("a.b.c", "eq", 1), leaf("a", "exists")]})])])
    assert deep.parent == [-1, 0] and deep.witness({1: 1 << 5}) == {"a": {"|||": 0, "b": {"c": 1}}}


@pytest.mark.parametrize(("operator", "value", "x", "holds"), [
    ("exists", None, 0, True), ("exists", None, MISSING, False), ("exists", None, None, True),
    ("not_exists", None, MISSING, True), ("not_exists", None, None, False),
    ("eq", 1, 1.0, True), ("eq", 1, True, False), ("eq", None, MISSING, False), ("eq", None, None, True),
    ("neq", 1, 2, True), ("neq", 1, 1, False), ("neq", 1, MISSING, False),
    ("gt", 1, 2, True), ("gt", 1, 1, False), ("gte", 1, 1, True), ("gte", 1, 0.5, False),
    ("lt", 1, 0, True), ("lt", 1, 1, False), ("lte", 1, 1, True), ("lte", 1, 2, False),
    ("gt", 1, True, False), ("gt", True, 2, False), ("gt", 1, "2", False),
    ("in", [1, 2], 2, True), ("in", [1, 2], 3, False), ("in", "12", "1", False),
    ("not_in", [1, 2], 3, True), ("not_in", [1, 2], 1, False), ("not_in", [1], MISSING, False),
    ("not_in", "12", 3, False),
    ("contains", "b", "abc", True), ("contains", "b", "ac", False), ("contains", 1, [1, 2], True),
    ("not_contains", "b", "ac", True), ("not_contains", "b", "abc", False),
])
def test_leaf_holds_as_the_evaluator(operator, value, x, holds):
    assert leaf_holds(operator, value, x) is holds


def test_an_unknown_operator_raises():
    with pytest.raises(ValueError, match="unsupported operator 'matches'"):
        leaf_holds("matches", 1, 1)


@pytest.mark.parametrize(("kind", "x", "ok"), [
    ("string", "a", True), ("string", 1, False), ("number", 1.5, True), ("number", math.inf, False),
    ("number", True, False), ("integer", 2.0, True), ("integer", 2.5, False), ("integer", math.nan, False),
    ("integer", -math.inf, False), ("boolean", False, True), ("boolean", 0, False), ("array", [], True),
    ("array", {}, False), ("object", {}, True), ("object", [], False), ("null", None, True), ("null", 0, False),
])
def test_type_ok(kind, x, ok):
    assert type_ok(kind, x) is ok


def test_leaves_left_to_right():
    a, b, c, d = (leaf(k, "exists") for k in "abcd")
    node = {"all": [a, {"any": [b, {"not": [c]}]}, {"not": d}]}
    assert list(leaves_of(node)) == [a, b, c, d]


@pytest.mark.parametrize(("lo", "hi", "integral", "rep"), [
    (None, None, None, 0), (None, None, True, 0), (None, None, False, 0.5),
    (None, 5, None, 4), (None, 5, True, 4), (None, 5, False, 4.5), (None, 4.2, False, 3.5), (None, 4.2, True, 4),
    (2, None, None, 3), (2, None, True, 3), (2, None, False, 2.5), (2.7, None, False, 3.5), (2.7, None, True, 3),
    (2, 5, None, 3), (2, 5, True, 3), (2, 5, False, 3.5), (2, 4, False, 2.5), (2, 3, None, 2.5),
    (2, 3, True, None), (2, 3, False, 2.5), (0.1, 0.2, True, None), (0.1, 0.2, None, 0.15000000000000002),
    (2, 2.5, False, 2.25), (1, 3, False, 1.5),
    (None, 4.5, False, 3.5),                 # 4.5 is the bound itself: half below the integer under it
    (2, 6, False, 2.5), (0, 4, False, 0.5),  # the midpoints are integers: half past the integer after lo
])
def test_a_gap_representative(lo, hi, integral, rep):
    assert _gap_rep(lo, hi, integral) == rep
    if rep is not None:
        assert type(_gap_rep(lo, hi, integral)) is type(rep)


def test_a_gap_without_room_between_neighbouring_floats():
    lo = 1.0
    hi = math.nextafter(lo, math.inf)
    assert _gap_rep(lo, hi, None) is None and _gap_rep(lo, hi, False) is None


def test_paths_resolve_through_objects_only():
    facts = {"a": {"b": {"c": 1}}, "l": [{"x": 1}]}
    assert resolve(facts, "a.b.c") == 1 and resolve(facts, "a.b") == {"c": 1}
    assert resolve(facts, "a.x") is MISSING and resolve(facts, "l.x") is MISSING and resolve(5, "a") is MISSING
    out = {"a": 5}
    set_path(out, "a.b.c", 2)
    assert out == {"a": {"b": {"c": 2}}}
    set_path(out, "a.d", 3)
    assert out == {"a": {"b": {"c": 2}, "d": 3}}


def test_atom_bounds_and_subsets():
    assert Atom("number", 1, interval=(0, False, 2, True)).bounds() == (0, False, 2, True)
    with pytest.raises(TypeError, match="a string atom has no interval"):
        Atom("string", "a").bounds()
    assert list(_subsets(2)) == [(), (0,), (1,), (0, 1)] and list(_subsets(0)) == [()]


def test_leaf_masks_are_the_atoms_a_leaf_holds_on():
    space = Space([BOOK])
    n = space.index["n"]
    assert space.leaf_mask(leaf("n", "gte", 2)) == sum(1 << a for a in (6, 7, 8, 9, 10, 11))
    assert space.leaf_mask(leaf("n", "exists")) == space.full[n] & ~1
    s = space.index["s"]
    assert space.leaf_mask(leaf("s", "contains", "b")) == sum(1 << a for a in (6, 8, 9, 11, 13))
    # cached by field, operator and value: the same answer again, and another value its own
    assert space.leaf_mask(leaf("s", "contains", "b")) == sum(1 << a for a in (6, 8, 9, 11, 13))
    assert space.leaf_mask(leaf("s", "contains", "ab")) == sum(1 << a for a in (8, 12, 13))
    assert space.full[s] == 2**15 - 1


def test_a_witness_follows_an_object_constant_down_two_levels():
    book = Build.rulebook([rule("aa", {"all": [leaf("a", "eq", {"b": {"c": 1}}), leaf("a.b", "exists"),
                                               leaf("a.b.c", "eq", 2)]})])
    space = Space([book])
    assert [f.path for f in space.fields] == ["a", "a.b", "a.b.c"] and space.parent == [-1, 0, 1]
    # a: 7 is the constant {"b": {"c": 1}}; a.b.c: 4 is 1, 5 is 2
    assert space.witness({0: 1 << 7, 2: 1 << 4}) == {"a": {"b": {"c": 1}}}
    assert space.witness({0: 1 << 7, 2: 1 << 5}) is None
    assert space.witness({2: 1 << 4}) == {"a": {"b": {"c": 1}}}
    assert space.witness({2: 1 << 5}) == {"a": {"|||": 0, "b": {"|||": 0, "c": 2}}}


def test_gaps_without_a_member_of_a_kind_have_no_atom_of_it():
    tiny = math.nextafter(1.0, math.inf)
    book = Build.rulebook([rule("aa", {"all": [leaf("n", "gt", 2), leaf("n", "lt", 3), leaf("x", "gt", 1),
                                               leaf("x", "lt", tiny)]})],
                          input_schema={"properties": {"n": {"type": "integer"}}})
    space = Space([book])
    n, x = space.fields[space.index["n"]], space.fields[space.index["x"]]
    # (2, 3) holds no integer: only its non-integers have an atom (8); the other gaps both
    assert n.number_atoms == [(-1, 4, 5), (6, -1, -1), (-1, -1, 7), (8, -1, -1), (-1, 9, 10)]
    assert [(a.rep, a.integral) for a in n.atoms[4:11]] == [(1, True), (1.5, False), (2, None), (2.5, False),
                                                            (3, None), (4, True), (3.5, False)]
    assert [space.atom_of(space.index["n"], v) for v in (2.5, 2, 3, 1, 0.5, 7, 7.25)] == [7, 6, 8, 4, 5, 9, 10]
    # (1, 1 + 2^-52) holds no number at all: no atom, in a field of either kind
    assert x.number_atoms == [(4, -1, -1), (5, -1, -1), (-1, -1, -1), (6, -1, -1), (7, -1, -1)]
    assert [a.rep for a in x.atoms[4:8]] == [0, 1, tiny, 2]
    assert [space.atom_of(space.index["x"], v) for v in (0, 1, tiny, 5)] == [4, 5, 6, 7]
    integral = Space([Build.rulebook([rule("aa", {"all": [leaf("m", "gt", 1), leaf("m", "lt", tiny)]})],
                                     input_schema={"properties": {"m": {"type": "integer"}}})]).fields[0]
    assert integral.number_atoms[2] == (-1, -1, -1)
