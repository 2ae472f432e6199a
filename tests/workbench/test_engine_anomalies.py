"""Anomalies: each detector on a ledger built to trigger it, a stable ledger that triggers none,
and the threshold / max_items / min_sample knobs."""

from __future__ import annotations

from datetime import timedelta

from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import anomalies
from workbench.engines.common import evidence, odds_shift


def _ledger(*, bad_rule: bool = False, new_version_blocks: bool = False, drift: bool = False,
            version_fails: bool = False, n: int = 200):
    ds, os_ = [], []
    for i in range(n):
        at = T0 + timedelta(days=i * 58 / n)  # January and February
        rule = ("approve", "margin", "volume", "loyalty")[i % 4]
        version = "v2" if i >= n // 2 else "v1"
        verdict = "no" if new_version_blocks and version == "v2" and i % 2 else "yes"
        amount = 100 + (i % 7) * 10 + (500 if drift and at.month == 2 else 0)
        ds.append(decision(f"d{i:04d}", at=at, rule=rule, policy_version=version, verdict=verdict,
                           facts={"amount": amount}))
        failed = (i % 7 == 0) or (bad_rule and rule == "volume" and i % 3) or (version_fails and version == "v2" and i % 3 == 0)
        os_.append(outcome(f"r{i:04d}", f"d{i:04d}", "failed" if failed else "succeeded", at=at + timedelta(hours=2)))
    return frames(ds, os_)


def _run(f, **kw):
    args = {"min_sample": 10, "threshold": 0.35, "max_items": 5, **kw}
    return anomalies.anomalies(f.decisions, f.outcomes, CLASSES, **args)


def test_stable_ledger_has_no_anomalies():
    report = _run(_ledger())
    assert report["anomaly_count"] == 0 and report["anomalies"] == []
    assert report["recommendation"] == "stable"
    assert report["checks"]["policy_versions"] == {"current": "v2", "previous": "v1"}
    assert report["checks"]["facts"] == {"recent_month": "2026-02", "numeric_facts": 1}
    assert report["sample"]["decisions_considered"] == 200


def test_failure_rate_shift_by_rule_names_the_failed_decisions():
    report = _run(_ledger(bad_rule=True))
    finding = next(a for a in report["anomalies"] if a["anomaly_id"] == "failure_rate_shift:matched_rule_id:volume")
    f1 = finding["observed"]["failures"]
    n1 = finding["observed"]["resolved"]
    f0, n0 = finding["baseline"]["failures"], finding["baseline"]["resolved"]
    assert n1 == 50 and n0 == 150
    odds, z = odds_shift(f1, n1, f0, n0)
    assert finding["anomaly_score"] == round((1 - 1 / odds) * evidence(z), 4)
    assert finding["severity"] in ("medium", "high")
    assert "under matched_rule_id 'volume'" in finding["reasons"][1]
    assert len(finding["decision_ids"]) == 10
    assert all(int(d[1:]) % 4 == 2 for d in finding["decision_ids"])  # only 'volume' decisions
    assert finding["decision_ids"] == sorted(finding["decision_ids"], reverse=True)  # newest first


def test_verdict_mix_shift_after_a_version_change():
    report = _run(_ledger(new_version_blocks=True))
    finding = next(a for a in report["anomalies"] if a["kind"] == "verdict_mix_shift")
    assert finding["value"] == "v2"
    assert finding["baseline"]["verdict_shares"] == {"yes": 1.0, "no": 0.0, "review": 0.0}
    assert finding["observed"]["verdict_shares"] == {"yes": 0.5, "no": 0.5, "review": 0.0}
    assert "under version 'v1'" in finding["reasons"][1]
    assert finding["decision_ids"] and all(int(d[1:]) % 2 == 1 and int(d[1:]) >= 100 for d in finding["decision_ids"])


def test_fact_drift_in_the_newest_month():
    report = _run(_ledger(drift=True))
    finding = next(a for a in report["anomalies"] if a["kind"] == "fact_drift")
    assert finding["value"] == "amount" and finding["observed"]["month"] == "2026-02"
    assert finding["observed"]["mean"] - finding["baseline"]["mean"] > 400
    assert finding["severity"] == "high" and report["recommendation"] == "investigate"
    assert len(finding["decision_ids"]) == 10


