"""Cross-customer benchmarks over opt-in anonymized cohorts.

The input holds decisions of the caller's scope and of other scopes (the `scope` column); the
caller passes its own scope and the set of scopes that opted in. Formulas in
docs/intelligence.md, "Benchmarks":

* your_metrics: the caller's success_rate, failure_rate, review_rate, terminal_coverage and
  counts, exactly as the effectiveness report computes them;
* the cohort is every *other* opted-in scope with at least one resolved outcome (success or
  failure) for the policy; percentiles p25 / p50 / p75 (linear interpolation, type 7) are
  taken over the per-scope rates, one value per scope;
* percentiles and `comparison.success_rate_delta_vs_p50` appear only when the caller opted in,
  the cohort has at least `min_cohort_scopes` scopes and `min_cohort_decisions` decisions.
  Nothing else about other scopes is ever returned: no names, no records, no per-scope values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Set
from typing import TypedDict

import polars as pl

from workbench.engines.common import (
    EXCLUDED,
    FAILURE,
    NO_OUTCOME,
    OPEN,
    SUCCESS,
    Sample,
    class_expr,
    latest_joined,
    merge_frames,
    merge_sample,
    percentile,
    r4,
    ratio,
    sample_block,
)

SCOPE_HOW = {"decisions": "sum", "success": "sum", "failure": "sum", "excluded": "sum", "open": "sum",
             "with_outcome": "sum"}
METRICS = ("success_rate", "failure_rate", "review_rate", "terminal_coverage")
PERCENTILES = (("p25", 0.25), ("p50", 0.5), ("p75", 0.75))
DELTA_BAND = 0.05


def partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], *,
            own_scope: str | None, by: Sequence[str] = ()) -> dict[str, pl.DataFrame]:
    """`sample`: the caller's own scope's decisions by latest status (every scope's, when
    `own_scope` is None: rollups keep each partition's and pick the caller's when they are read);
    `scopes`: per scope, the counts the percentiles are taken over. `by`: per partition."""
    fine = (latest_joined(decisions.select("decision_id", "scope", "created_at", *by), outcomes)
            .group_by(*by, "scope", "status").agg(
                pl.len().cast(pl.Int64).alias("decisions"), pl.col("outcome_records").sum().cast(pl.Int64),
                pl.col("created_at").min().alias("first_at"), pl.col("created_at").max().alias("last_at"))
            .collect().with_columns(class_expr(classes)))  # one join; both states from its groups
    per_scope = fine.group_by([*by, "scope"]).agg(
        pl.col("decisions").sum(),
        *[pl.col("decisions").filter(pl.col("effect") == c).sum().alias(c) for c in (SUCCESS, FAILURE, EXCLUDED, OPEN)],
        pl.col("decisions").filter(pl.col("effect") != NO_OUTCOME).sum().alias("with_outcome"),
    )
    own = fine if own_scope is None else fine.filter(pl.col("scope") == own_scope)
    sample = own.group_by(*by, "status").agg(
        pl.col("decisions").sum(), pl.col("outcome_records").sum(), pl.col("first_at").min(),
        pl.col("last_at").max()).sort([*by, "status"], nulls_last=True)
    return {
        "sample": sample,
        "scopes": merge_frames([per_scope], [*by, "scope"], SCOPE_HOW),
    }


def merge(partials: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return {
        "sample": merge_sample([p["sample"] for p in partials]),
        "scopes": merge_frames([p["scopes"] for p in partials], ["scope"], SCOPE_HOW),
    }


class BenchmarkMetrics(TypedDict):
    success_rate: float | None
    failure_rate: float | None
    review_rate: float | None
    terminal_coverage: float | None
    decisions: int
    resolved_decisions: int


class CrossCustomer(TypedDict):
    status: str
    reason: str
    cohort: dict[str, int]
    percentiles: dict[str, dict[str, float | None]]  # metric → {p25, p50, p75}; empty below the floors


class Comparison(TypedDict):
    success_rate_delta_vs_p50: float | None


class BenchmarkBody(TypedDict):
    """The benchmark report's members (`finalize`; sealed by `workbench.reports.policy`)."""

    your_metrics: BenchmarkMetrics
    cross_customer: CrossCustomer
    comparison: Comparison
    recommendation: str
    sample: Sample


