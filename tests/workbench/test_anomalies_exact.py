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

import polars as pl
import pytest
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.dataset.convert import frame_of
from workbench.dataset.facts import facts_table
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


# --------------------------------------------------------------------------- failure-rate shift by segment
#
# Each decision below has one outcome: "failed" and "reverted" count as failures, "succeeded" as a
# success. A segment (rule, reason code, action) is compared with the rest of the policy: odds
# ratio with +0.5 per cell, z = ln(OR) / sqrt(1/a + 1/b + 1/c + 1/d), score = (1 - 1/OR) x
# min(1, |z| / 3). Worked by hand: 3 of 4 against 1 of 4 is OR = (3.5 x 3.5) / (1.5 x 1.5) =
# 5.4444, z = 1.6946 / 1.3801 = 1.2279, score = 0.8163 x 0.4093 = 0.3341.


def _segments(rows: list[tuple], **kw) -> dict:
    """One decision an hour from T0, each (rule, action, status or None[, version[, verdict]])."""
    ds, outs = [], []
    for i, (rule, action, status, *rest) in enumerate(rows):
        version = rest[0] if rest else "v1"
        verdict = rest[1] if len(rest) > 1 else "yes"
        at = T0 + timedelta(hours=i)
        ds.append(decision(f"d{i:02d}", at=at, rule=rule, action=action, policy_version=version, verdict=verdict))
        if status is not None:
            outs.append(outcome(f"o{i:02d}", f"d{i:02d}", status, at=at + timedelta(minutes=5)))
    f = frames(ds, outs)
    args = {"min_sample": 4, "threshold": 0.0, "max_items": 10, **kw}
    return anomalies.anomalies(f.decisions, f.outcomes, CLASSES, **args)


# Rule "hold" (action "hold" too): 3 of 4 failed; rule "approve" (action "apply_discount"): 1 of 4.
HOLD_3_OF_4 = [("hold", "hold", "failed"), ("hold", "hold", "succeeded"), ("hold", "hold", "failed"),
               ("hold", "hold", "reverted"), ("approve", "apply_discount", "succeeded"),
               ("approve", "apply_discount", "failed"), ("approve", "apply_discount", "succeeded"),
               ("approve", "apply_discount", "succeeded")]


def _hold_finding(dimension: str, word: str) -> dict:
    return {
        "anomaly_id": f"failure_rate_shift:{dimension}:hold", "kind": "failure_rate_shift",
        "dimension": dimension, "value": "hold", "anomaly_score": 0.3341, "severity": "low",
        "reasons": [
            f"failures are 75.0% under {word} hold, against 25.0% for the rest of the policy",
            (f"failure rate 75.0% (3 of 4 resolved decisions) under {dimension} 'hold' against 25.0% (1 of 4) "
            "for the rest of the policy"),
            "odds of failure x5.44, z = 1.23",
        ],
        # The failed decisions of the segment only (not d01, a success; not d05, another rule's
        # failure), newest first.
        "decision_ids": ["d03", "d02", "d00"],
        "baseline": {"failure_rate": 0.25, "resolved": 4, "failures": 1},
        "observed": {"failure_rate": 0.75, "resolved": 4, "failures": 3, "odds_ratio": 5.4444, "z": 1.2279},
    }


def test_a_failing_segment_against_the_rest_of_the_policy_every_member():
    report = _segments(HOLD_3_OF_4)
    # Both sides have exactly min_sample (4) resolved decisions: the size gate lets them through.
    assert report["anomalies"] == [_hold_finding("action", "action"), _hold_finding("matched_rule_id", "rule")]
    assert report["anomaly_count"] == 2
    # Low severity only: monitor, not investigate; 8 decisions are past min_sample.
    assert report["recommendation"] == "monitor"
    assert report["checks"]["segments"] == {"matched_rule_id": 2, "reason_code": 1, "action": 2}
    assert report["checks"]["policy_versions"] == {"current": "v1", "previous": None}


