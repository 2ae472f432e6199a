"""Vectorized evaluation of the demo rulebooks over NumPy columns (for `workbench.dataset.synth`).

A deliberately small interpreter: the leaf operators that make a plain comparison (`eq`, `neq`,
`gt`, `gte`, `lt`, `lte`: their `compare` in `gate.rulebook.operators`) or test an array of
options (`in`, `not_in`), and the combinators `all`, `any`, `not`, over facts that are always present
and well typed (the scenario draws them so). Rules are tried by descending priority, ties in
document order, and the first match decides, as in `gate.rulebook`; a test holds it equal to
the scalar evaluator on the scenario's facts. It is not a general Rulebook v1 compiler (the
dry-run's Polars compiler is): anything else raises ValueError.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from gate.rulebook import Condition, RulebookDocument
from gate.rulebook.operators import BY_NAME, Operand

# The NumPy form of each comparison an operator makes (`Operator.compare`, gate.rulebook.operators).
_UFUNCS: dict[Any, np.ufunc] = {
    operator.eq: np.equal, operator.ne: np.not_equal, operator.gt: np.greater, operator.ge: np.greater_equal,
    operator.lt: np.less, operator.le: np.less_equal,
}


def condition_mask(condition: Condition, columns: dict[str, np.ndarray], n: int) -> np.ndarray:
    if "all" in condition:
        mask = np.ones(n, bool)
        for child in condition["all"]:
            mask &= condition_mask(child, columns, n)
        return mask
    if "any" in condition:
        mask = np.zeros(n, bool)
        for child in condition["any"]:
            mask |= condition_mask(child, columns, n)
        return mask
    if "not" in condition:
        negated = condition["not"]  # an object, or the one-element list Rulebook v1 also accepts
        return ~condition_mask(negated[0] if isinstance(negated, list) else negated, columns, n)
    name = condition["operator"]
    declared = BY_NAME.get(name)
    value: Any = condition.get("value")  # JSON: a list for in / not_in, a scalar to compare with
    column = columns[condition["field"]]
    if declared is not None and declared.operand is Operand.OPTIONS:
        mask = np.isin(column, value)
        return ~mask if declared.negates else mask
    ufunc = None if declared is None else _UFUNCS.get(declared.compare)
    if declared is None or ufunc is None:
        raise ValueError(f"operator {name!r} is not supported here")
    if isinstance(value, bool) != (column.dtype == bool):
        return np.full(n, declared.negates is not None)  # strict types: a boolean never equals a number
    compared: np.ndarray = ufunc(column, value)
    return compared


def evaluate(rulebook: RulebookDocument, columns: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
    """(verdict, matched_rule_id) arrays: `yes|no|review` and the rule id ("" = default)."""
    verdict = np.full(n, rulebook["default_outcome"]["decision"], dtype=object)
    rule_id = np.full(n, "", dtype=object)
    decided = np.zeros(n, bool)
    ordered = sorted(enumerate(rulebook["rules"]), key=lambda item: (-item[1]["priority"], item[0]))
    for _, rule in ordered:
        hit = condition_mask(rule["condition"], columns, n) & ~decided
        verdict[hit] = rule["outcome"]["decision"]
        rule_id[hit] = rule["rule_id"]
        decided |= hit
    return verdict.astype(str), rule_id.astype(str)