def metrics_of(row: Mapping[str, int]) -> dict[str, float | None]:
    resolved = row["success"] + row["failure"]
    return {
        "success_rate": ratio(row["success"], resolved),
        "failure_rate": ratio(row["failure"], resolved),
        "review_rate": ratio(row["open"], row["with_outcome"]),
        "terminal_coverage": ratio(row["success"] + row["failure"] + row["excluded"], row["decisions"]),
    }


def finalize(state: Mapping[str, pl.DataFrame], classes: Mapping[str, str], *, own_scope: str,
             opted_in: Set[str], min_cohort_scopes: int, min_cohort_decisions: int) -> BenchmarkBody:
    rows = {r["scope"]: r for r in state["scopes"].iter_rows(named=True)} if state["scopes"].height else {}
    zero = dict.fromkeys(SCOPE_HOW, 0)
    own = rows.get(own_scope, zero)
    mine = metrics_of(own)
    your_metrics: BenchmarkMetrics = {
        "success_rate": r4(mine["success_rate"]), "failure_rate": r4(mine["failure_rate"]),
        "review_rate": r4(mine["review_rate"]), "terminal_coverage": r4(mine["terminal_coverage"]),
        "decisions": own["decisions"], "resolved_decisions": own["success"] + own["failure"]}
    cohort = [r for scope, r in sorted(rows.items())
              if scope != own_scope and scope in opted_in and r["success"] + r["failure"] > 0]
    cohort_decisions = sum(r["decisions"] for r in cohort)
    thresholds = {"min_cohort_scopes": min_cohort_scopes, "min_cohort_decisions": min_cohort_decisions}
    percentiles: dict[str, dict[str, float | None]] = {}
    delta = None
    if own_scope not in opted_in:
        status = "not_opted_in"
        reason = ("your scope has not opted in to anonymized benchmarks, so it is neither compared nor "
                  "part of any cohort; an operator can opt it in (gate scopes benchmarks --opt-in)")
        recommendation = "opt_in_to_compare"
        cohort_view = dict(thresholds)
    elif len(cohort) < min_cohort_scopes or cohort_decisions < min_cohort_decisions:
        status = "insufficient_cohort"
        reason = (f"fewer than {min_cohort_scopes} other opted-in scopes with resolved outcomes for this "
                  f"policy, or fewer than {min_cohort_decisions} decisions among them; nothing is compared")
        recommendation = "insufficient_cohort"
        cohort_view = dict(thresholds)
    else:
        status = "available"
        reason = "percentiles over other opted-in scopes, one value per scope"
        for name in METRICS:
            values = [v for v in (metrics_of(r)[name] for r in cohort) if v is not None]
            if len(values) >= min_cohort_scopes:
                percentiles[name] = {label: r4(percentile(values, q)) for label, q in PERCENTILES}
        p50 = percentiles.get("success_rate", {}).get("p50")
        if mine["success_rate"] is not None and p50 is not None:
            delta = mine["success_rate"] - p50
        if delta is None:
            recommendation = "insufficient_data"
        elif delta >= DELTA_BAND:
            recommendation = "above_cohort"
        elif delta <= -DELTA_BAND:
            recommendation = "below_cohort"
        else:
            recommendation = "in_line_with_cohort"
        cohort_view = {"scopes": len(cohort), "decisions": cohort_decisions, **thresholds}
    return {
        "your_metrics": your_metrics,
        "cross_customer": {"status": status, "reason": reason, "cohort": cohort_view, "percentiles": percentiles},
        "comparison": {"success_rate_delta_vs_p50": r4(delta)},
        "recommendation": recommendation,
        "sample": sample_block(state["sample"], classes),
    }


def benchmarks(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], *,
               own_scope: str, opted_in: Set[str], min_cohort_scopes: int,
               min_cohort_decisions: int) -> BenchmarkBody:
    state = merge([partial(decisions, outcomes, classes, own_scope=own_scope)])
    return finalize(state, classes, own_scope=own_scope, opted_in=opted_in,
                    min_cohort_scopes=min_cohort_scopes, min_cohort_decisions=min_cohort_decisions)
