"""The confidence engine: decision confidence over Polars LazyFrames in the dataset schema.

Same sample and formulas as the decide-time block (`gate/protocol/confidence.py`, docs/intelligence.md
"Decision confidence"): each decision's latest outcome (greatest `(reported_at, receipt_id)`),
mapped to its effectiveness class; similar decisions are those of the policy (and the given
verdict and action) whose latest outcome is success or failure; evidence splits into the
current `policy_version` and the others; then the Wilson lower bound, the policy stability and
the score. The float arithmetic is written in the same order as the scalar code, so both give
the same IEEE doubles; rounding and levels are applied afterwards in plain Python.

Inputs: `decisions` with `decision_id`, `created_at`, `policy_id`, `policy_version`, `verdict`,
`action`; `outcomes` with `decision_id`, `reported_at`, `receipt_id`, `status`; both already
restricted to the caller's scope (the engines never see another scope). `classes` maps every
outcome status to `success`/`failure`/`excluded`/`open` (pass
`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`; the engines import only Polars).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from workbench.engines.common import (
    FAILURE,
    SUCCESS,
    class_expr,
    latest_joined,
    sample_block,
)

Z = 1.96
HIGH_SCORE = 0.8
MEDIUM_SCORE = 0.5
DIGITS = 6
RECOMMENDATIONS = {
    "insufficient_data": "insufficient_data_collect_outcomes",
    "high": "high_confidence_proceed",
    "medium": "medium_confidence_monitor",
    "low": "low_confidence_review",
}
MAX_BUCKETS = 50

__all__ = ["confidence_report", "formula_columns"]


def formula_columns(frame: pl.LazyFrame) -> pl.LazyFrame:
    """Add `lower`, `stability` and `score` to a frame of s_cur, f_cur, s_old, f_old counts."""
    s_cur, f_cur, s_old, f_old = (pl.col(name).cast(pl.Int64) for name in ("s_cur", "f_cur", "s_old", "f_old"))
    s = s_cur + s_old
    n = s + f_cur + f_old
    n_cur, n_old = s_cur + f_cur, s_old + f_old
    nf = n.cast(pl.Float64)
    p = s.cast(pl.Float64) / nf
    z2 = Z * Z
    centre = p + pl.lit(z2) / (2 * n).cast(pl.Float64)
    margin = pl.lit(Z) * (p * (1 - p) / nf + pl.lit(z2) / (4 * n * n).cast(pl.Float64)).sqrt()
    lower = pl.when(n > 0).then(
        pl.max_horizontal(pl.lit(0.0), (centre - margin) / (1 + pl.lit(z2) / nf))).otherwise(0.0)
    share = pl.when(n > 0).then(n_cur.cast(pl.Float64) / nf).otherwise(0.0)
    p_cur = (s_cur + 1).cast(pl.Float64) / (n_cur + 2).cast(pl.Float64)
    p_old = (s_old + 1).cast(pl.Float64) / (n_old + 2).cast(pl.Float64)
    stability = 1 - (1 - share) * (p_cur - p_old).abs()
    return frame.with_columns(n.alias("n"), lower.alias("lower"), stability.alias("stability")) \
        .with_columns((pl.col("lower") * pl.col("stability")).alias("score"))


def _level(score: float, n: int, min_sample: int) -> str:
    if n < min_sample:
        return "insufficient_data"
    if score >= HIGH_SCORE:
        return "high"
    if score >= MEDIUM_SCORE:
        return "medium"
    return "low"


def _values(row: Mapping[str, Any], min_sample: int) -> dict[str, Any]:
    score, stability = round(row["score"], DIGITS), round(row["stability"], DIGITS)
    level = _level(score, row["n"], min_sample)
    return {"score": score, "level": level, "similar_decisions": row["n"], "policy_stability": stability,
            "recommendation": RECOMMENDATIONS[level]}


def confidence_report(
    decisions: pl.LazyFrame,
    outcomes: pl.LazyFrame,
    *,
    policy_id: str,
    classes: Mapping[str, str],
    policy_version: str | None = None,
    verdict: str | None = None,
    action: str | None = None,
    min_sample: int = 10,
) -> dict[str, Any]:
    """The confidence report body (without envelope or hash) for one policy of one scope.

    `policy_version` is the current version (default: that of the newest decision of the
    policy). `verdict` / `action` select similar decisions (omitted: every value pooled). The
    caller bounds the sample (the API loads the newest `limit` decisions of the policy).
    """
    policy = decisions.filter(pl.col("policy_id") == policy_id).select(
        "decision_id", "created_at", "policy_version", "verdict", "action")
    if policy_version is None:
        policy_version = _newest_version(policy)
    chosen = policy
    if verdict is not None:
        chosen = chosen.filter(pl.col("verdict") == verdict)
    if action is not None:
        chosen = chosen.filter(pl.col("action") == action)
    # One pass: the decisions joined to their latest outcome, grouped by everything below reads.
    fine = latest_joined(chosen, outcomes).group_by("verdict", "action", "policy_version", "status").agg(
        pl.len().cast(pl.Int64).alias("decisions"), pl.col("outcome_records").sum().cast(pl.Int64),
        pl.col("created_at").min().alias("first_at"), pl.col("created_at").max().alias("last_at"),
    ).collect().with_columns(class_expr(classes))
    similar = fine.lazy().filter(pl.col("effect").is_in([SUCCESS, FAILURE]))
    pooled, buckets = _evidence_counts(similar, policy_version)
    sample = sample_block(fine.group_by("status").agg(
        pl.col("decisions").sum(), pl.col("outcome_records").sum(), pl.col("first_at").min(),
        pl.col("last_at").max()).sort("status", nulls_last=True), classes)
    row = pooled.row(0, named=True)
    report: dict[str, Any] = {"policy_id": policy_id}
    report.update(_values(row, min_sample))
    report["based_on"] = {
        "policy_version": policy_version,
        "verdict": verdict,
        "action": action,
        "successes": row["s_cur"] + row["s_old"],
        "failures": row["f_cur"] + row["f_old"],
        "current_version_successes": row["s_cur"],
        "current_version_failures": row["f_cur"],
        "min_sample": min_sample,
    }
    report["sample"] = sample
    report["buckets"] = [
        {"verdict": b["verdict"], "action": b["action"], **_values(b, min_sample),
         "successes": b["s_cur"] + b["s_old"], "failures": b["f_cur"] + b["f_old"]}
        for b in buckets.iter_rows(named=True)
    ]
    return report


def _newest_version(policy: pl.LazyFrame) -> str | None:
    """The `policy_version` of the policy's newest decision (by created_at, then decision_id)."""
    newest = policy.filter(pl.col("created_at").eq_missing(pl.col("created_at").max())).select(
        pl.col("policy_version").sort_by("decision_id").last()).collect()  # no sort of every decision
    return newest.item() if newest.height else None


def _evidence_counts(similar: pl.LazyFrame, policy_version: str | None) -> list[pl.DataFrame]:
    """The similar decisions' (grouped, with their `decisions` count) successes and failures of the current version and of the others,
    with their formula columns: pooled (one row), and per (verdict, action) bucket (the
    MAX_BUCKETS largest)."""
    current = pl.col("policy_version") == policy_version if policy_version is not None else pl.lit(False)
    success = pl.col("effect") == SUCCESS
    decisions = pl.col("decisions")  # `similar` is grouped: each row counts its decisions
    counts = [
        decisions.filter(success & current).sum().alias("s_cur"),
        decisions.filter(~success & current).sum().alias("f_cur"),
        decisions.filter(success & ~current).sum().alias("s_old"),
        decisions.filter(~success & ~current).sum().alias("f_old"),
    ]
    return pl.collect_all([
        formula_columns(similar.select(counts)),
        formula_columns(similar.group_by("verdict", "action").agg(counts))
        .sort(["n", "verdict", "action"], descending=[True, False, False]).head(MAX_BUCKETS),
    ])
