"""The typed facts columns' contract to the exact value (issue 22, item 5: a mutation pass found
`strict_key`'s text and `flatten`'s edges unpinned).

`strict_key` texts are stored in the facts table (the `j` and `e` columns), so their exact form
is part of the dataset format, not only their equality.
"""

from __future__ import annotations

import pytest

from workbench.engines.fact_columns import (
    MAX_EXACT_INTEGER,
    MAX_PATH_LENGTH,
    flatten,
    path_columns,
    reachable_key,
    strict_key,
)


@pytest.mark.parametrize(("value", "key"), [
    (None, "null"),
    (True, "true"),
    (False, "false"),
    (1, "1"),
    (1.0, "1"),
    (-0.0, "0"),
    (0.5, "0.5"),
    ("é\"x", '"é\\"x"'),                       # JSON-quoted, not escaped to ASCII
    ([], "[]"),
    ([True, False, None, "ü", [1]], '[true,false,null,"ü",[1]]'),
    ({}, "{}"),
    ({"b": 1, "ä": [2.0], "a": {"c": None}}, '{"a":{"c":null},"b":1,"ä":[2]}'),
])
def test_strict_key_text(value, key):
    assert strict_key(value) == key


def test_strict_key_tells_booleans_from_numbers():
    assert len({strict_key(value) for value in (True, False, 1, 0, None)}) == 5


@pytest.mark.parametrize("value", [float("nan"), float("inf"), object(), (1, 2), {"a": {1, 2}}])
def test_strict_key_refuses_what_is_not_json(value):
    with pytest.raises(ValueError):
        strict_key(value)


def test_path_columns_names_the_six_parts_in_order():
    assert path_columns("a.b") == ["a.b::t", "a.b::b", "a.b::n", "a.b::s", "a.b::j", "a.b::e"]


@pytest.mark.parametrize(("key", "first", "reachable"), [
    ("amount", True, True), ("_x-1", True, True), ("1a", True, False), ("-a", True, False),
    ("1a", False, True), ("-a", False, True), ("", False, True), ("", True, False),
    ("a.b", False, False), ("a b", False, False), ("é", False, False),
])
def test_reachable_key(key, first, reachable):
    assert reachable_key(key, first=first) is reachable


def test_flatten_walks_objects_and_skips_keys_no_path_can_name():
    facts = {"1a": 1, "-x": 2, "ok": 3, "a.b": 4, "o": {"1b": 5, "c": {"d": [6]}}}
    assert flatten(facts) == ({"ok": 3, "o": {"1b": 5, "c": {"d": [6]}}, "o.1b": 5,
                               "o.c": {"d": [6]}, "o.c.d": [6]}, True)
    assert flatten([1]) == ({}, True) and flatten(None) == ({}, True)


def test_flatten_keeps_paths_up_to_the_length_limit_and_goes_on_after_a_long_one():
    longest, too_long = "k" * MAX_PATH_LENGTH, "k" * (MAX_PATH_LENGTH + 1)
    paths, exact = flatten({too_long: 1, longest: 2, "b": 3, "o": {"x" * (MAX_PATH_LENGTH - 1): 4, "y": 5}})
    assert exact and set(paths) == {longest, "b", "o", "o.y"}
    assert len(f"o.{'x' * (MAX_PATH_LENGTH - 1)}") == MAX_PATH_LENGTH + 1


@pytest.mark.parametrize(("value", "exact"), [
    (MAX_EXACT_INTEGER, True), (-MAX_EXACT_INTEGER, True), (MAX_EXACT_INTEGER + 1, False),
    (-MAX_EXACT_INTEGER - 1, False), (float(MAX_EXACT_INTEGER + 1), True), (True, True),
])
def test_flatten_marks_integers_beyond_a_double_inexact(value, exact):
    assert flatten({"a": {"n": value}}) == ({"a": {"n": value}, "a.n": value}, exact)
