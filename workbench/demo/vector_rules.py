"""Vectorized evaluation of the demo rulebooks over NumPy columns (for `workbench.dataset.synth`).

A deliberately small interpreter: the leaf operators `eq`, `neq`, `gt`, `gte`, `lt`, `lte`,
`in`, `not_in` and the combinators `all`, `any`, `not`, over facts that are always present
and well typed (the scenario draws them so). Rules are tried by descending priority, ties in
document order, and the first match decides, as in `gate.rulebook`; a test holds it equal to
the scalar evaluator on the scenario's facts. It is not a general Rulebook v1 compiler (the
dry-run's Polars compiler is): anything else raises ValueError.
"""

from __future__ import annotations

from typing import Any

import numpy as np

_COMPARE = {
    "eq": np.equal, "neq": np.not_equal, "gt": np.greater, "gte": np.greater_equal,
    "lt": np.less, "lte": np.less_equal,
}


def condition_mask(condition: dict[str, Any], columns: dict[str, np.ndarray], n: int) -> np.ndarray:
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
        return ~condition_mask(condition["not"], columns, n)
    operator = condition["operator"]
    value: Any = condition.get("value")  # JSON: a list for in / not_in, a scalar to compare with
    column = columns[condition["field"]]
    if operator in ("in", "not_in"):
        mask = np.isin(column, value)
        return mask if operator == "in" else ~mask
    if operator not in _COMPARE:
        raise ValueError(f"operator {operator!r} is not supported here")
    if isinstance(value, bool) != (column.dtype == bool):
        return np.full(n, operator == "neq")  # strict types: a boolean never equals a number
    compared: np.ndarray = _COMPARE[operator](column, value)
    return compared


def evaluate(rulebook: dict[str, Any], columns: dict[str, np.ndarray], n: int) -> tuple[np.ndarray, np.ndarray]:
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
