"""The confidence formulas (gate.protocol.confidence) and the counter moves (gate.ledger.confidence)."""

from __future__ import annotations

import math

import pytest

from gate.confidence_scale import level_for
from gate.ledger import Ledger
from gate.ledger.confidence import Bucket, OutcomeMove, apply_outcome
from gate.protocol.confidence import (
    ConfidenceCounts,
    confidence_block,
    confidence_hash,
    confidence_values,
    policy_stability,
    wilson_lower,
)


def test_wilson_lower_bound_known_values():
    assert wilson_lower(0, 0) == 0.0
    assert wilson_lower(0, 5) == 0.0
    # 10 of 10 at z = 1.96: (1 + z²/20 - z·sqrt(z²/400)) / (1 + z²/10) = 1 / (1 + z²/10)
    assert math.isclose(wilson_lower(10, 10), 1 / (1 + 1.96 ** 2 / 10))
    assert math.isclose(wilson_lower(95, 100), 0.8882, abs_tol=1e-4)
    assert wilson_lower(50, 100) < 0.5 < wilson_lower(60, 100)


def test_stability_is_one_when_all_evidence_is_from_the_current_version():
    assert policy_stability(ConfidenceCounts(30, 3, 0, 0)) == 1.0
    assert policy_stability(ConfidenceCounts(0, 0, 0, 0)) == 1.0


def test_stability_drops_with_old_evidence_that_disagrees():
    agree = policy_stability(ConfidenceCounts(9, 1, 90, 10))
    disagree = policy_stability(ConfidenceCounts(1, 9, 90, 10))
    assert 0.9 < agree <= 1.0 and disagree < 0.5
    # A brand-new version (no evidence yet) against a 0.9 history: 1 - |0.5 - 91/102|
    assert math.isclose(policy_stability(ConfidenceCounts(0, 0, 90, 10)), 1 - abs(0.5 - 91 / 102))


@pytest.mark.parametrize("score, n, level", [
    (0.95, 9, "insufficient_data"), (0.8, 10, "high"), (0.7999, 10, "medium"),
    (0.5, 10, "medium"), (0.4999, 10, "low"), (0.0, 10, "low")])
def test_levels_follow_the_documented_thresholds(score, n, level):
    assert level_for(score, n, 10) == level


def test_values_and_block():
    values = confidence_values(ConfidenceCounts(95, 5, 0, 0))
    assert values == {"score": round(wilson_lower(95, 100), 6), "level": "high", "similar_decisions": 100,
                      "policy_stability": 1.0, "recommendation": "high_confidence_proceed"}
    low = confidence_values(ConfidenceCounts(3, 12, 0, 0))
    assert (low["level"], low["recommendation"]) == ("low", "low_confidence_review")
    few = confidence_values(ConfidenceCounts(3, 0, 0, 0), min_sample=5)
    assert (few["level"], few["recommendation"]) == ("insufficient_data", "insufficient_data_collect_outcomes")
    block = confidence_block(ConfidenceCounts(5, 1, 2, 2), policy_version="v2")
    assert block["decision_confidence_version"] == "decision_confidence_v1"
    assert block["similar_decisions"] == 10
    assert block["based_on"] == {"policy_version": "v2", "successes": 7, "failures": 3,
                                 "current_version_successes": 5, "current_version_failures": 1,
                                 "min_sample": 10}
    assert block["confidence_hash"] == confidence_hash(block)
    assert math.isclose(block["score"], wilson_lower(7, 10) * policy_stability(ConfidenceCounts(5, 1, 2, 2)),
                        abs_tol=1e-6)


@pytest.mark.usefixtures("backend")
def test_outcome_moves_follow_the_latest_outcome(database_url):
    ledger = Ledger(database_url)
    bucket = Bucket("s", "p", "yes", "apply", "v1")
    other_version = Bucket("s", "p", "yes", "apply", "v0")

    def apply(decision, at, receipt, effect, where=bucket):
        with ledger.write() as connection:
            return apply_outcome(connection, ledger.dialect, OutcomeMove(where, decision, at, receipt, effect))

    def counts():
        return ledger.confidence_counts(bucket)

    try:
        assert counts() is None
        assert apply("d1", "2026-01-01T00:00:00.000Z", "out_b", "open") is True
        assert counts() == ConfidenceCounts(0, 0, 0, 0)  # an outcome exists: the block is due
        assert apply("d1", "2026-01-02T00:00:00.000Z", "out_c", "success") is True
        assert counts() == ConfidenceCounts(1, 0, 0, 0)
        # Older, or the same instant with a smaller receipt id: not the latest, nothing moves.
        assert apply("d1", "2026-01-01T12:00:00.000Z", "out_z", "failure") is False
        assert apply("d1", "2026-01-02T00:00:00.000Z", "out_a", "failure") is False
        assert counts() == ConfidenceCounts(1, 0, 0, 0)
        # Same instant, larger receipt id: newer.
        assert apply("d1", "2026-01-02T00:00:00.000Z", "out_d", "failure") is True
        assert counts() == ConfidenceCounts(0, 1, 0, 0)
        apply("d2", "2026-01-03T00:00:00.000Z", "out_e", "success", other_version)
        assert counts() == ConfidenceCounts(0, 1, 1, 0)
        with pytest.raises(ValueError):
            apply("d3", "2026-01-03T00:00:00.000Z", "out_f", "bogus")
    finally:
        ledger.dispose()
