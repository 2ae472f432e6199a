"""Rulebook v1 compiled to Polars expressions over the typed facts columns.

`compile_rulebook(rulebook, order)` turns a *validated* rulebook into one boolean expression
per rule and a flat first-match pick; `evaluate(frame, compiled)` adds the evaluation's columns
to a LazyFrame of the `facts` table (`workbench.engines.fact_columns`). The result equals the
scalar evaluator (`gate.rulebook.compile`, reference facts §2) row for row: `status`,
`verdict` (yes/no/review), `application_verdict`, `action`, `reason_code`, `matched_rule_id`;
a hypothesis differential test over generated rulebooks and facts holds the two together.

How each leaf maps to columns (`t` kind, `b`/`n`/`s` scalar values, `j` strict key of an
array or object, `e` strict keys of array elements), one `LEAVES` entry per operator (the
operators are declared in `gate.rulebook.operators`; this module cannot import it, and a test
holds the two to the same names):

- `exists` / `not_exists`: `t` is (not) null.
- `eq`: the kind of the constant, then its value: a string against `s`, a number against `n`
  (`1` equals `1.0`; a boolean is never a number), a boolean against `b`, null as kind null,
  an array or object by its strict key against `j`.
- `neq`: resolved and not `eq`. `in`: `eq` against any option (grouped by kind, one `is_in`
  per kind); `not_in`: resolved and not `in`; both false when `value` is not an array.
- `gt`/`gte`/`lt`/`lte`: kind number and the comparison on `n`; false for a non-number constant.
- `contains`: an array field holding an element strictly equal to the value (`e` contains its
  strict key), or a string field and string value as a literal substring; `not_contains`:
  resolved and not `contains`.
- Every leaf is `fill_null(False)`, so `all`/`any`/`not` are plain two-valued logic and a
  missing path makes every leaf false except `not_exists`, as in the evaluator.

Order: the engines import only Polars, so the caller passes the rules' evaluation order
(`gate.rulebook.compile.rule_order`: priority descending, ties by rule id in Unicode
collation); `compile_rulebook` checks it is a permutation of the rule ids with non-increasing
priorities. The pick is `coalesce(when(rule_i).then(i) …)`: the first true rule's index, no
nested when/then chain, so a hundred rules cost a hundred flat columns.

`input_schema` gives `status = needs_input` (verdict review, `NEEDS_INPUT`,
`collect_required_input`, `INPUT_SCHEMA_FAILED`, no matched rule) when a required path is
missing or a declared path has another type, before any rule, as in the evaluator.

Rows whose facts are not fully typed (`facts_state` partial: an integer beyond ±(2^53−1), a
string Arrow cannot hold, more paths than the table keeps) come out with `replay = "scalar"`
and null results: the caller evaluates exactly those rows with the scalar evaluator. Rows
without facts come out with `replay = "unreplayable"`. No operator is ever approximated.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeGuard

import polars as pl

from workbench.engines import fact_columns as fc

if TYPE_CHECKING:  # types only (nothing of the core loads at run time): the document this compiles
    from gate.rulebook.shapes import Condition, InputSchema, Outcome, RulebookDocument

__all__ = [
    "PICK",
    "RESULT_COLUMNS",
    "CompiledPolarsRulebook",
    "compile_rulebook",
    "evaluate",
    "outcome_table",
    "referenced_paths",
    "with_pick",
]

# The evaluator's needs_input outcome (gate.vocabulary; a test pins the equality).
NEEDS_INPUT_STATUS = "needs_input"
NEEDS_INPUT_DECISION = "review"
NEEDS_INPUT_VERDICT = "NEEDS_INPUT"
NEEDS_INPUT_ACTION = "collect_required_input"
NEEDS_INPUT_REASON = "INPUT_SCHEMA_FAILED"
STATUS_OK = "ok"

REPLAY_VECTOR, REPLAY_SCALAR, REPLAY_NONE = "vector", "scalar", "unreplayable"
RESULT_COLUMNS = ("replay", "status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")

_NEEDS_INPUT_INDEX = -1
_DEFAULT_INDEX = -2
PICK = "_pick"

LeafExpr = Callable[[str, Any], pl.Expr]
"""A leaf operator's expression from the leaf's field path and value."""


@dataclass(frozen=True)
class CompiledPolarsRulebook:
    """A rulebook as Polars expressions. `rules` are (rule_id, boolean expression) in evaluation
    order; `needs_input` is the input_schema failure expression (None without input_schema);
    `paths` are the fact paths the expressions read (their typed columns must be present)."""

    rulebook_id: str
    version: str
    rules: tuple[tuple[str, pl.Expr], ...]
    outcomes: tuple[Outcome, ...]
    default_outcome: Outcome
    needs_input: pl.Expr | None
    paths: tuple[str, ...]
    columns: dict[str, pl.DataType] = field(default_factory=dict)


# --------------------------------------------------------------------------- paths


def _walk_conditions(node: Condition, out: list[str]) -> None:
    stack = [node]
    while stack:
        item = stack.pop()
        if "all" in item or "any" in item:
            stack.extend(item.get("all") or item["any"])
        elif "not" in item:
            child = item["not"]
            stack.extend(child if isinstance(child, list) else [child])
        else:
            out.append(item["field"])


def referenced_paths(rulebook: RulebookDocument) -> list[str]:
    """Every fact path a rulebook reads (leaves and input_schema), sorted, without repeats."""
    out: list[str] = []
    for rule in rulebook["rules"]:
        _walk_conditions(rule["condition"], out)
    schema = rulebook.get("input_schema") or {}
    out.extend(schema.get("required", ()))
    out.extend(schema.get("properties", {}))
    return sorted(set(out))


# --------------------------------------------------------------------------- leaves


def _col(path: str, part: str) -> pl.Expr:
    return pl.col(fc.column(path, part))


def _kind(path: str, kind: int) -> pl.Expr:
    return _col(path, "t") == kind


def _is_number(value: Any) -> TypeGuard[int | float]:
    return type(value) in (int, float)


def _eq(path: str, value: Any) -> pl.Expr:
    """Strictly equal to the constant `value` (may be null where the path is missing)."""
    if value is None:
        return _kind(path, fc.KIND_NULL)
    if value is True or value is False:
        return _kind(path, fc.KIND_BOOL) & (_col(path, "b") == value)
    if _is_number(value):
        return _kind(path, fc.KIND_NUMBER) & (_col(path, "n") == float(value))
    if isinstance(value, str):
        return _kind(path, fc.KIND_STRING) & (_col(path, "s") == value)
    kind = fc.KIND_ARRAY if isinstance(value, list) else fc.KIND_OBJECT
    return _kind(path, kind) & (_col(path, "j") == fc.strict_key(value))


def _member(path: str, options: list[Any]) -> pl.Expr:
    """Strictly equal to some option: one `is_in` per kind of option."""
    tests: list[pl.Expr] = []
    strings = [o for o in options if isinstance(o, str)]
    numbers = [float(o) for o in options if _is_number(o)]
    booleans = sorted({o for o in options if o is True or o is False})
    composite = sorted({fc.strict_key(o) for o in options if isinstance(o, (list, dict))})
    if strings:
        tests.append(_kind(path, fc.KIND_STRING) & _col(path, "s").is_in(strings))
    if numbers:
        tests.append(_kind(path, fc.KIND_NUMBER) & _col(path, "n").is_in(numbers))
    if booleans:
        tests.append(_kind(path, fc.KIND_BOOL) & _col(path, "b").is_in(booleans))
    if any(o is None for o in options):
        tests.append(_kind(path, fc.KIND_NULL))
    if composite:
        tests.append(_col(path, "t").is_in([fc.KIND_ARRAY, fc.KIND_OBJECT])
                     & _col(path, "j").is_in(composite))
    return pl.any_horizontal(tests) if tests else pl.lit(False)


def _contains(path: str, needle: Any) -> pl.Expr:
    in_array = _kind(path, fc.KIND_ARRAY) & _col(path, "e").list.contains(fc.strict_key(needle))
    if isinstance(needle, str):
        return in_array | (_kind(path, fc.KIND_STRING) & _col(path, "s").str.contains(needle, literal=True))
    return in_array


def _resolved(path: str) -> pl.Expr:
    return _col(path, "t").is_not_null()


_FALSE = pl.lit(False)  # a leaf that never holds (a constant of the wrong kind): final as it is


def _negated(path: str, positive: pl.Expr) -> pl.Expr:
    """Resolved and not `positive`."""
    return _resolved(path) & ~positive.fill_null(False)


def _number(path: str, value: Any, compare: Callable[[pl.Expr, float], pl.Expr]) -> pl.Expr:
    """Kind number and `compare` on `n`; never for a non-number constant."""
    if not _is_number(value):
        return _FALSE
    return _kind(path, fc.KIND_NUMBER) & compare(_col(path, "n"), float(value))


def _leaf_exists(path: str, value: Any) -> pl.Expr:
    return _resolved(path)


def _leaf_not_exists(path: str, value: Any) -> pl.Expr:
    return _col(path, "t").is_null()


def _leaf_eq(path: str, value: Any) -> pl.Expr:
    return _eq(path, value)


def _leaf_neq(path: str, value: Any) -> pl.Expr:
    return _negated(path, _eq(path, value))


def _leaf_gt(path: str, value: Any) -> pl.Expr:
    return _number(path, value, operator.gt)


def _leaf_gte(path: str, value: Any) -> pl.Expr:
    return _number(path, value, operator.ge)


def _leaf_lt(path: str, value: Any) -> pl.Expr:
    return _number(path, value, operator.lt)


def _leaf_lte(path: str, value: Any) -> pl.Expr:
    return _number(path, value, operator.le)


def _leaf_in(path: str, value: Any) -> pl.Expr:
    return _member(path, value) if isinstance(value, list) else _FALSE


def _leaf_not_in(path: str, value: Any) -> pl.Expr:
    return _negated(path, _member(path, value)) if isinstance(value, list) else _FALSE


def _leaf_contains(path: str, value: Any) -> pl.Expr:
    return _contains(path, value)


def _leaf_not_contains(path: str, value: Any) -> pl.Expr:
    return _negated(path, _contains(path, value))


# One entry per Rulebook v1 leaf operator (declared in gate.rulebook.operators; a test holds the
# names equal): the leaf's expression from its field path and its value, null where the path is
# missing (`_leaf` reads null as false), or `_FALSE`. Each is a function of its own, called when
# a rulebook is compiled, so mutation testing reaches each.
LEAVES: dict[str, LeafExpr] = {
    "exists": _leaf_exists,
    "not_exists": _leaf_not_exists,
    "eq": _leaf_eq,
    "neq": _leaf_neq,
    "gt": _leaf_gt,
    "gte": _leaf_gte,
    "lt": _leaf_lt,
    "lte": _leaf_lte,
    "in": _leaf_in,
    "not_in": _leaf_not_in,
    "contains": _leaf_contains,
    "not_contains": _leaf_not_contains,
}


def _leaf(node: Condition) -> pl.Expr:
    leaf = LEAVES.get(node["operator"])
    if leaf is None:  # unreachable after validation
        raise ValueError(f"unsupported operator {node['operator']!r}")
    expr = leaf(node["field"], node.get("value"))
    return expr if expr is _FALSE else expr.fill_null(False)


def _condition(node: Condition) -> pl.Expr:
    if "all" in node:
        return pl.all_horizontal([_condition(child) for child in node["all"]])
    if "any" in node:
        return pl.any_horizontal([_condition(child) for child in node["any"]])
    if "not" in node:
        child = node["not"][0] if isinstance(node["not"], list) else node["not"]
        return ~_condition(child)
    return _leaf(node)


# --------------------------------------------------------------------------- input_schema


def _type_ok(path: str, kind: str) -> pl.Expr:
    if kind == "number":
        return _kind(path, fc.KIND_NUMBER)  # stored numbers are finite (JSON has no NaN)
    if kind == "integer":
        n = _col(path, "n")
        return _kind(path, fc.KIND_NUMBER) & (n.floor() == n)
    code = {"string": fc.KIND_STRING, "boolean": fc.KIND_BOOL, "array": fc.KIND_ARRAY,
            "object": fc.KIND_OBJECT, "null": fc.KIND_NULL}[kind]
    return _kind(path, code)


def _needs_input(schema: InputSchema) -> pl.Expr | None:
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    failures: list[pl.Expr] = []
    for name in sorted(required | set(properties)):
        kind = properties[name]["type"] if name in properties else None
        if name in required:
            failures.append(_col(name, "t").is_null())
        if kind is not None:
            failures.append(_resolved(name) & ~_type_ok(name, kind).fill_null(False))
    return pl.any_horizontal(failures).fill_null(False) if failures else None


# --------------------------------------------------------------------------- compile / evaluate


def compile_rulebook(rulebook: RulebookDocument, order: Sequence[str]) -> CompiledPolarsRulebook:
    """Compile a rulebook that `gate.rulebook.validate_rulebook` accepted.

    `order`: the rule ids in evaluation order (`gate.rulebook.compile.rule_order`). Raises
    ValueError when it is not a permutation of the rule ids or breaks priority order.
    """
    by_id = {rule["rule_id"]: rule for rule in rulebook["rules"]}
    if sorted(order) != sorted(by_id) or len(order) != len(by_id):
        raise ValueError("order must list every rule id exactly once")
    priorities = [int(by_id[rule_id].get("priority", 0)) for rule_id in order]
    if any(a < b for a, b in itertools.pairwise(priorities)):
        raise ValueError("order must list rules by priority descending")
    rules = tuple((rule_id, _condition(by_id[rule_id]["condition"])) for rule_id in order)
    outcomes = tuple(by_id[rule_id]["outcome"].copy() for rule_id in order)
    schema = rulebook.get("input_schema")
    paths = tuple(referenced_paths(rulebook))
    return CompiledPolarsRulebook(
        rulebook_id=rulebook["rulebook_id"],
        version=rulebook["version"],
        rules=rules,
        outcomes=outcomes,
        default_outcome=rulebook["default_outcome"].copy(),
        needs_input=_needs_input(schema) if schema else None,
        paths=paths,
        columns=fc.path_schema(list(paths)),
    )


def _lookup(values: list[Any], index: pl.Expr) -> pl.Expr:
    """`values[index + 2]` per row (index -2 default, -1 needs_input, 0… the rules), null
    where `index` is null. A gather from a literal column, which the streaming engine runs in
    constant memory (a `replace_strict` mapping does not)."""
    return pl.lit(pl.Series(values, dtype=pl.String)).gather(index - _DEFAULT_INDEX)


def _outcome_column(compiled: CompiledPolarsRulebook, key: Literal["decision", "verdict", "action", "reason_code"],
                    index: pl.Expr) -> pl.Expr:
    needs_input = {
        "decision": NEEDS_INPUT_DECISION, "verdict": NEEDS_INPUT_VERDICT,
        "action": NEEDS_INPUT_ACTION, "reason_code": NEEDS_INPUT_REASON,
    }[key]
    return _lookup([compiled.default_outcome[key], needs_input, *[o[key] for o in compiled.outcomes]], index)


def with_fact_columns(frame: pl.LazyFrame, compiled: CompiledPolarsRulebook) -> pl.LazyFrame:
    """Add (as null) every typed column the rulebook reads that `frame` lacks: a path no stored
    fact ever had is missing in every row."""
    present = set(frame.collect_schema().names())
    absent = [pl.lit(None, dtype=dtype).alias(name) for name, dtype in compiled.columns.items() if name not in present]
    return frame.with_columns(absent) if absent else frame


def with_pick(frame: pl.LazyFrame, compiled: CompiledPolarsRulebook) -> pl.LazyFrame:
    """`frame` (a facts-table LazyFrame) with `replay` (vector | scalar | unreplayable) and
    `PICK` (Int32): which outcome the evaluation takes, -2 the default outcome, -1
    needs_input, i ≥ 0 the i-th rule in evaluation order; null where `replay` is not
    `vector`. `outcome_table(compiled)` maps a pick to the evaluation's columns, so an
    aggregate can group by the pick and name the outcomes after grouping."""
    frame = with_fact_columns(frame, compiled)
    picks = [pl.when(expr).then(pl.lit(i, dtype=pl.Int32)) for i, (_, expr) in enumerate(compiled.rules)]
    index = pl.coalesce([*picks, pl.lit(_DEFAULT_INDEX, dtype=pl.Int32)])
    if compiled.needs_input is not None:
        index = pl.when(compiled.needs_input).then(pl.lit(_NEEDS_INPUT_INDEX, dtype=pl.Int32)).otherwise(index)
    state = pl.col(fc.STATE_COLUMN)
    replay = (pl.when(state == fc.STATE_TYPED).then(pl.lit(REPLAY_VECTOR))
              .when(state == fc.STATE_PARTIAL).then(pl.lit(REPLAY_SCALAR))
              .otherwise(pl.lit(REPLAY_NONE)))
    return frame.with_columns(replay.alias("replay"), pl.when(state == fc.STATE_TYPED).then(index).alias(PICK))


def outcome_table(compiled: CompiledPolarsRulebook) -> pl.DataFrame:
    """One row per pick value (`PICK`, then `RESULT_COLUMNS` without `replay`): what an
    evaluation that takes that outcome answers."""
    picks = list(range(_DEFAULT_INDEX, len(compiled.rules)))
    index = pl.Series(PICK, picks, dtype=pl.Int32)
    frame = pl.DataFrame([index])
    return frame.with_columns(_outcome_columns(compiled, pl.col(PICK))).select(PICK, *RESULT_COLUMNS[1:])


def _outcome_columns(compiled: CompiledPolarsRulebook, pick: pl.Expr) -> list[pl.Expr]:
    return [
        pl.when(pick == _NEEDS_INPUT_INDEX).then(pl.lit(NEEDS_INPUT_STATUS))
        .when(pick.is_not_null()).then(pl.lit(STATUS_OK)).alias("status"),
        _outcome_column(compiled, "decision", pick).alias("verdict"),
        _outcome_column(compiled, "verdict", pick).alias("application_verdict"),
        _outcome_column(compiled, "action", pick).alias("action"),
        _outcome_column(compiled, "reason_code", pick).alias("reason_code"),
        _lookup([None, None, *[rule_id for rule_id, _ in compiled.rules]], pick).alias("matched_rule_id"),
    ]


def evaluate(frame: pl.LazyFrame, compiled: CompiledPolarsRulebook, *, keep_rule_columns: bool = False) -> pl.LazyFrame:
    """`frame` (a facts-table LazyFrame) with the evaluation's columns added: `replay`
    (vector | scalar | unreplayable), `status`, `verdict`, `application_verdict`, `action`,
    `reason_code`, `matched_rule_id` (null for the default outcome and needs_input). Results
    are null where `replay` is not `vector`. With `keep_rule_columns`, one boolean column
    `rule::<rule_id>` per rule is kept too."""
    if keep_rule_columns:
        frame = with_fact_columns(frame, compiled)
        frame = frame.with_columns([expr.alias(f"rule::{rule_id}") for rule_id, expr in compiled.rules])
    frame = with_pick(frame, compiled)
    return frame.with_columns(_outcome_columns(compiled, pl.col(PICK))).drop(PICK)
