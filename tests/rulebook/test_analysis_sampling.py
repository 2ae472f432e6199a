"""The sampling fallback's generator, pinned by what it draws (issue 22, item 5: a mutation pass
found its value choices unpinned).

`samples` draws each field of each fact set so: absent one time in ten; from the field's
`contains` values one time in three and a half (a random subset of them, as an array or joined
into a string); otherwise an atom's representative, from the atoms the rulebook singles out
(constants, the numbers around a threshold, the needle groups) seven times in eight, else from
every atom. The shares below are measured over 2,000 seeded fact sets, with margins far wider
than the seed's noise and far narrower than any change of those rules.
"""

from __future__ import annotations

import pytest
from rulebook_support import Build

from gate.rulebook.analysis.sampling import samples
from gate.rulebook.analysis.space import Space
from gate.rulebook.semantics import MISSING, strict_equal

leaf, rule = Build.leaf, Build.rule
COUNT = 2000


def _rulebook():
    """A number with a threshold, a boolean, strings with two needles, arrays with two needles
    that are not strings (one an object, so sampled values hold nested containers)."""
    return Build.rulebook([
        rule("big", leaf("amount", "gt", 100)),
        rule("flagged", leaf("flag", "eq", True)),
        rule("vip", leaf("tags", "contains", "vip")),
        rule("new", leaf("tags", "contains", "new")),
        rule("sku", leaf("items", "contains", {"sku": "A"})),
        rule("five", leaf("items", "contains", 5)),
    ])


@pytest.fixture
def drawn():
    space = Space([_rulebook()])
    return space, list(samples(space, COUNT))


def _kind(space, path, facts):
    """What a sampled value is: absent, an atom's representative (`atom:<kind>` or
    `signature:<kind>` for a needle group), a list or a string built from needles, or other."""
    if path not in facts:
        return "absent"
    value, field = facts[path], space.fields[space.index[path]]
    for atom in field.atoms:
        if (_is_missing(value) and atom.rep is MISSING) or (not _is_missing(value) and strict_equal(value, atom.rep)):
            return f"signature:{atom.kind}" if atom.signature or atom.rep in ("||", ["|||"]) else f"atom:{atom.kind}"
    needles = field.sample_needles
    if isinstance(value, list) and all(any(strict_equal(item, n) for n in needles) for item in value):
        return "needle list"
    if isinstance(value, str) and needles and ((value == "" and not any(isinstance(n, str) for n in needles))
                                               or (value and all(part in needles for part in value.split("|")))):
        return "needle string"
    return "other"


def _is_missing(value):
    """The missing atom's representative, deep-copied as every drawn value is (a copy of the
    MISSING marker, not the marker itself)."""
    return type(value) is type(MISSING)


def _shares(space, facts_list, path):
    tally: dict = {}
    for facts in facts_list:
        kind = _kind(space, path, facts)
        tally[kind] = tally.get(kind, 0) + 1
    return {kind: count / len(facts_list) for kind, count in tally.items()}


def _share(shares, *kinds):
    return sum(shares.get(kind, 0.0) for kind in kinds)


def test_every_value_is_an_atom_or_built_from_the_fields_contains_values(drawn):
    space, facts_list = drawn
    assert space.separator == "|"
    for path in ("amount", "flag", "items", "tags"):
        assert "other" not in _shares(space, facts_list, path), path
    # Fields without contains values get atoms only: never an empty list or string of needles.
    for path in ("amount", "flag"):
        assert set(_shares(space, facts_list, path)) <= {"absent", "atom:missing", "atom:null", "atom:boolean",
                                                         "atom:number", "signature:string", "signature:array",
                                                         "atom:object"}, path
    # A string built from needles holds at least one of them when there are string needles ...
    assert not any(facts.get("tags") == "" for facts in facts_list)
    # ... and is empty when there are none (the items' needles are an object and a number).
    assert any(facts.get("items") == "" for facts in facts_list)


