"""`PacketOptions`: the export options of a packet, and their parsing from query parameters."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.errors import GateError
from gate.packets.common import (
    _LIMIT_OF,
    _OPTION_NAMES,
    LIMIT_DEFAULT,
    LIMIT_MAX,
    LIMIT_MIN,
    _is_int,
)
from gate.packets.members import PacketOptionsJSON

_INTEGER_TEXT = re.compile(r"-?[0-9]{1,12}")


def _problem(field_name: str, code: str, message: str) -> dict[str, str]:
    return {"field": field_name, "code": code, "message": message}


def _query_value(query: Mapping[str, str | Sequence[str]], name: str) -> tuple[bool, Any]:
    """(present, value); a repeated parameter (a list of several values) is returned as is."""
    if name not in query:
        return False, None
    value = query[name]
    if isinstance(value, (list, tuple)) and len(value) == 1:
        value = value[0]
    return True, value


def _parse_bool(name: str, value: Any, problems: list[dict[str, str]]) -> bool | None:
    if value is True or value is False:
        return value
    if isinstance(value, str) and value in ("true", "1"):
        return True
    if isinstance(value, str) and value in ("false", "0"):
        return False
    problems.append(_problem(name, "invalid_value", f"{name} must be true, false, 1 or 0"))
    return None


def _parse_limit(name: str, value: Any, problems: list[dict[str, str]]) -> int | None:
    if _is_int(value):
        number = value
    elif isinstance(value, str) and _INTEGER_TEXT.fullmatch(value):
        number = int(value)
    elif isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value):
        number = None  # more digits than any limit: out of range, not a type error
    else:
        problems.append(_problem(name, "invalid_type", f"{name} must be an integer"))
        return None
    if number is None or not LIMIT_MIN <= number <= LIMIT_MAX:
        problems.append(_problem(name, "out_of_range", f"{name} must be between {LIMIT_MIN} and {LIMIT_MAX}"))
        return None
    return number


@dataclass(frozen=True, slots=True)
class PacketOptions:
    """The export options of `GET /api/decision/{decision_id}/packet` (spec defaults)."""

    include_input: bool = False
    include_chain: bool = True
    include_intelligence: bool = True
    execution_limit: int = LIMIT_DEFAULT
    outcome_limit: int = LIMIT_DEFAULT
    chain_limit: int = LIMIT_DEFAULT

    def __post_init__(self) -> None:
        for name in ("include_input", "include_chain", "include_intelligence"):
            if type(getattr(self, name)) is not bool:
                raise ValueError(f"{name} must be a boolean")
        for name in ("execution_limit", "outcome_limit", "chain_limit"):
            value = getattr(self, name)
            if not _is_int(value) or not LIMIT_MIN <= value <= LIMIT_MAX:
                raise ValueError(f"{name} must be an integer between {LIMIT_MIN} and {LIMIT_MAX}")

    @classmethod
    def from_query(cls, query: Mapping[str, str | Sequence[str]]) -> PacketOptions:
        """Parse query parameters (a mapping of name → text, or → list of texts).

        Booleans: exactly `true`, `false`, `1`, `0`. Limits: decimal integers 1…1000. Absent
        parameters take the defaults; unrelated parameters are ignored; a parameter given more
        than once is invalid. Every problem is reported at once:
        `GateError("REQUEST_INVALID", …, errors=[{field, code, message}])` with codes
        `invalid_value` (boolean), `invalid_type` (not an integer), `out_of_range`.
        """
        values: dict[str, Any] = {}  # keyword arguments of PacketOptions, each parsed for its field
        problems: list[dict[str, str]] = []
        for name in _OPTION_NAMES:
            present, value = _query_value(query, name)
            if not present:
                continue
            if isinstance(value, (list, tuple)):
                problems.append(_problem(name, "invalid_value", f"{name} must be given at most once"))
                continue
            parsed = (_parse_bool if name.startswith("include_") else _parse_limit)(name, value, problems)
            if parsed is not None:
                values[name] = parsed
        if problems:
            raise GateError("REQUEST_INVALID", f"invalid packet query: {problems[0]['message']}", errors=problems)
        return cls(**values)

    def limit_for(self, part: str) -> int:
        limit: int = getattr(self, _LIMIT_OF[part])
        return limit

    def to_dict(self) -> PacketOptionsJSON:
        """The options by name, in `_OPTION_NAMES` order."""
        return {"include_input": self.include_input, "include_chain": self.include_chain,
                "include_intelligence": self.include_intelligence, "execution_limit": self.execution_limit,
                "outcome_limit": self.outcome_limit, "chain_limit": self.chain_limit}
