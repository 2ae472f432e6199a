"""Run-time meaning of Rulebook v1 leaves (reference facts §2), shared by compiled evaluators.

JSON has no coercion here, and Python's own equality would give some wrong answers, so each
rule is spelled out:

- A number is an `int` or `float` that is not a `bool` (Python's `True == 1` must not leak).
- Strict equality: numbers equal by value (`1` equals `1.0`), strings by value, booleans only
  booleans, null only null, arrays element-wise and objects key-by-key with the same rule at
  every depth. Anything else (including values of other Python types) is unequal.
- A field path is split on dots and resolved through objects only; a list or scalar in the
  middle, or an absent key, leaves the path unresolved (`MISSING`). A present `null` resolves.
  (Resolution and the scalar cases are inlined by `gate.rulebook.compile`; the helpers here
  are the ones the generated code calls for arrays, objects and mixed values.)

Every helper is total: it returns a bool for any input and never raises (deep structures are
compared iteratively, so no input can exhaust the stack).
"""

from __future__ import annotations

from typing import Any


class _Missing:
    """The value of a field path that does not resolve (distinct from JSON null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISSING"

    # One marker, compared by identity everywhere: a copy of it must be it, or a deep-copied
    # sample would carry a present, non-JSON value where the path should be absent.
    def __copy__(self) -> _Missing:
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> _Missing:
        return self


MISSING: Any = _Missing()


def strict_equal(left: Any, right: Any) -> bool:
    """JSON equality without coercion, compared by value at every depth."""
    stack = [(left, right)]
    while stack:
        a, b = stack.pop()
        if isinstance(a, bool) or isinstance(b, bool):
            if a is not b:
                return False
        elif isinstance(a, (int, float)):
            if not isinstance(b, (int, float)) or a != b:
                return False
        elif isinstance(a, str):
            if not isinstance(b, str) or a != b:
                return False
        elif a is None:
            if b is not None:
                return False
        elif isinstance(a, list):
            if not isinstance(b, list) or len(a) != len(b):
                return False
            stack.extend(zip(a, b, strict=True))  # lengths are equal: checked above
        elif isinstance(a, dict):
            if not isinstance(b, dict) or len(a) != len(b):
                return False
            for key, value in a.items():
                if key not in b:
                    return False
                stack.append((value, b[key]))
        else:
            return False
    return True


def member(value: Any, options: Any) -> bool:
    """`in`: `options` is an array holding an element strictly equal to `value`."""
    if value is MISSING or not isinstance(options, list):
        return False
    return any(strict_equal(value, option) for option in options)


def contains(container: Any, needle: Any) -> bool:
    """`contains`: array with an element strictly equal to `needle`, or substring of a string."""
    if isinstance(container, list):
        return any(strict_equal(item, needle) for item in container)
    if isinstance(container, str) and isinstance(needle, str):
        return needle in container
    return False


def not_contains(container: Any, needle: Any) -> bool:
    """`not_contains`: the negation of `contains` for a resolved field (unresolved: false)."""
    return container is not MISSING and not contains(container, needle)
