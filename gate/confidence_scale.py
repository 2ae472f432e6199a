"""The confidence scale (`decision_confidence_v1`; docs/intelligence.md, "Decision confidence"):
the z of the Wilson bound, the rounding, the level a score reaches and the advice each level gives.

Two computations state a confidence: the decide-time block signed into records
(`gate.protocol.confidence`, scalar, from counters) and the confidence report
(`workbench.engines.confidence`, Polars, from the dataset). They must say the same for the same
evidence (a differential test holds them to it), so what turns their figures into a level and
a recommendation is defined here, once. A leaf with no imports of its own, like
`gate.vocabulary`: the engines, which may not import the core, read it as they read that one.
Changing a value here changes the hash of new records' confidence blocks: treat as frozen."""

from __future__ import annotations

from typing import Literal, TypedDict

__all__ = [
    "DIGITS",
    "HIGH_SCORE",
    "MEDIUM_SCORE",
    "RECOMMENDATIONS",
    "ConfidenceLevel",
    "ConfidenceValues",
    "Z",
    "level_for",
    "rated",
]

Z = 1.96  # the Wilson score bound's z (95 %)
HIGH_SCORE = 0.8  # a score from here up is `high`
MEDIUM_SCORE = 0.5  # from here up (below HIGH_SCORE) `medium`; lower is `low`
DIGITS = 6  # scores and stabilities are rounded to this many decimals, after all arithmetic

ConfidenceLevel = Literal["insufficient_data", "high", "medium", "low"]
RECOMMENDATIONS: dict[ConfidenceLevel, str] = {
    "insufficient_data": "insufficient_data_collect_outcomes",
    "high": "high_confidence_proceed",
    "medium": "medium_confidence_monitor",
    "low": "low_confidence_review",
}


class ConfidenceValues(TypedDict):
    """What a confidence says: the score, its level, the sample size, the stability and the advice
    (the record's block and each figure of the report begin with these)."""

    score: float
    level: ConfidenceLevel
    similar_decisions: int
    policy_stability: float
    recommendation: str


def level_for(score: float, n: int, min_sample: int) -> ConfidenceLevel:
    """`insufficient_data` under `min_sample` similar decisions, else by the (rounded) score."""
    if n < min_sample:
        return "insufficient_data"
    if score >= HIGH_SCORE:
        return "high"
    if score >= MEDIUM_SCORE:
        return "medium"
    return "low"


def rated(score: float, stability: float, n: int, min_sample: int) -> ConfidenceValues:
    """The values of a computed `score` and `stability` over `n` similar decisions: both rounded to
    `DIGITS`, then the level of the rounded score and its recommendation."""
    score, stability = round(score, DIGITS), round(stability, DIGITS)
    level = level_for(score, n, min_sample)
    return {"score": score, "level": level, "similar_decisions": n, "policy_stability": stability,
            "recommendation": RECOMMENDATIONS[level]}
