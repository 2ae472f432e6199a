"""Strict JSON: how untrusted JSON text enters the system, and the error it and the canonical
writer raise (issue 66, item 8: under the keys, which read key registries with it, and under
the record protocol, whose canonical writer `gate.protocol.canonical` states it as its own).

`parse_strict` rejects what the reference would silently round or mangle (NaN, ±Infinity,
duplicate keys, integers beyond ±(2^53−1), a lone surrogate), so nothing ambiguous is ever
hashed, and refuses documents nested deeper than its `max_depth` (`MAX_JSON_DEPTH` for request
bodies, `MAX_DOCUMENT_DEPTH` for records and packets that embed them) before decoding.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from itertools import accumulate
from typing import Any, NoReturn

from gate.errors import Signal
from gate.vocabulary import MAX_SAFE_INTEGER

__all__ = ["LONE_SURROGATE", "MAX_DOCUMENT_DEPTH", "MAX_JSON_DEPTH", "MAX_WRITE_DEPTH", "CanonicalJSONError",
           "JsonValue", "parse_strict"]

JsonValue = str | int | float | bool | None | list["JsonValue"] | dict[str, "JsonValue"]
"""A plain JSON value, what `parse_strict` answers: a member of a document whose shape is not
(yet) known, where `object` would also admit what JSON cannot carry."""

# Nesting limits (containers inside containers; `{"a": [1]}` has depth 2). SECURITY: bounded so
# that every recursive walk of a value (writer, clone, validators) stays far from Python's
# recursion limit; deeper input is a 400 JSON_TOO_DEEP, never a crash.
MAX_JSON_DEPTH = 64  # request bodies a client writes (decide, receipts)
MAX_DOCUMENT_DEPTH = 96  # records and packets handed back for verification: they embed bodies
MAX_WRITE_DEPTH = 128  # anything hashed

# A UTF-16 surrogate code point: in a Python string, only ever a lone one (not Unicode text).
LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class CanonicalJSONError(Signal, ValueError):
    """Input that cannot be canonicalised without changing its meaning.

    `code` is a stable machine string (`JSON_NON_FINITE_NUMBER`, `JSON_DUPLICATE_KEY`,
    `JSON_UNSAFE_INTEGER`, `JSON_INVALID`, `JSON_UNSUPPORTED_TYPE`, `JSON_TOO_DEEP`);
    `path` points at the offending member (`$.context.inputs.amount`) when known.

    A Signal, not a refusal: every caller translates it with its own context (the API into a 400
    body, `api.jsonio`; the CLI naming the file; a verifier into a failed check), and a value the
    writer cannot canonicalise is a fault of the caller, never a refusal of the request.
    """

    def __init__(self, code: str, message: str, path: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.path = path


def _reject_constant(name: str) -> NoReturn:
    raise CanonicalJSONError("JSON_NON_FINITE_NUMBER", f"{name} is not allowed in JSON input")


def _parse_int(text: str) -> int:
    value = int(text)
    if not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
        raise CanonicalJSONError(
            "JSON_UNSAFE_INTEGER",
            f"integer {text} is outside ±(2^53−1) and cannot be hashed without rounding",
        )
    return value


_NONZERO_MANTISSA = re.compile(r"-?0*\.?0*[1-9]")


def _parse_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise CanonicalJSONError(
            "JSON_NON_FINITE_NUMBER", f"number {text} overflows to Infinity"
        )
    if value == 0 and _NONZERO_MANTISSA.match(text):
        # SECURITY: 1e-400 must not silently become 0 (and, say, pass a `<=` rule); refused
        # like its overflowing mirror 1e400.
        raise CanonicalJSONError("JSON_NON_FINITE_NUMBER", f"number {text} underflows to 0")
    # A literal with a fraction or exponent is a double in every implementation, so it hashes
    # the same everywhere; only integer literals beyond ±(2^53−1) would be silently rounded.
    return value


def _pairs(pairs: list[tuple[str, object]]) -> dict[str, object]:
    result = dict(pairs)
    if len(result) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise CanonicalJSONError(
                    "JSON_DUPLICATE_KEY", f"duplicate object key {key!r}"
                )
            seen.add(key)
    return result


_DECODER = json.JSONDecoder(
    object_pairs_hook=_pairs,
    parse_constant=_reject_constant,
    parse_int=_parse_int,
    parse_float=_parse_float,
)


_STRING_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _nesting_depth(text: str, limit: int) -> int:
    """The deepest container nesting in JSON `text`, or a lower bound above `limit`.

    Linear: string literals and everything but brackets are removed with regular expressions,
    then a running sum of ±1 gives the depth. Text with at most `limit` brackets cannot be
    deeper than `limit`, so most documents skip the scan.
    """
    if text.count("[") + text.count("{") <= limit:
        return 0
    brackets = _NOT_BRACKET.sub("", _STRING_LITERAL.sub("", text))
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate_path(value: Any) -> str | None:
    """JSON path of the first string or member name holding a lone surrogate, else None."""
    stack: list[tuple[Any, str]] = [(value, "$")]
    while stack:
        item, path = stack.pop()
        if type(item) is str:
            if LONE_SURROGATE.search(item):
                return path
        elif type(item) is dict:
            for key, child in item.items():
                if LONE_SURROGATE.search(key):
                    return f"{path}.{key.encode('utf-8', 'backslashreplace').decode('ascii')}"
                stack.append((child, f"{path}.{key}"))
        elif type(item) is list:
            stack.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    return None


def _orjson() -> tuple[Callable[[str], Any], Callable[[Any], bytes]] | None:
    """orjson's reader and writer where it is installed (the server's extra), else None: the quick
    path of `parse_strict` is then never taken and the standard library reads everything."""
    try:
        from orjson import dumps, loads
    except ImportError:  # pragma: no cover - a core install without the server's extra
        return None
    return loads, dumps


_ORJSON = _orjson()
_NOT_QUICK = object()
_SAFE_FLOAT_INTEGRAL = float(MAX_SAFE_INTEGER)


def _quick(text: str) -> Any:
    """The value of `text` read by orjson, when nothing in it could read otherwise than the strict
    reader below reads it; else `_NOT_QUICK`, and the strict reader decides (and names any refusal).

    orjson refuses what the strict reader refuses as invalid text (NaN, a number beyond a double's
    range, a lone surrogate, a control character in a string, trailing data), and reads the same
    values otherwise, with three differences this checks for on the value it read: an integer
    beyond ±(2^53−1) (which orjson keeps, or reads as a float past 64 bits: any whole float
    that large goes to the strict reader), a float that reads as 0 (an underflow the strict reader
    refuses), and a repeated member name (orjson keeps the last; `_repeats_a_name`). Floats it
    reads as Python's `float` does, correctly rounded (tests/core/test_strict_quick.py compares
    both readers on random and halfway texts). 16 against 26 µs for the sample decide body."""
    if _ORJSON is None:
        return _NOT_QUICK
    loads, dumps = _ORJSON
    try:
        value = loads(text)
    except ValueError:  # orjson.JSONDecodeError: the strict reader names what is wrong
        return _NOT_QUICK
    members = 0
    stack = [value]
    pop, extend = stack.pop, stack.extend
    while stack:
        item = pop()
        kind = type(item)
        if kind is dict:
            members += len(item)
            extend(item.values())
        elif kind is list:
            extend(item)
        elif (kind is int or kind is float) and _left_to_strict(item):
            return _NOT_QUICK
    return _NOT_QUICK if _repeats_a_name(text, value, members, dumps) else value


def _left_to_strict(number: float) -> bool:
    """An integer beyond ±(2^53−1), or a float that reads as 0 or is whole past 2^53 (`_quick`)."""
    if type(number) is int:
        return not -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER
    return number == 0 or (abs(number) >= _SAFE_FLOAT_INTEGRAL and number.is_integer())


def _repeats_a_name(text: str, value: Any, members: int, dumps: Callable[[Any], bytes]) -> bool:
    """Whether an object of `text` repeats a member name, given the `members` of `value`, what
    orjson read from it: each member written is one colon outside string literals, and orjson keeps
    one member per name. Where the text has colons in strings too, and no escape that could write
    one (`\\u003a`), `value` written again by orjson (which escapes no colon) holds the same
    strings' colons, and fewer only when a repeated member (its own and its value's) was dropped;
    with such an escape, the colons outside the text's string literals are counted."""
    colons = text.count(":")
    if colons == members:
        return False
    if "\\u" in text:
        return _STRING_LITERAL.sub("", text).count(":") != members
    try:
        return dumps(value).count(b":") != colons
    except TypeError:  # orjson writes at most 254 levels: a deeper value is the strict reader's
        return True


