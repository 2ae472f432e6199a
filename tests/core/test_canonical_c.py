"""The C canonical JSON writer (gate/protocol/_canonical.c) against the Python reference writer.

The C writer answers the common forms (str-keyed objects in `key_order`, arrays, strings, safe
integers, plain floats, null and booleans) and returns None for everything else, which the
Python writers then write or refuse. Every text it answers must be the reference writer's.
"""

from __future__ import annotations

import enum
import shutil
import sys
from collections import OrderedDict

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.protocol import canonical
from gate.protocol.canonical import (
    CanonicalJSONError,
    _canonical_text_python,
    _canonical_text_slow,
    canonical_text,
    key_order,
)

pytestmark = pytest.mark.skipif(canonical._encode_c is None, reason="the C writer is not built here")
encode_c = canonical._encode_c


def _reference(value):
    """The reference writer's text, or the code it refuses the value with."""
    try:
        return _canonical_text_slow(value)
    except CanonicalJSONError as error:
        return ("refused", error.code)


def test_the_c_writer_is_built_where_a_compiler_is():
    """`pip install` builds it (scripts/bootstrap, CI); only a machine without a C compiler
    falls back to the Python writers (the same text, slower)."""
    if shutil.which("cc") or shutil.which("gcc"):
        assert canonical.ACCELERATED


# Any text, surrogates and control characters included; keys that look like array indexes.
texts = st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=12)
keys = texts | st.sampled_from(["0", "1", "01", "10", "-1", "4294967294", "4294967295", "a", "A", "_", "é", "Z"])
scalars = (st.none() | st.booleans() | st.integers() | st.floats() | texts)
values = st.recursive(
    scalars,
    lambda children: (st.lists(children, max_size=5) | st.lists(children, max_size=3).map(tuple)
                      | st.dictionaries(keys, children, max_size=5)),
    max_leaves=30,
)


@settings(max_examples=1500, deadline=None)
@given(values)
def test_every_text_the_c_writer_answers_is_the_reference_text(value):
    text = encode_c(value, key_order)
    reference = _reference(value)
    if text is not None:
        assert text == reference
    # Whoever writes it, canonical_text is the reference (or refuses the same way).
    try:
        assert canonical_text(value) == reference
    except CanonicalJSONError as error:
        assert reference == ("refused", error.code)


plain = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1) | texts
    | st.floats(min_value=1e-4, max_value=1e15) | st.floats(min_value=-1e15, max_value=-1e-4),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(keys, children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=500, deadline=None)
@given(plain)
def test_the_c_writer_answers_every_plain_document(value):
    """Records and requests are made of these forms: the C writer must not hand them back."""
    assert encode_c(value, key_order) == _canonical_text_slow(value)


@settings(max_examples=300, deadline=None)
@given(values)
def test_the_python_path_is_still_the_reference(value):
    """Without the C writer (a build without a compiler) the text is the same."""
    reference = _reference(value)
    try:
        assert _canonical_text_python(value) == reference
    except CanonicalJSONError as error:
        assert reference == ("refused", error.code)


class Level(enum.IntEnum):
    HIGH = 2


class Text(str):
    pass


def _nested(depth: int):
    value: object = 1
    for _ in range(depth):
        value = [value]
    return value


HANDED_BACK = {
    "2^53": 2**53, "-2^53": -(2**53), "10^30": 10**30, "1e16": 1e16, "-1e16": -1e16, "1e-5": 1e-5,
    "2.5e-7": 2.5e-7, "1e21": 1e21, "inf": float("inf"), "nan": float("nan"), "an IntEnum": Level.HIGH,
    "a str subclass": Text("a"), "an OrderedDict": OrderedDict(a=1), "an int key": {1: "a"},
    "a None key inside": {"a": {None: 1}}, "bytes": [b"bytes"], "an object": {"a": object()},
    "129 levels": _nested(129), "129 levels inside an object": {"deep": _nested(128)},
}


@pytest.mark.parametrize("value", list(HANDED_BACK.values()), ids=list(HANDED_BACK))
def test_what_the_c_writer_hands_back(value):
    """Numbers whose JavaScript text differs from Python's, types that are not exactly JSON's,
    non-string keys and nesting past the writer's limit are the Python writers' to answer."""
    assert encode_c(value, key_order) is None
    reference = _reference(value)
    try:
        assert canonical_text(value) == reference
    except CanonicalJSONError as error:
        assert reference == ("refused", error.code)


def test_the_limit_of_nesting_is_the_reference_writers():
    assert encode_c(_nested(128), key_order) == _canonical_text_slow(_nested(128))
    with pytest.raises(CanonicalJSONError) as caught:
        canonical_text(_nested(129))
    assert caught.value.code == "JSON_TOO_DEEP"