def test_threshold_max_items_and_min_sample():
    f = _ledger(bad_rule=True, new_version_blocks=True, drift=True)
    everything = _run(f, threshold=0.0, max_items=100)
    assert everything["anomaly_count"] >= 3
    scores = [a["anomaly_score"] for a in everything["anomalies"]]
    assert scores == sorted(scores, reverse=True)
    one = _run(f, threshold=0.0, max_items=1)
    assert one["anomaly_count"] == everything["anomaly_count"] and one["anomalies"] == everything["anomalies"][:1]
    strict = _run(f, threshold=0.99)
    assert all(a["anomaly_score"] >= 0.99 for a in strict["anomalies"])
    assert _run(f, min_sample=1000)["recommendation"] == "insufficient_data"
    assert _run(f, min_sample=1000)["anomaly_count"] == 0


def test_mixed_type_fact_is_not_numeric():
    ds = [decision(f"d{i}", at=T0 + timedelta(days=i), facts={"x": i if i % 5 else "text", "y": i})
          for i in range(60)]
    report = _run(frames(ds, []), threshold=0.0)
    assert report["checks"]["facts"]["numeric_facts"] == 1
    assert all(a["value"] != "x" for a in report["anomalies"])


def test_each_reason_leads_with_a_plain_sentence_then_the_statistics():
    version = next(a for a in _run(_ledger(version_fails=True))["anomalies"]
                   if a["anomaly_id"] == "failure_rate_shift:policy_version:v2")
    p0, p1 = version["baseline"]["failure_rate"], version["observed"]["failure_rate"]
    assert version["reasons"][0] == f"failures rose from {p0:.1%} to {p1:.1%} after version v2"
    assert "odds of failure" in version["reasons"][-1]
    rule = next(a for a in _run(_ledger(bad_rule=True))["anomalies"]
                if a["anomaly_id"] == "failure_rate_shift:matched_rule_id:volume")
    assert rule["reasons"][0].startswith("failures are ") and "under rule volume, against " in rule["reasons"][0]
    mix = next(a for a in _run(_ledger(new_version_blocks=True))["anomalies"] if a["kind"] == "verdict_mix_shift")
    assert mix["reasons"][0] in ("'yes' verdicts fell from 100.0% to 50.0% after version v2",
                                 "'no' verdicts rose from 0.0% to 50.0% after version v2")
    drift = next(a for a in _run(_ledger(drift=True))["anomalies"] if a["kind"] == "fact_drift")
    assert drift["reasons"][0].startswith("fact amount rose from ") and drift["reasons"][0].endswith(" on average in 2026-02")


def _without_ids(report: dict) -> dict:
    return {**report, "anomalies": [{**a, "decision_ids": []} for a in report["anomalies"]]}


def test_without_evidence_every_finding_is_the_same_but_its_decision_ids():
    """The effectiveness report's `health` reads the anomaly state without its evidence
    (`partial(…, evidence=False)`): every finding, score, order and reason must be the same."""
    args = {"min_sample": 10, "threshold": 0.0, "max_items": 100}
    every_kind = {"failure_rate_shift", "verdict_mix_shift", "fact_drift"}
    for f in (_ledger(bad_rule=True, new_version_blocks=True, drift=True, version_fails=True), _ledger(drift=True)):
        full = anomalies.finalize(anomalies.merge([anomalies.partial(f.decisions, f.outcomes, CLASSES)]), CLASSES,
                                  **args)
        bare = anomalies.partial(f.decisions, f.outcomes, CLASSES, evidence=False)
        assert all(not bare[name].height for name in ("failed", "by_verdict", "fact_high", "fact_low"))
        lean = anomalies.finalize(anomalies.merge([bare]), CLASSES, **args)
        assert full["anomalies"] and all(a["decision_ids"] for a in full["anomalies"])
        assert lean == _without_ids(full)
    assert {a["kind"] for a in full["anomalies"]} <= every_kind
