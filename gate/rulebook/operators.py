"""The Rulebook v1 leaf operators, each declared once: what it means, how it compiles, how it reads.

Every reader of a leaf's `operator` takes it from `OPERATORS` (in the order of the published
schema's enum) or `BY_NAME`, never from a list of its own: the contract's operator names
(`gate.rulebook.contract.OPERATORS`), the compiled evaluator (`gate.rulebook.compile`), the cost
bound (`gate.rulebook.budget`), the exact analysis (`gate.rulebook.analysis.space`), the rule
table's reading (`workbench.app.ruletable`), the threshold sweep (`workbench.migration.sweep`)
and the demo's NumPy interpreter (`workbench.demo.vector_rules`). The vector evaluator
(`workbench.engines.rulebook_polars.LEAVES`) cannot import the core, so it keeps one entry per
operator of its own; tests hold it, and the schema's enum, to this table.

An `Operator` says:

- `operand`: what its `value` is. `NONE`: none (the leaf asks whether the path resolves).
  `VALUE`: any JSON value, compared by strict equality. `NUMBER`: a number the field is compared
  with (any other value: the leaf never holds). `OPTIONS`: an array of values, compared by strict
  equality (any other value: never holds). `NEEDLE`: a value an array field holds as an element
  (or a string field as a substring). The exact analysis cuts a field's values at the constants
  each kind of operand names (`gate.rulebook.analysis.space`).
- `holds(x, value)`: the meaning (reference facts §2) on the resolved field value `x` (`MISSING`
  when the path does not resolve). The analysis runs it; the compiled form must agree with it.
- `compiled(src, field, value)`: the compiled form, a Python boolean expression (see below).
- `words`: how the rule table reads the leaf, `field <words> value` (`field <words>` when the
  operator takes no value).
- `cost`: its share of the evaluation's work bound (`gate.rulebook.budget`), in units: one per
  field path part, plus: `PATH` one; `VALUE` the size of the rulebook's value; `ARRAY` the fact's
  length times the size of the value when the fact is an array, else one.
- `negates`: the operator whose negation it is on a resolved field (`neq` of `eq`); for
  `not_exists`, `exists`, negated everywhere.
- `compare`: the comparison it makes between two values of a type it compares (`operator.gt`
  for `gt`, on two numbers; `operator.eq` for `eq`, on two strings, numbers or booleans).
- `threshold`: for a numeric threshold comparison (what the sweep moves), whether it holds
  above the threshold (`rising`) and whether it excludes the threshold itself (`strict`).

The compiled form. `compiled` returns an expression over the generated evaluator's names:
`field` is the expression that reads the leaf's field (`_M` when it does not resolve), to be
read once; the first read may bind it, `(x := field)`, and later reads use `x`. A constant is
referenced only by the name `src.const(value)` returns. The other names are those
`gate.rulebook.compile` binds (`_M`, `_type`, `_int`, `_float`, `_bool`, `_isinstance`, `_str`)
and `HELPERS`. SECURITY: the expression is made of fixed text and those names only; no
rulebook string or value is ever spelled into it (`gate.rulebook.compile`).

A new operator is one entry here, one in `workbench/engines/rulebook_polars.py` (`LEAVES`), its
name in `gate/schemas/rulebook-v1.schema.json` and its entries in
`tests/rulebook/test_rulebook_operators.py`, as long as its operand is one of the kinds above and
its cost one of the classes above; a new kind of operand also changes how the analysis cuts a
field (`gate/rulebook/analysis/space.py`), a new cost class `budget.py`.
"""

from __future__ import annotations

import enum
import operator as op
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from gate.rulebook.semantics import MISSING, contains, member, not_contains, strict_equal

__all__ = [
    "BY_NAME", "HELPERS", "OPERATORS", "Constants", "Cost", "Operand", "Operator", "Threshold", "is_number",
]


class Operand(enum.Enum):
    """What a leaf's `value` is for an operator (module docstring)."""

    NONE = "none"
    VALUE = "value"
    NUMBER = "number"
    OPTIONS = "options"
    NEEDLE = "needle"