def test_the_segment_size_gate_at_min_sample():
    assert _segments(HOLD_3_OF_4, min_sample=5)["anomalies"] == []       # both sides have 4
    # The failing side below min_sample, the rest above it: no finding either.
    rows = HOLD_3_OF_4 + [("approve", "apply_discount", "succeeded")] * 4   # rest: 1 of 8 failed
    assert _segments(rows, min_sample=5)["anomalies"] == []
    found = _segments(rows, min_sample=4)["anomalies"]
    assert [a["anomaly_id"] for a in found] == ["failure_rate_shift:action:hold", "failure_rate_shift:matched_rule_id:hold"]
    # 3 of 4 against 1 of 8: OR = (3.5 x 7.5) / (1.5 x 1.5) = 11.6667, z = 2.4567 / 1.3238 = 1.8559.
    assert found[0]["baseline"] == {"failure_rate": 0.125, "resolved": 8, "failures": 1}
    assert found[0]["observed"] == {"failure_rate": 0.75, "resolved": 4, "failures": 3, "odds_ratio": 11.6667,
                                    "z": 1.8559}
    assert found[0]["anomaly_score"] == 0.5656


def test_a_weak_shift_is_still_a_finding_and_a_lower_rate_is_none():
    # 4 of 10 against 3 of 10: OR = (4.5 x 7.5) / (6.5 x 3.5) = 1.4835 (not above 2), z = 0.4423 (not
    # above 1); the "approve" side (3 of 10 against 4 of 10, OR < 1) is no finding.
    rows = ([("hold", "hold", "failed")] * 4 + [("hold", "hold", "succeeded")] * 6
            + [("approve", "x", "failed")] * 3 + [("approve", "x", "succeeded")] * 7)
    report = _segments(rows)
    assert [a["anomaly_id"] for a in report["anomalies"]] == ["failure_rate_shift:action:hold",
                                                              "failure_rate_shift:matched_rule_id:hold"]
    rule = report["anomalies"][1]
    assert rule["observed"] == {"failure_rate": 0.4, "resolved": 10, "failures": 4, "odds_ratio": 1.4835, "z": 0.4423}
    assert rule["baseline"] == {"failure_rate": 0.3, "resolved": 10, "failures": 3}
    assert rule["anomaly_score"] == 0.0481
    assert rule["reasons"][0] == "failures are 40.0% under rule hold, against 30.0% for the rest of the policy"
    assert rule["decision_ids"] == ["d03", "d02", "d01", "d00"]
    assert report["recommendation"] == "monitor"


def test_equal_rates_are_no_finding():
    # 2 of 4 against 2 of 4: OR exactly 1, z exactly 0.
    rows = [("hold", "hold", "failed"), ("hold", "hold", "failed"), ("hold", "hold", "succeeded"),
            ("hold", "hold", "succeeded"), ("approve", "x", "failed"), ("approve", "x", "reverted"),
            ("approve", "x", "succeeded"), ("approve", "x", "succeeded")]
    report = _segments(rows)
    assert report["anomalies"] == [] and report["recommendation"] == "stable"


def test_a_high_score_is_investigate():
    # 12 of 12 against 0 of 12: OR = 12.5^2 / 0.5^2 = 625, z = 6.4378 / 2.0396 = 3.1564: score 1 - 1/625.
    rows = [("hold", "hold", "failed")] * 12 + [("approve", "x", "succeeded")] * 12
    report = _segments(rows)
    rule = report["anomalies"][1]
    assert rule["anomaly_score"] == 0.9984 and rule["severity"] == "high"
    assert rule["observed"] == {"failure_rate": 1.0, "resolved": 12, "failures": 12, "odds_ratio": 625.0, "z": 3.1564}
    assert rule["decision_ids"] == [f"d{i:02d}" for i in range(11, 1, -1)]   # the ten newest failures
    assert report["recommendation"] == "investigate"


def test_the_threshold_keeps_a_score_equal_to_it():
    assert _segments(HOLD_3_OF_4, threshold=0.3341)["anomaly_count"] == 2
    above = _segments(HOLD_3_OF_4, threshold=0.3342)
    assert above["anomaly_count"] == 0 and above["anomalies"] == []
    assert above["recommendation"] == "stable"


def test_max_items_cuts_the_list_not_the_count():
    report = _segments(HOLD_3_OF_4, max_items=1)
    assert report["anomaly_count"] == 2
    assert [a["anomaly_id"] for a in report["anomalies"]] == ["failure_rate_shift:action:hold"]


