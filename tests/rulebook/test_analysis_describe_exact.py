"""The region descriptions of the rulebook analysis, to the exact value (issue 22, item 5: a
mutation pass found `describe` pinned only by one diff's text).

One small rulebook gives a field of each shape; each test picks atoms of one field by hand (the
atom order is `Space`'s: missing, null, true, false, then numbers, strings, arrays, objects) and
requires the exact `allows` member and the exact text.
"""

from __future__ import annotations

import pytest
from rulebook_support import Build

from gate.rulebook.analysis.describe import describe, field_allows, field_text
from gate.rulebook.analysis.space import Space

leaf, rule = Build.leaf, Build.rule

# x: a number cut at 25 and 40; n: an `integer` number cut at 2 and 5 (its gaps split into their
# integers and the rest); s: strings ("gold", and the others with or without "ab"); t: arrays
# (["q"], and the others with or without "v"); o: objects ({"k": 1} and every other object).
BOOK = Build.rulebook([
    rule("a", {"all": [leaf("x", "gt", 25), leaf("x", "lte", 40), leaf("s", "eq", "gold"), leaf("s", "contains", "ab"),
                       leaf("t", "contains", "v"), leaf("t", "eq", ["q"]), leaf("o", "eq", {"k": 1})]}),
    rule("b", {"all": [leaf("n", "gt", 2), leaf("n", "lt", 5)]}),
], input_schema={"properties": {"n": {"type": "integer"}}})
SPACE = Space([BOOK])  # for the atom numbering; each description is made in a fresh space (below)
# The atoms of each field, by name, as `Space` numbers them.
BASE = {"missing": 0, "null": 1, "true": 2, "false": 3}
X = {**BASE, "<25": 4, "25": 5, "(25,40)": 6, "40": 7, ">40": 8,
     "string": 9, "array": 10, "object": 11}
N = {**BASE, "<2 int": 4, "<2 frac": 5, "2": 6, "(2,5) int": 7, "(2,5) frac": 8, "5": 9, ">5 int": 10, ">5 frac": 11,
     "string": 12, "array": 13, "object": 14}
S = {**BASE, "number": 4, "gold": 5, "other": 6, "other ab": 7, "array": 8, "array ab": 9, "object": 10}
T = {**BASE, "number": 4, "string": 5, "string v": 6, "[q]": 7, "array": 8, "array v": 9, "object": 10}
OBJ = {**BASE, "number": 4, "string": 5, "array": 6, "{k:1}": 7, "object": 8}
NOTHING_ELSE = {"values": [], "excluded": [], "any_other": False, "other": []}


def _mask(atoms, *names):
    return sum(1 << atoms[name] for name in names)


def _allows(path, atoms, *names):
    return field_allows(SPACE, SPACE.index[path], _mask(atoms, *names))


def _fresh():
    """A new space: `describe` caches its descriptions in the space, and a module-wide one would
    answer a test (or a mutant run after the tests that filled it) from that cache."""
    return Space([BOOK])


def test_the_atoms_are_numbered_as_the_tests_name_them():
    for path, atoms in (("x", X), ("n", N), ("s", S), ("t", T), ("o", OBJ)):
        f = SPACE.fields[SPACE.index[path]]
        assert len(f.atoms) == len(atoms), path
    n = SPACE.fields[SPACE.index["n"]]
    assert [(a.rep, a.integral) for a in n.atoms[4:12]] == [(1, True), (1.5, False), (2, None), (3, True), (3.5, False),
                                                            (5, None), (6, True), (5.5, False)]
    assert SPACE.fields[SPACE.index["s"]].atoms[7].rep == "|ab|" and SPACE.fields[SPACE.index["t"]].atoms[9].rep == ["v", "|||"]


def test_a_number_interval_member_by_member():
    assert _allows("x", X, "(25,40)", "40") == {
        "missing": False, "null": False, "booleans": [],
        "numbers": [{"min": 25, "min_inclusive": False, "max": 40, "max_inclusive": True}],
        "strings": NOTHING_ELSE, "arrays": NOTHING_ELSE, "objects": {"values": [], "excluded": [], "any_other": False}}


