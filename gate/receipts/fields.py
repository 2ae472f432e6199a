"""Field checks for the execution, outcome and CRM sync request bodies.

Each check takes `(value, path, problems)`, records every problem it finds in `problems`
(`{field, code, message}`, the shape of `gate.protocol.requests` and RULEBOOK_INVALID) and returns the
normalized value, or None when the member counts as absent. Nothing raises here: the request
validators collect all problems of a body and raise one REQUEST_INVALID.

Normalization: free text is trimmed the way JavaScript trims (`gate.protocol.records.js_trim`); text
that is empty after trimming, and `null`, count as absent. Lengths are counted in UTF-16 code
units, as the reference counts them. Over-long text is refused, never cut, because a receipt
must state what the caller said or nothing.

Problem codes: `missing_field`, `unknown_field`, `invalid_type`, `invalid_value`,
`invalid_format`, `too_long`, `too_many`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypedDict
from urllib.parse import urlsplit

from gate.protocol.records import MAX_DECISION_ID, MAX_URL, js_trim
from gate.strict_json import JsonValue
from gate.vocabulary import MAX_SAFE_INTEGER

__all__ = [
    "BINDING_MEMBER_NAME",
    "MAX_BINDING_MEMBERS",
    "MAX_DECISION_ID",
    "MAX_EVIDENCE_REFS",
    "MAX_FIELD_MAPPING",
    "MAX_ID",
    "MAX_LABEL",
    "MAX_METRICS",
    "MAX_OPAQUE_HASH",
    "MAX_RESULT_MEMBERS",
    "MAX_RESULT_TEXT",
    "MAX_URL",
    "METRIC_NAME",
    "Check",
    "Executor",
    "Problems",
    "ResultObject",
    "action_binding",
    "boolean",
    "decision_id",
    "evidence_refs",
    "executor",
    "field_mapping",
    "hex64",
    "http_url",
    "identifier",
    "label",
    "observed_metrics",
    "one_of",
    "opaque_hash",
    "reference",
    "required",
    "result_text_or_object",
    "timestamp",
    "utf16_length",
]

# --------------------------------------------------------------------------- limits

MAX_ID = 300  # ids and references to caller/CRM objects
MAX_LABEL = 160  # labels: action names, systems, mutations, providers, types, versions
# MAX_URL (800, URLs and storage references) and MAX_DECISION_ID (600) are the record's own
# limits (reference facts §5), imported from gate.protocol.records.
MAX_OPAQUE_HASH = 200  # caller-supplied hash strings such as "sha256:…"
MAX_RESULT_TEXT = 500  # execution_result given as text
MAX_METRICS = 64
MAX_FIELD_MAPPING = 100
MAX_BINDING_MEMBERS = 32
MAX_RESULT_MEMBERS = 32
MAX_EVIDENCE_REFS = 32
MAX_TIMESTAMP = 40

# Patterns are applied with `fullmatch`: `$` alone would also accept a trailing newline.
METRIC_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]{0,79}$")
BINDING_MEMBER_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_OPAQUE_HASH = re.compile(r"^[A-Za-z0-9_.:+/=-]+$")
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:Z|\+00:00)$", re.ASCII
)
_SPACE_OR_CONTROL = re.compile(r"[\s\x00-\x1f\x7f]")


class Problems:
    """The problems found in one request body, in the order they were found."""

    def __init__(self) -> None:
        self.items: list[dict[str, str]] = []

    def add(self, field: str, code: str, message: str) -> None:
        self.items.append({"field": field, "code": code, "message": message})

    def __bool__(self) -> bool:
        return bool(self.items)

    def at(self, field: str) -> bool:
        """True when a problem was already recorded for `field`."""
        return any(item["field"] == field for item in self.items)


Check = Callable[[Any, str, Problems], Any]


def utf16_length(text: str) -> int:
    """Length as JavaScript's `String.prototype.length` counts it."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite_number(value: int | float, path: str, problems: Problems) -> bool:
    """True for a finite float or an integer within ±(2^53−1); records the problem otherwise."""
    if math.isfinite(value) if isinstance(value, float) else abs(value) <= MAX_SAFE_INTEGER:
        return True
    problems.add(path, "invalid_value", f"{path} must be a finite, safe number")
    return False


# --------------------------------------------------------------------------- text


def _text(value: Any, path: str, problems: Problems, limit: int) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        problems.add(path, "invalid_type", f"{path} must be a string")
        return None
    text = js_trim(value)
    if not text:
        return None
    if utf16_length(text) > limit:
        problems.add(path, "too_long", f"{path} must be at most {limit} characters")
        return None
    return text


