"""Canonical JSON `json.sort_deep.v1` and the sha256 helpers: the only place hash bytes are made.

The rule (reference facts §1): recursively, arrays keep their order and object keys are ordered
by JavaScript's `String.prototype.localeCompare` with no locale (ICU root collation); the text
is what `JSON.stringify` writes, without whitespace. `JSON.stringify` also writes integer-like
keys (canonical array indices, "0" … "4294967294") first, in ascending numeric order.

Collation uses the Unicode Collation Algorithm with the default table (`pyuca`), which the
reference facts measured to reproduce Node's order; `gate.protocol.collation` computes the same order in
time linear in the key's length. Sort keys and key orders of short keys are cached because keys
repeat; the caches are bounded in bytes, so attacker-chosen keys cannot grow a worker.

Nesting is bounded: `parse_strict` refuses documents nested deeper than its `max_depth`
(`MAX_JSON_DEPTH` for request bodies, `MAX_DOCUMENT_DEPTH` for records and packets that embed
them) before decoding, and the writer refuses anything deeper than `MAX_WRITE_DEPTH`, so no
nesting ever reaches Python's recursion limit.

`parse_strict` is the way untrusted JSON enters the system. It rejects what the reference
would silently round or mangle (NaN, ±Infinity, duplicate keys, integers beyond ±(2^53−1)),
so nothing ambiguous is ever hashed. It and `CanonicalJSONError` live in `gate.strict_json`,
under the keys (which read key registries with it; issue 66), and are stated here as this
module's own: canonical JSON is read with one and written with the other.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from gate.errors import Signal
from gate.protocol.collation_ascii import ascii_key
from gate.strict_json import (
    LONE_SURROGATE,
    MAX_DOCUMENT_DEPTH,
    MAX_JSON_DEPTH,
    MAX_WRITE_DEPTH,
    CanonicalJSONError,
    JsonValue,
    parse_strict,
)
from gate.vocabulary import MAX_SAFE_INTEGER

__all__ = [
    "MAX_DOCUMENT_DEPTH",
    "MAX_JSON_DEPTH",
    "MAX_WRITE_DEPTH",
    "CanonicalJSONError",
    "CanonicalRuns",
    "canonical_bytes",
    "canonical_runs",
    "canonical_spliced",
    "canonical_text",
    "canonical_with",
    "clone",
    "collation_sorted",
    "key_order",
    "parse_strict",
    "sha256_bytes_hex",
    "sha256_hex",
    "splice_mark",
]


_MAX_ARRAY_INDEX = 2**32 - 2
# SECURITY: caches hold only short keys and small objects, and are emptied when their estimated
# size passes a byte budget, so memory does not grow with what requests send (issue 6, defect 2).
_CACHED_KEY_CHARS = 64
_CACHED_ORDER_KEYS = 64
_CACHE_BUDGET_BYTES = 4 * 1024 * 1024
_SORT_KEY_CACHE: dict[str, tuple[Any, ...]] = {}
_ORDER_CACHE: dict[tuple[str, ...], list[str]] = {}
_cache_bytes = [0, 0]  # estimated bytes held by _SORT_KEY_CACHE, _ORDER_CACHE

_encode_string = json.encoder.encode_basestring  # C-accelerated, ensure_ascii=False semantics




# --------------------------------------------------------------------------- key order


def _array_index(key: str) -> int | None:
    """Return the numeric value when `key` is a canonical array index, else None."""
    if not key or not key.isdigit() or not key.isascii():
        return None
    if len(key) > 1 and key[0] == "0":
        return None
    value = int(key)
    return value if value <= _MAX_ARRAY_INDEX else None


_COLLATION: list[Callable[[str], tuple[str, str, str]]] = []  # gate.protocol.collation's key, once loaded


def collation_key(text: str) -> tuple[str, str, str]:
    """`gate.protocol.collation.collation_key`. An ASCII key is keyed by `ascii_key`, which needs
    none of that module's tables (0.6–0.8 s to build with pyuca's); the module is loaded on the
    first key with another character, so a command that writes only ASCII keys (`gate verify` of a
    record, `gate --help`) never builds them (issue 68). The API loads it with `api.app`, at boot."""
    if text.isascii():
        return ascii_key(text)
    if not _COLLATION:
        from gate.protocol.collation import collation_key as key

        _COLLATION.append(key)
    return _COLLATION[0](text)


def _remember(cache: dict[Any, Any], slot: int, key: Any, value: Any, size: int) -> None:
    if _cache_bytes[slot] + size > _CACHE_BUDGET_BYTES:
        cache.clear()
        _cache_bytes[slot] = 0
    cache[key] = value
    _cache_bytes[slot] += size


def _sort_key(key: str) -> tuple[Any, ...]:
    cached = _SORT_KEY_CACHE.get(key)
    if cached is None:
        index = _array_index(key)
        # Ties under the collation (rare: only fully ignorable differences) fall back to
        # code-point order so the result is a total order.
        cached = (0, index, ()) if index is not None else (1, collation_key(key), key)
        if len(key) <= _CACHED_KEY_CHARS:
            # key + three weight strings (≤ 2 weights per character each) + object overheads
            _remember(_SORT_KEY_CACHE, 0, key, cached, 32 * len(key) + 400)
    return cached


def collation_sorted(keys: Iterable[str]) -> list[str]:
    """Keys ordered as `a.localeCompare(b)` orders them (no array-index rule)."""
    return sorted(keys, key=lambda key: (collation_key(key), key))


def key_order(keys: Iterable[str]) -> list[str]:
    """Keys in `json.sort_deep.v1` order (array-index keys first, then collation order)."""
    signature = tuple(keys)
    order = _ORDER_CACHE.get(signature)
    if order is None:
        order = sorted(signature, key=_sort_key)
        if len(signature) <= _CACHED_ORDER_KEYS and all(
            type(key) is str and len(key) <= _CACHED_KEY_CHARS for key in signature
        ):
            _remember(_ORDER_CACHE, 1, signature, order, 200 + 120 * len(signature))
    return order


# --------------------------------------------------------------------------- numbers


def _format_float(value: float) -> str:
    """ECMAScript Number::toString for a finite double (shortest round-trip digits)."""
    if value == 0:
        return "0"  # also -0
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    mantissa, _, exponent = text.partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    # n: position of the decimal point counted from the first digit of `digits`.
    point = len(whole) + (int(exponent) if exponent else 0)
    significant = digits.lstrip("0")
    point -= len(digits) - len(significant)
    digits = significant.rstrip("0") or "0"
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    exp = n - 1
    exp_text = ("+" if exp >= 0 else "-") + str(abs(exp))
    if k == 1:
        return sign + digits + "e" + exp_text
    return sign + digits[0] + "." + digits[1:] + "e" + exp_text


def _format_number(value: int | float) -> str:
    if isinstance(value, int):
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return str(value)
        # Beyond the safe range JavaScript holds a double; write what it would write.
        return _format_float(float(value))
    if not math.isfinite(value):
        raise CanonicalJSONError("JSON_NON_FINITE_NUMBER", "NaN and Infinity have no canonical form")
    return _format_float(value)


# --------------------------------------------------------------------------- strings




def _escape_surrogates(text: str) -> str:
    """JSON.stringify writes lone surrogates as `\\udXXX`; encode_basestring leaves them raw."""
    return LONE_SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _encode_text(value: str) -> str:
    text = _encode_string(value)
    if not text.isascii() and LONE_SURROGATE.search(text):
        text = _escape_surrogates(text)
    return text


# --------------------------------------------------------------------------- writer


def _too_deep() -> CanonicalJSONError:
    return CanonicalJSONError("JSON_TOO_DEEP", f"JSON nesting deeper than {MAX_WRITE_DEPTH} levels")


def _write(value: Any, out: list[str], depth: int = 0) -> None:
    kind = type(value)
    if kind is str:
        out.append(_encode_text(value))
    elif kind is dict:
        if depth >= MAX_WRITE_DEPTH:
            raise _too_deep()
        if not value:
            out.append("{}")
            return
        # Before ordering them: the key order is defined for strings only.
        if any(type(key) is not str for key in value):
            raise CanonicalJSONError("JSON_UNSUPPORTED_TYPE", "object keys must be strings")
        out.append("{")
        first = True
        for key in key_order(value):
            if not first:
                out.append(",")
            first = False
            out.append(_encode_text(key))
            out.append(":")
            _write(value[key], out, depth + 1)
        out.append("}")
    elif kind is list or kind is tuple:
        if depth >= MAX_WRITE_DEPTH:
            raise _too_deep()
        if not value:
            out.append("[]")
            return
        out.append("[")
        first = True
        for item in value:
            if not first:
                out.append(",")
            first = False
            _write(item, out, depth + 1)
        out.append("]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int or kind is float:
        out.append(_format_number(value))
    elif isinstance(value, str):
        out.append(_encode_text(str(value)))
    elif isinstance(value, dict):
        _write(dict(value), out, depth)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        out.append(_format_number(value))
    else:
        raise CanonicalJSONError(
            "JSON_UNSUPPORTED_TYPE", f"{type(value).__name__} has no JSON form"
        )


class _SlowPath(Signal):
    """The fast path met a value only the full writer formats (or rejects) correctly."""


def _prepare(value: Any, depth: int = 0) -> Any:
    """Copy `value` with keys in canonical order and numbers the C encoder writes as JS does.

    Python's float repr equals ECMAScript's text for finite non-integral doubles printed
    without an exponent (1e-4 ≤ |x| < 1e16); integral doubles below 2^53 print as integers in
    both. Anything else (exponents, unsafe integers, subclasses, non-string keys) takes the
    slow path.
    """
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return value
    if kind is dict:
        if depth >= MAX_WRITE_DEPTH:
            raise _SlowPath  # the full writer names the error
        try:
            order = key_order(value)
        except (AttributeError, TypeError) as exc:
            raise _SlowPath from exc
        depth += 1
        return {key: _prepare(value[key], depth) for key in order}
    if kind is list or kind is tuple:
        if depth >= MAX_WRITE_DEPTH:
            raise _SlowPath
        depth += 1
        return [_prepare(item, depth) for item in value]
    if kind is int:
        if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
            return value
        raise _SlowPath
    if kind is float:
        if value.is_integer():
            if -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                return int(value)
        elif math.isfinite(value) and 1e-4 <= abs(value) < 1e16:
            return value
    raise _SlowPath


def _c_writer() -> Callable[..., str | None] | None:
    """The C writer (gate/protocol/_canonical.c), which `pip install` builds; None where it was
    not built (no C compiler): the Python writers below give the same text, more slowly. It
    takes `key_order` and key_order's cache, which it reads itself: an object whose keys the
    cache holds is ordered without a Python call (most objects of a record, after the first)."""
    try:
        from gate.protocol._canonical import encode
    except ImportError:  # pragma: no cover - a build without a C compiler
        return None
    return encode


_encode_c = _c_writer()
# Whether the C writer is in use (tests/core/test_canonical_c.py holds both writers equal).
ACCELERATED = _encode_c is not None

_FAST_ENCODER = json.JSONEncoder(
    ensure_ascii=False, separators=(",", ":"), allow_nan=False, check_circular=False
)


def canonical_text(value: Any) -> str:
    """The `json.sort_deep.v1` text of `value`.

    Three writers, each answering what it can: the C writer (`_canonical.c`: every member in
    `key_order`, strings, safe integers and plain floats); then keys reordered in Python and
    written by `json`'s C encoder; then the full Python writer below, which handles every other
    case and is the reference the tests compare the other two against.
    """
    if _encode_c is not None:
        text = _encode_c(value, key_order, _ORDER_CACHE)
        if text is not None:
            return text
    return _canonical_text_python(value)


def _canonical_text_python(value: Any) -> str:
    """The text without the C writer: keys reordered in Python, then `json`'s C encoder, then
    the full writer for whatever that path cannot write."""
    try:
        text = _FAST_ENCODER.encode(_prepare(value))
    except _SlowPath:
        return _canonical_text_slow(value)
    if not text.isascii() and LONE_SURROGATE.search(text):
        text = _escape_surrogates(text)
    return text


def _canonical_text_slow(value: Any) -> str:
    out: list[str] = []
    _write(value, out)
    return "".join(out)


# An object's canonical text cut where members still to come fall in key order (`canonical_runs`):
# (None, a run of its members' text) or (a later member's name, "").
CanonicalRuns = tuple[tuple[str | None, str], ...]


def canonical_runs(value: Mapping[str, JsonValue], later: Iterable[str]) -> CanonicalRuns:
    """Object `value`'s canonical text, cut where the members named in `later` (those `value`
    lacks) fall in key order. `canonical_with` completes it: the canonical text of `value` with
    those members added, where only their own texts are written then (a record's envelope is
    written once, its parts added after it). Each run is the text `canonical_text` writes of the
    run's members (key order is a total order, so a subset keeps its order), so the whole is the
    same text.

    Each run is written on its own (a record's envelope: five runs around its parts' seven
    places, 27 µs against 40 µs for the whole written once with a mark in each place and cut at
    the marks, a search of the text that also had to fall back to this when a value held a mark;
    the whole envelope written plain takes 18 µs: issue 68, item 2)."""
    slots = [name for name in later if name not in value]
    pieces: list[tuple[str | None, str]] = []
    run: dict[str, JsonValue] = {}
    for key in key_order([*value, *slots]):
        if key in value:
            run[key] = value[key]
            continue
        if run:
            pieces.append((None, canonical_text(run)[1:-1]))
            run = {}
        pieces.append((key, ""))
    if run:
        pieces.append((None, canonical_text(run)[1:-1]))
    return tuple(pieces)


def splice_mark(name: str) -> str:
    """The string that stands for member `name`'s value until its text is spliced in
    (`canonical_spliced`)."""
    return f"gate.canonical.splice:{name}"


_MARK_START = '"gate.canonical.splice:'  # how every mark's text starts (a string's opening quote)


def canonical_spliced(value: Any, texts: Mapping[str, str]) -> str | None:
    """The canonical text of `value`, in which the string `splice_mark(name)` stands for a value
    whose canonical text is `texts[name]`: written with the marks, then the texts put in their
    places. None when a mark does not occur exactly once in that text (a value holding the same
    string): the caller writes the value itself then."""
    text = canonical_text(value)
    found = _marks_once(text, {name: _encode_text(splice_mark(name)) for name in texts})
    if found is None:
        return None
    out, start = [], 0
    for at, name, length in found:
        out.append(text[start:at])
        out.append(texts[name])
        start = at + length
    out.append(text[start:])
    return "".join(out)


def _marks_once(text: str, marks: Mapping[str, str]) -> list[tuple[int, str, int]] | None:
    """(offset, name, length) of each mark in `text`, in text order; None unless the marks' common
    start occurs exactly once per mark (then each mark's first occurrence is its own: one scan
    of the text, where looking for each mark twice took 14)."""
    if text.count(_MARK_START) != len(marks):
        return None
    found = []
    for name, mark in marks.items():
        at = text.find(mark)
        if at < 0:
            return None
        found.append((at, name, len(mark)))
    return sorted(found)


def canonical_with(runs: CanonicalRuns, texts: Mapping[str, str]) -> str:
    """The canonical text of the object `runs` cut, with the later members whose canonical texts
    `texts` gives (by name; each exactly `canonical_text` of its value). A name `runs` has no
    place for is a `ValueError`, never dropped."""
    out: list[str] = []
    placed = 0
    for name, text in runs:
        if name is None:
            out.append(text)
        elif name in texts:
            out.append(f"{_encode_text(name)}:{texts[name]}")
            placed += 1
    if placed != len(texts):
        raise ValueError(f"no place for {sorted(set(texts) - {name for name, _ in runs})} in these runs")
    return "{" + ",".join(out) + "}"


def canonical_bytes(value: Any) -> bytes:
    """The UTF-8 bytes of the canonical text (lone surrogates are escaped, so this never fails)."""
    return canonical_text(value).encode("utf-8")


def sha256_bytes_hex(data: bytes) -> str:
    """Bare lowercase hex sha256 of raw bytes (no `sha256:` prefix)."""
    return hashlib.sha256(data).hexdigest()


def sha256_hex(value: Any) -> str:
    """Bare lowercase hex sha256 of the canonical bytes of `value`."""
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def clone(value: Any) -> Any:
    """A deep copy of a JSON value (dicts, lists, scalars): several times faster than
    copy.deepcopy, which must handle arbitrary objects and memoise shared references."""
    kind = type(value)
    if kind is dict:
        return {key: clone(item) for key, item in value.items()}
    if kind is list or kind is tuple:
        return [clone(item) for item in value]
    return value


