"""`parse_strict`'s quick path (orjson, then checks on the value it read) answers exactly what the
strict reader answers: the same value, member order and number types where both accept, and where
the quick path declines, the strict reader's own answer (gate/strict_json.py, `_quick`)."""

from __future__ import annotations

import json
import math
import random
import struct
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gate.strict_json import _NOT_QUICK, CanonicalJSONError, _quick, _strict, parse_strict


def _same(left, right) -> bool:
    """Equal values of equal types, member order included; floats compared bit for bit."""
    if type(left) is not type(right):
        return False
    if type(left) is dict:
        return list(left) == list(right) and all(_same(left[key], right[key]) for key in left)
    if type(left) is list:
        return len(left) == len(right) and all(_same(a, b) for a, b in zip(left, right, strict=True))
    if type(left) is float:
        return struct.pack("<d", left) == struct.pack("<d", right)
    return bool(left == right)


def _strict_answer(text: str):
    try:
        return "value", _strict(text)
    except CanonicalJSONError as refused:
        return "refused", (refused.code, refused.path)


def _check(text: str) -> bool:
    """The quick path agrees with the strict reader on `text`; True when it took the text."""
    kind, expected = _strict_answer(text)
    quick = _quick(text)
    if quick is _NOT_QUICK:
        return False
    assert kind == "value", (text, expected)  # the quick path never takes what is refused
    assert _same(quick, expected), text
    return True


@pytest.mark.parametrize("text", [
    '{"a":1,"a":2}', '{"a":{"b":1,"b":1}}', '[{"k":"x:y","k":1}]', '{"a:":1,"a:":2}',
    '{"x":"\\u003a","y":{"k":1,"k":2}}', '{"\\u003a":1,"x":"\\u003a","x":3}', '{"a":"b:c","a":"d:e"}',
    "9007199254740992", "-9007199254740992", "18446744073709551616", "-9223372036854775809",
    "123456789012345678901234567890", "1e17", "1.5e300", "1e-400", "-1e-400", "0.0", "-0.0", "0e5", "1e400", "NaN",
    '"\\ud800"', '{"a":"\\udc00"}', "[1,]", "01", '{"a":1}x', '"\x01"', "\ufeff{}",
])
def test_what_the_strict_reader_refuses_reads_otherwise_or_might_is_left_to_it(text):
    # Whole floats past 2^53 (1e17) are left to the strict reader too: orjson reads an integer
    # past 64 bits as one, which the strict reader refuses.
    assert _check(text) is False


@pytest.mark.parametrize("text", [
    '{"a":1,"b":[1,2,{"c":null}],"d":true}', '{"t":"2026-11-29T10:00:00Z","u":"https://x/y"}',
    '{"k:1":"v:2","n":{"m":"::"}}', '{"e":"\\u00e9","f":"caf\\u00e9:"}', "9007199254740991",
    "-9007199254740991", "1.25e-7", "-2.5", "[]", "{}", '"x"', "  [1 , 2 ]\n",
])
def test_plain_documents_are_taken_quick_and_read_the_same(text):
    assert _check(text) is True


def _floats(count: int):
    rng = random.Random(68)
    for _ in range(count):
        value = struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0]
        if math.isfinite(value):
            yield repr(value)
            yield f"{value:.25e}"
        digits = "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 30)))
        yield f"{digits[0]}.{digits[1:] or '0'}e{rng.randint(-330, 310)}"
        low = rng.uniform(-1e12, 1e12)
        bits = struct.unpack("<Q", struct.pack("<d", low))[0]
        high = struct.unpack("<d", struct.pack("<Q", bits + 1))[0]
        yield format((Decimal(low) + Decimal(high)) / 2, "f")  # halfway between two doubles


def test_floats_read_as_the_strict_reader_reads_them_including_halfway_texts():
    taken = sum(_check(f'{{"x":[{text}]}}') for text in _floats(3000))
    assert taken > 6000  # most are plain floats, taken quick


_names = st.sampled_from(["a", "b", "a:", ":", "k", "\u00e9"])
_scalars = (st.none() | st.booleans() | st.integers(-(2**65), 2**65)
            | st.floats(allow_nan=False, allow_infinity=False) | st.text(alphabet="ab:\u00e9\"\\", max_size=6))
_values = st.recursive(_scalars, lambda children: st.lists(children, max_size=4)
                       | st.lists(st.tuples(_names, children), max_size=4), max_leaves=16)


def _written(value, escape: bool) -> str:
    """JSON text of a value whose objects are lists of (name, value) pairs, so names may repeat."""
    if isinstance(value, list) and value and all(isinstance(item, tuple) for item in value):
        members = ",".join(f"{_written(name, escape)}:{_written(child, escape)}" for name, child in value)
        return "{" + members + "}"
    if isinstance(value, list):
        return "[" + ",".join(_written(item, escape) for item in value) + "]"
    if isinstance(value, str) and escape:
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace(":", "\\u003a") + '"'
    return json.dumps(value, ensure_ascii=not escape)


@settings(max_examples=400, deadline=None)
@given(_values, st.booleans())
def test_any_document_reads_the_same_either_way(value, escape):
    text = _written(value, escape)
    _check(text)
    kind, expected = _strict_answer(text)
    if kind == "value":
        assert _same(parse_strict(text), expected)
    else:
        with pytest.raises(CanonicalJSONError) as refused:
            parse_strict(text)
        assert (refused.value.code, refused.value.path) == expected


def test_a_document_deeper_than_orjson_writes_is_left_to_the_strict_reader():
    # orjson reads 300 levels but writes at most 254, and the second count writes the value again
    # (a colon in a string makes it run): the strict reader answers instead, never an error.
    text = '{"a:b":' * 300 + "1" + "}" * 300
    assert _quick(text) is _NOT_QUICK
    assert _same(parse_strict(text, max_depth=400), _strict(text))
