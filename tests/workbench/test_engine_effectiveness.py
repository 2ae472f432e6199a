"""Effectiveness: the latest outcome per decision and every formula, on a hand-checked ledger."""

from __future__ import annotations

from datetime import timedelta

from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import effectiveness
from workbench.engines.common import wilson

H = timedelta(hours=1)


def _ledger(extra_status: str | None = None):
    ds = [decision(f"d{i}", at=T0 + i * H) for i in range(1, 6)]
    os_ = [
        outcome("r1", "d1", "succeeded", at=T0 + 10 * H),
        outcome("r2", "d1", "failed", at=T0 + 10 * H),        # same instant: receipt_id breaks the tie
        outcome("r3", "d2", "succeeded", at=T0 + 12 * H),
        outcome("r0", "d2", "pending", at=T0 + 11 * H),        # older, although its id sorts first
        outcome("r4", "d4", "cancelled", at=T0 + 10 * H),
        outcome("r5", "d5", "review", at=T0 + 10 * H),
    ]
    if extra_status:
        ds.append(decision("d6", at=T0 + 6 * H))
        os_.append(outcome("r6", "d6", extra_status, at=T0 + 10 * H))
    return frames(ds, os_)


def test_latest_outcome_and_rates():
    f = _ledger()
    report = effectiveness.effectiveness(f.decisions, f.outcomes, CLASSES, min_sample=1)
    assert report["sample"] == {
        "decisions_considered": 5, "decisions_with_outcome": 4, "outcome_records": 6,
        "latest_outcome_counts": {"cancelled": 1, "failed": 1, "review": 1, "succeeded": 1},
        "outcome_classes": {"success": 1, "failure": 1, "excluded": 1, "open": 1, "unclassified": 0},
        "first_decision_at": "2026-01-01T01:00:00.000Z", "last_decision_at": "2026-01-01T05:00:00.000Z",
    }
    m = report["metrics"]
    assert (m["success_rate"], m["failure_rate"], m["review_rate"], m["excluded_rate"]) == (0.5, 0.5, 0.25, 0.25)
    assert (m["terminal_coverage"], m["outcome_coverage"], m["resolved_decisions"]) == (0.6, 0.8, 2)
    low, high = wilson(1, 2)
    assert report["effectiveness_score"] == 0.5
    assert report["confidence"] == round((1 - (high - low)) * 0.6, 4)
    assert report["recommendation"] == "review_policy"


def test_recommendations_follow_the_documented_bands():
    f = _ledger()
    assert effectiveness.effectiveness(f.decisions, f.outcomes, CLASSES, min_sample=3)["recommendation"] == \
        "insufficient_data"
    ds = [decision(f"d{i}", at=T0 + i * H) for i in range(20)]
    for successes, expected in ((17, "healthy"), (13, "monitor"), (11, "review_policy")):
        os_ = [outcome(f"r{i}", f"d{i}", "succeeded" if i < successes else "failed", at=T0 + 30 * H)
               for i in range(20)]
        f = frames(ds, os_)
        report = effectiveness.effectiveness(f.decisions, f.outcomes, CLASSES, min_sample=10)
        assert report["recommendation"] == expected, (successes, report)
        assert report["effectiveness_score"] == successes / 20


def test_unknown_status_is_never_counted_as_success_or_failure():
    f = _ledger(extra_status="exploded")
    report = effectiveness.effectiveness(f.decisions, f.outcomes, CLASSES, min_sample=1)
    assert report["sample"]["outcome_classes"]["unclassified"] == 1
    assert report["metrics"]["resolved_decisions"] == 2


def test_empty_sample_reports_nothing_but_says_so():
    f = frames([], [])
    report = effectiveness.effectiveness(f.decisions, f.outcomes, CLASSES, min_sample=10)
    assert report["effectiveness_score"] is None and report["confidence"] == 0.0
    assert report["recommendation"] == "insufficient_data"
    assert report["sample"]["decisions_considered"] == 0 and report["sample"]["first_decision_at"] is None