def test_a_field_is_absent_one_time_in_ten_and_when_its_missing_atom_is_drawn(drawn):
    """Absent: the one-in-ten roll, plus a draw of the `missing` atom (which leaves the path
    absent too). That atom is never singled out, so it comes from every atom: one in five
    draws (past the roll) when the field has singled-out atoms, every draw when it has none."""
    space, facts_list = drawn
    expected = {"amount": 0.1 + 0.2 / 10, "flag": 0.1 + 0.9 / 8, "items": 0.1 + 0.2 / 11, "tags": 0.1 + 0.2 / 14}
    for path, share in expected.items():
        assert abs(_shares(space, facts_list, path)["absent"] - share) < 0.03, path


def test_a_threshold_field_mostly_gets_the_numbers_around_it(drawn):
    space, facts_list = drawn
    shares = _shares(space, facts_list, "amount")
    numbers = [facts["amount"] for facts in facts_list if _kind(space, "amount", facts) == "atom:number"]
    assert set(numbers) == {99, 100, 101}
    assert shares["atom:number"] > 0.6                     # about 0.7 preferred + 0.2 x 3/10 of every atom
    assert 0.01 < _share(shares, "atom:null", "atom:boolean") < 0.15   # only from every atom: 0.2 x 3/10


def test_null_and_booleans_are_never_singled_out(drawn):
    space, facts_list = drawn
    shares = _shares(space, facts_list, "flag")            # nothing singled out: every atom alike
    assert 0.15 < shares["atom:boolean"] < 0.35             # 0.9 x 2/8
    assert 0.05 < shares["atom:null"] < 0.2                 # 0.9 x 1/8


def test_contains_fields_get_needle_subsets_and_needle_groups(drawn):
    space, facts_list = drawn
    shares = _shares(space, facts_list, "tags")
    assert 0.28 < _share(shares, "needle list", "needle string") < 0.42   # 0.35
    assert 0.15 < shares["signature:string"] < 0.35          # 0.35 x 4/8 preferred + 0.2 x 4/14
    assert 0.15 < shares["signature:array"] < 0.35
    others = _share(shares, "atom:missing", "atom:null", "atom:boolean", "atom:number", "atom:object")
    assert others < 0.15                                   # only from every atom: 0.2 x 6/14


def test_needle_subsets_take_each_needle_three_times_in_ten(drawn):
    space, facts_list = drawn
    lists = [facts["tags"] for facts in facts_list if _kind(space, "tags", facts) == "needle list"]
    strings = [facts["tags"] for facts in facts_list if _kind(space, "tags", facts) == "needle string"]
    assert 0.35 < len(lists) / (len(lists) + len(strings)) < 0.65
    assert 0.2 < sum("vip" in value for value in lists) / len(lists) < 0.4
    assert [] in lists and ["vip", "new"] in lists
    # A string joins the chosen needles; with none chosen it is one needle alone.
    assert {"vip", "new", "vip|new"} <= set(strings) <= {"vip", "new", "vip|new"}
    assert strings.count("vip|new") < strings.count("vip")


def _containers(value, out):
    if isinstance(value, (list, dict)):
        out.append(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            _containers(item, out)
    return out


def test_every_fact_set_is_its_own(drawn):
    space, facts_list = drawn
    owned: list = []
    for f in space.fields:
        for atom in f.atoms:
            _containers(atom.rep, owned)
        _containers(f.sample_needles, owned)
    seen = set(owned)
    for facts in facts_list:
        found = _containers(facts, [])
        assert not seen.intersection(found)
        seen.update(found)
    items = [facts["items"] for facts in facts_list if isinstance(facts.get("items"), list)]
    assert any({"sku": "A"} in value for value in items)


def test_the_default_seed_is_zero_and_a_seed_gives_the_same_fact_sets():
    space = Space([_rulebook()])
    drawn = repr(list(samples(space, 50)))   # repr: the copies of MISSING are equal only by their text
    assert drawn == repr(list(samples(space, 50, seed=0))) == repr(list(samples(Space([_rulebook()]), 50)))
    assert repr(list(samples(space, 50, seed=1))) != drawn


def test_a_missing_draw_leaves_the_path_absent_never_a_copy_of_the_marker(drawn):
    """The `missing` atom's representative is the MISSING marker; drawn and copied, it must stay
    the marker, so no sampled fact set ever holds it as a present value."""
    import copy
    import json

    assert copy.deepcopy(MISSING) is MISSING and copy.copy(MISSING) is MISSING
    _, facts_sets = drawn
    for facts in facts_sets:
        json.dumps(facts)  # every sampled fact set is plain JSON