def test_the_recommendation_at_min_sample_decisions():
    # Eight decisions: with min_sample 8 the sample is big enough (no segment is: both sides need 8).
    assert _segments(HOLD_3_OF_4, min_sample=8)["recommendation"] == "stable"
    assert _segments(HOLD_3_OF_4, min_sample=9)["recommendation"] == "insufficient_data"


def test_findings_by_score_then_id():
    # Rule "hold" fails 4 of 4 against 0 of 4: OR = 4.5^2 / 0.5^2 = 81, z = 4.3944 / 2.1082 = 2.0845,
    # score 0.9877 x 0.6948 = 0.6862 (medium: still monitor). Action "zz" fails 3 of 4 against 1 of 4
    # (0.3341). The higher score comes first although its id sorts after the other's.
    rows = ([("hold", "zz", "failed")] * 3 + [("hold", "a", "failed"), ("approve", "zz", "succeeded")]
            + [("approve", "a", "succeeded")] * 3)
    report = _segments(rows)
    assert [(a["anomaly_id"], a["anomaly_score"], a["severity"], a["decision_ids"]) for a in report["anomalies"]] == [
        ("failure_rate_shift:matched_rule_id:hold", 0.6862, "medium", ["d03", "d02", "d01", "d00"]),
        ("failure_rate_shift:action:zz", 0.3341, "low", ["d02", "d01", "d00"]),
    ]
    assert report["anomalies"][0]["observed"] == {"failure_rate": 1.0, "resolved": 4, "failures": 4,
                                                  "odds_ratio": 81.0, "z": 2.0845}
    assert report["anomalies"][0]["baseline"] == {"failure_rate": 0.0, "resolved": 4, "failures": 0}
    assert report["recommendation"] == "monitor"
    assert report["checks"]["segments"] == {"matched_rule_id": 2, "reason_code": 1, "action": 2}


def test_the_policy_version_is_no_segment():
    # v1 fails 3 of 4, v2 (newer) 1 of 4: against the rest of the policy v1 would be a finding; by
    # version only the newest is compared with the one before it, and it improved.
    rows = [("hold", "hold", s, "v1") for s in ("failed", "failed", "reverted", "succeeded")]
    rows += [("hold", "hold", s, "v2") for s in ("failed", "succeeded", "succeeded", "succeeded")]
    report = _segments(rows, threshold=0.01)
    assert report["anomalies"] == []
    assert report["checks"]["segments"] == {"matched_rule_id": 1, "reason_code": 1, "action": 1}
    assert report["checks"]["policy_versions"] == {"current": "v2", "previous": "v1"}


# --------------------------------------------------------------------------- version order


def test_versions_by_their_first_decision_then_by_text():
    # "b" decided first (a "yes" at hour 0, a "no" at hour 2), "a" at hour 1: "a" is the newest.
    first = [("r", "x", None, "b", "yes"), ("r", "x", None, "a", "yes"), ("r", "x", None, "b", "no")]
    assert _segments(first, min_sample=1)["checks"]["policy_versions"] == {"current": "a", "previous": "b"}


def test_versions_first_seen_together_order_by_text():
    ds = [decision("d0", at=T0, policy_version="v2"), decision("d1", at=T0, policy_version="v1")]
    f = frames(ds, [])
    report = anomalies.anomalies(f.decisions, f.outcomes, CLASSES, min_sample=1, threshold=0.0, max_items=10)
    assert report["checks"]["policy_versions"] == {"current": "v2", "previous": "v1"}


def test_no_decisions_no_segments():
    report = _report([], [])
    assert report["checks"]["segments"] == {"matched_rule_id": 0, "reason_code": 0, "action": 0}
    assert report["checks"]["policy_versions"] == {"current": None, "previous": None}
    assert report["anomaly_count"] == 0


# --------------------------------------------------------------------------- shifts between versions
#
# The newest version (by its first decision) against the one before it. All decisions share one
# rule and action, so no segment has a rest of the policy to be compared with: only the version
# detectors speak.


