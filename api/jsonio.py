"""JSON in and out at the HTTP boundary.

Requests are parsed with `gate.protocol.canonical.parse_strict` (NaN, ±Infinity, duplicate keys and
unsafe integers are refused with 400 before anything is hashed). Responses are written with the
C encoder; they need not be canonical because hashes are computed from the stored record.
"""

from __future__ import annotations

import json
from typing import Any

from flask import Request

from api.bodies import read_body
from gate.errors import GateError
from gate.protocol.canonical import MAX_JSON_DEPTH, CanonicalJSONError, parse_strict

_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def dumps(value: Any) -> str:
    return _ENCODER.encode(value)


def _require_json_media_type(request: Request) -> None:
    """`application/json` or `application/*+json`, UTF-8 (the only JSON encoding, RFC 8259).

    An absent Content-Type is read as JSON (many clients omit it); any other declared media
    type, or a charset other than UTF-8, is a 415 before the body is read: a body sent as
    text/plain, form fields or UTF-16 is not what the caller thinks it is.
    """
    declared = request.headers.get("Content-Type")
    if declared is None or not declared.strip():
        return
    mimetype = request.mimetype
    charset = request.mimetype_params.get("charset")
    is_json = mimetype == "application/json" or (mimetype.startswith("application/") and mimetype.endswith("+json"))
    if not is_json or (charset is not None and charset.strip().lower() not in ("utf-8", "utf8")):
        raise GateError(
            "UNSUPPORTED_MEDIA_TYPE",
            "the body must be JSON sent as Content-Type: application/json (UTF-8)",
            content_type=declared[:200],
        )


def read_json_bytes(request: Request, max_bytes: int) -> bytes:
    """The request body of a JSON request, media type checked and size bounded, not yet parsed."""
    _require_json_media_type(request)
    return read_body(request, max_bytes)  # the limit holds while the body streams in


def parse_json_bytes(data: bytes, *, optional: bool = False, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Strict JSON of a body read by `read_json_bytes`; `None` for an empty body when `optional`."""
    if optional and not data.strip():
        return None
    try:
        return parse_strict(data, max_depth=max_depth)
    except CanonicalJSONError as exc:
        details = {"path": exc.path} if exc.path else {}
        raise GateError(exc.code, exc.message, **details) from exc


def read_json(request: Request, max_bytes: int, *, optional: bool = False,
              max_depth: int = MAX_JSON_DEPTH) -> Any:
    """The request body as strict JSON; `None` for an empty body when `optional`.

    Bodies nested deeper than `max_depth` are a 400 `JSON_TOO_DEEP` (records and packets sent
    back for verification pass `MAX_DOCUMENT_DEPTH`: they embed client bodies).
    """
    return parse_json_bytes(read_json_bytes(request, max_bytes), optional=optional, max_depth=max_depth)
