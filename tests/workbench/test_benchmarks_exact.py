"""Benchmarks to the exact value (issue 22, item 5): the caller's metrics, every metric's
percentiles over the cohort, who is in the cohort, and the recommendation's band around the
cohort's median, tested on both sides with deltas that are exactly +-0.05.

Formulas in docs/intelligence.md, "Benchmarks": success and failure rates over resolved
decisions, review rate over decisions with an outcome, terminal coverage over all decisions;
percentiles by linear interpolation (type 7) over one value per other opted-in scope with a
resolved outcome; `above_cohort` from +0.05 and `below_cohort` from -0.05 inclusive.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import benchmarks

STATUS = {"s": "succeeded", "f": "failed", "x": "cancelled", "o": "pending"}


def _scope(scope: str, kinds: str) -> tuple[list, list]:
    """One decision per letter: s success, f failure, x excluded, o open, - no outcome."""
    ds = [decision(f"{scope}-{i}", at=T0 + timedelta(hours=i), scope=scope) for i in range(len(kinds))]
    os_ = [outcome(f"{scope}-r{i}", f"{scope}-{i}", STATUS[kind], at=T0 + timedelta(days=9), scope=scope)
           for i, kind in enumerate(kinds) if kind != "-"]
    return ds, os_


def _run(scopes: dict[str, str], opted_in=None, *, own: str = "own", min_scopes: int = 1,
         min_decisions: int = 1) -> dict:
    ds, os_ = [], []
    for scope, kinds in scopes.items():
        d, o = _scope(scope, kinds)
        ds, os_ = ds + d, os_ + o
    f = frames(ds, os_)
    opted_in = set(scopes) if opted_in is None else opted_in
    return benchmarks.benchmarks(f.decisions, f.outcomes, CLASSES, own_scope=own, opted_in=opted_in,
                                 min_cohort_scopes=min_scopes, min_cohort_decisions=min_decisions)


def test_your_metrics():
    report = _run({"own": "sssfxxoo--", "b": "sf"})
    assert report["your_metrics"] == {"success_rate": 0.75, "failure_rate": 0.25, "review_rate": 0.25,
                                      "terminal_coverage": 0.6, "decisions": 10, "resolved_decisions": 4}
    assert report["sample"]["decisions_considered"] == 10 and report["sample"]["decisions_with_outcome"] == 8


def test_a_caller_without_decisions_has_no_rates_and_no_recommendation():
    report = _run({"b": "sf", "own_elsewhere": "s"}, opted_in={"own", "b"})
    assert report["your_metrics"] == {"success_rate": None, "failure_rate": None, "review_rate": None,
                                      "terminal_coverage": None, "decisions": 0, "resolved_decisions": 0}
    assert report["cross_customer"]["status"] == "available"
    assert (report["comparison"]["success_rate_delta_vs_p50"], report["recommendation"]) == (None, "insufficient_data")


def test_percentiles_of_every_metric_over_the_cohort():
    report = _run({
        "own": "ss",
        "b": "sfff",        # success 0.25, review 0, coverage 1
        "c": "ssf-",        # 0.6667, 0, 0.75
        "d": "ssssoo--",    # 1.0, 1/3, 0.5
        "e": "sffffxxo",    # 0.2, 0.125, 0.875
        "none_resolved": "xxoo",   # no success or failure: not in the cohort
        "not_in": "ffff",          # not opted in
    }, opted_in={"own", "b", "c", "d", "e", "none_resolved"}, min_scopes=4, min_decisions=24)
    cross = report["cross_customer"]
    assert cross["status"] == "available"
    assert cross["cohort"] == {"scopes": 4, "decisions": 24, "min_cohort_scopes": 4, "min_cohort_decisions": 24}
    assert cross["percentiles"] == {
        "success_rate": {"p25": 0.2375, "p50": 0.4583, "p75": 0.75},
        "failure_rate": {"p25": 0.25, "p50": 0.5417, "p75": 0.7625},
        "review_rate": {"p25": 0.0, "p50": 0.0625, "p75": 0.1771},
        "terminal_coverage": {"p25": 0.6875, "p50": 0.8125, "p75": 0.9062},
    }
    assert report["comparison"]["success_rate_delta_vs_p50"] == 0.5417
    assert report["recommendation"] == "above_cohort"
    fewer = _run({"own": "ss", "b": "sfff", "c": "ssf-"}, min_scopes=2, min_decisions=9)
    assert fewer["cross_customer"]["status"] == "insufficient_cohort"
    assert fewer["cross_customer"]["cohort"] == {"min_cohort_scopes": 2, "min_cohort_decisions": 9}
    assert fewer["recommendation"] == "insufficient_cohort" and fewer["cross_customer"]["percentiles"] == {}
    for body in (report, fewer):
        assert set(body["cross_customer"]) == {"status", "reason", "cohort", "percentiles"}
        assert isinstance(body["cross_customer"]["reason"], str) and body["cross_customer"]["reason"]


@pytest.mark.parametrize(("own", "cohort", "delta", "recommendation"), [
    ("s" + "f" * 19, ("f", "f", "f"), 0.05, "above_cohort"),          # 0.05 - 0 exactly
    ("f" * 20, ("s" + "f" * 19,) * 3, -0.05, "below_cohort"),        # 0 - 0.05 exactly
    ("sf", ("sf", "sf"), 0.0, "in_line_with_cohort"),
    ("ssf", ("sf", "sf"), 0.1667, "above_cohort"),
    ("sff", ("sf", "sf"), -0.1667, "below_cohort"),
    ("s" * 11 + "f" * 9, ("sf", "sf"), 0.05, "above_cohort"),           # 0.55 - 0.5, a hair over 0.05
    ("s" * 21 + "f" * 19, ("sf", "sf"), 0.025, "in_line_with_cohort"),
])
def test_recommendation_band_around_the_median(own, cohort, delta, recommendation):
    scopes = {"own": own, **{f"peer{i}": kinds for i, kinds in enumerate(cohort)}}
    report = _run(scopes)
    assert report["comparison"]["success_rate_delta_vs_p50"] == delta
    assert report["recommendation"] == recommendation


def test_not_opted_in_shows_thresholds_only():
    report = _run({"own": "sf", "b": "sf"}, opted_in={"b"}, min_scopes=1, min_decisions=2)
    assert report["cross_customer"]["status"] == "not_opted_in"
    assert report["cross_customer"]["cohort"] == {"min_cohort_scopes": 1, "min_cohort_decisions": 2}
    assert report["comparison"]["success_rate_delta_vs_p50"] is None


def _sample_counts(state: dict) -> dict:
    return dict(state["sample"].select("status", "decisions").iter_rows())


def test_a_partial_without_an_own_scope_keeps_every_scopes_sample():
    """The rollups compute one partial for every scope (`own_scope=None`) and pick the caller's
    sample when they read it: without an own scope no decision is left out of the sample."""
    ds, os_ = [], []
    for scope, kinds in {"own": "sf-", "b": "so", "c": "s"}.items():
        d, o = _scope(scope, kinds)
        ds, os_ = ds + d, os_ + o
    f = frames(ds, os_)
    every = benchmarks.partial(f.decisions, f.outcomes, CLASSES, own_scope=None)
    assert _sample_counts(every) == {"succeeded": 3, "failed": 1, "pending": 1, None: 1}
    own = benchmarks.partial(f.decisions, f.outcomes, CLASSES, own_scope="own")
    assert _sample_counts(own) == {"succeeded": 1, "failed": 1, None: 1}
    for state in (every, own):  # the per-scope counts do not depend on the own scope
        assert state["scopes"].select("scope", "decisions", "success", "failure", "open", "with_outcome").rows() == [
            ("b", 2, 1, 0, 1, 2), ("c", 1, 1, 0, 0, 1), ("own", 3, 1, 1, 0, 2)]