def test_a_failure_rate_rising_after_a_version_every_member():
    # v1 (older) fails 1 of 4, v2 3 of 4: OR = (3.5 x 3.5) / (1.5 x 1.5) = 5.4444, z = 1.2279, score
    # 0.3341 (the worked example above). The verdicts did not move (all yes): that finding scores 0.
    # The action is named "v2" too: its failed decisions (all of the policy's) are no evidence of
    # the version.
    rows = [("hold", "v2", s, "v1") for s in ("failed", "succeeded", "succeeded", "succeeded")]
    rows += [("hold", "v2", s, "v2") for s in ("failed", "failed", "reverted", "succeeded")]
    report = _segments(rows)
    shift = next(a for a in report["anomalies"] if a["kind"] == "failure_rate_shift")
    assert shift == {
        "anomaly_id": "failure_rate_shift:policy_version:v2", "kind": "failure_rate_shift",
        "dimension": "policy_version", "value": "v2", "anomaly_score": 0.3341, "severity": "low",
        "reasons": [
            "failures rose from 25.0% to 75.0% after version v2",
            ("failure rate 75.0% (3 of 4 resolved decisions) under policy_version 'v2' against 25.0% (1 of 4) "
             "for the previous version 'v1'"),
            "odds of failure x5.44, z = 1.23",
        ],
        # v2's failures only (d04 to d06; not v1's d00, not v2's success d07), newest first.
        "decision_ids": ["d06", "d05", "d04"],
        "baseline": {"failure_rate": 0.25, "resolved": 4, "failures": 1},
        "observed": {"failure_rate": 0.75, "resolved": 4, "failures": 3, "odds_ratio": 5.4444, "z": 1.2279},
    }
    assert [a["anomaly_id"] for a in report["anomalies"]] == ["failure_rate_shift:policy_version:v2",
                                                              "verdict_mix_shift:policy_version:v2"]
    mix = report["anomalies"][1]
    assert mix["anomaly_score"] == 0.0 and mix["severity"] == "low"
    assert report["anomaly_count"] == 2 and report["recommendation"] == "monitor"
    assert report["checks"]["policy_versions"] == {"current": "v2", "previous": "v1"}


def test_the_version_failure_gate_at_min_sample():
    # Both versions have exactly 4 resolved decisions: found at min_sample 4, not at 5 (either side short).
    rows = [("hold", "hold", s, "v1") for s in ("failed", "succeeded", "succeeded", "succeeded")]
    rows += [("hold", "hold", s, "v2") for s in ("failed", "failed", "reverted", "succeeded")]
    assert _segments(rows, min_sample=5)["anomalies"] == []
    # v2 with a fifth resolved decision (4 of 5 failed), v1 still 4: min(5, 4) = 4 passes 4, not 5.
    five = rows + [("hold", "hold", "failed", "v2")]
    assert [a["anomaly_id"] for a in _segments(five, min_sample=5)["anomalies"]] == []
    found = [a for a in _segments(five, min_sample=4)["anomalies"] if a["kind"] == "failure_rate_shift"]
    # 4 of 5 against 1 of 4: OR = (4.5 x 3.5) / (1.5 x 1.5) = 7.0, z = 1.9459 / 1.3569 = 1.4340.
    assert [(a["value"], a["observed"], a["baseline"]) for a in found] == [
        ("v2", {"failure_rate": 0.8, "resolved": 5, "failures": 4, "odds_ratio": 7.0, "z": 1.434},
         {"failure_rate": 0.25, "resolved": 4, "failures": 1})]
    # An improving version is no failure finding.
    better = [("hold", "hold", s, "v1") for s in ("failed", "failed", "reverted", "succeeded")]
    better += [("hold", "hold", s, "v2") for s in ("failed", "succeeded", "succeeded", "succeeded")]
    assert not [a for a in _segments(better)["anomalies"] if a["kind"] == "failure_rate_shift"]


