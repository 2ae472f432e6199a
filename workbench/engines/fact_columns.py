"""The typed facts columns: how one JSON fact path is stored so a rulebook evaluates column-wise.

This module is the contract shared by the writer (`workbench.dataset.facts`, which flattens stored facts
into the `facts` table) and the reader (`workbench.engines.rulebook_polars`, which compiles a
rulebook into expressions over those columns). It imports only Polars and the standard library.

Every field path a Rulebook v1 `field` can name (dot-separated object keys, resolved through
objects only) gets six columns named `<path>::<part>` (`:` never occurs in a field path, so the
names cannot collide with each other or with the table's own columns):

- `t` Int8: the JSON kind of the value at the path (`KIND_*`), null when the path does not
  resolve. Null here, and only here, means *missing*; a present JSON `null` is `KIND_NULL`.
- `b` Boolean: the value when the kind is boolean.
- `n` Float64: the value when the kind is number. Exact: the facts hold no integer beyond
  ±(2^53−1) in a typed row (the writer sends such rows to the scalar evaluator), so every stored
  number is one double, and `1` and `1.0` are the same value as they are to the evaluator.
- `s` String: the value when the kind is string.
- `j` String: `strict_key(value)` when the kind is array or object.
- `e` List(String): `strict_key` of each element when the kind is array.

The value columns are null for every other kind, so a column a batch never wrote (inserted as
null when files of several batches are read together) reads exactly as "not of this kind",
and `t` null reads as missing. `strict_key` is injective up to the evaluator's strict equality:
two JSON values get the same key exactly when `gate.rulebook.semantics.strict_equal` holds.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import polars as pl

__all__ = [
    "KIND_ARRAY",
    "KIND_BOOL",
    "KIND_NULL",
    "KIND_NUMBER",
    "KIND_OBJECT",
    "KIND_STRING",
    "MAX_EXACT_INTEGER",
    "PARTS",
    "PART_DTYPES",
    "STATE_ABSENT",
    "STATE_COLUMN",
    "STATE_PARTIAL",
    "STATE_TYPED",
    "column",
    "flatten",
    "path_columns",
    "path_schema",
    "reachable_key",
    "strict_key",
]

KIND_NULL, KIND_BOOL, KIND_NUMBER, KIND_STRING, KIND_ARRAY, KIND_OBJECT = 0, 1, 2, 3, 4, 5

PART_DTYPES: dict[str, pl.DataType] = {
    "t": pl.Int8(),
    "b": pl.Boolean(),
    "n": pl.Float64(),
    "s": pl.String(),
    "j": pl.String(),
    "e": pl.List(pl.String()),
}
PARTS = tuple(PART_DTYPES)

# Per row: may the typed columns be trusted for every path of this row?
STATE_COLUMN = "facts_state"
STATE_TYPED = "typed"      # every reachable path of the facts is in the typed columns
STATE_PARTIAL = "partial"  # some value could not be typed exactly: evaluate with the scalar evaluator
STATE_ABSENT = "absent"    # the record carries no facts: the decision cannot be replayed

MAX_EXACT_INTEGER = 2**53 - 1

# A key is reachable by a field path part when it holds only field-path characters and no dot
# (paths are split on dots); the first part must also start with a letter or underscore.
_PART_RE = re.compile(r"[A-Za-z0-9_-]*")
_FIRST_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
MAX_PATH_LENGTH = 160


def column(path: str, part: str) -> str:
    """The column name of one part of a fact path."""
    return f"{path}::{part}"


def path_columns(path: str) -> list[str]:
    return [column(path, part) for part in PARTS]


def path_schema(paths: list[str]) -> dict[str, pl.DataType]:
    """Fixed dtypes of the typed columns of `paths` (what a scan asks for)."""
    return {column(path, part): dtype for path in paths for part, dtype in PART_DTYPES.items()}


def reachable_key(key: str, first: bool) -> bool:
    """Can some field path name this object key (as its first part when `first`)?"""
    return bool((_FIRST_RE if first else _PART_RE).fullmatch(key))


def _number_key(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # 1.0 and 1 (and -0.0 and 0) are strictly equal
    return repr(value)


def strict_key(value: Any) -> str:
    """A text key of a JSON value, equal for two values exactly when they are strictly equal.

    Numbers by value (integral floats as integers; other floats by shortest repr, which is
    unique per double), booleans and null as JSON words, strings JSON-quoted, arrays in order
    and objects by sorted keys, recursively. Raises ValueError for a non-JSON value or a
    non-finite number.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("non-finite number")
        return _number_key(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ",".join(strict_key(item) for item in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(json.dumps(k, ensure_ascii=False) + ":" + strict_key(v) for k, v in items) + "}"
    raise ValueError(f"{type(value).__name__} is not a JSON value")


def flatten(facts: Any) -> tuple[dict[str, Any], bool]:
    """Every reachable field path of `facts` with its value, and whether all are exactly typable.

    Only objects are walked (a field path never enters an array); keys no field path can name
    (with a dot or another character outside `[A-Za-z0-9_-]`, or a path over 160 characters)
    are skipped. A non-object `facts` has no paths (the evaluator reads it as `{}`).
    """
    paths: dict[str, Any] = {}
    exact = True
    if not isinstance(facts, dict):
        return paths, exact
    stack: list[tuple[str, dict[str, Any]]] = [("", facts)]
    while stack:
        prefix, obj = stack.pop()
        for key, value in obj.items():
            if not reachable_key(key, first=not prefix):
                continue
            path = f"{prefix}.{key}" if prefix else key
            if len(path) > MAX_PATH_LENGTH:
                continue
            paths[path] = value
            if isinstance(value, dict):
                stack.append((path, value))
            elif type(value) is int and abs(value) > MAX_EXACT_INTEGER:
                exact = False
    return paths, exact