def identifier(value: Any, path: str, problems: Problems) -> str | None:
    return _text(value, path, problems, MAX_ID)


def label(value: Any, path: str, problems: Problems) -> str | None:
    return _text(value, path, problems, MAX_LABEL)


def reference(value: Any, path: str, problems: Problems) -> str | None:
    """A storage or document reference (URL, URI or opaque key): text up to 800 units."""
    return _text(value, path, problems, MAX_URL)


def decision_id(value: Any, path: str, problems: Problems) -> str | None:
    return _text(value, path, problems, MAX_DECISION_ID)


def hex64(value: Any, path: str, problems: Problems) -> str | None:
    """A gate hash: 64 lowercase hex characters, exactly (no prefix, no trimming)."""
    if value is None:
        return None
    if not isinstance(value, str):
        problems.add(path, "invalid_type", f"{path} must be a string")
        return None
    if not _HEX64.fullmatch(value):
        problems.add(path, "invalid_format", f"{path} must be 64 lowercase hex characters")
        return None
    return value


def opaque_hash(value: Any, path: str, problems: Problems) -> str | None:
    """A caller's state hash such as "sha256:ab12…": no spaces, at most 200 characters."""
    text = _text(value, path, problems, MAX_OPAQUE_HASH)
    if text is not None and not _OPAQUE_HASH.fullmatch(text):
        problems.add(path, "invalid_format",
                     f"{path} may contain only letters, digits and _ . : + / = -")
        return None
    return text


def timestamp(value: Any, path: str, problems: Problems) -> str | None:
    """An ISO 8601 UTC date-time: `YYYY-MM-DDThh:mm:ss[.fraction](Z|+00:00)`, a real date."""
    text = _text(value, path, problems, MAX_TIMESTAMP)
    if text is None:
        return None
    match = _TIMESTAMP.fullmatch(text)
    try:
        if match is None:
            raise ValueError
        year, month, day, hour, minute, second = (int(part) for part in match.groups())
        datetime(year, month, day, hour, minute, second)
    except ValueError:
        problems.add(path, "invalid_format",
                     f"{path} must be an ISO 8601 UTC timestamp such as 2026-05-21T00:00:00Z")
        return None
    return text


def boolean(value: Any, path: str, problems: Problems) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        problems.add(path, "invalid_type", f"{path} must be a boolean")
        return None
    return value


def one_of(allowed: tuple[str, ...]) -> Check:
    """A member whose value must be one of `allowed`, exactly (no trimming, no case folding)."""

    def check(value: Any, path: str, problems: Problems) -> str | None:
        if value is None:
            return None
        if not isinstance(value, str):
            problems.add(path, "invalid_type", f"{path} must be a string")
            return None
        if value not in allowed:
            problems.add(path, "invalid_value", f"{path} must be one of {', '.join(allowed)}")
            return None
        return value

    return check


def http_url(value: Any, path: str, problems: Problems) -> str | None:
    """An absolute http(s) URL with a host and no spaces. (Userinfo is refused earlier, as
    credential material: see `gate.receipts.credentials`.)"""
    text = _text(value, path, problems, MAX_URL)
    if text is None:
        return None
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a malformed port
    except ValueError:
        parts = None
    if parts is None or _SPACE_OR_CONTROL.search(text) or not parts.hostname:
        problems.add(path, "invalid_format", f"{path} must be an absolute http or https URL")
        return None
    if parts.scheme.lower() not in ("http", "https"):
        problems.add(path, "invalid_value", f"{path} must use http or https")
        return None
    return text


# --------------------------------------------------------------------------- structures


def required(check: Check, code: str = "missing_field") -> Check:
    """`check`, but null or blank text is a problem (`code`) instead of "absent"."""

    def wrapped(value: Any, path: str, problems: Problems) -> Any:
        if value is None or (isinstance(value, str) and not js_trim(value)):
            what = "is required" if code == "missing_field" else "must not be empty"
            problems.add(path, code, f"{path} {what}")
            return None
        return check(value, path, problems)

    return wrapped


_non_empty_identifier = required(identifier, "invalid_value")
_non_empty_label = required(label, "invalid_value")


def _object(value: Any, path: str, problems: Problems, limit: int) -> dict[str, JsonValue] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.add(path, "invalid_type", f"{path} must be an object")
        return None
    if len(value) > limit:
        problems.add(path, "too_many", f"{path} may have at most {limit} members")
        return None
    return value


class Executor(TypedDict):
    """`executor` as stored: who ran the action (both members trimmed text)."""

    type: str
    id: str


# `execution_result` given as an object: member name → text, finite number or boolean.
ResultObject = dict[str, str | int | float | bool]