def test_a_verdict_mix_shift_every_member():
    # v1: four yes; v2: one yes, two no, one review (no outcomes: no failure finding). Per verdict,
    # (1 - 1/max(OR, 1/OR)) x min(1, |z| / 3):
    #   yes 1 of 4 against 4 of 4: OR = (1.5 x 0.5) / (3.5 x 4.5) = 1/21, z = -3.0445 / 1.7817 = -1.7087:
    #       (1 - 1/21) x 0.5696 = 0.5425, the best;
    #   no 2 of 4 against 0 of 4: OR = 9, z = 1.2639: 0.3745; review 1 of 4 against 0: OR 3.857: 0.1870.
    # The evidence is v2's verdict whose share rose most: no (+50 points; review +25, yes -75).
    rows = [("r", "x", None, "v1", "yes")] * 4
    rows += [("r", "x", None, "v2", v) for v in ("yes", "no", "review", "no")]
    report = _segments(rows)
    assert report["anomalies"] == [{
        "anomaly_id": "verdict_mix_shift:policy_version:v2", "kind": "verdict_mix_shift",
        "dimension": "policy_version", "value": "v2", "anomaly_score": 0.5425, "severity": "medium",
        "reasons": [
            "'yes' verdicts fell from 100.0% to 25.0% after version v2",
            "share of verdict 'yes' moved from 100.0% (4 of 4) under version 'v1' to 25.0% (1 of 4) under version 'v2'",
            "verdict mix yes 100.0% -> 25.0%, no 0.0% -> 50.0%, review 0.0% -> 25.0%; odds ratio 0.05, z = -1.71",
        ],
        "decision_ids": ["d07", "d05"],
        "baseline": {"policy_version": "v1", "decisions": 4,
                     "verdict_shares": {"yes": 1.0, "no": 0.0, "review": 0.0}},
        "observed": {"policy_version": "v2", "decisions": 4,
                     "verdict_shares": {"yes": 0.25, "no": 0.5, "review": 0.25},
                     "odds_ratio": 0.0476, "z": -1.7087},
    }]
    assert report["recommendation"] == "monitor"
    # Both versions need min_sample decisions: 4 each passes 4, not 5.
    assert _segments(rows, min_sample=5)["anomalies"] == []
    # A share that rose is said to rise; v1's decisions are the baseline whatever their number.
    grown = [("r", "x", None, "v1", "no")] * 4 + [("r", "x", None, "v2", "no")] + [("r", "x", None, "v2", "yes")] * 4
    found = _segments(grown)["anomalies"]
    assert [a["reasons"][0] for a in found] == ["'yes' verdicts rose from 0.0% to 80.0% after version v2"]
    assert found[0]["baseline"]["decisions"] == 4 and found[0]["observed"]["decisions"] == 5
    assert found[0]["decision_ids"] == ["d08", "d07", "d06", "d05"]
    # One version more than min_sample, the other short: no finding.
    assert _segments(grown[1:], min_sample=4)["anomalies"] == []


def test_the_typed_facts_table_is_what_the_drift_reads():
    # An exported dataset gives the facts as a typed table (`facts`); its decisions need not carry
    # facts_json. The drift of the first case above (score 0.9203), read from the table alone.
    ds = [decision(f"b{i}", at=T0 + timedelta(days=i), facts={"amount": v}) for i, v in enumerate([10, 12, 14, 16, 18])]
    ds += [decision(f"r{i}", at=FEB + timedelta(days=i), facts={"amount": v}) for i, v in enumerate([20, 22, 24])]
    f = frames(ds, [])
    table = frame_of(facts_table(f.decisions.collect().to_arrow()))
    bare = f.decisions.with_columns(pl.lit(None, dtype=pl.String).alias("facts_json"))
    report = anomalies.anomalies(bare, f.outcomes, CLASSES, min_sample=1, threshold=0.0, max_items=10,
                                 facts=table.lazy())
    drift = _drift(report)
    assert drift is not None and drift["anomaly_score"] == 0.9203
    assert drift["decision_ids"] == ["r2", "r1", "r0"]
    assert _drift(anomalies.anomalies(bare, f.outcomes, CLASSES, min_sample=1, threshold=0.0, max_items=10)) is None


