"""Threshold sweeps: one numeric comparison of a draft rule, its threshold swept over a range, and
for each threshold the dry-run's figures over full history (approvals, failures caught, successes
lost, review load change, each with its interval), in one vectorized pass.

How one pass answers every threshold. Take the swept leaf `field op t` (op one of gt, gte, lt, lte)
of rule R, not under a `not` (so R's condition is monotone in the leaf). Each typed decision is
evaluated twice by the compiled draft, with the leaf forced false (`low`) and forced true (`high`).
Where both picks agree the decision does not depend on t. Where they differ, the decision goes to R
exactly when `field op t` holds, else to `low`'s pick. So one pass keeps, for the dependent
decisions, the field's value with (old verdict, outcome class, young, low verdict, high verdict),
grouped; each threshold then counts by a sorted search over those values. The rows the typed
columns cannot hold exactly (`partial`) are evaluated per threshold by the scalar evaluator (the
ground truth); rows without facts are left out and counted. Every threshold's figures come from
`workbench.migration.impact.impact`, so they mean what `dry_run.impact` means; a threshold's
figures equal a full dry-run of the draft with that threshold (tests/workbench/test_sweep.py).
"""

from __future__ import annotations

import copy
import json
import math
import operator
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import polars as pl

from gate.clock import iso_ms
from gate.protocol.canonical import sha256_hex
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.rulebook import get_evaluator
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp
from workbench.migration.compute import NO_OUTCOME, UNOBSERVABLE, latest_outcomes
from workbench.migration.draft import Draft, load_draft
from workbench.migration.errors import DryRunError
from workbench.migration.history import History
from workbench.migration.impact import CostModel, impact, wilson
from workbench.migration.run import load_history

__all__ = ["SweepLeaf", "find_leaf", "sweep", "thresholds_between"]

NUMERIC = ("gt", "gte", "lt", "lte")
MAX_THRESHOLDS = 1000
_GROUP = ["old_verdict", "outcome_class", "young", "low_verdict", "high_verdict"]


@dataclass(frozen=True)
class SweepLeaf:
    """The swept comparison: rule id, its path inside the rule's condition, field and operator."""

    rule_id: str
    path: tuple[Any, ...]  # keys and indexes from the rule's `condition` to the leaf
    field: str
    operator: str
    value: float


def _leaves(node: Any, path: tuple[Any, ...], under_not: bool,
            out: list[tuple[tuple[Any, ...], dict[str, Any], bool]]) -> None:
    if not isinstance(node, dict):
        return
    for key in ("all", "any"):
        if key in node:
            for index, child in enumerate(node[key]):
                _leaves(child, (*path, key, index), under_not, out)
            return
    if "not" in node:
        child = node["not"][0] if isinstance(node["not"], list) else node["not"]
        _leaves(child, (*path, "not", 0) if isinstance(node["not"], list) else (*path, "not"), True, out)
        return
    out.append((path, node, under_not))


def find_leaf(rulebook: dict[str, Any], rule_id: str, field: str, occurrence: int = 0) -> SweepLeaf:
    """The `occurrence`-th numeric comparison of `field` in rule `rule_id` (DryRunError otherwise)."""
    rule = next((r for r in rulebook["rules"] if r["rule_id"] == rule_id), None)
    if rule is None:
        raise DryRunError("SWEEP_INVALID", f"the draft has no rule {rule_id!r}")
    found: list[tuple[tuple[Any, ...], dict[str, Any], bool]] = []
    _leaves(rule["condition"], (), False, found)
    matches = [(p, leaf, neg) for p, leaf, neg in found if leaf.get("field") == field]
    numeric = [(p, leaf, neg) for p, leaf, neg in matches if leaf.get("operator") in NUMERIC]
    if not matches:
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} does not compare field {field!r}")
    if not numeric:
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} compares {field!r} with "
                          f"{matches[0][1].get('operator')!r}, not a numeric comparison (gt, gte, lt, lte)")
    if not 0 <= occurrence < len(numeric):
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} has {len(numeric)} numeric comparison(s) of {field!r}; "
                          f"occurrence {occurrence} does not exist")
    path, leaf, under_not = numeric[occurrence]
    if under_not:
        raise DryRunError("SWEEP_INVALID", "the comparison is under a `not`: sweeping it is not supported")
    if isinstance(leaf.get("value"), bool) or not isinstance(leaf.get("value"), (int, float)):
        raise DryRunError("SWEEP_INVALID", "the comparison's value is not a number")
    return SweepLeaf(rule_id, path, field, leaf["operator"], float(leaf["value"]))


