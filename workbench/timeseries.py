"""A policy's course month by month: decision volume by verdict and the effectiveness report of
each month's decisions.

Each month's figures are the effectiveness engine run over that month's decisions (and all
their outcomes), so a month's `effectiveness_score` means exactly what the effectiveness
report means; nothing is recomputed with another formula. Used by the workbench's overview
and the notebooks.
"""

from __future__ import annotations

import polars as pl

from workbench.load import Frames
from workbench.policy_reports import ReportParams, effectiveness_report

VERDICTS = ("yes", "no", "review")


def monthly(frames: Frames, policy_id: str, *, min_sample: int = 10) -> pl.DataFrame:
    """One row per month with decisions: `month`, `decisions`, one count per verdict,
    `effectiveness_score`, `recommendation`, `resolved` (success + failure) and the 95% Wilson
    interval of the score (`interval_low`, `interval_high`; null without resolved decisions)."""
    volume = (
        frames.decisions.group_by("month")
        .agg(pl.len().alias("decisions"),
             *[(pl.col("verdict") == verdict).sum().alias(verdict) for verdict in VERDICTS])
        .sort("month")
        .collect()
    )
    params = ReportParams(limit=10_000, min_sample=min_sample)
    rows = []
    for month in volume["month"].to_list():
        decisions = frames.decisions.filter(pl.col("month") == month)
        outcomes = frames.outcomes.join(decisions.select("decision_id"), on="decision_id", how="semi")
        report = effectiveness_report(Frames(decisions, outcomes), policy_id, params, with_health=False)
        interval = report["metrics"]["success_rate_interval"] or [None, None]
        rows.append({"month": month, "effectiveness_score": report["effectiveness_score"],
                     "recommendation": report["recommendation"],
                     "resolved": report["metrics"]["resolved_decisions"],
                     "interval_low": interval[0], "interval_high": interval[1]})
    scores = pl.DataFrame(rows, schema={"month": pl.String, "effectiveness_score": pl.Float64,
                                        "recommendation": pl.String, "resolved": pl.Int64,
                                        "interval_low": pl.Float64, "interval_high": pl.Float64})
    return volume.join(scores, on="month", how="left").sort("month")


def version_changes(frames: Frames) -> pl.DataFrame:
    """One row per policy version, oldest first: `policy_version` and the `month` (and
    `first_at`) of its first decision, so a chart can mark where each version took over."""
    return (frames.decisions.filter(pl.col("policy_version").is_not_null())
            .group_by("policy_version").agg(pl.col("created_at").min().alias("first_at"),
                                             pl.col("month").min().alias("month"))
            .sort(["first_at", "policy_version"]).collect())