def test_a_verdict_mix_tie_names_the_first_verdict():
    # v1: four reviews; v2: four no. No (0 of 4 to 4 of 4) and review (4 of 4 to 0 of 4) move alike:
    # OR 81 and 1/81, |z| = 4.3944 / 2.1082 = 2.0845, score 0.9877 x 0.6948 = 0.6862 each. The
    # first of equals in verdict order (yes, no, review) is named: no.
    rows = [("r", "x", None, "v1", "review")] * 4 + [("r", "x", None, "v2", "no")] * 4
    (found,) = _segments(rows)["anomalies"]
    assert found["anomaly_score"] == 0.6862 and found["severity"] == "medium"
    assert found["reasons"][0] == "'no' verdicts rose from 0.0% to 100.0% after version v2"
    assert (found["observed"]["odds_ratio"], found["observed"]["z"]) == (81.0, 2.0845)
    assert found["decision_ids"] == ["d07", "d06", "d05", "d04"]


def test_the_verdict_mix_evidence_is_the_verdict_whose_share_rose_most():
    # The evidence names v2's decisions of the verdict whose share rose most, by share, not by count:
    # v1 four yes, v2 three yes and one no: yes fell (-25 points) though it is v2's commonest, no rose.
    rows = [("r", "x", None, "v1", "yes")] * 4 + [("r", "x", None, "v2", "yes")] * 3 + [("r", "x", None, "v2", "no")]
    (found,) = _segments(rows)["anomalies"]
    assert found["decision_ids"] == ["d07"]
    # A verdict v1 never gave counts from a share of 0: v1 three yes and one no, v2 two no and two
    # reviews: review rose 50 points, no 25.
    rows = [("r", "x", None, "v1", v) for v in ("yes", "yes", "yes", "no")]
    rows += [("r", "x", None, "v2", v) for v in ("no", "no", "review", "review")]
    (found,) = _segments(rows)["anomalies"]
    assert found["decision_ids"] == ["d07", "d06"]
    assert found["baseline"]["verdict_shares"] == {"yes": 0.75, "no": 0.25, "review": 0.0}
    # Only the current version's decisions of that verdict: v1's two no are not its evidence.
    rows = [("r", "x", None, "v1", v) for v in ("yes", "yes", "no", "no")]
    rows += [("r", "x", None, "v2", v) for v in ("yes", "no", "no", "no")]
    (found,) = _segments(rows)["anomalies"]
    assert found["decision_ids"] == ["d07", "d06", "d05"]


def test_the_severity_reads_the_reported_four_digit_score():
    # One recent value 18.3835 against 10..18 (mean 14, sd sqrt(10)): d = 4.3835 / 3.16228 = 1.38618,
    # z = 4.3835 / sqrt(2) = 3.0996 (full evidence): score 1 - e^-1.38618 = 0.749972, reported as
    # 0.75: high, as the reported number says (not medium, as 0.74997 would be).
    report = _report([10, 12, 14, 16, 18], [18.3835])
    drift = _drift(report)
    assert (drift["anomaly_score"], drift["severity"]) == (0.75, "high")
    assert report["recommendation"] == "investigate"


def test_the_newest_version_against_the_one_just_before_it():
    # Three versions: v3 (3 of 4 failed) against v2 (1 of 4), not against v1 (3 of 4 too).
    rows = [("hold", "hold", s, "v1") for s in ("failed", "failed", "reverted", "succeeded")]
    rows += [("hold", "hold", s, "v2") for s in ("failed", "succeeded", "succeeded", "succeeded")]
    rows += [("hold", "hold", s, "v3") for s in ("failed", "failed", "reverted", "succeeded")]
    report = _segments(rows)
    assert report["checks"]["policy_versions"] == {"current": "v3", "previous": "v2"}
    shift = next(a for a in report["anomalies"] if a["kind"] == "failure_rate_shift")
    assert (shift["value"], shift["anomaly_score"], shift["baseline"]) == (
        "v3", 0.3341, {"failure_rate": 0.25, "resolved": 4, "failures": 1})
    assert shift["decision_ids"] == ["d10", "d09", "d08"]


def test_the_default_rule_and_a_missing_action_keep_their_evidence():
    # HOLD_3_OF_4 with the failing segment decided by the default outcome (no rule) and without an
    # action: its findings are named "(default_outcome)" and "(none)", and their evidence is found
    # under those names.
    rows = [(None if rule == "hold" else rule, None if action == "hold" else action, status)
            for rule, action, status in HOLD_3_OF_4]
    found = _segments(rows)["anomalies"]
    assert [(a["anomaly_id"], a["anomaly_score"], a["decision_ids"]) for a in found] == [
        ("failure_rate_shift:action:(none)", 0.3341, ["d03", "d02", "d00"]),
        ("failure_rate_shift:matched_rule_id:(default_outcome)", 0.3341, ["d03", "d02", "d00"]),
    ]


