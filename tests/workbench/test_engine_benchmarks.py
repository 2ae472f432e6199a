"""Benchmarks: opt-in cohorts, thresholds, percentiles by hand, nothing about other scopes leaks."""

from __future__ import annotations

import json
from datetime import timedelta

from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import benchmarks


def _scope(scope: str, successes: int, total: int = 10):
    ds = [decision(f"{scope}-{i}", at=T0 + timedelta(hours=i), scope=scope) for i in range(total)]
    os_ = [outcome(f"{scope}-r{i}", f"{scope}-{i}", "succeeded" if i < successes else "failed",
                   at=T0 + timedelta(days=1), scope=scope) for i in range(total)]
    return ds, os_


def _run(opted_in, **kw):
    ds, os_ = [], []
    for scope, successes in (("own", 9), ("secret_b", 2), ("secret_c", 4), ("secret_d", 6), ("secret_e", 8),
                             ("outsider", 0)):
        d, o = _scope(scope, successes)
        ds += d
        os_ += o
    f = frames(ds, os_)
    args = {"min_cohort_scopes": 3, "min_cohort_decisions": 30, **kw}
    return benchmarks.benchmarks(f.decisions, f.outcomes, CLASSES, own_scope="own", opted_in=opted_in, **args)


EVERYONE = {"own", "secret_b", "secret_c", "secret_d", "secret_e"}


def test_percentiles_and_delta_over_opted_in_scopes_only():
    report = _run(EVERYONE)
    assert report["your_metrics"]["success_rate"] == 0.9 and report["your_metrics"]["decisions"] == 10
    cross = report["cross_customer"]
    assert cross["status"] == "available"
    assert cross["cohort"]["scopes"] == 4 and cross["cohort"]["decisions"] == 40
    # rates 0.2 0.4 0.6 0.8 (the non-opted-in 0.0 is left out): type-7 percentiles
    assert cross["percentiles"]["success_rate"] == {"p25": 0.35, "p50": 0.5, "p75": 0.65}
    assert report["comparison"]["success_rate_delta_vs_p50"] == 0.4
    assert report["recommendation"] == "above_cohort"
    text = json.dumps(report)
    assert "secret" not in text and "outsider" not in text
    assert report["sample"]["decisions_considered"] == 10  # the sample is the caller's own


def test_not_opted_in_caller_sees_only_its_own_metrics():
    report = _run(EVERYONE - {"own"})
    assert report["cross_customer"]["status"] == "not_opted_in"
    assert report["cross_customer"]["percentiles"] == {}
    assert "scopes" not in report["cross_customer"]["cohort"]
    assert report["comparison"]["success_rate_delta_vs_p50"] is None
    assert report["your_metrics"]["success_rate"] == 0.9
    assert report["recommendation"] == "opt_in_to_compare"


def test_thresholds_withhold_percentiles():
    few = _run({"own", "secret_b", "secret_c"})
    assert few["cross_customer"]["status"] == "insufficient_cohort" and few["cross_customer"]["percentiles"] == {}
    assert "scopes" not in few["cross_customer"]["cohort"]
    small = _run(EVERYONE, min_cohort_decisions=41)
    assert small["cross_customer"]["status"] == "insufficient_cohort"
    exact = _run(EVERYONE, min_cohort_scopes=4, min_cohort_decisions=40)
    assert exact["cross_customer"]["status"] == "available"