class Cost(enum.Enum):
    """A leaf's class in the evaluation's work bound (module docstring)."""

    PATH = "path"
    VALUE = "value"
    ARRAY = "array"


class Constants(Protocol):
    """Where a compiled form registers a constant and gets the name the evaluator reads it by."""

    def const(self, value: Any) -> str: ...


@dataclass(frozen=True, slots=True)
class Threshold:
    """A numeric threshold comparison: it holds above (`rising`) or below the threshold, and
    excludes (`strict`) or includes the threshold itself."""

    rising: bool
    strict: bool


@dataclass(frozen=True, slots=True)
class Operator:
    """One leaf operator (module docstring)."""

    name: str
    operand: Operand
    holds: Callable[[Any, Any], bool]
    compiled: Callable[[Constants, str, Any], str]
    words: str
    cost: Cost
    negates: str | None = None
    compare: Callable[[Any, Any], Any] | None = None
    threshold: Threshold | None = None


# The helpers the compiled forms call, by the names they call them.
HELPERS: Mapping[str, Callable[[Any, Any], bool]] = {
    "_deq": strict_equal,
    "_member": member,
    "_contains": contains,
    "_not_contains": not_contains,
}


def is_number(value: Any) -> bool:
    """A JSON number: an int or float that is not a bool."""
    return type(value) in (int, float)


# --------------------------------------------------------------------------- compiled forms


def _bind(field: str) -> str:
    return f"(x := {field})"


def _eq_test(src: Constants, value: Any, x: str) -> str:
    """Test of the field value strictly equal to the constant `value`.

    `x` is the expression for the first read of the field (a walrus binding `x` or `x`
    itself); later reads use the bound name `x`. Specialised by the constant's type: against a
    string plain `==` is exact for JSON values (Python never equates a string with a non-string).
    """
    if type(value) is str:
        return f"{x} == {src.const(value)}"
    if value is None:
        return f"{x} is None"
    if value is True:
        return f"{x} is True"
    if value is False:
        return f"{x} is False"
    if is_number(value):
        return f"({x} == {src.const(value)} and _type(x) is not _bool)"
    return f"_deq({x}, {src.const(value)})"


def _in_test(src: Constants, options: list[Any], x: str) -> str:
    """Test of the field value being strictly equal to an element of `options` (see _eq_test)."""
    if options and all(type(o) is str for o in options):
        return f"(_isinstance({x}, _str) and x in {src.const(frozenset(options))})"
    if options and all(is_number(o) for o in options):
        return f"((_type({x}) is _int or _type(x) is _float) and x in {src.const(frozenset(options))})"
    return f"_member({x}, {src.const(options)})"


def _compiled_exists(src: Constants, field: str, value: Any) -> str:
    return f"{_bind(field)} is not _M"


def _compiled_not_exists(src: Constants, field: str, value: Any) -> str:
    return f"{_bind(field)} is _M"


def _compiled_eq(src: Constants, field: str, value: Any) -> str:
    return _eq_test(src, value, _bind(field))


def _compiled_neq(src: Constants, field: str, value: Any) -> str:
    return f"({_bind(field)} is not _M and not {_eq_test(src, value, 'x')})"


def _number_test(src: Constants, field: str, value: Any, symbol: str) -> str:
    """A number comparison `x <symbol> value` in Python, both sides plain numbers."""
    if not is_number(value):
        return "False"
    return f"((_type({_bind(field)}) is _int or _type(x) is _float) and x {symbol} {src.const(value)})"


def _compiled_gt(src: Constants, field: str, value: Any) -> str:
    return _number_test(src, field, value, ">")


def _compiled_gte(src: Constants, field: str, value: Any) -> str:
    return _number_test(src, field, value, ">=")


def _compiled_lt(src: Constants, field: str, value: Any) -> str:
    return _number_test(src, field, value, "<")


def _compiled_lte(src: Constants, field: str, value: Any) -> str:
    return _number_test(src, field, value, "<=")


