"""Threshold sweeps: one numeric comparison of a draft rule, its threshold swept over a range, and
for each threshold the dry-run's figures over full history (approvals, failures caught, successes
lost, review load change, each with its interval), in one vectorized pass.

How one pass answers every threshold. Take the swept leaf `field op t` (op one of gt, gte, lt, lte)
of rule R, not under a `not` (so R's condition is monotone in the leaf). Each typed decision is
evaluated by the compiled draft with the leaf forced false (`low`); the pick with it forced true
(`high`) differs only where no earlier rule and no needs_input decided and R's condition holds with
the leaf true, so R alone is evaluated again. Where both verdicts agree the decision does not
depend on t. Where they differ, the decision goes to R exactly when `field op t` holds, else to
`low`'s pick; with the thresholds sorted, `field op t` holds for a prefix (gt, gte) or a suffix
(lt, lte) of them, so each decision is one position `k` (a search of its value among the
thresholds, searched in the same streaming pass). The decisions are counted there by (stored
verdict, outcome class, young, low and high pick, k): a few thousand groups, whatever the number of
distinct values, and each threshold's tally is a cumulative sum over k. The rows the typed columns
cannot hold exactly (`partial`) are evaluated twice each by the scalar evaluator (the ground truth)
and get their k in exact Python arithmetic; a decision with no facts at all is left out, as the
dry-run leaves it out. The latest outcomes are read once; the class is given
only to the approvals some threshold withdraws (the only rows whose class enters a figure). Every
threshold's figures come from `workbench.migration.impact.impact`, so they mean what
`dry_run.impact` means; a threshold's figures equal a full dry-run of the draft with that
threshold (tests/workbench/test_sweep.py).
"""

from __future__ import annotations

import bisect
import copy
import json
import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, TypedDict, final

import numpy as np
import polars as pl

from gate.clock import iso_ms
from gate.protocol.canonical import sha256_hex
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.rulebook import Condition, RulebookDocument, get_evaluator
from gate.rulebook.operators import OPERATORS, Threshold
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp
from workbench.migration import baseline as baselines
from workbench.migration.compute import NO_OUTCOME, UNOBSERVABLE, latest_outcomes
from workbench.migration.draft import Draft, load_draft
from workbench.migration.errors import DryRunError
from workbench.migration.history import History
from workbench.migration.impact import (
    CostModel,
    CostModelBody,
    ExpectedNetEffect,
    Figure,
    Immature,
    LostSuccesses,
    ReviewChange,
    impact,
    wilson,
)
from workbench.migration.run import load_history

__all__ = ["Comparison", "SweepLeaf", "default_range", "field_spread", "find_leaf", "sweep", "thresholds_between"]

# The numeric threshold comparisons (gt, gte, lt, lte), the operators a sweep can move, and their form.
_THRESHOLDS = {operator.name: operator.threshold for operator in OPERATORS if operator.threshold is not None}
NUMERIC = tuple(_THRESHOLDS)
MAX_THRESHOLDS = 1000
SPREAD_QUANTILES = (0.01, 0.99)  # a sweep's default range: where 98% of a field's observed numbers lie
# The replayed decisions are counted by these (`k`: where the verdict switches among the sorted thresholds, `_switch`).
GROUP_KEYS = ["old_verdict", "outcome_class", "young", "low_verdict", "high_verdict", "k"]


@dataclass(frozen=True)
class SweepLeaf:
    """The swept comparison: rule id, its path inside the rule's condition, field and operator."""

    rule_id: str
    path: tuple[Any, ...]  # keys and indexes from the rule's `condition` to the leaf
    field: str
    operator: str
    value: float


def _leaves(node: Condition | None, path: tuple[Any, ...], under_not: bool,
            out: list[tuple[tuple[Any, ...], Condition, bool]]) -> None:
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


