"""Collation sort keys for object keys, in time linear in the key's length.

The canonical key order (reference facts §1) is the Unicode Collation Algorithm with the
default table as `pyuca` 1.2 implements it (`Collator_9_0_0`), which the reference facts
measured to reproduce Node's `localeCompare`. `pyuca`'s own `sort_key` is quadratic in the
length of the string (it re-slices the remaining code points after every collation element,
and CPython's NFD reorders long runs of combining marks by insertion sort), so an attacker's
250,000-character key stalled a worker for half a minute. This module computes keys that
order exactly as `pyuca`'s do, in linear time:

- NFD: `unicodedata.normalize` when the text has no long run of characters whose
  decomposition starts with a combining mark (each run is then short, so the insertion sort is
  bounded per character); otherwise a per-character decomposition followed by a stable sort of
  each run by combining class, which is what canonical ordering is.
- Collation elements: a string in which no contraction can start is mapped one character at a
  time with `str.translate` (C speed) into three weight strings, one per level; anything else
  goes through `_elements`, a port of `pyuca`'s loop that walks a reversed list instead of
  slicing, so each step costs a bounded amount of work.

The key is `(primary, secondary, tertiary)` as strings of `chr(weight)`. Comparing those
tuples orders exactly as `pyuca`'s flat tuple `primary + (0,) + secondary + (0,) + tertiary
+ (0,)` does, because every weight written is non-zero. `tests/core/test_collation.py`
checks this against `pyuca` itself.
"""

from __future__ import annotations

import re
import unicodedata

from pyuca import Collator

__all__ = ["collation_key"]

_COLLATOR = Collator()
_ROOT = _COLLATOR.table.root
_combining = unicodedata.combining


class _LevelTable(dict):
    """`str.translate` table for one level: code point → that level's weights as text.

    Code points without a single-character entry get the UCA implicit weights, computed on
    demand and not stored (so the table's size is fixed by the collation table, never by input).
    """

    __slots__ = ("level",)

    def __init__(self, level: int, items) -> None:
        super().__init__(items)
        self.level = level

    def __missing__(self, codepoint: int) -> str:
        if self.level:  # implicit weights are [[AAAA, 0020, 0002], [BBBB, 0, 0]]
            return "\x20" if self.level == 1 else "\x02"
        return _level_text(_COLLATOR.implicit_weight(codepoint), 0)


def _level_text(elements, level: int) -> str:
    return "".join(chr(element[level]) for element in elements if element[level])


_SINGLE = {cp: node.value for cp, node in _ROOT.children.items() if node.value}
_LEVELS = tuple(_LevelTable(level, ((cp, _level_text(v, level)) for cp, v in _SINGLE.items()))
                for level in range(3))

# ASCII: every character has one collation element (or none: the ignorable controls), with
# secondary 0x20, a tertiary below 256 and a primary outside the surrogate range; checked here.
# So ASCII text is keyed with bytes.translate alone: the primary as UTF-16 code units built
# from a high-byte and a low-byte table, the tertiary as Latin-1.
_ASCII_IGNORABLE = bytes(cp for cp in range(128) if _SINGLE[cp] == [[0, 0, 0]])
assert all(len(_SINGLE[cp]) == 1 and _SINGLE[cp][0][1] == 0x20 and _SINGLE[cp][0][2] < 256
           and not 0xD800 <= _SINGLE[cp][0][0] < 0xE000
           for cp in range(128) if cp not in _ASCII_IGNORABLE)


def _byte_table(weight) -> bytes:
    return bytes(weight(_SINGLE[b][0]) if b < 128 else 0 for b in range(256))


_PRIMARY_HIGH = _byte_table(lambda element: element[0] >> 8)
_PRIMARY_LOW = _byte_table(lambda element: element[0] & 0xFF)
_TERTIARY = _byte_table(lambda element: element[2])


def _ascii_key(text: str) -> tuple[str, str, str]:
    data = text.encode("ascii").translate(None, _ASCII_IGNORABLE)
    units = bytearray(2 * len(data))
    units[0::2] = data.translate(_PRIMARY_HIGH)
    units[1::2] = data.translate(_PRIMARY_LOW)
    return units.decode("utf-16-be"), "\x20" * len(data), data.translate(_TERTIARY).decode("latin-1")


