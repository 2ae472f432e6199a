"""A policy's course month by month: decision volume by verdict and the effectiveness report of
each month's decisions.

Each month's figures are the effectiveness engine run over that month's decisions (and all
their outcomes), so a month's `effectiveness_score` means exactly what the effectiveness
report means; nothing is recomputed with another formula. Used by the workbench's overview
and the notebooks.

`monthly_from_rollups` gives the same table from the dataset's report rollups
(`workbench.dataset.rollups`), which are kept per decision month: each month's effectiveness is the
engine's merge and finalize of that month's `effectiveness.sample` rows, and the volume by
verdict is summed from the `anomalies.versions` rows (decisions per version and verdict), so no
decision row is read. A test holds both tables equal.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl

from gate.vocabulary import VERDICTS
from workbench.dataset.load import Frames
from workbench.engines import effectiveness as effectiveness_engine
from workbench.reports.policy import CLASSES, ReportParams, effectiveness_report

if TYPE_CHECKING:
    from workbench.dataset.rollups import RollupView

MONTH = "rollup_month"
SCORES = {"month": pl.String, "effectiveness_score": pl.Float64, "recommendation": pl.String, "resolved": pl.Int64,
          "interval_low": pl.Float64, "interval_high": pl.Float64}


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
    scores = pl.DataFrame(rows, schema=SCORES)
    return volume.join(scores, on="month", how="left").sort("month")


def monthly_from_rollups(view: RollupView | None, *, min_sample: int = 10) -> pl.DataFrame | None:
    """`monthly` of a whole-history selection from its rollups (`workbench.dataset.rollups.RollupView`
    of one policy, every version), or None when there are none usable with `CLASSES`."""
    if view is None or not view.usable(CLASSES):
        return None
    versions = view.by_month("anomalies.versions")
    volume = (
        versions.group_by(MONTH)
        .agg(pl.col("decisions").sum().cast(pl.UInt32),
             *[pl.col("decisions").filter(pl.col("verdict") == verdict).sum().cast(pl.UInt32).alias(verdict)
               for verdict in VERDICTS])
        .rename({MONTH: "month"})
        .sort("month")
    )
    samples = view.by_month("effectiveness.sample")
    rows = []
    for month in volume["month"].to_list():
        sample = samples.filter(pl.col(MONTH) == month).drop(MONTH)
        body = effectiveness_engine.finalize(effectiveness_engine.merge([{"sample": sample}]), CLASSES,
                                             min_sample=min_sample)
        interval = body["metrics"]["success_rate_interval"] or [None, None]
        rows.append({"month": month, "effectiveness_score": body["effectiveness_score"],
                     "recommendation": body["recommendation"], "resolved": body["metrics"]["resolved_decisions"],
                     "interval_low": interval[0], "interval_high": interval[1]})
    return volume.join(pl.DataFrame(rows, schema=SCORES), on="month", how="left").sort("month")


def version_changes(frames: Frames) -> pl.DataFrame:
    """One row per policy version, oldest first: `policy_version` and the `month` (and
    `first_at`) of its first decision, so a chart can mark where each version took over."""
    return (frames.decisions.filter(pl.col("policy_version").is_not_null())
            .group_by("policy_version").agg(pl.col("created_at").min().alias("first_at"),
                                             pl.col("month").min().alias("month"))
            .sort(["first_at", "policy_version"]).collect())


def version_changes_from_rollups(view: RollupView | None) -> pl.DataFrame | None:
    """`version_changes` of a whole-history selection from its rollups (the anomaly engine's
    `versions` state keeps each version's first decision time per month), or None without
    usable rollups."""
    if view is None or not view.usable(CLASSES):
        return None
    versions = view.by_month("anomalies.versions").filter(pl.col("policy_version").is_not_null())
    return (versions.group_by("policy_version")
            .agg(pl.col("first_at").min().alias("first_at"), pl.col(MONTH).min().alias("month"))
            .sort(["first_at", "policy_version"]))
