"""Effectiveness: the recommendation's exact boundaries and the confidence formula's exact
values (issue 22, item 5: a mutation pass found both unpinned).

The bands are `score >= 0.8` healthy, `>= 0.6` monitor, else review_policy, and
insufficient_data while the resolved decisions are fewer than `min_sample`
(docs/intelligence.md, "Effectiveness"). Each boundary is tested on both sides with a score
that is exactly the threshold. The expected confidences are literals worked out by hand from
`(1 - Wilson width) x terminal coverage`, so a changed constant or operator is caught.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import effectiveness

H = timedelta(hours=1)
STATUS = {"s": "succeeded", "f": "failed", "x": "cancelled", "o": "pending"}


def _report(s: int, f: int, x: int = 0, o: int = 0, none: int = 0, *, min_sample: int = 1) -> dict:
    """s successes, f failures, x excluded, o open and `none` decisions without an outcome."""
    kinds = "s" * s + "f" * f + "x" * x + "o" * o + "-" * none
    ds = [decision(f"d{i:03d}", at=T0 + i * H) for i in range(len(kinds))]
    os_ = [outcome(f"r{i:03d}", f"d{i:03d}", STATUS[kind], at=T0 + 500 * H)
           for i, kind in enumerate(kinds) if kind != "-"]
    f_ = frames(ds, os_)
    return effectiveness.effectiveness(f_.decisions, f_.outcomes, CLASSES, min_sample=min_sample)


@pytest.mark.parametrize(("successes", "expected"), [
    (20, "healthy"),
    (16, "healthy"),        # 16 / 20 = 0.8 exactly: healthy starts at 0.8 inclusive
    (15, "monitor"),        # 0.75
    (12, "monitor"),        # 0.6 exactly: monitor starts at 0.6 inclusive
    (11, "review_policy"),  # 0.55
    (0, "review_policy"),
])
def test_recommendation_boundaries_are_inclusive(successes, expected):
    report = _report(successes, 20 - successes, min_sample=20)
    assert report["effectiveness_score"] == successes / 20
    assert report["recommendation"] == expected


def test_min_sample_counts_resolved_decisions_inclusively():
    # 5 resolved (4 + 1) plus excluded, open and outcome-less decisions, which do not count.
    assert _report(4, 1, x=3, o=3, none=3, min_sample=5)["recommendation"] == "healthy"
    assert _report(4, 1, x=3, o=3, none=3, min_sample=6)["recommendation"] == "insufficient_data"
    assert _report(0, 0, x=9, min_sample=1)["recommendation"] == "insufficient_data"
    assert _report(1, 0, min_sample=1)["recommendation"] == "healthy"
    assert _report(1, 0, min_sample=0)["recommendation"] == "healthy"


def test_confidence_and_metrics_are_the_documented_formula():
    report = _report(16, 4, x=3, o=2, none=5)   # N = 30, R = 20, 25 with an outcome
    m = report["metrics"]
    assert m["success_rate_interval"] == [0.584, 0.9193]
    assert m["terminal_coverage"] == 0.7667      # (16 + 4 + 3) / 30
    assert report["confidence"] == 0.5096        # (1 - (0.9193.. - 0.5840..)) x 23 / 30
    assert (m["success_rate"], m["failure_rate"]) == (0.8, 0.2)
    assert (m["review_rate"], m["excluded_rate"], m["outcome_coverage"]) == (0.08, 0.12, 0.8333)
    assert m["resolved_decisions"] == 20
    assert report["effectiveness_score"] == 0.8 and report["recommendation"] == "healthy"


@pytest.mark.parametrize(("counts", "confidence", "interval"), [
    ((12, 8), 0.6054, [0.3866, 0.7812]),
    ((3, 1, 1), 0.3462, [0.3006, 0.9544]),   # coverage 1: the excluded decision is terminal
    ((5, 0), 0.5655, [0.5655, 1.0]),
    ((0, 5), 0.5655, [0.0, 0.4345]),
])
def test_confidence_exact_values(counts, confidence, interval):
    report = _report(*counts)
    assert report["confidence"] == confidence
    assert report["metrics"]["success_rate_interval"] == interval


def test_no_resolved_decision_has_zero_confidence_and_no_interval():
    report = _report(0, 0, x=2, o=1)
    assert report["confidence"] == 0.0
    assert report["metrics"]["success_rate_interval"] is None
    assert report["effectiveness_score"] is None
    assert report["metrics"]["terminal_coverage"] == 0.6667


def _groups(rows: list[tuple[str | None, str]], *, min_sample: int = 1) -> list:
    """One decision an hour per (rule, outcome kind); `by_group` over the matched rule."""
    ds = [decision(f"d{i:03d}", at=T0 + i * H, rule=rule) for i, (rule, _kind) in enumerate(rows)]
    os_ = [outcome(f"r{i:03d}", f"d{i:03d}", STATUS[kind], at=T0 + 500 * H)
           for i, (_rule, kind) in enumerate(rows) if kind != "-"]
    f_ = frames(ds, os_)
    return effectiveness.by_group(f_.decisions, f_.outcomes, CLASSES, "matched_rule_id", min_sample=min_sample)


def test_by_group_orders_groups_by_size_then_value_nulls_last():
    # b: 4 decisions (3 of 4 succeeded); a, c and the default (no rule): 2 each. Ties by value, the
    # null group last.
    rows = [(None, "f"), ("c", "s"), ("b", "s"), ("a", "s"), ("b", "f"), ("c", "x"), ("b", "s"),
            ("a", "-"), (None, "s"), ("b", "s")]
    groups = _groups(rows, min_sample=2)
    assert [value for value, _body in groups] == ["b", "a", "c", None]
    bodies = dict(groups)
    b = bodies["b"]
    assert (b["effectiveness_score"], b["recommendation"]) == (0.75, "monitor")
    assert b["metrics"]["resolved_decisions"] == 4 and b["sample"]["decisions_considered"] == 4
    # Each group is finalized on its own sample: a has one resolved decision (under min_sample 2),
    # one without an outcome; c one success and one excluded; the null group one of each.
    a = bodies["a"]
    assert (a["recommendation"], a["metrics"]["resolved_decisions"], a["metrics"]["outcome_coverage"]) == (
        "insufficient_data", 1, 0.5)
    c = bodies["c"]
    assert (c["metrics"]["resolved_decisions"], c["metrics"]["excluded_rate"], c["metrics"]["terminal_coverage"]) == (
        1, 0.5, 1.0)
    none = bodies[None]
    assert (none["effectiveness_score"], none["metrics"]["failure_rate"], none["recommendation"]) == (
        0.5, 0.5, "review_policy")
    # The same body as the whole report of exactly that group's decisions.
    for value, body in groups:
        kept = [(rule, kind) for rule, kind in rows if rule == value]
        only = [decision(f"d{i:03d}", at=T0 + i * H, rule=rule) for i, (rule, _k) in enumerate(rows) if rule == value]
        outs = [outcome(f"r{i:03d}", f"d{i:03d}", STATUS[kind], at=T0 + 500 * H)
                for i, (rule, kind) in enumerate(rows) if rule == value and kind != "-"]
        f_ = frames(only, outs)
        assert body == effectiveness.effectiveness(f_.decisions, f_.outcomes, CLASSES, min_sample=2), (value, kept)


def test_by_group_without_decisions_is_empty():
    assert _groups([]) == []