def _char_class(codepoints) -> str:
    """A regex character class body of ranges (a list of single characters matches slowly)."""
    ranges: list[list[int]] = []
    for cp in sorted(codepoints):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
                   for a, b in ranges)


_ALL = range(0x30000)  # no code point above has a combining class or a decomposition
_NON_STARTERS = {cp for cp in _ALL if _combining(chr(cp))}
_STARTS = {cp for cp, node in _ROOT.children.items() if node.children}
_FOLLOWERS = {child for cp in _STARTS for child in _ROOT.children[cp].children} | _NON_STARTERS
_UNMAPPED_NON_STARTERS = {cp for cp in _NON_STARTERS if cp not in _SINGLE}
# Where pyuca's loop does anything but map one character to its own elements: a contraction
# start followed by something that may extend it, or a combining mark without an entry (pyuca
# then pulls a later mark forward). Over-matching is harmless: it only takes the exact slow path.
_NEEDS_LOOP = re.compile(
    f"[{_char_class(_STARTS)}](?=[{_char_class(_FOLLOWERS)}])|[{_char_class(_UNMAPPED_NON_STARTERS)}]"
)
# Characters whose NFD begins with a combining mark; a long run of them makes CPython's
# canonical reordering quadratic.
_DECOMPOSES_TO_MARK = {
    cp for cp in _ALL
    if not 0xD800 <= cp < 0xE000 and _combining(unicodedata.normalize("NFD", chr(cp))[:1] or "a")
}
_LONG_MARK_RUN = re.compile(f"[{_char_class(_DECOMPOSES_TO_MARK)}]{{16,}}")
del _ALL


def _nfd(text: str) -> str:
    """NFD in linear time (CPython's own reordering is quadratic on long runs of marks)."""
    if not _LONG_MARK_RUN.search(text):
        return unicodedata.normalize("NFD", text)
    out: list[str] = []
    run: list[tuple[int, int, str]] = []  # (combining class, position, mark) of the current run
    for char in text:
        for mark in unicodedata.normalize("NFD", char):
            klass = _combining(mark)
            if klass:
                run.append((klass, len(run), mark))
                continue
            if run:
                out.extend(item[2] for item in sorted(run))
                run.clear()
            out.append(mark)
    out.extend(item[2] for item in sorted(run))
    return "".join(out)


def _find(stack: list[int], top: int) -> tuple[int, list | None]:
    """Longest entry starting at `stack[top]` reading downwards: (its length, its elements)."""
    node, length, value, index = _ROOT, 0, None, top
    while index >= 0:
        children = node.children
        if children is None:
            break
        node = children.get(stack[index])
        if node is None:
            break
        if node.value:
            length, value = top - index + 1, node.value
        index -= 1
    return length, value


def _entry(codepoints: list[int]):
    node = _ROOT
    for codepoint in codepoints:
        if node.children is None or codepoint not in node.children:
            return None
        node = node.children[codepoint]
    return node.value or None


def _elements(text: str) -> list:
    """pyuca's `collation_elements`, stepping through a reversed list (front = last item)."""
    stack = [ord(char) for char in reversed(text)]
    elements: list = []
    while stack:
        top = len(stack) - 1
        length, value = _find(stack, top)
        matched = stack[top - length + 1:][::-1] if length else []
        del stack[top - length + 1:]
        last_class = None
        # Non-starters that may join the match without being adjacent (pyuca's rule, kept as is).
        for index in range(len(stack) - 1, -1, -1):
            klass = _combining(chr(stack[index]))
            if klass == 0 or klass == last_class:
                break
            last_class = klass
            joined = _entry(matched + [stack[index]])
            if joined is not None:
                del stack[index]
                value = joined
                break
        if not value:
            value = _COLLATOR.implicit_weight(stack.pop())
        elements.extend(value)
    return elements


def collation_key(text: str) -> tuple[str, str, str]:
    """A key that orders strings exactly as `pyuca.Collator().sort_key` orders them."""
    if text.isascii():  # no ASCII character starts a contraction that ASCII can continue
        return _ascii_key(text)
    normalized = _nfd(text)
    if not _NEEDS_LOOP.search(normalized):
        return (normalized.translate(_LEVELS[0]), normalized.translate(_LEVELS[1]),
                normalized.translate(_LEVELS[2]))
    elements = _elements(normalized)
    return tuple("".join(chr(e[level]) for e in elements if e[level]) for level in range(3))