@pytest.mark.parametrize(("names", "text"), [
    (("(25,40)", "40"), "number in (25, 40]"),
    (("25", "(25,40)"), "number in [25, 40)"),
    (("25", "(25,40)", "40"), "number in [25, 40]"),
    (("(25,40)",), "number in (25, 40)"),
    (("25",), "number = 25"),
    (("<25",), "number in (-inf, 25)"),
    (("40", ">40"), "number in [40, +inf)"),
    (("<25", "25", "(25,40)", "40", ">40"), "any number"),
    (("<25", "40"), "number in (-inf, 25) or number = 40"),
    (("missing", "null", "true"), "missing or null or true"),
    (("missing",), "missing"),
    (("null",), "null"),
    (("true",), "true"),
    (("false",), "false"),
    (("missing", "25"), "missing or number = 25"),
    ((), "nothing"),
])
def test_number_texts(names, text):
    assert field_text(_allows("x", X, *names)) == text


@pytest.mark.parametrize(("names", "numbers"), [
    # both members of a gap: no integrality to state
    (("(2,5) int", "(2,5) frac"), [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False}]),
    (("(2,5) int",), [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": True}]),
    (("(2,5) frac",), [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": False}]),
    # a point merges with the integers next to it (it is one) ...
    (("(2,5) int", "5"), [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": True, "integers": True}]),
    (("2", "(2,5) int"), [{"min": 2, "min_inclusive": True, "max": 5, "max_inclusive": False, "integers": True}]),
    # ... but not with the non-integers
    (("(2,5) frac", "5"), [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": False},
                           {"min": 5, "min_inclusive": True, "max": 5, "max_inclusive": True}]),
    (("2", "(2,5) frac"), [{"min": 2, "min_inclusive": True, "max": 2, "max_inclusive": True},
                           {"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": False}]),
    # gaps of the same integrality merge across a point; a whole gap after a point merges into [2, ...
    (("(2,5) int", "5", ">5 int"), [{"min": 2, "min_inclusive": False, "max": None, "max_inclusive": False,
                                     "integers": True}]),
    (("<2 frac", "2", "(2,5) int", "(2,5) frac", "5"),
     [{"min": None, "min_inclusive": False, "max": 2, "max_inclusive": False, "integers": False},
      {"min": 2, "min_inclusive": True, "max": 5, "max_inclusive": True}]),
    (("(2,5) frac", "5", ">5 int"),
     [{"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": False},
      {"min": 5, "min_inclusive": True, "max": None, "max_inclusive": False, "integers": True}]),
    # two pieces of different integrality with nothing between them do not merge
    (("<2 int", "2", "(2,5) frac"),
     [{"min": None, "min_inclusive": False, "max": 2, "max_inclusive": True, "integers": True},
      {"min": 2, "min_inclusive": False, "max": 5, "max_inclusive": False, "integers": False}]),
])
def test_integer_gaps_split_and_merge(names, numbers):
    assert _allows("n", N, *names)["numbers"] == numbers


@pytest.mark.parametrize(("names", "text"), [
    (("(2,5) int",), "number in (2, 5) (integers)"),
    (("(2,5) frac",), "number in (2, 5) (non-integers)"),
    (("(2,5) int", "5"), "number in (2, 5] (integers)"),
    (("(2,5) frac", "5", ">5 int"), "number in (2, 5) (non-integers) or number in [5, +inf) (integers)"),
    (("<2 int", "<2 frac"), "number in (-inf, 2)"),
])
def test_integer_texts(names, text):
    assert field_text(_allows("n", N, *names)) == text


def test_strings_listed_excluded_and_grouped_by_needles():
    assert _allows("s", S, "gold", "other ab")["strings"] == {
        "values": ["gold"], "excluded": [], "any_other": False, "other": [{"contains": ["ab"], "not_contains": []}]}
    assert _allows("s", S, "other")["strings"] == {
        "values": [], "excluded": ["gold"], "any_other": False, "other": [{"contains": [], "not_contains": ["ab"]}]}
    assert _allows("s", S, "other", "other ab")["strings"] == {
        "values": [], "excluded": ["gold"], "any_other": True, "other": []}
    assert _allows("s", S, "gold")["strings"] == {"values": ["gold"], "excluded": [], "any_other": False, "other": []}
    # the arrays of a field with a string needle are grouped by it too
    assert _allows("s", S, "array ab")["arrays"] == {
        "values": [], "excluded": [], "any_other": False, "other": [{"contains": ["ab"], "not_contains": []}]}


@pytest.mark.parametrize(("path", "atoms", "names", "text"), [
    ("s", S, ("gold", "other ab"), 'string in ["gold"] or other string containing ["ab"]'),
    ("s", S, ("other",), 'other string not containing ["ab"]'),
    ("s", S, ("other", "other ab"), 'any string except ["gold"]'),
    ("s", S, ("gold", "other", "other ab"), "any string"),
    ("s", S, ("array",), 'other array not containing ["ab"]'),
    ("t", T, ("[q]", "array v"), 'array in [["q"]] or other array containing ["v"]'),
    ("t", T, ("array", "array v"), 'any array except [["q"]]'),
    ("t", T, ("string", "string v"), "any string"),
    ("t", T, ("string v",), 'other string containing ["v"]'),
    ("o", OBJ, ("{k:1}",), 'object in [{"k": 1}]'),
    ("o", OBJ, ("object",), 'any object except [{"k": 1}]'),
    ("o", OBJ, ("{k:1}", "object"), "any object"),
    ("o", OBJ, ("number", "string", "array"), "any number or any string or any array"),
])
def test_string_array_and_object_texts(path, atoms, names, text):
    assert field_text(_allows(path, atoms, *names)) == text


def test_objects_and_arrays_member_by_member():
    assert _allows("o", OBJ, "object")["objects"] == {"values": [], "excluded": [{"k": 1}], "any_other": True}
    assert _allows("o", OBJ, "{k:1}")["objects"] == {"values": [{"k": 1}], "excluded": [], "any_other": False}
    assert _allows("t", T, "[q]")["arrays"] == {"values": [["q"]], "excluded": [], "any_other": False, "other": []}
    assert _allows("t", T, "array")["arrays"] == {
        "values": [], "excluded": [["q"]], "any_other": False, "other": [{"contains": [], "not_contains": ["v"]}]}
    assert _allows("t", T, "missing", "null", "true", "false") | {"numbers": None} == {
        "missing": True, "null": True, "booleans": [True, False], "numbers": None, "strings": NOTHING_ELSE,
        "arrays": {"values": [], "excluded": [["q"]], "any_other": False, "other": []}, "objects": {"values": [], "excluded": [], "any_other": False}}


def test_describe_leaves_out_unconstrained_fields_and_reads_the_smaller_side():
    space = _fresh()
    full = space.full
    x, s, o = space.index["x"], space.index["s"], space.index["o"]
    cube = {s: _mask(S, "gold"), o: full[o], x: _mask(X, "(25,40)", "40")}
    assert describe(space, cube) == [
        {"field": "s", "text": 'string in ["gold"]', "allows": field_allows(space, s, _mask(S, "gold"))},
        {"field": "x", "text": "number in (25, 40]", "allows": field_allows(space, x, _mask(X, "(25,40)", "40"))},
    ]


def test_a_field_allowing_more_than_it_leaves_out_is_read_by_what_it_leaves_out():
    space = _fresh()
    x = space.index["x"]
    most = space.full[x] & ~_mask(X, "string")
    assert describe(space, {x: most}) == [
        {"field": "x", "text": "anything but (any string)", "allows": field_allows(space, x, most)}]
    o = space.index["o"]
    assert describe(space, {o: space.full[o] & ~_mask(OBJ, "{k:1}", "number")})[0]["text"] == \
        'anything but (any number or object in [{"k": 1}])'


def test_a_field_allowing_exactly_half_is_read_as_it_is():
    space = _fresh()
    x = space.index["x"]
    half = _mask(X, "missing", "null", "true", "false", "<25", "25")  # 6 of x's 12 atoms
    assert describe(space, {x: half})[0]["text"] == "missing or null or true or false or number in (-inf, 25]"


def test_a_description_is_the_callers_own():
    space = _fresh()
    s = space.index["s"]
    first = describe(space, {s: _mask(S, "gold")})[0]
    first["text"] = "changed"
    assert describe(space, {s: _mask(S, "gold")})[0]["text"] == 'string in ["gold"]'