def test_evidence_of_more_groups_than_the_per_group_floors_hold():
    # 65 failing rules (past MAX_FLOORS, 64: one floor for the grouping), ten failures each, then 650
    # successes of rule "ok": every failing rule keeps its own ten failures as evidence, the oldest
    # rule's too (its failures are older than every other group's floor).
    rows = [(f"r{r:02d}", "x", "failed") for r in range(65) for _ in range(10)]
    rows += [("ok", "x", "succeeded")] * 650
    found = {a["anomaly_id"]: a["decision_ids"] for a in _segments(rows, max_items=100)["anomalies"]
             if a["dimension"] == "matched_rule_id"}
    assert len(found) == 65
    assert found["failure_rate_shift:matched_rule_id:r00"] == [f"d{i:02d}" for i in range(9, -1, -1)]
    assert found["failure_rate_shift:matched_rule_id:r64"] == [f"d{i:02d}" for i in range(649, 639, -1)]


def test_evidence_of_a_later_grouping_beside_one_past_the_floors():
    # The 65 failing rules above, and before them ten failures of rule r00 with reason code OLD. The
    # rules' grouping (past MAX_FLOORS) reads only rows from its earliest floor on, after the OLD
    # failures; the reason codes' grouping still reads them, so OLD keeps its ten as evidence.
    at = [T0 + timedelta(hours=i) for i in range(1310)]
    ds = [decision(f"e{i}", at=at[i], rule="r00", reason="OLD", action="x") for i in range(10)]
    ds += [decision(f"f{r:02d}{j}", at=at[10 + 10 * r + j], rule=f"r{r:02d}", action="x")
           for r in range(65) for j in range(10)]
    ds += [decision(f"s{i:03d}", at=at[660 + i], rule="ok", action="x") for i in range(650)]
    outs = [outcome(f"o-{d['decision_id']}", d["decision_id"], "succeeded" if d["decision_id"][0] == "s" else "failed",
                    at=d["created_at"] + timedelta(minutes=5)) for d in ds]
    f = frames(ds, outs)
    report = anomalies.anomalies(f.decisions, f.outcomes, CLASSES, min_sample=4, threshold=0.0, max_items=200)
    found = {a["anomaly_id"]: a["decision_ids"] for a in report["anomalies"]}
    assert found["failure_rate_shift:reason_code:OLD"] == [f"e{i}" for i in range(9, -1, -1)]


def test_a_decision_without_a_version_keeps_its_verdict_evidence():
    # Ten yes under v1, then ten no recorded without a version (the "(none)" version, the newest):
    # the verdict mix names the ten newest no decisions of "(none)" as its evidence.
    rows = [("r", "x", None, "v1", "yes")] * 10 + [("r", "x", None, None, "no")] * 10
    (found,) = _segments(rows)["anomalies"]
    assert (found["anomaly_id"], found["observed"]["decisions"]) == ("verdict_mix_shift:policy_version:(none)", 10)
    assert found["decision_ids"] == [f"d{i:02d}" for i in range(19, 9, -1)]


def test_the_outcome_state_keeps_its_evidence_by_default():
    # The dataset's rollups call outcome_partial without `evidence`: its default keeps the failed
    # decisions per segment (the findings' decision ids).
    ds, outs = [], []
    for i, (rule, action, status) in enumerate(HOLD_3_OF_4):
        ds.append(decision(f"d{i:02d}", at=T0 + timedelta(hours=i), rule=rule, action=action))
        outs.append(outcome(f"o{i:02d}", f"d{i:02d}", status, at=T0 + timedelta(hours=i, minutes=5)))
    f = frames(ds, outs)
    failed = anomalies.outcome_partial(f.decisions, f.outcomes, CLASSES)["failed"]
    rule = failed.filter((pl.col("dimension") == "matched_rule_id") & (pl.col("value") == "hold"))
    assert sorted(rule["decision_id"].to_list()) == ["d00", "d02", "d03"]