def executor(value: Any, path: str, problems: Problems) -> Executor | None:
    """`{type, id}`: both required non-empty text (type ≤ 160, id ≤ 300); no other member."""
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.add(path, "invalid_type", f"{path} must be an object")
        return None
    before = len(problems.items)
    for key in value:
        if key not in ("type", "id"):
            problems.add(f"{path}.{key}", "unknown_field", f"{path} has only the members type and id")
    kind = required(label)(value.get("type"), f"{path}.type", problems)
    ident = required(identifier)(value.get("id"), f"{path}.id", problems)
    if len(problems.items) != before:
        return None
    return {"type": kind, "id": ident}


def action_binding(value: Any, path: str, problems: Problems) -> dict[str, str] | None:
    """An object of binding member name → non-empty text (≤ 300), at most 32 members."""
    value = _object(value, path, problems, MAX_BINDING_MEMBERS)
    if value is None:
        return None
    result: dict[str, str] = {}
    for key, item in value.items():
        item_path = f"{path}.{key}"
        if not BINDING_MEMBER_NAME.fullmatch(key):
            problems.add(item_path, "invalid_format",
                         f"binding member names match {BINDING_MEMBER_NAME.pattern}")
            continue
        text = _non_empty_identifier(item, item_path, problems)
        if text is not None:
            result[key] = text
    return result or None


def observed_metrics(value: Any, path: str, problems: Problems) -> dict[str, int | float] | None:
    """An object of metric name → finite number, at most 64 metrics."""
    value = _object(value, path, problems, MAX_METRICS)
    if value is None:
        return None
    result: dict[str, int | float] = {}
    for key, item in value.items():
        item_path = f"{path}.{key}"
        if not METRIC_NAME.fullmatch(key):
            problems.add(item_path, "invalid_format", f"metric names match {METRIC_NAME.pattern}")
        elif not _is_number(item):
            problems.add(item_path, "invalid_type", f"{item_path} must be a number")
        elif _finite_number(item, item_path, problems):
            result[key] = item
    return result or None


def field_mapping(value: Any, path: str, problems: Problems) -> dict[str, str] | None:
    """An object of field name → field name (both non-empty text ≤ 160), at most 100 entries.
    Keys are kept exactly as sent (object keys are not free text to normalize); values are
    trimmed like all text."""
    value = _object(value, path, problems, MAX_FIELD_MAPPING)
    if value is None:
        return None
    result: dict[str, str] = {}
    for key, item in value.items():
        item_path = f"{path}.{key}"
        if not js_trim(key):
            problems.add(item_path, "invalid_value", "field names must not be empty")
        elif utf16_length(key) > MAX_LABEL:
            problems.add(item_path, "too_long", f"field names must be at most {MAX_LABEL} characters")
        else:
            text = _non_empty_label(item, item_path, problems)
            if text is not None:
                result[key] = text
    return result or None


def evidence_refs(value: Any, path: str, problems: Problems) -> list[str] | None:
    """An array of at most 32 non-empty references (≤ 300 each)."""
    if value is None:
        return None
    if not isinstance(value, list):
        problems.add(path, "invalid_type", f"{path} must be an array of strings")
        return None
    if len(value) > MAX_EVIDENCE_REFS:
        problems.add(path, "too_many", f"{path} may have at most {MAX_EVIDENCE_REFS} items")
        return None
    result = [_non_empty_identifier(item, f"{path}[{index}]", problems)
              for index, item in enumerate(value)]
    return result if result and None not in result else None


def result_text_or_object(value: Any, path: str, problems: Problems) -> str | ResultObject | None:
    """`execution_result`: text (≤ 500), or an object of at most 32 members whose names match
    the metric-name pattern and whose values are non-empty text (≤ 300), finite numbers or
    booleans."""
    if isinstance(value, str) or value is None:
        return _text(value, path, problems, MAX_RESULT_TEXT)
    if not isinstance(value, dict):
        problems.add(path, "invalid_type", f"{path} must be a string or an object")
        return None
    value = _object(value, path, problems, MAX_RESULT_MEMBERS)
    if value is None:
        return None
    result: ResultObject = {}
    for key, item in value.items():
        item_path = f"{path}.{key}"
        if not METRIC_NAME.fullmatch(key):
            problems.add(item_path, "invalid_format", f"result member names match {METRIC_NAME.pattern}")
        elif isinstance(item, bool):
            result[key] = item
        elif _is_number(item):
            if _finite_number(item, item_path, problems):
                result[key] = item
        elif isinstance(item, str) or item is None:
            text = _non_empty_identifier(item, item_path, problems)
            if text is not None:
                result[key] = text
        else:
            problems.add(item_path, "invalid_type", f"{item_path} must be text, a number or a boolean")
    return result or None