def find_leaf(rulebook: RulebookDocument, rule_id: str, field: str, occurrence: int = 0) -> SweepLeaf:
    """The `occurrence`-th numeric comparison of `field` in rule `rule_id` (DryRunError otherwise)."""
    rule = next((r for r in rulebook["rules"] if r["rule_id"] == rule_id), None)
    if rule is None:
        raise DryRunError("SWEEP_INVALID", f"the draft has no rule {rule_id!r}")
    found: list[tuple[tuple[Any, ...], Condition, bool]] = []
    _leaves(rule["condition"], (), False, found)
    matches = [(p, leaf, neg) for p, leaf, neg in found if leaf.get("field") == field]
    numeric = [(p, leaf, neg) for p, leaf, neg in matches if leaf.get("operator") in NUMERIC]
    if not matches:
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} does not compare field {field!r}")
    if not numeric:
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} compares {field!r} with "
                          f"{matches[0][1].get('operator')!r}, not a numeric comparison ({', '.join(NUMERIC)})")
    if not 0 <= occurrence < len(numeric):
        raise DryRunError("SWEEP_INVALID", f"rule {rule_id!r} has {len(numeric)} numeric comparison(s) of {field!r}; "
                          f"occurrence {occurrence} does not exist")
    path, leaf, under_not = numeric[occurrence]
    if under_not:
        raise DryRunError("SWEEP_INVALID", "the comparison is under a `not`: sweeping it is not supported")
    value = leaf.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise DryRunError("SWEEP_INVALID", "the comparison's value is not a number")
    return SweepLeaf(rule_id, path, field, leaf["operator"], float(value))


class Comparison(TypedDict):
    """A numeric comparison of a draft rule that `sweep` accepts (`numeric_comparisons`)."""

    rule_id: str
    field: str
    occurrence: int  # among the rule's numeric comparisons of `field`, in the condition's order
    operator: str
    value: int | float


def numeric_comparisons(rulebook: RulebookDocument) -> list[Comparison]:
    """Every comparison `sweep` accepts, in rule order: {rule_id, field, occurrence, operator,
    value} (a numeric leaf with a number, not under a `not`), as `find_leaf` would find it."""
    found: list[Comparison] = []
    for rule in rulebook.get("rules", []):
        leaves: list[tuple[tuple[Any, ...], Condition, bool]] = []
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


def with_threshold(rulebook: RulebookDocument, rule_id: str, field: str, occurrence: int, value: float) -> RulebookDocument:
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


def _with_value(rulebook: RulebookDocument, leaf: SweepLeaf, value: float) -> RulebookDocument:
    """A copy of the draft with the swept leaf's value replaced."""
    copied = copy.deepcopy(rulebook)
    node: Any = next(r for r in copied["rules"] if r["rule_id"] == leaf.rule_id)["condition"]
    for step in leaf.path:
        node = node[step]
    node["value"] = value
    return copied


def _forced(condition: Condition, path: tuple[Any, ...], value: bool) -> pl.Expr:
    """The rule's condition as a Polars expression with the leaf at `path` replaced by `value`."""
    if not path:
        return pl.lit(value)
    key, rest = path[0], path[1:]
    if key in ("all", "any"):
        index, tail = rest[0], rest[1:]
        parts = [(_forced(child, tail, value) if i == index else rp._condition(child))
                 for i, child in enumerate(condition["all"] if key == "all" else condition["any"])]
        return pl.all_horizontal(parts) if key == "all" else pl.any_horizontal(parts)
    raise DryRunError("SWEEP_INVALID", "unsupported condition shape for a sweep")  # `not` refused in find_leaf


def _variant(draft: Draft, leaf: SweepLeaf, value: bool) -> rp.CompiledPolarsRulebook:
    rule = next(r for r in draft.rulebook["rules"] if r["rule_id"] == leaf.rule_id)
    expr = _forced(rule["condition"], leaf.path, value)
    rules = tuple((rule_id, expr if rule_id == leaf.rule_id else e) for rule_id, e in draft.polars.rules)
    return replace(draft.polars, rules=rules)


def _high_pick(draft: Draft, leaf: SweepLeaf) -> pl.Expr:
    """The pick with the leaf forced true, from the pick with it forced false (`PICK`): a rule
    before R or needs_input decides either way; otherwise R's condition with the leaf true
    decides whether R is taken (R is monotone in the leaf: taken forced false, taken forced true)."""
    index = [rule_id for rule_id, _ in draft.polars.rules].index(leaf.rule_id)
    rule = next(r for r in draft.rulebook["rules"] if r["rule_id"] == leaf.rule_id)
    low = pl.col(rp.PICK)
    high: pl.Expr = (pl.when(low.is_between(rp._NEEDS_INPUT_INDEX, index - 1)).then(low)
                     .when(_forced(rule["condition"], leaf.path, True)).then(pl.lit(index, dtype=pl.Int32))
                     .otherwise(low))
    return high