def test_edges_written_exactly():
    assert encode_c({"b": -0.0, "a": 5.0, "10": 0.0001, "2": 9007199254740991,
                     "c": -9007199254740991.0, "d": 0.1 + 0.2}, key_order) == (
        '{"2":9007199254740991,"10":0.0001,"a":5,"b":0,"c":-9007199254740991,"d":0.30000000000000004}')
    assert encode_c("\x00\x1f\x7f\u2028\ud800\udfff😀\"\\", key_order) == (
        '"\\u0000\\u001f\x7f\u2028\\ud800\\udfff😀\\"\\\\"')
    assert encode_c([(), {}, [], ""], key_order) == '[[],{},[],""]'


def test_errors_of_the_key_order_come_out_and_nothing_leaks():
    def failing(_):
        raise ValueError("no order")

    with pytest.raises(ValueError, match="no order"):
        encode_c({"a": 1}, failing)
    with pytest.raises(RuntimeError):
        encode_c({"a": 1}, lambda _: ["b"])
    with pytest.raises(TypeError):
        encode_c({"a": 1}, lambda _: 5)
    with pytest.raises(TypeError):
        encode_c({"a": 1})


def test_references_are_balanced():
    """Encoding many times leaves every reference count where it was (no leak, no early free)."""
    inner, text, number = {"k": [1, 2.5]}, "some text é", 12345678901
    value = {"inner": inner, "list": [text, number, inner], "tuple": (text,)}
    before = [sys.getrefcount(item) for item in (inner, text, number, value)]
    for _ in range(2000):
        assert encode_c(value, key_order) is not None
        assert encode_c({"x": object()}, key_order) is None
    assert [sys.getrefcount(item) for item in (inner, text, number, value)] == before


# --------------------------------------------------------------------------- key_order's cache, read in C


def test_an_object_whose_keys_the_cache_holds_is_ordered_without_calling_key_order():
    """The third argument is key_order's own cache: an object whose tuple of keys it holds is
    written in the cached order, with no Python call; any other object still asks key_order."""
    asked = []

    def counting(keys):
        asked.append(tuple(keys))
        return key_order(keys)

    value = {"b": 1, "a": {"d": 2, "c": 3}}
    orders = {("b", "a"): ["a", "b"]}
    assert encode_c(value, counting, orders) == canonical_text(value) == '{"a":{"c":3,"d":2},"b":1}'
    assert asked == [("d", "c")]  # the outer object came from the cache
    # The cache is read as it is: an order it holds is the order written (so it must only ever
    # hold key_order's own answers, which canonical.key_order guarantees).
    assert encode_c({"b": 1, "a": 2}, counting, {("b", "a"): ["b", "a"]}) == '{"b":1,"a":2}'
    # Keys in another iteration order are another tuple: no false hit.
    assert encode_c({"a": 2, "b": 1}, lambda keys: ["b", "a"], {("b", "a"): ["a", "b"]}) == '{"b":1,"a":2}'
    assert encode_c(value, counting, None) == canonical_text(value)
    with pytest.raises(TypeError, match="orders must be a dict"):
        encode_c(value, counting, [])


def test_canonical_text_reads_the_module_cache_and_matches_the_reference():
    value = {"zeta": [1, {"y": 1, "x": 2}], "alpha": {"10": 1, "9": 2, "b": 3}}
    canonical._ORDER_CACHE.clear()
    first = canonical_text(value)
    assert canonical._ORDER_CACHE  # key_order filled it on the first write
    assert canonical_text(value) == first == _canonical_text_slow(value)


def test_a_cache_emptied_while_an_object_is_written_frees_nothing_in_use():
    """A nested object's key_order call may empty the cache (its byte budget) while an outer
    object is written in a cached order: that order is held, not borrowed."""
    orders = {}

    def clearing(keys):
        orders.clear()
        return key_order(keys)

    value = {"b": {"y": 1, "x": 2}, "a": 1}
    for _ in range(500):
        orders[("b", "a")] = ["a", "b"]  # a fresh list each time: its only reference is the cache's
        assert encode_c(value, clearing, orders) == '{"a":1,"b":{"x":2,"y":1}}'


@pytest.mark.parametrize("text", [
    "plain ascii", 'quote " and backslash \\ and \b\f\n\r\t and \x00\x1f\x7f',  # ASCII: escapes, DEL as itself
    "é (two bytes) ☃ (three) 😀 (four) \U0010ffff (the last)",
    "é with escapes \" \\ \n \x01",  # not ASCII: the code point path writes escapes too
    "lone \ud800 and \udfff, a pair written apart \ud83d\ude00",  # surrogates: each escaped
    "",
])
def test_every_utf8_length_and_escape_is_the_reference_text(text):
    # The writer works in UTF-8 (ASCII text copied byte for byte, the rest encoded per code
    # point); the text it answers must be the reference writer's, as keys and as values.
    value = {text: [text, {"k": text}]}
    assert encode_c(value, key_order) == _canonical_text_slow(value)
