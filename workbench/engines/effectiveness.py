"""Policy effectiveness: how the decisions of a policy turned out, from the latest Outcome
Record of each decision (spec: "Effectiveness uses the latest Outcome Record per decision").

Formulas (docs/intelligence.md, "Effectiveness"): with S, F, X, O the decisions whose latest
outcome is in the success, failure, excluded and open class, N the decisions considered and
R = S + F the resolved ones,

    success_rate = S / R        failure_rate = F / R
    review_rate = O / (decisions with an outcome)         terminal_coverage = (S + F + X) / N
    effectiveness_score = success_rate
    confidence = (1 − width of the 95% Wilson interval of S / R) × terminal_coverage
    recommendation = insufficient_data (R < min_sample) | healthy (score ≥ 0.8)
                     | monitor (score ≥ 0.6) | review_policy
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import polars as pl

from workbench.engines.common import (
    EXCLUDED,
    FAILURE,
    OPEN,
    SUCCESS,
    Sample,
    class_counts,
    latest_joined,
    merge_sample,
    r4,
    ratio,
    sample_block,
    sample_partial,
    wilson,
)


class EffectivenessMetrics(TypedDict):
    success_rate: float | None
    failure_rate: float | None
    review_rate: float | None
    excluded_rate: float | None
    terminal_coverage: float | None
    outcome_coverage: float | None
    success_rate_interval: list[float | None] | None  # [low, high] (each rounded with r4)
    resolved_decisions: int


class EffectivenessBody(TypedDict):
    """The effectiveness report's members (`finalize`; sealed by `workbench.reports.policy`)."""

    effectiveness_score: float | None
    confidence: float | None
    recommendation: str
    metrics: EffectivenessMetrics
    sample: Sample


HEALTHY_AT = 0.8
MONITOR_AT = 0.6


def partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, by: Sequence[str] = ()) -> dict[str, pl.DataFrame]:
    """The additive state of one partition: decisions per latest outcome status (per partition
    of the `by` key columns, keys first, when given)."""
    joined = latest_joined(decisions.select("decision_id", "created_at", *by), outcomes)
    return {"sample": sample_partial(joined, by)}


def merge(partials: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return {"sample": merge_sample([p["sample"] for p in partials])}


def finalize(state: Mapping[str, pl.DataFrame], classes: Mapping[str, str], *, min_sample: int) -> EffectivenessBody:
    """The report body (without envelope or hash)."""
    sample = state["sample"]
    counts = class_counts(sample, classes)
    block = sample_block(sample, classes)
    n = block["decisions_considered"]
    with_outcome = block["decisions_with_outcome"]
    s, f, x, o = counts[SUCCESS], counts[FAILURE], counts[EXCLUDED], counts[OPEN]
    resolved = s + f
    success_rate = ratio(s, resolved)
    coverage = ratio(s + f + x, n)
    interval = wilson(s, resolved)
    confidence = 0.0 if interval is None else (1 - (interval[1] - interval[0])) * (coverage or 0.0)
    if resolved < min_sample or success_rate is None:  # None: nothing resolved (min_sample 0)
        recommendation = "insufficient_data"
    elif success_rate >= HEALTHY_AT:
        recommendation = "healthy"
    elif success_rate >= MONITOR_AT:
        recommendation = "monitor"
    else:
        recommendation = "review_policy"
    return {
        "effectiveness_score": r4(success_rate),
        "confidence": r4(confidence),
        "recommendation": recommendation,
        "metrics": {
            "success_rate": r4(success_rate),
            "failure_rate": r4(ratio(f, resolved)),
            "review_rate": r4(ratio(o, with_outcome)),
            "excluded_rate": r4(ratio(x, with_outcome)),
            "terminal_coverage": r4(coverage),
            "outcome_coverage": r4(ratio(with_outcome, n)),
            "success_rate_interval": None if interval is None else [r4(interval[0]), r4(interval[1])],
            "resolved_decisions": resolved,
        },
        "sample": block,
    }


def effectiveness(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], *,
                  min_sample: int) -> EffectivenessBody:
    """Whole-sample effectiveness: finalize(merge([partial(all)]))."""
    return finalize(merge([partial(decisions, outcomes)]), classes, min_sample=min_sample)


def by_group(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str], key: str, *,
             min_sample: int) -> list[tuple[Any, EffectivenessBody]]:
    """Effectiveness of each value of the decisions' column `key` (a null value is a group too):
    each group's body is `finalize` of that group's sample, so a group's success rate and its
    interval mean exactly what the whole report's mean. Groups in descending decision count,
    ties by value (nulls last)."""
    sample = partial(decisions, outcomes, by=[key])["sample"]
    if not sample.height:
        return []
    sizes = sample.group_by(key).agg(pl.col("decisions").sum()).sort(
        ["decisions", key], descending=[True, False], nulls_last=True)
    return [(value, finalize({"sample": sample.filter(pl.col(key).eq_missing(value)).drop(key)}, classes,
                             min_sample=min_sample))
            for value in sizes[key].to_list()]
