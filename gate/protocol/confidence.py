"""Decision confidence (`decision_confidence_v1`): how well decisions like this one turned out.

Pure scalar code over outcome counters; docs/intelligence.md ("Decision confidence") states
every formula. The same formulas run over Polars LazyFrames in
`workbench.engines.confidence`; a differential test proves both give the same block.

Inputs are the terminal outcome classes of *similar decisions*: same scope, `policy_id`,
`verdict` and `action`, classified by their latest Outcome Record (by `reported_at`, then
receipt id) through `gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`; only `success` and
`failure` count. Evidence is split into the current `policy_version` and all other versions.

* ``n = s + f`` (similar decisions), ``s`` successes, ``f`` failures.
* ``lower`` = Wilson score lower bound of ``s / n`` at ``z = 1.96`` (0 when ``n = 0``).
* ``p_cur = (s_cur + 1) / (n_cur + 2)``, ``p_old = (s_old + 1) / (n_old + 2)`` (Laplace).
* ``share = n_cur / n`` (0 when ``n = 0``).
* ``policy_stability = 1 - (1 - share) * |p_cur - p_old|``.
* ``score = lower * policy_stability``.
* ``level``: ``insufficient_data`` when ``n < min_sample``, else ``high`` (score >= 0.8),
  ``medium`` (score >= 0.5) or ``low``; ``recommendation`` follows from the level.
Scores and stability are rounded to 6 decimals (after all arithmetic).
The z, the rounding, the levels and the recommendations are `gate.confidence_scale`'s, which the
Polars engine reads too.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gate.confidence_scale import ConfidenceValues, Z, rated
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.vocabulary import DECISION_CONFIDENCE_VERSION

MIN_SAMPLE_DEFAULT = 10

@dataclass(frozen=True, slots=True)
class ConfidenceCounts:
    """Terminal outcome classes of the similar decisions, split by policy version."""

    current_successes: int = 0
    current_failures: int = 0
    other_successes: int = 0
    other_failures: int = 0

    @property
    def successes(self) -> int:
        return self.current_successes + self.other_successes

    @property
    def failures(self) -> int:
        return self.current_failures + self.other_failures


def wilson_lower(successes: int, n: int, z: float = Z) -> float:
    """Wilson score interval lower bound of successes / n (0.0 when n is 0)."""
    if n <= 0:
        return 0.0
    p = successes / n
    z2 = z * z
    centre = p + z2 / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return max(0.0, (centre - margin) / (1 + z2 / n))


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> list[float] | None:
    """The Wilson score interval of successes / n, clipped to [0, 1] and rounded to 6 digits
    (None when n is 0): the interval the release figures and the dry-run's impact state."""
    if n <= 0:
        return None
    p = successes / n
    z2 = z * z
    centre = (p + z2 / (2 * n)) / (1 + z2 / n)
    margin = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return [round(max(0.0, centre - margin), 6), round(min(1.0, centre + margin), 6)]


def policy_stability(counts: ConfidenceCounts) -> float:
    """1 - (1 - share of current-version evidence) * |smoothed current rate - smoothed older rate|."""
    n_cur = counts.current_successes + counts.current_failures
    n_old = counts.other_successes + counts.other_failures
    n = n_cur + n_old
    share = n_cur / n if n else 0.0
    p_cur = (counts.current_successes + 1) / (n_cur + 2)
    p_old = (counts.other_successes + 1) / (n_old + 2)
    return 1 - (1 - share) * abs(p_cur - p_old)


class ConfidenceBasis(TypedDict):
    """`based_on`: the counts the score was computed from."""

    policy_version: str | None
    successes: int
    failures: int
    current_version_successes: int
    current_version_failures: int
    min_sample: int


class DecisionConfidence(TypedDict):
    """The record's `decision_confidence` member, in the order `confidence_block` writes it."""

    decision_confidence_version: str
    score: float
    level: str
    similar_decisions: int
    policy_stability: float
    recommendation: str
    based_on: ConfidenceBasis
    confidence_hash: str


def confidence_values(counts: ConfidenceCounts, min_sample: int = MIN_SAMPLE_DEFAULT) -> ConfidenceValues:
    """`score`, `level`, `similar_decisions`, `policy_stability`, `recommendation` from counts."""
    n = counts.successes + counts.failures
    stability = policy_stability(counts)
    return rated(wilson_lower(counts.successes, n) * stability, stability, n, min_sample)


def confidence_block(counts: ConfidenceCounts, *, policy_version: str | None,
                     min_sample: int = MIN_SAMPLE_DEFAULT) -> DecisionConfidence:
    """The record's `decision_confidence` member, with its `confidence_hash`."""
    values = confidence_values(counts, min_sample)
    based_on: ConfidenceBasis = {
        "policy_version": policy_version,
        "successes": counts.successes,
        "failures": counts.failures,
        "current_version_successes": counts.current_successes,
        "current_version_failures": counts.current_failures,
        "min_sample": min_sample,
    }
    block: DecisionConfidence = {"decision_confidence_version": DECISION_CONFIDENCE_VERSION, **values,
                                 "based_on": based_on, "confidence_hash": ""}
    block["confidence_hash"] = confidence_hash(block)  # over the block without it (its value is left out)
    return block


def confidence_hash(block: Mapping[str, Any]) -> str:
    """sha256 of the canonical block without its `confidence_hash` (reference facts §6)."""
    return sha256_hex({k: v for k, v in block.items() if k != "confidence_hash"})


def confidence_signature_payload(decision_id: Any, key_id: Any, confidence_hash_value: Any) -> bytes:
    """What `confidence_signature` signs: canon({confidence_hash, decision_id, key_id}).

    The block is outside record_hash (reference facts §5), so the gate signs it on its own with
    the receipt key, like the `audit_chain` member."""
    return canonical_bytes({"confidence_hash": confidence_hash_value, "decision_id": decision_id,
                            "key_id": key_id})


