"""Query parameters: the one parser of integer parameters, shared by every route that takes one.

`str.isdigit` accepts superscripts and other scripts' digits (`²` made `int()` raise, a 500;
`١` was read as 1). Only ASCII digits are an integer here; anything else is a 400 naming the
parameter and its range, before the value reaches a query.
"""

from __future__ import annotations

import re

from flask import request

from gate.errors import GateError

_ASCII_DIGITS = re.compile(r"[0-9]{1,18}")


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
