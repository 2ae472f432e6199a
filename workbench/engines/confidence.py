"""The confidence engine: decision confidence over Polars LazyFrames in the dataset schema.

Same sample and formulas as the decide-time block (`gate/protocol/confidence.py`, docs/intelligence.md
"Decision confidence"): each decision's latest outcome (greatest `(reported_at, receipt_id)`),
mapped to its effectiveness class; similar decisions are those of the policy (and the given
verdict and action) whose latest outcome is success or failure; evidence splits into the
current `policy_version` and the others; then the Wilson lower bound, the policy stability and
the score. The float arithmetic is written in the same order as the scalar code, so both give
the same IEEE doubles; rounding and levels are applied afterwards in plain Python, by the scale
both share (`gate.confidence_scale`: a leaf the engines read as they read `gate.vocabulary`).

Inputs: `decisions` with `decision_id`, `created_at`, `policy_id`, `policy_version`, `verdict`,
`action`; `outcomes` with `decision_id`, `reported_at`, `receipt_id`, `status`; both already
restricted to the caller's scope (the engines never see another scope). `classes` maps every
outcome status to `success`/`failure`/`excluded`/`open` (pass
`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`; the engines import only Polars).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import polars as pl

from gate.confidence_scale import ConfidenceValues, Z, rated
from workbench.engines.common import (
    FAILURE,
    SUCCESS,
    Sample,
    class_expr,
    latest_rows,
    merge_frames,
    merge_sample,
    sample_block,
    sample_groups,
    sample_of_groups,
)

MAX_BUCKETS = 50

__all__ = ["confidence_report", "finalize", "formula_columns", "merge", "partial"]


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


class ConfidenceBucket(ConfidenceValues):
    verdict: str
    action: str | None
    successes: int
    failures: int


class BasedOn(TypedDict):
    """What the figure rests on: the current version, the similar decisions' selection and counts."""

    policy_version: str | None
    verdict: str | None
    action: str | None
    successes: int
    failures: int
    current_version_successes: int
    current_version_failures: int
    min_sample: int


class ConfidenceBody(ConfidenceValues):
    """The confidence report's members (`finalize`; sealed by `workbench.reports.policy`)."""

    policy_id: str
    based_on: BasedOn
    sample: Sample
    buckets: list[ConfidenceBucket]


def _values(row: Mapping[str, Any], min_sample: int) -> ConfidenceValues:
    return rated(row["score"], row["stability"], row["n"], min_sample)


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
) -> ConfidenceBody:
    """The confidence report body (without envelope or hash) for one policy of one scope:
    `finalize(merge([partial(all)]))`.

    `policy_version` is the current version (default: that of the newest decision of the
    policy). `verdict` / `action` select similar decisions (omitted: every value pooled). The
    caller bounds the sample (the API loads the newest `limit` decisions of the policy).
    """
    state = merge([partial(decisions, outcomes, policy_id=policy_id, classes=classes, verdict=verdict,
                           action=action)])
    return finalize(state, policy_id=policy_id, classes=classes, policy_version=policy_version, verdict=verdict,
                    action=action, min_sample=min_sample)


EVIDENCE_KEYS = ["policy_version", "verdict", "action", "effect"]
_NEWEST = ["created_at", "decision_id"]


def partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, *, policy_id: str, classes: Mapping[str, str],
            verdict: str | None = None, action: str | None = None) -> dict[str, pl.DataFrame]:
    """The additive state of one partition: the similar decisions (latest outcome success or
    failure) counted by version, verdict, action and class (`evidence`), the sample of the
    chosen decisions (`sample`), and the policy's newest decision with its version (`newest`)."""
    # The policy's decisions are read once: the newest is taken from them in memory, and the
    # chosen ones are joined to their latest outcome (`latest_rows`).
    policy = decisions.filter(pl.col("policy_id") == policy_id).select(
        "decision_id", "created_at", "policy_version", "verdict", "action").collect()
    chosen = policy
    if verdict is not None:
        chosen = chosen.filter(pl.col("verdict") == verdict)
    if action is not None:
        chosen = chosen.filter(pl.col("action") == action)
    # One join, grouped once by every key a state is keyed by (a few dozen groups): the
    # evidence and the sample are both sums over those groups.
    fine, newest = pl.collect_all([
        sample_groups(latest_rows(chosen, outcomes).lazy(), ["policy_version", "verdict", "action"]),
        policy.lazy().sort(_NEWEST).select(*_NEWEST, "policy_version").tail(1),
    ])
    evidence = (fine.with_columns(class_expr(classes)).filter(pl.col("effect").is_in([SUCCESS, FAILURE]))
                .group_by(EVIDENCE_KEYS).agg(pl.col("decisions").sum().alias("n")))
    return {"evidence": evidence, "newest": newest, "sample": sample_of_groups(fine)}


def merge(partials: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return {
        "evidence": merge_frames([p["evidence"] for p in partials], EVIDENCE_KEYS, {"n": "sum"}),
        "newest": pl.concat([p["newest"] for p in partials], how="vertical_relaxed").sort(_NEWEST).tail(1),
        "sample": merge_sample([p["sample"] for p in partials]),
    }


def finalize(state: Mapping[str, pl.DataFrame], *, policy_id: str, classes: Mapping[str, str],
             policy_version: str | None = None, verdict: str | None = None, action: str | None = None,
             min_sample: int = 10) -> ConfidenceBody:
    """The report body from the merged state (`confidence_report` names the parameters)."""
    if policy_version is None:
        newest = state["newest"]
        policy_version = newest["policy_version"].item() if newest.height else None
    pooled, buckets = _evidence_counts(state["evidence"].lazy(), policy_version)
    row = pooled.row(0, named=True)
    based_on: BasedOn = {
        "policy_version": policy_version,
        "verdict": verdict,
        "action": action,
        "successes": row["s_cur"] + row["s_old"],
        "failures": row["f_cur"] + row["f_old"],
        "current_version_successes": row["s_cur"],
        "current_version_failures": row["f_cur"],
        "min_sample": min_sample,
    }
    return {
        "policy_id": policy_id, **_values(row, min_sample), "based_on": based_on,
        "sample": sample_block(state["sample"], classes),
        "buckets": [{"verdict": b["verdict"], "action": b["action"], **_values(b, min_sample),
                     "successes": b["s_cur"] + b["s_old"], "failures": b["f_cur"] + b["f_old"]}
                    for b in buckets.iter_rows(named=True)],
    }


def _evidence_counts(evidence: pl.LazyFrame, policy_version: str | None) -> list[pl.DataFrame]:
    """The similar decisions' successes and failures (`evidence`: counts `n` by version, verdict,
    action and class) of the current version and of the others, with their formula columns:
    pooled (one row), and per (verdict, action) bucket (the MAX_BUCKETS largest). A decision of
    no version counts as neither, as a null comparison selects nothing."""
    current = pl.col("policy_version") == policy_version if policy_version is not None else pl.lit(False)
    success = pl.col("effect") == SUCCESS
    n = pl.col("n")
    counts = [
        n.filter(success & current).sum().alias("s_cur"), n.filter(~success & current).sum().alias("f_cur"),
        n.filter(success & ~current).sum().alias("s_old"), n.filter(~success & ~current).sum().alias("f_old"),
    ]
    return pl.collect_all([
        formula_columns(evidence.select(counts)),
        formula_columns(evidence.group_by("verdict", "action").agg(counts))
        .sort(["n", "verdict", "action"], descending=[True, False, False]).head(MAX_BUCKETS),
    ])
