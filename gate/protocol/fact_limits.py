"""The bounds on a request's facts (`context.inputs`), checked before anything walks or hashes them.

The first of the two evaluation-cost checks (`gate.rulebook.budget` has the second and the
reasons for both): the facts hold at most `MAX_FACT_VALUES` JSON values in all (each object,
array, string, number, boolean and null counts one), no array longer than
`MAX_FACT_ARRAY_LENGTH` and no string or object key longer than `MAX_FACT_STRING_LENGTH`
characters; past a limit, 422 `EVALUATION_INPUT_TOO_LARGE` (nothing evaluated, nothing stored).
The request checks (`gate.protocol.requests`), the advisory requests, replay and the adapters
call it; it needs nothing of the rulebook package.
"""

from __future__ import annotations

from typing import Any

from gate.errors import GateError

__all__ = ["MAX_FACT_ARRAY_LENGTH", "MAX_FACT_STRING_LENGTH", "MAX_FACT_VALUES", "check_facts"]

MAX_FACT_VALUES = 100_000
MAX_FACT_ARRAY_LENGTH = 10_000
MAX_FACT_STRING_LENGTH = 65_536


def _too_large(limit: str, message: str, maximum: int) -> GateError:
    return GateError("EVALUATION_INPUT_TOO_LARGE", f"context.inputs {message}; at most {maximum} allowed",
                     limit=limit, maximum=maximum)


def check_facts(facts: Any) -> int:
    """The number of JSON values in `facts`; raises `EVALUATION_INPUT_TOO_LARGE` past a limit."""
    count = 0
    stack = [facts]
    while stack:
        value = stack.pop()
        count += 1
        if count > MAX_FACT_VALUES:  # SECURITY: stop walking at the limit
            raise _too_large("values", f"holds more than {MAX_FACT_VALUES} values", MAX_FACT_VALUES)
        kind = type(value)
        if kind is str:
            if len(value) > MAX_FACT_STRING_LENGTH:
                raise _too_large("string_length", f"holds a string of {len(value)} characters",
                                 MAX_FACT_STRING_LENGTH)
        elif kind is list:
            if len(value) > MAX_FACT_ARRAY_LENGTH:
                raise _too_large("array_length", f"holds an array of {len(value)} elements",
                                 MAX_FACT_ARRAY_LENGTH)
            stack.extend(value)
        elif kind is dict:
            for key in value:
                if len(key) > MAX_FACT_STRING_LENGTH:
                    raise _too_large("string_length", f"holds an object key of {len(key)} characters",
                                     MAX_FACT_STRING_LENGTH)
            stack.extend(value.values())
    return count