def _young(cutoff: datetime) -> pl.Expr:
    return ((pl.col("old_verdict") == "yes") & (pl.col("created_at") > cutoff)).fill_null(False).alias("young")


def _latest(outcomes: pl.LazyFrame) -> pl.DataFrame:
    """`latest_outcomes` (decision_id, outcome_status), read once: where no decision has a second
    outcome (the usual history) each outcome is its decision's latest, and the per-decision sort is
    skipped."""
    read = outcomes.select("decision_id", "reported_at", "receipt_id", "status").collect(engine="streaming")
    if read["decision_id"].n_unique() == read.height:
        return read.select("decision_id", pl.col("status").alias("outcome_status"))
    return latest_outcomes(read.lazy()).collect()


def _classed(rows: pl.LazyFrame, withdrawn: pl.Expr, latest: pl.DataFrame) -> pl.LazyFrame:
    """`rows` with `outcome_class`. The class enters a figure only for an approval that some
    threshold withdraws (`withdrawn`: caught, lost, immature), classed by its latest outcome as
    the dry-run classes a flip; a stored `no` is unobservable, and any other row has class `none`."""
    classes = dict(OUTCOME_EFFECTIVENESS_CLASS)
    return rows.join(latest.lazy(), on="decision_id", how="left").with_columns(
        pl.when(pl.col("old_verdict") == "no").then(pl.lit(UNOBSERVABLE))
        .when(~withdrawn.fill_null(False) | pl.col("outcome_status").is_null()).then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col("outcome_status").replace_strict(classes, default="unknown", return_dtype=pl.String))
        .alias("outcome_class"))


def _vector_groups(history: History, draft: Draft, leaf: SweepLeaf, points: list[float], cutoff: datetime,
                   latest: pl.DataFrame) -> pl.DataFrame:
    """The typed rows counted by `GROUP_KEYS`, in one streaming pass: the rules evaluated once
    with the leaf false (`low`), R alone again with it true (`high`, `_high_pick`), each row's
    `k` (`_switch`) searched in the plan; the picks are named after grouping (outcome table)."""
    low, high = pl.col(rp.PICK), pl.col("high")
    table = rp.outcome_table(draft.polars).select(rp.PICK, "verdict")
    away = [pick for pick, verdict in table.iter_rows() if verdict != "yes"]
    frame = (rp.with_pick(history.base.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_TYPED), _variant(draft, leaf, False))
             .with_columns(_high_pick(draft, leaf).alias("high"))
             .select("decision_id", "old_verdict", _young(cutoff), rp.PICK, "high",
                     # A row whose verdict does not depend on the threshold keeps k 0 (fewer groups).
                     pl.when(low == high).then(pl.lit(0, dtype=pl.Int64)).otherwise(_switch(leaf, points)).alias("k")))
    withdrawn = (pl.col("old_verdict") == "yes") & (low.is_in(away) | high.is_in(away))
    grouped = (_classed(frame, withdrawn, latest)
               .group_by(["old_verdict", "outcome_class", "young", rp.PICK, "high", "k"])
               .agg(pl.len().cast(pl.Int64).alias("count")).collect(engine="streaming"))
    return (grouped.join(table.rename({"verdict": "low_verdict"}), on=rp.PICK, how="left")
            .join(table.rename({rp.PICK: "high", "verdict": "high_verdict"}), on="high", how="left")
            .select(*GROUP_KEYS, "count"))


def _switch(leaf: SweepLeaf, points: list[float]) -> pl.Expr:
    """Each row's `k`: with `points` the thresholds in ascending order, the leaf `x op t` holds
    for the thresholds at positions below k (gt, gte) or from k on (lt, lte), compared in
    float64 as the Polars leaf compares. A value that is not a number never holds: k is 0 (gt,
    gte) or every position (lt, lte)."""
    threshold = _threshold(leaf)
    side: Literal["left", "right"] = "left" if _search_left(threshold) else "right"
    x = rp._col(leaf.field, "n")
    number = rp._kind(leaf.field, fc.KIND_NUMBER).fill_null(False) & x.is_not_null()
    missing = 0 if threshold.rising else len(points)
    search = pl.lit(pl.Series(points, dtype=pl.Float64)).search_sorted(x, side=side).cast(pl.Int64)
    return pl.when(number).then(search).otherwise(pl.lit(missing, dtype=pl.Int64))


