"""Canonical JSON `json.sort_deep.v1`: golden vectors, strict parsing, and properties."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.protocol.canonical import (
    CanonicalJSONError,
    canonical_text,
    collation_sorted,
    key_order,
    parse_strict,
    sha256_hex,
)

VECTORS = json.loads((Path(__file__).parent.parent / "vectors" / "canonical-json.json").read_text())


@pytest.mark.parametrize("vector", VECTORS["vectors"], ids=lambda v: v["input"][:40])
def test_golden_vectors(vector):
    value = json.loads(vector["input"])
    assert canonical_text(value) == vector["canonical"]
    assert sha256_hex(value) == vector["sha256"]


@pytest.mark.parametrize("case", VECTORS["key_orders"], ids=lambda c: str(len(c["keys"])))
def test_key_collation_matches_locale_compare(case):
    assert collation_sorted(case["keys"]) == case["locale_compare_order"]


def test_array_index_keys_come_first_in_numeric_order():
    assert key_order(["b", "10", "2", "_", "01", "4294967295", "4294967294"]) == [
        "2", "10", "4294967294", "_", "01", "4294967295", "b"]


@pytest.mark.parametrize(
    "number, text",
    [(22.0, "22"), (-0.0, "0"), (1e21, "1e+21"), (1e-7, "1e-7"), (0.000001, "0.000001"),
     (123e-20, "1.23e-18"), (1.5e300, "1.5e+300"), (-2.5, "-2.5"), (1e20, "100000000000000000000"),
     (0.1 + 0.2, "0.30000000000000004"), (2**53 + 2, "9007199254740994")],
)
def test_numbers_use_ecmascript_formatting(number, text):
    assert canonical_text(number) == text


def test_strings_escape_like_json_stringify():
    assert canonical_text("\u0001\b\f\n\r\t\"\\/é😀\u2028\x7f") == '"\\u0001\\b\\f\\n\\r\\t\\"\\\\/é😀\u2028\x7f"'
    assert canonical_text("\ud800x") == '"\\ud800x"'


@pytest.mark.parametrize(
    "text, code",
    [
        ('{"a": NaN}', "JSON_NON_FINITE_NUMBER"),
        ('{"a": Infinity}', "JSON_NON_FINITE_NUMBER"),
        ('{"a": -Infinity}', "JSON_NON_FINITE_NUMBER"),
        ('{"a": 1e400}', "JSON_NON_FINITE_NUMBER"),
        ('{"a": 1, "a": 2}', "JSON_DUPLICATE_KEY"),
        ('{"x": {"a": 1, "a": 1}}', "JSON_DUPLICATE_KEY"),
        ('{"a": 9007199254740992}', "JSON_UNSAFE_INTEGER"),
        ('{"a": -9007199254740992}', "JSON_UNSAFE_INTEGER"),
        ('{"a": 1', "JSON_INVALID"),
        ('{"a": 1} x', "JSON_INVALID"),
        (b'{"a": "\xff"}', "JSON_INVALID"),
        ("[" * 100_000 + "]" * 100_000, "JSON_TOO_DEEP"),
    ],
)
def test_strict_parse_rejects_ambiguous_json(text, code):
    with pytest.raises(CanonicalJSONError) as info:
        parse_strict(text)
    assert info.value.code == code


def test_strict_parse_accepts_the_safe_edges():
    assert parse_strict('{"a": 9007199254740991, "b": -9007199254740991, "c": 1.5e300, "d": 1e17}') == {
        "a": 9007199254740991, "b": -9007199254740991, "c": 1.5e300, "d": 1e17}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_text_round_trips_and_is_stable(value):
    text = canonical_text(value)
    reparsed = json.loads(text)
    assert canonical_text(reparsed) == text  # idempotent
    assert _same(reparsed, value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(max_size=8), st.integers(0, 9), max_size=8), st.randoms())
def test_key_insertion_order_does_not_matter(mapping, rnd):
    items = list(mapping.items())
    rnd.shuffle(items)
    assert canonical_text(dict(items)) == canonical_text(mapping)


def _same(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=0, abs_tol=0) or float(a) == float(b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


@settings(max_examples=500, deadline=None)
@given(json_values)
def test_fast_path_equals_the_full_writer(value):
    from gate.protocol.canonical import _canonical_text_slow

    assert canonical_text(value) == _canonical_text_slow(value)


@pytest.mark.parametrize("value", [1e-5, 1.5e-7, 1e16 + 0.5, 2.5e20, 123456.789, 0.0001, 9999999999999998.0,
                                   {"k": [1e-4, 1.0000000000000002]}, "\ud800", {"\udfff": 1}])
def test_fast_path_boundaries(value):
    from gate.protocol.canonical import _canonical_text_slow

    assert canonical_text(value) == _canonical_text_slow(value)


@pytest.mark.parametrize("value", [{1: "a"}, {"a": {2: "b"}}, {None: 1}, {"a": 1, 2: 3}, [{(1,): 0}]])
def test_a_key_that_is_not_a_string_is_a_canonical_error_not_a_crash(value):
    """Callers catch CanonicalJSONError (packet and record verification fail closed on it)."""
    with pytest.raises(CanonicalJSONError) as caught:
        canonical_text(value)
    assert caught.value.code == "JSON_UNSUPPORTED_TYPE"


@pytest.mark.parametrize("text,refused", [
    ('{"a":"x\\ud800"}', True),  # an escaped lone surrogate in ASCII text
    ('{"a":"é\\udc00"}', True),  # escaped, in text that is not ASCII
    ('{"a":"x\ud800"}', True),  # the code point itself (text handed over as str)
    ('{"a":"\\ud83d\\ude00 \\u00e9"}', False),  # a pair and another escape: text
    ('{"a":"é ☃"}', False),  # not ASCII, no surrogate
    ('{"a":"plain"}', False),
])
def test_lone_surrogates_are_found_written_either_way(text, refused):
    # parse_strict scans for them only when the text holds an escape or is not ASCII; each form
    # must still be found, and nothing else refused.
    if refused:
        with pytest.raises(CanonicalJSONError) as caught:
            parse_strict(text)
        assert caught.value.code == "JSON_INVALID" and caught.value.path == "$.a"
    else:
        assert parse_strict(text)["a"]