def _compiled_in(src: Constants, field: str, value: Any) -> str:
    if not isinstance(value, list):
        return "False"
    return _in_test(src, value, _bind(field))


def _compiled_not_in(src: Constants, field: str, value: Any) -> str:
    if not isinstance(value, list):
        return "False"
    return f"({_bind(field)} is not _M and not {_in_test(src, value, 'x')})"


def _compiled_contains(src: Constants, field: str, value: Any) -> str:
    if type(value) is str:
        needle = src.const(value)
        return f"({needle} in x if _isinstance({_bind(field)}, _str) else _contains(x, {needle}))"
    return f"_contains({field}, {src.const(value)})"


def _compiled_not_contains(src: Constants, field: str, value: Any) -> str:
    return f"_not_contains({field}, {src.const(value)})"


# --------------------------------------------------------------------------- meanings


def _holds_exists(x: Any, value: Any) -> bool:
    return x is not MISSING


def _holds_not_exists(x: Any, value: Any) -> bool:
    return x is MISSING


def _holds_eq(x: Any, value: Any) -> bool:
    return x is not MISSING and strict_equal(x, value)


def _holds_neq(x: Any, value: Any) -> bool:
    return x is not MISSING and not strict_equal(x, value)


def _holds_gt(x: Any, value: Any) -> bool:
    return is_number(value) and is_number(x) and x > value


def _holds_gte(x: Any, value: Any) -> bool:
    return is_number(value) and is_number(x) and x >= value


def _holds_lt(x: Any, value: Any) -> bool:
    return is_number(value) and is_number(x) and x < value


def _holds_lte(x: Any, value: Any) -> bool:
    return is_number(value) and is_number(x) and x <= value


def _holds_in(x: Any, value: Any) -> bool:
    return isinstance(value, list) and member(x, value)


def _holds_not_in(x: Any, value: Any) -> bool:
    return isinstance(value, list) and x is not MISSING and not member(x, value)


# The table, in the order of the schema's enum. Every meaning and compiled form is a function of
# its own, called when a leaf is evaluated or compiled (none is made at import by a factory), so
# mutation testing reaches each of them.
OPERATORS: tuple[Operator, ...] = (
    Operator("exists", Operand.NONE, _holds_exists, _compiled_exists, "exists", Cost.PATH),
    Operator("not_exists", Operand.NONE, _holds_not_exists, _compiled_not_exists, "is absent", Cost.PATH,
             negates="exists"),
    Operator("eq", Operand.VALUE, _holds_eq, _compiled_eq, "=", Cost.VALUE, compare=op.eq),
    Operator("neq", Operand.VALUE, _holds_neq, _compiled_neq, "≠", Cost.VALUE, negates="eq", compare=op.ne),
    Operator("gt", Operand.NUMBER, _holds_gt, _compiled_gt, ">", Cost.PATH, compare=op.gt,
             threshold=Threshold(rising=True, strict=True)),
    Operator("gte", Operand.NUMBER, _holds_gte, _compiled_gte, "≥", Cost.PATH, compare=op.ge,
             threshold=Threshold(rising=True, strict=False)),
    Operator("lt", Operand.NUMBER, _holds_lt, _compiled_lt, "<", Cost.PATH, compare=op.lt,
             threshold=Threshold(rising=False, strict=True)),
    Operator("lte", Operand.NUMBER, _holds_lte, _compiled_lte, "≤", Cost.PATH, compare=op.le,
             threshold=Threshold(rising=False, strict=False)),
    Operator("in", Operand.OPTIONS, _holds_in, _compiled_in, "in", Cost.VALUE),
    Operator("not_in", Operand.OPTIONS, _holds_not_in, _compiled_not_in, "not in", Cost.VALUE, negates="in"),
    Operator("contains", Operand.NEEDLE, contains, _compiled_contains, "contains", Cost.ARRAY),
    Operator("not_contains", Operand.NEEDLE, not_contains, _compiled_not_contains, "not contains", Cost.ARRAY,
             negates="contains"),
)

BY_NAME: Mapping[str, Operator] = {operator.name: operator for operator in OPERATORS}