def numeric_comparisons(rulebook: dict[str, Any]) -> list[dict[str, Any]]:
    """Every comparison `sweep` accepts, in rule order: {rule_id, field, occurrence, operator,
    value} (a numeric leaf with a number, not under a `not`), as `find_leaf` would find it."""
    found: list[dict[str, Any]] = []
    for rule in rulebook.get("rules", []):
        leaves: list[tuple[tuple[Any, ...], dict[str, Any], bool]] = []
        _leaves(rule.get("condition"), (), False, leaves)
        seen: Counter[str] = Counter()
        for _path, leaf, under_not in leaves:
            if leaf.get("operator") not in NUMERIC:
                continue
            field = str(leaf.get("field"))
            occurrence = seen[field]
            seen[field] += 1
            value = leaf.get("value")
            if not under_not and isinstance(value, (int, float)) and not isinstance(value, bool):
                found.append({"rule_id": rule["rule_id"], "field": field, "occurrence": occurrence,
                              "operator": leaf["operator"], "value": value})
    return found


def with_threshold(rulebook: dict[str, Any], rule_id: str, field: str, occurrence: int, value: float) -> dict[str, Any]:
    """A copy of the draft with that comparison's threshold set to `value` (every other member,
    and the key order, kept); DryRunError as `find_leaf` for a comparison it cannot sweep."""
    shown = float(f"{float(value):.12g}")  # 0.12, not the 0.12000000000000002 an even step can land on
    number: float = int(shown) if shown.is_integer() else shown
    return _with_value(rulebook, find_leaf(rulebook, rule_id, field, occurrence), number)


def thresholds_between(low: float, high: float, steps: int) -> list[float]:
    """`steps` evenly spaced thresholds from `low` to `high` (both included)."""
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise DryRunError("SWEEP_INVALID", "the range needs finite bounds with from <= to")
    if not 1 <= steps <= MAX_THRESHOLDS:
        raise DryRunError("SWEEP_INVALID", f"steps must be from 1 to {MAX_THRESHOLDS}")
    if steps == 1:
        return [low]
    return [low + (high - low) * i / (steps - 1) for i in range(steps)]


def _with_value(rulebook: dict[str, Any], leaf: SweepLeaf, value: Any) -> dict[str, Any]:
    """A copy of the draft with the swept leaf's value replaced."""
    copied = copy.deepcopy(rulebook)
    node = next(r for r in copied["rules"] if r["rule_id"] == leaf.rule_id)["condition"]
    for step in leaf.path:
        node = node[step]
    node["value"] = value
    return copied


def _forced(condition: dict[str, Any], path: tuple[Any, ...], value: bool) -> pl.Expr:
    """The rule's condition as a Polars expression with the leaf at `path` replaced by `value`."""
    if not path:
        return pl.lit(value)
    key, rest = path[0], path[1:]
    if key in ("all", "any"):
        index, tail = rest[0], rest[1:]
        parts = [(_forced(child, tail, value) if i == index else rp._condition(child))
                 for i, child in enumerate(condition[key])]
        return pl.all_horizontal(parts) if key == "all" else pl.any_horizontal(parts)
    raise DryRunError("SWEEP_INVALID", "unsupported condition shape for a sweep")  # `not` refused in find_leaf


def _variant(draft: Draft, leaf: SweepLeaf, value: bool) -> rp.CompiledPolarsRulebook:
    rule = next(r for r in draft.rulebook["rules"] if r["rule_id"] == leaf.rule_id)
    expr = _forced(rule["condition"], leaf.path, value)
    rules = tuple((rule_id, expr if rule_id == leaf.rule_id else e) for rule_id, e in draft.polars.rules)
    return replace(draft.polars, rules=rules)


def _classes(frame: pl.LazyFrame, outcomes: pl.LazyFrame, cutoff: Any) -> pl.LazyFrame:
    """Each approved row's outcome class (as the dry-run classes a flip) and whether it is young.
    Only approvals need them (caught, lost and immature are all withdrawn approvals): the other
    rows get the class the dry-run gives a stored `no` (unobservable) or none, and are never
    young, so the latest outcomes are read for the approvals only."""
    classes = dict(OUTCOME_EFFECTIVENESS_CLASS)
    approved = pl.col("old_verdict") == "yes"
    wanted = outcomes.join(frame.filter(approved).select("decision_id"), on="decision_id", how="semi")
    return frame.join(latest_outcomes(wanted), on="decision_id", how="left").with_columns(
        pl.when(pl.col("old_verdict") == "no").then(pl.lit(UNOBSERVABLE))
        .when(~approved | pl.col("outcome_status").is_null()).then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col("outcome_status").replace_strict(classes, default="unknown", return_dtype=pl.String))
        .alias("outcome_class"),
        (approved & (pl.col("created_at") > cutoff)).alias("young"))


