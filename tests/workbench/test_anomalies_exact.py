"""Anomalies to the exact value (issue 22, item 5): the fact-drift detector's moments, its shift
in baseline standard deviations, its z and score, and the sample-size gate.

Formula (docs/intelligence.md, "Anomalies"): baseline = every month before the newest, recent =
the newest month; d = (recent mean - baseline mean) / baseline standard deviation (the pooled
one when the baseline does not vary); z = the difference over its standard error; score =
(1 - e^-|d|) x min(1, |z| / 3). The expected values are literals worked out by hand with
`statistics.variance` (sample variance).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from workbench_support import CLASSES, T0, decision, frames

from workbench.engines import anomalies

FEB = T0 + timedelta(days=40)


def _report(baseline: list, recent: list, *, min_sample: int = 1) -> dict:
    ds = [decision(f"b{i}", at=T0 + timedelta(days=i), facts={"amount": v}) for i, v in enumerate(baseline)]
    ds += [decision(f"r{i}", at=FEB + timedelta(days=i), facts={"amount": v}) for i, v in enumerate(recent)]
    f = frames(ds, [])
    return anomalies.anomalies(f.decisions, f.outcomes, CLASSES, min_sample=min_sample, threshold=0.0, max_items=10)


def _drift(report: dict) -> dict | None:
    return next((a for a in report["anomalies"] if a["kind"] == "fact_drift"), None)


@pytest.mark.parametrize(("baseline", "recent", "score", "before", "after", "shift"), [
    ([10, 12, 14, 16, 18], [20, 22, 24], 0.9203, (14.0, 3.1623), (22.0, 2.0), 2.5298),
    ([5, 5, 5, 5], [6, 8, 10], 0.7852, (5.0, 0.0), (8.0, 2.0), 2.3717),   # pooled deviation, z 2.6
    ([5, 5, 5], [7, 7, 7], 1.0, (5.0, 0.0), (7.0, 0.0), None),            # nothing varies: a full shift
    ([10, 12, 14, 16, 18], [11, 12, 13], 0.2046, (14.0, 3.1623), (12.0, 1.0), -0.6325),
    ([10, 20, 30], [12], 0.2543, (20.0, 10.0), (12.0, 0.0), -0.8),        # one recent value: no variance
])
def test_fact_drift_values(baseline, recent, score, before, after, shift):
    finding = _drift(_report(baseline, recent))
    assert finding["anomaly_id"] == "fact_drift:fact:amount"
    assert finding["anomaly_score"] == score
    assert finding["severity"] == ("high" if score >= 0.75 else "medium" if score >= 0.5 else "low")
    assert finding["baseline"] == {"months": "before 2026-02", "values": len(baseline), "mean": before[0],
                                   "stddev": before[1]}
    assert finding["observed"] == {"month": "2026-02", "values": len(recent), "mean": after[0], "stddev": after[1],
                                   "shift_stddevs": shift}
    assert sorted(finding["decision_ids"]) == [f"r{i}" for i in range(len(recent))]


def test_the_drifting_side_names_the_recent_decisions_most_extreme_first():
    rose = _drift(_report([10, 12, 14, 16, 18], [13, 24, 20, 22]))
    assert rose["decision_ids"] == ["r1", "r3", "r2", "r0"]            # largest first
    fell = _drift(_report([10, 12, 14, 16, 18], [12, 13, 11]))
    assert fell["decision_ids"] == ["r2", "r0", "r1"]                  # smallest first


def test_z_and_the_sentence():
    finding = _drift(_report([10, 12, 14, 16, 18], [20, 22, 24]))
    assert finding["reasons"][2] == "shift of +2.53 baseline standard deviations, z = 4.38"
    low = _drift(_report([10, 12, 14, 16, 18], [11, 12, 13]))
    assert low["reasons"][2] == "shift of -0.63 baseline standard deviations, z = -1.31"


def test_no_drift_without_a_change_of_mean_or_enough_values():
    assert _drift(_report([10, 12, 14], [12, 12])) is None            # same mean
    assert _drift(_report([10, 12, 14], [20, 22], min_sample=2)) is not None
    assert _drift(_report([10, 12, 14], [20, 22], min_sample=3)) is None   # recent below min_sample
    assert _drift(_report([10, 12], [20, 22, 24], min_sample=3)) is None   # baseline below it
    assert _drift(_report([10, 12, 14], [20, 22, 24], min_sample=3)) is not None
    report = _report([10, 12, 14], [20, 22, 24], min_sample=3)
    assert report["checks"]["facts"] == {"recent_month": "2026-02", "numeric_facts": 1}
    assert _report([], [20, 22])["checks"]["facts"] == {"recent_month": "2026-02", "numeric_facts": 1}
    assert _drift(_report([], [20, 22])) is None


@pytest.mark.parametrize(("baseline", "recent", "score", "before", "after", "shift"), [
    ([5], [6, 8], 0.5046, (5.0, 0.0), (7.0, 1.4142), 1.4142),           # pooled over nb + nr - 2 = 1 degree
    ([10, 20], [30, 30, 30], 0.8801, (15.0, 7.0711), (30.0, 0.0), 2.1213),   # two values vary
])
def test_small_samples(baseline, recent, score, before, after, shift):
    finding = _drift(_report(baseline, recent))
    assert finding["anomaly_score"] == score
    assert (finding["baseline"]["mean"], finding["baseline"]["stddev"]) == before
    assert (finding["observed"]["mean"], finding["observed"]["stddev"], finding["observed"]["shift_stddevs"]) == \
        (*after, shift)


def test_no_decisions_no_facts():
    report = _report([], [])
    assert report["checks"]["facts"] == {"recent_month": None, "numeric_facts": 0}
    assert report["anomalies"] == [] and report["recommendation"] == "insufficient_data"
