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
  each run by combining class, which is what canonical ordering is (in C where it is built).
- Collation elements of ASCII text: `bytes.translate` alone (`gate.protocol.collation_ascii`,
  whose weights need none of the tables built here).
- Collation elements of other text: where the extension `gate/protocol/_collation.c` is built
  (`ACCELERATED`), its port of `pyuca`'s loop walks the whole text once with the table in flat
  arrays, so contractions and marks pulled forward cost no Python work (issue 41: such keys
  had cost a public verify 45x ASCII). Without it (`_python_key`): a string in which no
  contraction can start is mapped one character at a time with `str.translate` into three
  weight strings, one per level; anything else goes through `_elements`, a port of `pyuca`'s
  loop that walks a reversed list instead of slicing, so each step costs a bounded amount of work.

The key is `(primary, secondary, tertiary)` as strings of `chr(weight)`. Comparing those
tuples orders exactly as `pyuca`'s flat tuple `primary + (0,) + secondary + (0,) + tertiary
+ (0,)` does, because every weight written is non-zero. `tests/core/test_collation.py`
checks both paths against `pyuca` itself.
"""

from __future__ import annotations

import re
import unicodedata
from array import array
from collections.abc import Iterable, Sequence
from operator import itemgetter
from typing import Any

from pyuca import Collator

from gate.protocol.collation_ascii import ascii_element, ascii_key

__all__ = ["collation_key"]

_COLLATOR = Collator()
_ROOT = _COLLATOR.table.root
_combining = unicodedata.combining


def _holds(condition: bool, what: str) -> None:
    """An import-time check of what the fast paths below assume of the collation table."""
    if not condition:
        raise AssertionError(f"collation table assumption broken: {what}")


# A character's collation elements: one [primary, secondary, tertiary] weight list each.
_Elements = list[list[int]]

_IMPLICIT_CACHE = 1 << 15  # implicit weights remembered per level before the table is reset


class _LevelTable(dict[int, str]):
    """`str.translate` table for one level: code point → that level's weights as text.

    Code points without a single-character entry get the UCA implicit weights, computed on
    demand and remembered (so a run of one ideograph or unassigned code point costs a dict lookup
    a character); after `_IMPLICIT_CACHE` of them the table drops back to the collation table's
    own entries, so its size is bounded by that table, never by input.
    """

    __slots__ = ("level", "size")

    def __init__(self, level: int, items: Iterable[tuple[int, str]]) -> None:
        super().__init__(items)
        self.level = level
        self.size = len(self)

    def __missing__(self, codepoint: int) -> str:
        if self.level:  # implicit weights are [[AAAA, 0020, 0002], [BBBB, 0, 0]]
            text = "\x20" if self.level == 1 else "\x02"
        else:
            text = _level_text(_COLLATOR.implicit_weight(codepoint), 0)
        if len(self) >= self.size + _IMPLICIT_CACHE:
            for remembered in list(self)[self.size:]:  # insertion order: the table's own entries first
                self.pop(remembered, None)
        self[codepoint] = text
        return text


def _level_text(elements: Iterable[Sequence[int]], level: int) -> str:
    return "".join(map(chr, filter(None, map(itemgetter(level), elements))))


_SINGLE = {cp: node.value for cp, node in _ROOT.children.items() if node.value}
_LEVELS = tuple(_LevelTable(level, ((cp, _level_text(v, level)) for cp, v in _SINGLE.items()))
                for level in range(3))

# ASCII: every character has one collation element (or none: the ignorable controls), stated in
# `gate.protocol.collation_ascii` so that ASCII keys need no table built here; checked here against
# pyuca's table, element for element, and keyed there with bytes.translate alone.
_holds(all(_SINGLE[cp] == [list(ascii_element(cp))] for cp in range(128)), "the ASCII elements are the table's")
_holds(all(continuation > 127 for cp in range(128) for continuation in (_ROOT.children[cp].children or ())),
       "no contraction continues an ASCII character with another")

_ALL = range(0x30000)  # no code point above has a combining class, a decomposition or a trie entry
_NON_STARTERS = {cp: _combining(chr(cp)) for cp in _ALL if _combining(chr(cp))}
_STARTS = {cp for cp, node in _ROOT.children.items() if node.children}


def _deeper(node: Any, found: set[int]) -> set[int]:  # a pyuca trie node (untyped)
    for codepoint, child in (node.children or {}).items():
        found.add(codepoint)
        _deeper(child, found)
    return found


# Code points that continue a contraction (trie nodes at depth 2 or more).
_CONTINUES = set().union(*(_deeper(_ROOT.children[cp], set()) for cp in _STARTS))
# Characters whose NFD begins with a combining mark: the non-starters and three Tibetan vowels.
_DECOMPOSES_TO_MARK = {
    cp for cp in _ALL
    if not 0xD800 <= cp < 0xE000 and _combining(unicodedata.normalize("NFD", chr(cp))[:1] or "a")
}
_holds(not any(_combining(mark) == 0 for cp in _DECOMPOSES_TO_MARK for mark in unicodedata.normalize("NFD", chr(cp))),
       "mark decompositions hold only marks")
_holds(_CONTINUES.isdisjoint(cp for cp in _NON_STARTERS if cp not in _SINGLE), "continuations have entries")
_holds(max(_STARTS | _CONTINUES | _DECOMPOSES_TO_MARK) <= _ALL[-1],  # (max of a range walks it: once)
       "every special code point below the scanned range's end")


def _category(cp: int) -> str:
    """One character summarising what the collation loop can do with `cp` (see `_CATEGORY`)."""
    klass = _NON_STARTERS.get(cp, 0)
    start, continues = cp in _STARTS, cp in _CONTINUES
    if klass:
        block = (0x500 if continues else 0x200) if start else 0x400 if continues else 0x100 if cp in _SINGLE else 0x300
        return chr(block + klass)
    if cp in _DECOMPOSES_TO_MARK:
        return "D"
    return "G" if start and continues else "S" if start else "F" if continues else "a"


# Code point → category, applied with str.translate (C speed; characters from U+30000 up are left
# as they are and read as plain starters). Non-starters carry their combining class in the low
# byte: 0x1cc mapped, 0x2cc contraction start, 0x3cc without a table entry, 0x4cc contraction
# continuation, 0x5cc both. Starters: "a" plain, "S" contraction start, "F" continuation, "G"
# both, "D" decomposes to marks (never present after NFD).
_CATEGORY = [_category(cp) for cp in _ALL]
_NON = "\u0100-\u05ff"
_START = "SG\u0200-\u02ff\u0500-\u05ff"
_CONT = "FG\u0400-\u05ff"
# Where pyuca's loop may do anything but map one character to its own elements, as categories:
# a contraction start before a continuation; a start before two non-starters of different
# classes (a discontiguous contraction may skip the first); a combining mark without an entry
# before a non-starter of another class (pyuca then pulls that mark forward). Over-matching is
# harmless: it only sends a short span through the exact loop.
_IRREGULAR = re.compile(f"[{_START}](?=[{_CONT}])|[{_START}](?=([{_NON}])(?!\\1)[{_NON}])"
                        f"|([\u0300-\u03ff])(?=[{_NON}])(?!\\2)")
# A position where the loop's state is empty: after a starter that neither starts nor continues a
# contraction, or before a starter that continues none. Spans between two such cuts are independent.
_CUT = re.compile(f"(?<=[^SFG{_NON}])|(?=[^FG{_NON}])")
_CUT_REVERSED = re.compile(f"(?<=[^FG{_NON}])|(?=[^SFG{_NON}])|$")  # _CUT in reversed text
_LONG_RUN = 16
_LONG_MARK_RUN = re.compile(f"[D{_NON}]{{{_LONG_RUN},}}")


def _class_of(codepoints: Iterable[int]) -> str:
    """A regular-expression character class (without its brackets) of exactly `codepoints`."""
    ranges: list[list[int]] = []
    for cp in sorted(codepoints):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    return "".join(re.escape(chr(low)) if low == high else f"{re.escape(chr(low))}-{re.escape(chr(high))}"
                   for low, high in ranges)


# _LONG_MARK_RUN on text without astral characters, read on the text itself: the same runs,
# without a category pass over the text first (that pass, `str.translate` through a table, cost a
# key as much as CPython's NFD of it: issue 52, defect 10). The class is the BMP members only,
# which the regular-expression engine tests with a bitmap; with the astral ones it walks a list
# of ranges per character, slower than the category pass, so text with an astral character
# takes that pass.
_ASTRAL = re.compile("[\U00010000-\U0010ffff]")
_LONG_BMP_MARK_RUN = re.compile(f"[{_class_of(cp for cp in set(_NON_STARTERS) | _DECOMPOSES_TO_MARK if cp < 0x10000)}]{{{_LONG_RUN},}}")
# The same members for the C loop's scan (`_collation.mark_runs`), one byte per code point.
def _run_members() -> bytes:
    members = bytearray(len(_CATEGORY))
    for cp in set(_NON_STARTERS) | _DECOMPOSES_TO_MARK:
        members[cp] = 1
    return bytes(members)


_RUN_MEMBERS = _run_members()
_C: Any = None  # the C loop, once configured at the end of this module
_DECOMPOSE = {cp: unicodedata.normalize("NFD", chr(cp)) for cp in _DECOMPOSES_TO_MARK
              if unicodedata.normalize("NFD", chr(cp)) != chr(cp)}
_DECOMPOSE_TEXT = tuple((chr(cp), decomposition) for cp, decomposition in sorted(_DECOMPOSE.items()))
_holds(len(_DECOMPOSE_TEXT) <= 16 and not any(mark in decomposition for mark, _ in _DECOMPOSE_TEXT
                                              for _, decomposition in _DECOMPOSE_TEXT),
       "few marks decompose, none into another that does")
_CLASS = {cp: chr(klass) for cp, klass in _NON_STARTERS.items()}
del _ALL


def _sorted_marks(marks: str) -> str:
    """A run of non-starters in canonical order: a stable sort by combining class, in C (the
    extension's counting sort, or sorted() over the marks' indexes)."""
    if _C is not None:
        return str(_C.canonical_order(marks))
    classes = marks.translate(_CLASS)
    if "".join(sorted(classes)) == classes:  # already in order (timsort: one linear pass)
        return marks
    return "".join(map(marks.__getitem__, sorted(range(len(marks)), key=classes.__getitem__)))


def _decomposed_marks(marks: str) -> str:
    """A run of marks with each decomposed: a `str.replace` per mark that decomposes (seven of
    them), each a fast scan, where `str.translate` looked every mark up in a dict (issue 52,
    defect 10: a run of U+0344 cost a key more than its collation)."""
    for mark, decomposition in _DECOMPOSE_TEXT:
        if mark in marks:
            marks = marks.replace(mark, decomposition)
    return marks


def _long_mark_runs(text: str, categories: str | None) -> Iterable[tuple[int, int]]:
    """The spans of `_LONG_MARK_RUN` in `text` (whose categories may be given)."""
    if categories is None and _C is not None:
        spans: list[tuple[int, int]] = _C.mark_runs(text, _RUN_MEMBERS, _LONG_RUN)
        return spans
    if categories is None and _ASTRAL.search(text) is None:
        return (run.span() for run in _LONG_BMP_MARK_RUN.finditer(text))
    return (run.span() for run in _LONG_MARK_RUN.finditer(text.translate(_CATEGORY) if categories is None else categories))


def _nfd(text: str, categories: str | None = None) -> str:
    """NFD in linear time (CPython's own reordering is quadratic on long runs of marks).

    Text between long runs of marks is normalised by `unicodedata`; a long run (with the marks the
    character before it decomposes into) is decomposed by table and sorted by class.
    """
    out: list[str] = []
    last = 0
    for start, end in _long_mark_runs(text, categories):
        trailing = ""
        if start > last:
            out.append(unicodedata.normalize("NFD", text[last:start - 1]))
            head = unicodedata.normalize("NFD", text[start - 1])
            cut = len(head)
            while cut > 1 and _combining(head[cut - 1]):
                cut -= 1
            out.append(head[:cut])
            trailing = head[cut:]
        marks = trailing + text[start:end]
        if not unicodedata.is_normalized("NFD", marks):  # linear check: decomposed and in order
            marks = _sorted_marks(_decomposed_marks(marks))
        out.append(marks)
        last = end
    if not out:
        return unicodedata.normalize("NFD", text)
    out.append(unicodedata.normalize("NFD", text[last:]))
    return "".join(out)


def _find(stack: list[int], top: int) -> tuple[int, _Elements | None]:
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


def _entry(codepoints: list[int]) -> _Elements | None:
    node = _ROOT
    for codepoint in codepoints:
        if node.children is None or codepoint not in node.children:
            return None
        node = node.children[codepoint]
    return node.value or None


def _alone(children: dict[int, Any], stack: list[int]) -> bool:
    """Whether the contraction start on top of `stack` stays alone: the next character does not
    continue it and pyuca's scan of the non-starters after it stops before a second one."""
    if len(stack) < 2:
        return True
    klass = _NON_STARTERS.get(stack[-2], 0)
    if stack[-2] in children:
        return False
    return not klass or len(stack) < 3 or _NON_STARTERS.get(stack[-3], 0) in (0, klass)


def _elements(text: str) -> _Elements:
    """pyuca's `collation_elements`, stepping through a reversed list (front = last item)."""
    stack = list(map(ord, reversed(text)))
    elements: _Elements = []
    roots = _ROOT.children
    while stack:
        node = roots.get(stack[-1])
        if node is not None and (node.children is None or _alone(node.children, stack)):
            del stack[-1]  # nothing can join this character: its own entry, no scan
            elements.extend(node.value)
            continue
        if node is not None and len(stack) > 1 and (pair := node.children.get(stack[-2])) is not None \
                and pair.value and pair.children is None and (len(stack) < 3 or not _NON_STARTERS.get(stack[-3])):
            del stack[-2:]  # a two-character contraction followed by a starter: nothing can join it
            elements.extend(pair.value)
            continue
        if node is None:  # no entry: implicit weights, unless a mark pulls the next mark forward
            klass = _NON_STARTERS.get(stack[-1], 0)
            if not klass or len(stack) == 1 or _NON_STARTERS.get(stack[-2], 0) in (0, klass):
                elements.extend(_COLLATOR.implicit_weight(stack.pop()))
                continue
        top = len(stack) - 1
        length, value = _find(stack, top)
        matched = stack[top - length + 1:][::-1] if length else []
        del stack[top - length + 1:]
        last_class = None
        # Non-starters that may join the match without being adjacent (pyuca's rule, kept as is).
        for index in range(len(stack) - 1, -1, -1):
            klass = _NON_STARTERS.get(stack[index], 0)
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


_TABLE_SIZE = 0x30000  # the C table's flat part; above it, own entries only (checked above)


def _weight_bytes(elements: _Elements) -> bytes:
    """Collation elements as the C table holds them: native uint16 weights, three per element."""
    return array("H", [weight for element in elements for weight in element[:3]]).tobytes()


def _trie_node(node: Any) -> tuple[Any, Any]:  # a pyuca trie node (untyped) as nested tuples for C
    value = _weight_bytes(node.value) if node.value else None
    children = {cp: _trie_node(child) for cp, child in node.children.items()} if node.children else None
    return value, children


def _implicit_ranges(collator: Any) -> list[tuple[int, int, int, int]]:
    """pyuca's implicit-weight rules for `collator`, in its order: (start, end, base, by_offset);
    by_offset 0: AAAA = base + (cp >> 15), 1: AAAA = base and BBBB from cp - start."""
    shifted = [(0x4E00, 0x9FCC, 0xFB40)]
    shifted += [(0x9FCD, 0x9FD5, 0xFB40)] if collator.CJK_IDEOGRAPHS_8_0_0 else []
    shifted += [(0x9FD6, 0x9FEA, 0xFB40)] if collator.CJK_IDEOGRAPHS_10_0_0 else []
    shifted += [(cp, cp, 0xFB40) for cp in (0xFA0E, 0xFA0F, 0xFA11, 0xFA13, 0xFA14, 0xFA1F,
                                             0xFA21, 0xFA23, 0xFA24, 0xFA27, 0xFA28, 0xFA29)]
    shifted += [(0x2CEA2, 0x2CEA2, 0xFBC0)] if collator.CJK_IDEOGRAPHS_EXT_E else []  # pyuca's exception
    extensions = (("EXT_A", 0x3400, 0x4DB5), ("EXT_B", 0x20000, 0x2A6D6), ("EXT_C", 0x2A700, 0x2B734),
                  ("EXT_D", 0x2B740, 0x2B81D), ("EXT_E", 0x2B820, 0x2CEAF), ("EXT_F", 0x2CEB0, 0x2EBE0))
    shifted += [(start, end, 0xFB80) for name, start, end in extensions if getattr(collator, f"CJK_IDEOGRAPHS_{name}")]
    return ([(start, end, base, 0) for start, end, base in shifted]
            + [(start, end, base, 1) for start, end, base in collator.implicit_weights])


def _all_elements(node: Any) -> list[list[int]]:  # a pyuca trie node (untyped)
    """Every collation element the trie below `node` holds, its own value's included."""
    found: list[list[int]] = list(node.value or [])
    for child in (node.children or {}).values():
        found.extend(_all_elements(child))
    return found


def _c_levels() -> Any:  # the extension module (untyped), or None
    """The collation loop in C (gate/protocol/_collation.c), configured with this table; None where
    the extension was not built (no C compiler): `_python_key` below gives the same keys, more slowly."""
    try:
        from gate.protocol import _collation
    except ImportError:  # pragma: no cover - a build without a C compiler
        return None
    classes = bytearray(_TABLE_SIZE)
    continues = bytearray(_TABLE_SIZE)
    for cp, klass in _NON_STARTERS.items():
        classes[cp] = klass
    for cp in _CONTINUES:
        continues[cp] = 1
    _holds(all(_ROOT.children[cp].value for cp in _STARTS), "every contraction start has its own entry")
    _holds(all(cp < _TABLE_SIZE for cp in _NON_STARTERS), "non-starters below the flat table's end")
    _holds(all(len(element) == 3 and max(element) <= 0xFFFF for value in _SINGLE.values() for element in value),
           "three 16-bit weights per element")
    # The C loop writes the primary level as UCS-2 and the tertiary as ASCII, straight into the
    # strings it returns (issue 52, defect 10), so every element anywhere in the table, the
    # contractions' included, has a primary of 0 or at least 0x100 and a tertiary below 0x80.
    _holds(all(element[0] == 0 or element[0] >= 0x100 for element in _all_elements(_ROOT))
           and all(element[2] < 0x80 for element in _all_elements(_ROOT)),
           "primaries 0 or from 0x100, tertiaries below 0x80")
    _collation.configure(bytes(classes), bytes(continues),
                         {cp: _weight_bytes(value) for cp, value in _SINGLE.items()},
                         {cp: _trie_node(_ROOT.children[cp]) for cp in _STARTS}, _implicit_ranges(_COLLATOR))
    return _collation


_C = _c_levels()
# Whether the C loop is in use (tests/core/test_collation.py holds both paths equal to pyuca).
ACCELERATED = _C is not None

_PIECE_CACHE: dict[str, tuple[str, str, str]] = {}
_PIECE_CACHE_SIZE = 4096  # entries of at most _PIECE_CACHED_CHARS characters
_PIECE_CACHED_CHARS = 32


def _piece_key(piece: str) -> tuple[str, str, str]:
    """The three level strings of one irregular span, through the exact loop (remembered)."""
    cached = _PIECE_CACHE.get(piece)
    if cached is None:
        elements = _elements(piece)
        cached = (_level_text(elements, 0), _level_text(elements, 1), _level_text(elements, 2))
        if len(piece) <= _PIECE_CACHED_CHARS:
            if len(_PIECE_CACHE) >= _PIECE_CACHE_SIZE:
                _PIECE_CACHE.clear()
            _PIECE_CACHE[piece] = cached
    return cached


def _irregular_spans(categories: str) -> list[tuple[int, int]]:
    """The spans (between cuts) that hold an irregular position, in order, not overlapping."""
    spans: list[tuple[int, int]] = []
    end, size = 0, len(categories)
    found = _IRREGULAR.search(categories)
    backwards = categories[::-1] if found else ""
    while found:
        # The span starts at the last cut at or before the irregular position: the first cut at
        # or after its mirror image in the reversed text (never before the previous span's end).
        mirror = _CUT_REVERSED.search(backwards, size - found.start())  # never None: `$` matches
        start = max(end, size - (mirror.start() if mirror else size))
        cut = _CUT.search(categories, found.start() + 1)
        if spans and spans[-1][1] == start:  # adjacent spans: one walk of the loop, not two
            start = spans.pop()[0]
        end = cut.start() if cut else size
        spans.append((start, end))
        found = _IRREGULAR.search(categories, end)
    return spans


def _spliced_key(normalized: str, spans: list[tuple[int, int]]) -> tuple[str, str, str]:
    """Regular text by table, each irregular span through the exact loop, concatenated per level."""
    primary: list[str] = []
    secondary: list[str] = []
    tertiary: list[str] = []
    last = 0
    for start, end in spans:
        gap = normalized[last:start]
        piece = _piece_key(normalized[start:end])
        primary += (gap.translate(_LEVELS[0]), piece[0])
        secondary += (gap.translate(_LEVELS[1]), piece[1])
        tertiary += (gap.translate(_LEVELS[2]), piece[2])
        last = end
    gap = normalized[last:]
    primary.append(gap.translate(_LEVELS[0]))
    secondary.append(gap.translate(_LEVELS[1]))
    tertiary.append(gap.translate(_LEVELS[2]))
    return "".join(primary), "".join(secondary), "".join(tertiary)


def collation_key(text: str) -> tuple[str, str, str]:
    """A key that orders strings exactly as `pyuca.Collator().sort_key` orders them."""
    if text.isascii():  # no ASCII character starts a contraction that ASCII can continue
        return ascii_key(text)
    if _C is not None:
        key: tuple[str, str, str] = _C.levels(text if unicodedata.is_normalized("NFD", text) else _nfd(text))
        return key
    return _python_key(text)


def _python_key(text: str) -> tuple[str, str, str]:
    """`collation_key` of non-ASCII text without the C loop: regular text by table, irregular spans
    through `_elements`."""
    categories = text.translate(_CATEGORY)
    if unicodedata.is_normalized("NFD", text):  # a linear check; no second category pass
        normalized = text
    else:
        normalized = _nfd(text, categories)
        categories = normalized.translate(_CATEGORY)
    spans = _irregular_spans(categories)
    if not spans:
        return (normalized.translate(_LEVELS[0]), normalized.translate(_LEVELS[1]),
                normalized.translate(_LEVELS[2]))
    return _spliced_key(normalized, spans)