def _vector_groups(history: History, draft: Draft, leaf: SweepLeaf, cutoff: Any) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(independent rows counted by old verdict, class, young and verdict; dependent rows by those,
    their low and high verdicts and the field's value) over the typed rows, in one pass."""
    table = rp.outcome_table(draft.polars).select(rp.PICK, "verdict")
    low, high = _variant(draft, leaf, False), _variant(draft, leaf, True)
    typed = history.base.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_TYPED)
    picked = rp.with_pick(typed, low).rename({rp.PICK: "low"})
    picked = rp.with_pick(picked, high).rename({rp.PICK: "high"})
    value = rp._col(leaf.field, "n")
    number = rp._kind(leaf.field, fc.KIND_NUMBER).fill_null(False)
    frame = (picked.select("decision_id", "created_at", "old_verdict", "low", "high",
                           pl.when(number).then(value).otherwise(None).alias("x"))
             .join(table.lazy().rename({rp.PICK: "low", "verdict": "low_verdict"}), on="low", how="left")
             .join(table.lazy().rename({rp.PICK: "high", "verdict": "high_verdict"}), on="high", how="left"))
    frame = _classes(frame, history.outcomes, cutoff)
    same = pl.col("low") == pl.col("high")
    independent = frame.filter(same).group_by(["old_verdict", "outcome_class", "young", "low_verdict"]).agg(
        pl.len().alias("count"))
    dependent = frame.filter(~same).group_by([*_GROUP, "x"]).agg(pl.len().alias("count"))
    both = pl.collect_all([independent, dependent], engine="streaming")
    return both[0], both[1]


def _fires(operator: str, x: np.ndarray, weights: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """For each threshold, the weight of the rows whose value satisfies `x op t` (null x never does)."""
    order = np.argsort(x, kind="stable")
    xs, cum = x[order], np.concatenate([[0], np.cumsum(weights[order])])
    total = cum[-1]
    positions = np.searchsorted(xs, thresholds, side="right" if operator in ("gt", "lte") else "left")
    below: np.ndarray = cum[positions]
    return below if operator in ("lt", "lte") else total - below


def _tallies(independent: pl.DataFrame, dependent: pl.DataFrame, leaf: SweepLeaf,
             thresholds: Sequence[float]) -> list[Counter[tuple[str, str, str, bool]]]:
    """Per threshold: (old verdict, new verdict, class, young) → decisions, over the typed rows."""
    base: Counter[tuple[str, str, str, bool]] = Counter()
    for old, name, young, verdict, count in independent.iter_rows():
        base[(old, verdict, name, bool(young))] += int(count)
    tallies = [Counter(base) for _ in thresholds]
    points = np.asarray(thresholds, dtype=np.float64)
    for key, group in dependent.group_by(_GROUP):
        old, name, young, low_verdict, high_verdict = key
        known = group.filter(pl.col("x").is_not_null())
        total = int(group["count"].sum())
        fired = (_fires(leaf.operator, known["x"].to_numpy().astype(np.float64),
                        known["count"].to_numpy().astype(np.int64), points)
                 if known.height else np.zeros(len(points), dtype=np.int64))
        for index, hits in enumerate(fired):
            tallies[index][(old, high_verdict, name, bool(young))] += int(hits)
            tallies[index][(old, low_verdict, name, bool(young))] += total - int(hits)
    return tallies


_EXTREME = 1.0e308  # a finite JSON number beyond every finite fact: forces the leaf false or true
_PYTHON_OPS = {"gt": operator.gt, "gte": operator.ge, "lt": operator.lt, "lte": operator.le}


def _field_number(facts: Any, field: str) -> Any:
    """The fact at a dotted path when it is a plain number (as the evaluator compares), else None."""
    value = facts
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value if type(value) in (int, float) else None


def _scalar_tallies(history: History, draft: Draft, leaf: SweepLeaf, thresholds: Sequence[float],
                    cutoff: Any) -> tuple[list[Counter[tuple[str, str, str, bool]]], int]:
    """The partial rows (few), by the scalar evaluator (the ground truth): each evaluated twice,
    with the leaf forced false and true by an extreme threshold, then compared exactly (Python
    numbers, no float rounding) against every threshold, as the vector rows are."""
    partial = _classes(history.base.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL)
                       .select("decision_id", "created_at", "old_verdict", "facts_json"),
                       history.outcomes, cutoff).collect(engine="streaming")
    tallies: list[Counter[tuple[str, str, str, bool]]] = [Counter() for _ in thresholds]
    if not partial.height:
        return tallies, 0
    sign = 1 if leaf.operator in ("gt", "gte") else -1
    low = get_evaluator(*_hashed(_with_value(draft.rulebook, leaf, sign * _EXTREME)))
    high = get_evaluator(*_hashed(_with_value(draft.rulebook, leaf, -sign * _EXTREME)))
    fires = _PYTHON_OPS[leaf.operator]
    for row in partial.iter_rows(named=True):
        facts = json.loads(row["facts_json"])
        low_verdict, high_verdict = low.evaluate(facts).decision, high.evaluate(facts).decision
        x = _field_number(facts, leaf.field)
        for index, threshold in enumerate(thresholds):
            verdict = high_verdict if x is not None and fires(x, threshold) else low_verdict
            tallies[index][(row["old_verdict"], verdict, row["outcome_class"], bool(row["young"]))] += 1
    return tallies, partial.height