_EXTREME = 1.0e308  # a finite JSON number beyond every finite fact: forces the leaf false or true


def _threshold(leaf: SweepLeaf) -> Threshold:
    """The swept operator's threshold form (`find_leaf` takes only numeric comparisons)."""
    return _THRESHOLDS[leaf.operator]


def _search_left(threshold: Threshold) -> bool:
    """Whether a value's `k` among the ascending thresholds is its leftmost insertion point.

    `x > t` holds for the thresholds below x (left), `x >= t` for those up to x (right); `x < t`
    holds from the thresholds above x on (right), `x <= t` from x itself on (left)."""
    return threshold.rising == threshold.strict


def _field_number(facts: Any, field: str) -> Any:
    """The fact at a dotted path when it is a plain number (as the evaluator compares), else None."""
    value = facts
    for part in field.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value if type(value) in (int, float) else None


def _scalar_groups(history: History, draft: Draft, leaf: SweepLeaf, exact: list[float], cutoff: datetime,
                   latest: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The partial rows (few), by the scalar evaluator (the ground truth): each evaluated twice,
    with the leaf forced false and true by an extreme threshold, and `k` found among the
    thresholds (`exact`, ascending) in exact Python arithmetic (no float rounding); counted by
    `GROUP_KEYS` like the vector rows, and how many there were."""
    # A decision with no facts at all is unreplayable and left out, as the dry-run leaves it out.
    partial = (history.base.filter((pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL) & pl.col("facts_json").is_not_null())
               .select("decision_id", "old_verdict", _young(cutoff), "facts_json").collect(engine="streaming"))
    columns: dict[str, list[Any]] = {"low_verdict": [], "high_verdict": [], "k": []}
    if partial.height:
        threshold = _threshold(leaf)
        sign = 1 if threshold.rising else -1
        low = get_evaluator(*_hashed(_with_value(draft.rulebook, leaf, sign * _EXTREME)))
        high = get_evaluator(*_hashed(_with_value(draft.rulebook, leaf, -sign * _EXTREME)))
        search = bisect.bisect_left if _search_left(threshold) else bisect.bisect_right
        missing = 0 if sign == 1 else len(exact)
        for text in partial["facts_json"]:
            facts = json.loads(text)
            columns["low_verdict"].append(low.evaluate(facts).decision)
            columns["high_verdict"].append(high.evaluate(facts).decision)
            x = _field_number(facts, leaf.field)
            columns["k"].append(missing if x is None else search(exact, x))
    rows = partial.drop("facts_json").with_columns(
        pl.Series("low_verdict", columns["low_verdict"], dtype=pl.String),
        pl.Series("high_verdict", columns["high_verdict"], dtype=pl.String),
        pl.Series("k", columns["k"], dtype=pl.Int64))
    withdrawn = (pl.col("old_verdict") == "yes") & ((pl.col("low_verdict") != "yes")
                                                     | (pl.col("high_verdict") != "yes"))
    grouped = _classed(rows.lazy(), withdrawn, latest).group_by(GROUP_KEYS).agg(
        pl.len().cast(pl.Int64).alias("count")).collect()
    return grouped, partial.height


def _tallies(groups: pl.DataFrame, leaf: SweepLeaf, order: list[int]) -> list[Counter[tuple[str, str, str, bool]]]:
    """Per threshold (in the caller's order): (old verdict, new verdict, class, young) → decisions.
    `order[p]`: the caller's index of the threshold at ascending position p."""
    tallies: list[Counter[tuple[str, str, str, bool]]] = [Counter() for _ in order]
    rising = _threshold(leaf).rising
    for (old, name, young, low_verdict, high_verdict), group in groups.group_by(GROUP_KEYS[:-1]):
        counts = np.zeros(len(order) + 1, dtype=np.int64)
        np.add.at(counts, group["k"].to_numpy(), group["count"].to_numpy())
        total = int(counts.sum())
        at_or_below = np.cumsum(counts)[:-1]  # rows whose k is at most each position
        fired = total - at_or_below if rising else at_or_below
        for position, index in enumerate(order):
            hits = int(fired[position])
            if hits:
                tallies[index][(old, high_verdict, name, bool(young))] += hits
            if total - hits:
                tallies[index][(old, low_verdict, name, bool(young))] += total - hits
    return tallies


class SweepPoint(TypedDict):
    """One threshold's figures (`_point`): the dry-run's impact figures, and the approvals."""

    threshold: float
    approvals: Figure
    failures_caught: Figure
    successes_lost: LostSuccesses
    review_load_change: ReviewChange
    immature: Immature
    expected_net_effect: ExpectedNetEffect


class SweptLeaf(TypedDict):
    """`leaf`: the swept comparison, as the draft has it."""

    rule_id: str
    field: str
    operator: str
    draft_value: float
    occurrence: int


@final  # no other member: "refused" tells a refusal apart
class Sweep(TypedDict):
    """A threshold sweep (`threshold_sweep_v1`, `sweep`)."""

    sweep_version: str
    rulebook_id: str
    scope: str | None
    draft_hash: str
    baseline: baselines.Baseline
    leaf: SweptLeaf
    decisions_replayed: int
    scalar_rows: int
    as_of: str
    cost_model: CostModelBody
    points: list[SweepPoint]


@final
class SweepRefused(TypedDict):
    """A sweep the workbench could not run, and why (`Authoring.compute_sweep`)."""

    refused: str


class FieldSpread(TypedDict):
    """How one fact is spread over a rulebook's history (`field_spread`)."""

    field: str
    observed: int
    low: float | None
    high: float | None
    min: float | None
    max: float | None


def _hashed(rulebook: RulebookDocument) -> tuple[RulebookDocument, str]:
    return rulebook, sha256_hex(rulebook)


def _point(threshold: float, tally: Counter[tuple[str, str, str, bool]], cost: CostModel,
           as_of: str | None) -> SweepPoint:
    n = sum(tally.values())
    into = sum(c for (o, v, _, _), c in tally.items() if v == "review" and o != "review")
    out = sum(c for (o, v, _, _), c in tally.items() if o == "review" and v != "review")
    figures = impact(tally, n, cost, as_of=as_of, review_in=into, review_out=out)
    approvals = sum(c for (_, v, _, _), c in tally.items() if v == "yes")
    return {"threshold": threshold,
            "approvals": {"count": approvals, "rate": round(approvals / n, 6) if n else None,
                          "interval_95": wilson(approvals, n)},
            "failures_caught": figures["failures_caught"], "successes_lost": figures["successes_lost"],
            "review_load_change": figures["review_load_change"], "immature": figures["immature"],
            "expected_net_effect": figures["expected_net_effect"]}


def sweep(draft: object, rulebook_id: str, leaf_spec: tuple[str, str, int], thresholds: Sequence[float], *,
          scope: str | None = None, dataset: Any = None, ledger: Any = None, anchors: Any = None,
          cost: CostModel | None = None, baseline: Any = None, baseline_source: str | None = None) -> Sweep:
    """Sweep the threshold of (rule id, field, occurrence) in `draft` over `thresholds`: one
    point per threshold with the dry-run's figures and intervals (module doc). `baseline`,
    `baseline_source`: what each point is compared with, as `dry_run`'s (workbench.migration.baseline)."""
    cost = cost or CostModel()
    compiled = load_draft(draft, rulebook_id)
    base = baselines.compiled(baseline, rulebook_id)
    leaf = find_leaf(compiled.rulebook, *leaf_spec)
    if not thresholds or len(thresholds) > MAX_THRESHOLDS or not all(math.isfinite(t) for t in thresholds):
        raise DryRunError("SWEEP_INVALID", f"give 1 to {MAX_THRESHOLDS} finite thresholds")
    paths = tuple(dict.fromkeys(compiled.polars.paths + (base.polars.paths if base is not None else ())))
    history = load_history(rulebook_id, scope, dataset=dataset, ledger=ledger, paths=paths, anchors=anchors)
    if base is not None:
        history = baselines.against(history, base)
    versions = history.versions_in_scope()
    newest = versions["last"].max() if versions.height else None
    if not isinstance(newest, datetime):
        raise DryRunError("HISTORY_EMPTY", f"rulebook {rulebook_id!r} has no decision to sweep over")
    cutoff = newest - timedelta(days=cost.outcome_horizon_days)
    as_of = iso_ms(newest)
    order = sorted(range(len(thresholds)), key=lambda index: thresholds[index])  # exact, ascending
    exact = [thresholds[index] for index in order]
    latest = _latest(history.outcomes)
    vector = _vector_groups(history, compiled, leaf, [float(t) for t in exact], cutoff, latest)
    scalar, scalar_rows = _scalar_groups(history, compiled, leaf, exact, cutoff, latest)
    tallies = _tallies(pl.concat([vector, scalar]), leaf, order)
    return {
        "sweep_version": "threshold_sweep_v1", "rulebook_id": rulebook_id, "scope": scope,
        "draft_hash": compiled.rulebook_hash, "baseline": baselines.describe(base, baseline_source),
        "leaf": {"rule_id": leaf.rule_id, "field": leaf.field, "operator": leaf.operator,
                 "draft_value": leaf.value, "occurrence": leaf_spec[2]},
        "decisions_replayed": sum(tallies[0].values()) if tallies else 0, "scalar_rows": scalar_rows,
        "as_of": as_of, "cost_model": cost.to_dict(),
        "points": [_point(t, tally, cost, as_of) for t, tally in zip(thresholds, tallies, strict=True)],
    }


def field_spread(rulebook_id: str, field: str, *, scope: str | None = None, dataset: Any = None, ledger: Any = None,
                 anchors: Any = None) -> FieldSpread:
    """The observed distribution of one fact over the rulebook's history, as a sweep reads it:
    {field, observed (decisions where it is a number), low and high (the SPREAD_QUANTILES, linear
    interpolation; None when none is), min, max}. A decision where the fact is missing or not a
    number is not counted, as `field op t` never holds there. DryRunError as the sweep's."""
    history = load_history(rulebook_id, scope, dataset=dataset, ledger=ledger, paths=(field,), anchors=anchors)
    x = rp._col(field, "n")
    typed = (history.base.filter((pl.col(fc.STATE_COLUMN) == fc.STATE_TYPED)
                                 & rp._kind(field, fc.KIND_NUMBER).fill_null(False) & x.is_not_null())
             .select(x.cast(pl.Float64).alias("x")).collect(engine="streaming")["x"])
    partial = (history.base.filter((pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL) & pl.col("facts_json").is_not_null())
               .select("facts_json").collect(engine="streaming")["facts_json"])
    found = [_field_number(json.loads(text), field) for text in partial]
    values = pl.concat([typed, pl.Series("x", [float(v) for v in found if v is not None], dtype=pl.Float64)])
    low_q, high_q = SPREAD_QUANTILES
    some = len(values) > 0
    return {"field": field, "observed": len(values),
            "low": _number(values.quantile(low_q, interpolation="linear")) if some else None,
            "high": _number(values.quantile(high_q, interpolation="linear")) if some else None,
            "min": _number(values.min()) if some else None, "max": _number(values.max()) if some else None}


def _number(value: object) -> float | None:
    """A scalar of a Float64 series (a quantile, its min or max): the float it is, or None."""
    return value if isinstance(value, float) else None


def default_range(value: float, spread: FieldSpread | None) -> tuple[float, float]:
    """A comparison's sweep range: its field's observed spread (`field_spread`: 1st to 99th
    percentile) widened to hold the draft's `value`, its ends rounded outward at a tenth of the
    span's order of magnitude (0 to 1,900, 0.01 to 0.99); with no observed number, 0 to twice
    the value (around 0: -1 to 1)."""
    seen_low, seen_high = (None, None) if spread is None else (spread.get("low"), spread.get("high"))
    if seen_low is None or seen_high is None:
        return (0.0, 2 * value) if value > 0 else (2 * value, 0.0) if value < 0 else (-1.0, 1.0)
    low, high = min(float(seen_low), value), max(float(seen_high), value)
    if low == high:  # every observed number (and the draft's) is one value
        return default_range(value, None) if low == 0 else (min(0.0, 2 * low), max(0.0, 2 * low))
    unit = 10.0 ** (math.floor(math.log10(high - low)) - 1)
    return (float(f"{math.floor(low / unit) * unit:.12g}"), float(f"{math.ceil(high / unit) * unit:.12g}"))
