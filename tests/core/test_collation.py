"""`gate.collation` orders keys exactly as pyuca does, in linear time and bounded memory."""

from __future__ import annotations

import random
import sys
import unicodedata

from hypothesis import given, settings, strategies as st
from pyuca import Collator

from gate import canonical
from gate.collation import _nfd, collation_key

_PYUCA = Collator()

# Characters that exercise every branch: ASCII, contraction starts and their continuations
# (l·, и + breve, Thai/Lao prevowels, Indic two-part vowels), combining marks of several classes,
# marks without a table entry (pyuca pulls a later mark forward), characters decomposing to marks,
# Hangul, CJK and unassigned code points (implicit weights), lone surrogates and ignorables.
TRICKY = list(
    "lL\u00b7\u0387\u0438\u0418\u0306\u0327\u0301\u0316\u0308\u0344\u0f73\u0f71\u0f72\u0f80"
    "\u0e40\u0e01\u0ec0\u0e81\u0b47\u0b3e\u0dd9\u0dcf\u0cbf\u0cd5\u0625\u0654\u064a\u0652\u0d46"
    "\u0d3e\u0b92\u0bd7\u0e4d\u0e32\u07fd\u0898\u1dfa\u00e9\u1e69\u1100\uac00\u4e00\u01c5"
    "\ud800\udfff\u0000\u0009\ufffe\U0001d15e\U00020000\U0002f800\U0010ffff"
) + [chr(cp) for cp in range(0x20, 0x7F)]


def flat(key: tuple[str, str, str]) -> tuple[int, ...]:
    """pyuca's sort key layout: primary, 0, secondary, 0, tertiary, 0."""
    out: list[int] = []
    for level in key:
        out.extend(map(ord, level))
        out.append(0)
    return tuple(out)


@settings(max_examples=1500, deadline=None)
@given(st.lists(st.sampled_from(TRICKY), max_size=24).map("".join))
def test_keys_equal_pyucas_sort_keys(text):
    assert _nfd(text) == unicodedata.normalize("NFD", text)
    assert flat(collation_key(text)) == _PYUCA.sort_key(text)


def test_long_runs_of_marks_take_the_linear_normalisation():
    rng = random.Random(6)
    marks = "\u0301\u0316\u0327\u0308\u0344\u0f73\u0f71\u1dfa\u0306\u0654"
    for _ in range(200):
        text = "".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 30)))
        text += "".join(rng.choice(marks) for _ in range(rng.randint(16, 90)))
        text += "".join(rng.choice(TRICKY) for _ in range(rng.randint(0, 10)))
        assert _nfd(text) == unicodedata.normalize("NFD", text)
        assert flat(collation_key(text)) == _PYUCA.sort_key(text)


def test_key_order_of_long_keys_is_the_collation_order():
    # Long keys of every shape that used to cost quadratic time; the order is checked against
    # pyuca on prefixes short enough for pyuca itself.
    shapes = ["a" * 2000 + "b", "l\u00b7" * 1000, "a" + "\u0301\u0316" * 1000, "\u4e00" * 2000,
              "\u0438\u0327\u0306" * 700]
    expected = sorted(shapes, key=lambda key: (_PYUCA.sort_key(key), key))
    assert canonical.key_order(list(reversed(shapes))) == expected


def _deep_size(cache: dict) -> int:
    size = sys.getsizeof(cache)
    for key, value in cache.items():
        size += sys.getsizeof(key)
        stack = [value]
        while stack:
            item = stack.pop()
            size += sys.getsizeof(item)
            if isinstance(item, (tuple, list)):
                stack.extend(item)
    return size


def test_caches_stay_within_their_byte_budget():
    rng = random.Random(2)
    letters = "abcdefghijklmnopqrstuvwxyz"
    for round_ in range(10):
        keys = {"".join(rng.choice(letters) for _ in range(200)): i for i in range(4500)}
        canonical.canonical_bytes({"evaluation": keys, "short": {f"k{round_}_{i}": i for i in range(3000)}})
    held = _deep_size(canonical._SORT_KEY_CACHE) + _deep_size(canonical._ORDER_CACHE)
    assert held < 12 * 1024 * 1024  # 45,000 cached 200-character keys held about 90 MB