def parse_strict(data: bytes | bytearray | str, *, max_depth: int = MAX_DOCUMENT_DEPTH) -> Any:
    """Parse untrusted JSON, rejecting anything that would not hash unambiguously.

    Raises CanonicalJSONError with `JSON_INVALID` (syntax, bad UTF-8, trailing data),
    `JSON_NON_FINITE_NUMBER`, `JSON_DUPLICATE_KEY`, `JSON_UNSAFE_INTEGER` or `JSON_TOO_DEEP`
    (containers nested more than `max_depth` levels). A lone surrogate (`"\\ud800"` not
    followed by a low surrogate) is `JSON_INVALID`: it is not Unicode text, cannot be stored
    as UTF-8 and would hash differently in other implementations (issue 6, defect 7).
    """
    if isinstance(data, (bytes, bytearray)):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CanonicalJSONError("JSON_INVALID", f"body is not UTF-8: {exc.reason}") from exc
    if _nesting_depth(data, max_depth) > max_depth:
        raise CanonicalJSONError("JSON_TOO_DEEP", f"JSON nesting is deeper than {max_depth} levels")
    value = _quick(data)
    return _strict(data) if value is _NOT_QUICK else value


def _strict(data: str) -> Any:
    """The standard library's reader with the strict hooks: what `_quick` does not take, read and
    refused here, each refusal named."""
    try:
        value = _DECODER.decode(data)
    except CanonicalJSONError:
        raise
    except RecursionError as exc:
        raise CanonicalJSONError("JSON_TOO_DEEP", "JSON nesting is too deep") from exc
    except json.JSONDecodeError as exc:
        raise CanonicalJSONError(
            "JSON_INVALID", f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from exc
    # A lone surrogate is written as an escape or, in text that is not ASCII, as itself: the
    # substring and ASCII tests spare the regular expressions' scan of most bodies (15 µs for 3 KB).
    if ("\\u" in data and _SURROGATE_ESCAPE.search(data)) or (not data.isascii() and LONE_SURROGATE.search(data)):
        path = _lone_surrogate_path(value)
        if path is not None:
            path = path.encode("utf-8", "backslashreplace").decode("utf-8")
            raise CanonicalJSONError("JSON_INVALID", "a lone surrogate is not Unicode text", path=path)
    return value