def _hashed(rulebook: dict[str, Any]) -> tuple[dict[str, Any], str]:
    return rulebook, sha256_hex(rulebook)


def _point(threshold: float, tally: Counter[tuple[str, str, str, bool]], cost: CostModel,
           as_of: str | None) -> dict[str, Any]:
    n = sum(tally.values())
    into = sum(c for (o, v, _, _), c in tally.items() if v == "review" and o != "review")
    out = sum(c for (o, v, _, _), c in tally.items() if o == "review" and v != "review")
    figures = impact(tally, n, cost, as_of=as_of, review_in=into, review_out=out)
    approvals = sum(c for (_, v, _, _), c in tally.items() if v == "yes")
    return {"threshold": threshold,
            "approvals": {"count": approvals, "rate": round(approvals / n, 6) if n else None,
                          "interval_95": wilson(approvals, n)},
            **{name: figures[name] for name in ("failures_caught", "successes_lost", "review_load_change",
                                                 "immature", "expected_net_effect")}}


def sweep(draft: Any, rulebook_id: str, leaf_spec: tuple[str, str, int], thresholds: Sequence[float], *,
          scope: str | None = None, dataset: Any = None, ledger: Any = None, anchors: Any = None,
          cost: CostModel | None = None) -> dict[str, Any]:
    """Sweep the threshold of (rule id, field, occurrence) in `draft` over `thresholds`: one
    point per threshold with the dry-run's figures and intervals (module doc)."""
    cost = cost or CostModel()
    compiled = load_draft(draft, rulebook_id)
    leaf = find_leaf(compiled.rulebook, *leaf_spec)
    if not thresholds or len(thresholds) > MAX_THRESHOLDS or not all(math.isfinite(t) for t in thresholds):
        raise DryRunError("SWEEP_INVALID", f"give 1 to {MAX_THRESHOLDS} finite thresholds")
    history = load_history(rulebook_id, scope, dataset=dataset, ledger=ledger, paths=compiled.polars.paths,
                           anchors=anchors)
    versions = history.versions_in_scope()
    newest = versions["last"].max() if versions.height else None
    if not isinstance(newest, datetime):
        raise DryRunError("HISTORY_EMPTY", f"rulebook {rulebook_id!r} has no decision to sweep over")
    cutoff = newest - timedelta(days=cost.outcome_horizon_days)
    as_of = iso_ms(newest)
    independent, dependent = _vector_groups(history, compiled, leaf, cutoff)
    tallies = _tallies(independent, dependent, leaf, thresholds)
    scalar, scalar_rows = _scalar_tallies(history, compiled, leaf, thresholds, cutoff)
    for tally, extra in zip(tallies, scalar, strict=True):
        tally.update(extra)
    return {
        "sweep_version": "threshold_sweep_v1", "rulebook_id": rulebook_id, "scope": scope,
        "draft_hash": compiled.rulebook_hash,
        "leaf": {"rule_id": leaf.rule_id, "field": leaf.field, "operator": leaf.operator,
                 "draft_value": leaf.value, "occurrence": leaf_spec[2]},
        "decisions_replayed": sum(tallies[0].values()) if tallies else 0, "scalar_rows": scalar_rows,
        "as_of": as_of, "cost_model": cost.to_dict(),
        "points": [_point(t, tally, cost, as_of) for t, tally in zip(thresholds, tallies, strict=True)],
    }
