"""Query parameters: the one parser of integer parameters, shared by every route that takes one.

`str.isdigit` accepts superscripts and other scripts' digits (`²` made `int()` raise, a 500;
`١` was read as 1). Only ASCII digits are an integer here; anything else is a 400 naming the
parameter and its range, before the value reaches a query.

The URL itself must be UTF-8: WSGI passes the path and the query as latin-1 text of their raw
bytes and Werkzeug decodes them leniently (an invalid byte becomes U+FFFD), so
`undecodable_url_part` names the part that is not, and the app refuses it before routing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, overload
from urllib.parse import unquote_to_bytes

from flask import request

from gate.errors import GateError

_ASCII_DIGITS = re.compile(r"[0-9]{1,18}")


@overload
def int_arg(name: str, *, low: int = 1, high: int | None = None, default: int) -> int: ...


@overload
def int_arg(name: str, *, low: int = 1, high: int | None = None, default: None = None) -> int | None: ...


def int_arg(name: str, *, low: int = 1, high: int | None = None, default: int | None = None) -> int | None:
    """Query parameter `name` as an int in `low`…`high`; `default` when absent; 400 otherwise."""
    raw = request.args.get(name)
    if raw is None:
        return default
    value = int(raw) if _ASCII_DIGITS.fullmatch(raw) else None
    if value is None or value < low or (high is not None and value > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise GateError("REQUEST_INVALID", f"{name} must be an integer of ASCII digits, {bound}",
                        errors=[{"field": name, "code": "invalid_value", "message": bound}])
    return value


def _is_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def undecodable_url_part(environ: Mapping[str, Any]) -> str | None:
    """"path" or "query" when that part of the request URL is not valid UTF-8, else None."""
    # PATH_INFO is already percent-decoded (gunicorn, Werkzeug's server); RAW_URI / REQUEST_URI,
    # when the server gives one, is the path as sent (Werkzeug's test client decodes leniently).
    sent = str(environ.get("RAW_URI") or environ.get("REQUEST_URI") or "").partition("?")[0]
    try:
        paths = (str(environ.get("PATH_INFO", "")).encode("latin-1"), unquote_to_bytes(sent.encode("latin-1")))
    except UnicodeEncodeError:  # not WSGI bytes-as-latin-1 text: nothing a client could have sent
        return "path"
    if not all(_is_utf8(path) for path in paths):
        return "path"
    try:
        query = str(environ.get("QUERY_STRING", "")).encode("latin-1")
    except UnicodeEncodeError:
        return "query"
    if not _is_utf8(unquote_to_bytes(query.replace(b"+", b" "))):
        return "query"
    return None
