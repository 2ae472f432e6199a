"""Decision confidence to the exact value (issue 22, item 5): the Wilson lower bound, the policy
stability, the score and its levels, the buckets and the evidence counts.

The formula (docs/intelligence.md, "Decision confidence"): over similar decisions (latest outcome
success or failure), `lower` is the Wilson lower bound of the success rate (z = 1.96);
`stability` is `1 - (1 - share of the current version) x |p_cur - p_old|` with Laplace-smoothed
rates `(s + 1) / (n + 2)`; `score = lower x stability`, rounded to six digits before the level
is read: `high` from 0.8 and `medium` from 0.5 inclusive, `insufficient_data` below `min_sample`
similar decisions. The expected values are literals worked out from that formula by hand (a
plain-Python transcription), and the boundary cases are counts whose rounded score is exactly
the threshold.
"""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines.confidence import MAX_BUCKETS, confidence_report, finalize, merge, partial

H = timedelta(hours=1)


def _history(s_cur: int, f_cur: int, s_old: int, f_old: int, *, verdict: str = "yes",
             action: str = "apply_discount", prefix: str = "d", start: int = 0) -> tuple[list, list]:
    """Decisions of version v1 (old, first) and v2 (current, after them), each with one outcome."""
    kinds = [("v1", "succeeded")] * s_old + [("v1", "failed")] * f_old \
        + [("v2", "succeeded")] * s_cur + [("v2", "failed")] * f_cur
    ds, os_ = [], []
    for i, (version, status) in enumerate(kinds):
        did = f"{prefix}{start + i:04d}"
        ds.append(decision(did, at=T0 + (start + i) * H, policy_version=version, verdict=verdict, action=action))
        os_.append(outcome(f"r{did}", did, status, at=T0 + 1000 * H))
    return ds, os_


def _report(ds: list, os_: list, **kwargs) -> dict:
    f = frames(ds, os_)
    return confidence_report(f.decisions, f.outcomes, policy_id="pricing", classes=CLASSES, **kwargs)


@pytest.mark.parametrize(("counts", "score", "stability", "level"), [
    ((3, 1, 2, 2), 0.28026, 0.916667, "low"),
    ((4, 1, 0, 0), 0.375528, 1.0, "low"),              # all evidence current: stable
    ((0, 0, 3, 1), 0.25053, 0.833333, "low"),          # none current: p_cur is 1/2
    ((18, 6, 5, 4), 0.5, 0.94946, "medium"),           # 0.50000012 rounds to 0.5: medium
    ((10, 7, 13, 0), 0.499999, 0.846433, "low"),
    ((145, 14, 18, 8), 0.8, 0.96792, "high"),          # 0.79999995 rounds to 0.8: high
    ((56, 8, 19, 1), 0.799999, 0.989177, "medium"),
])
def test_score_stability_and_level(counts, score, stability, level):
    report = _report(*_history(*counts), policy_version="v2", min_sample=1)
    assert (report["score"], report["policy_stability"], report["level"]) == (score, stability, level)
    assert report["similar_decisions"] == sum(counts)
    assert report["recommendation"] == {"low": "low_confidence_review", "medium": "medium_confidence_monitor",
                                        "high": "high_confidence_proceed"}[level]


def test_min_sample_counts_similar_decisions_inclusively():
    ds, os_ = _history(3, 1, 2, 2)                     # 8 similar decisions
    assert _report(ds, os_, min_sample=8)["level"] == "low"
    short = _report(ds, os_, min_sample=9)
    assert (short["level"], short["recommendation"]) == ("insufficient_data", "insufficient_data_collect_outcomes")
    assert short["score"] == 0.28026                   # the score is reported either way
    assert _report(ds, os_)["level"] == "insufficient_data"   # the default min_sample is 10


def test_no_evidence_scores_zero_and_is_stable():
    ds, os_ = _history(0, 0, 0, 0)
    ds.append(decision("open", at=T0, policy_version="v2"))   # no outcome: considered, not similar
    report = _report(ds, os_, min_sample=0)
    assert (report["score"], report["policy_stability"], report["similar_decisions"], report["level"]) == \
        (0.0, 1.0, 0, "low")
    assert report["buckets"] == []


def test_based_on_counts_evidence_by_version():
    ds, os_ = _history(3, 1, 2, 2)
    report = _report(ds, os_, min_sample=4)
    assert report["policy_id"] == "pricing"
    assert report["based_on"] == {
        "policy_version": "v2", "verdict": None, "action": None, "successes": 5, "failures": 3,
        "current_version_successes": 3, "current_version_failures": 1, "min_sample": 4,
    }
    old_is_current = _report(ds, os_, policy_version="v1")["based_on"]
    assert (old_is_current["current_version_successes"], old_is_current["current_version_failures"]) == (2, 2)
    assert old_is_current["policy_version"] == "v1"
    nowhere = _report(ds, os_, policy_version="v0")           # no evidence is current: p_cur is 1/2
    assert (nowhere["based_on"]["current_version_successes"], nowhere["policy_stability"]) == (0, 0.9)


def test_the_current_version_defaults_to_the_newest_decisions():
    ds, os_ = _history(1, 0, 1, 0)
    # A tie on created_at goes to the greater decision id.
    ds.append(decision("z_last", at=T0 + 50 * H, policy_version="v3"))
    ds.append(decision("a_first", at=T0 + 50 * H, policy_version="v4"))
    assert _report(ds, os_)["based_on"]["policy_version"] == "v3"
    others = [decision("x", at=T0 + 99 * H, policy_id="other", policy_version="v9")]
    assert _report(ds + others, os_)["based_on"]["policy_version"] == "v3"   # another policy's decisions
    assert _report([], [])["based_on"]["policy_version"] is None
    assert _report([], [], min_sample=0)["score"] == 0.0


def test_verdict_and_action_select_similar_decisions():
    yes, yes_o = _history(4, 1, 0, 0, verdict="yes", action="apply_discount", prefix="y")
    no, no_o = _history(2, 0, 0, 0, verdict="no", action="reject", prefix="n", start=100)
    hold, hold_o = _history(1, 0, 0, 0, verdict="yes", action="hold", prefix="h", start=200)
    ds, os_ = yes + no + hold, yes_o + no_o + hold_o
    assert _report(ds, os_)["similar_decisions"] == 8
    assert _report(ds, os_, verdict="yes")["similar_decisions"] == 6
    assert _report(ds, os_, action="apply_discount")["similar_decisions"] == 5
    only = _report(ds, os_, verdict="yes", action="apply_discount", min_sample=1)
    assert (only["similar_decisions"], only["score"]) == (5, 0.375528)
    assert (only["based_on"]["verdict"], only["based_on"]["action"]) == ("yes", "apply_discount")
    assert _report(ds, os_, verdict="no", action="apply_discount")["similar_decisions"] == 0


def test_buckets_per_verdict_and_action_largest_first():
    yes, yes_o = _history(4, 1, 0, 0, verdict="yes", action="apply_discount", prefix="y")
    no, no_o = _history(2, 0, 0, 0, verdict="no", action="reject", prefix="n", start=100)
    hold, hold_o = _history(1, 0, 0, 0, verdict="yes", action="hold", prefix="h", start=200)
    also, also_o = _history(0, 1, 0, 0, verdict="review", action="aaa", prefix="r", start=300)
    buckets = _report(yes + no + hold + also, yes_o + no_o + hold_o + also_o, min_sample=2)["buckets"]
    assert buckets == [
        {"verdict": "yes", "action": "apply_discount", "score": 0.375528, "level": "low", "similar_decisions": 5,
         "policy_stability": 1.0, "recommendation": "low_confidence_review", "successes": 4, "failures": 1},
        {"verdict": "no", "action": "reject", "score": 0.342372, "level": "low", "similar_decisions": 2,
         "policy_stability": 1.0, "recommendation": "low_confidence_review", "successes": 2, "failures": 0},
        # One each: by verdict, then action.
        {"verdict": "review", "action": "aaa", "score": 0.0, "level": "insufficient_data", "similar_decisions": 1,
         "policy_stability": 1.0, "recommendation": "insufficient_data_collect_outcomes", "successes": 0,
         "failures": 1},
        {"verdict": "yes", "action": "hold", "score": 0.206543, "level": "insufficient_data", "similar_decisions": 1,
         "policy_stability": 1.0, "recommendation": "insufficient_data_collect_outcomes", "successes": 1,
         "failures": 0},
    ]


def test_buckets_stop_at_fifty():
    ds, os_ = [], []
    for i in range(MAX_BUCKETS + 1):
        more_d, more_o = _history(1, 0, 0, 0, action=f"a{i:02d}", prefix=f"b{i:02d}_", start=i)
        ds, os_ = ds + more_d, os_ + more_o
    buckets = _report(ds, os_)["buckets"]
    assert MAX_BUCKETS == 50
    assert [b["action"] for b in buckets] == [f"a{i:02d}" for i in range(50)]


def test_no_success_scores_a_positive_zero():
    # Without successes the Wilson bound is zero up to rounding (-3e-17 for five failures): the
    # clamp at 0 keeps the reported score 0.0, never -0.0.
    report = _report(*_history(0, 5, 0, 0), min_sample=1)
    assert report["score"] == 0.0 and math.copysign(1.0, report["score"]) == 1.0
    assert math.copysign(1.0, report["buckets"][0]["score"]) == 1.0


def test_bucket_counts_add_both_versions():
    ds, os_ = _history(2, 1, 3, 4, verdict="no", action="reject")
    (bucket,) = _report(ds, os_, policy_version="v2")["buckets"]
    assert (bucket["successes"], bucket["failures"], bucket["similar_decisions"]) == (5, 5, 10)


def test_a_newest_decision_without_a_version_makes_every_decision_old():
    """The dataset's `policy_version` may be null (`row.get("policy_version")`). When the newest
    decision has none, no version is current: every similar decision counts as old, its own
    version or none (`pl.lit(False)`, not a comparison with null, which would count none)."""
    ds, os_ = _history(0, 0, 3, 1)                     # v1: 3 successes, 1 failure
    ds.append(decision("untyped", at=T0 + 10 * H, policy_version=None))
    os_.append(outcome("runtyped", "untyped", "succeeded", at=T0 + 1000 * H))
    ds.append(decision("newest", at=T0 + 50 * H, policy_version=None))   # no outcome: not similar
    report = _report(ds, os_, min_sample=1)
    assert report["based_on"] == {
        "policy_version": None, "verdict": None, "action": None, "successes": 4, "failures": 1,
        "current_version_successes": 0, "current_version_failures": 0, "min_sample": 1,
    }
    # As _history(0, 0, 4, 1): none current, so p_cur is 1/2 and p_old 5/7: 1 - |1/2 - 5/7|.
    assert (report["similar_decisions"], report["policy_stability"]) == (5, 0.785714)
    (bucket,) = report["buckets"]
    assert (bucket["successes"], bucket["failures"]) == (4, 1)


def test_partials_of_partitions_merge_to_the_report_of_the_whole():
    """The cluster merges one partial per chunk: the newest decision (the current version) is
    taken over every partial, whichever lists it, and the evidence is summed. Here the newest
    decisions sit in the first partial, the oldest in the last, and a partial has no decision."""
    ds, os_ = _history(3, 1, 2, 2)                     # v1 first (d0000 to d0003), then v2
    ds.append(decision("later", at=T0 + 50 * H, policy_version="v3"))   # newest, no outcome
    whole = frames(ds, os_)
    chunks = [ds[4:], [], ds[:4]]
    parts = []
    for chunk in chunks:
        ids = {d["decision_id"] for d in chunk}
        f = frames(chunk, [o for o in os_ if o["decision_id"] in ids])
        parts.append(partial(f.decisions, f.outcomes, policy_id="pricing", classes=CLASSES))
    assert [p["newest"].height for p in parts] == [1, 0, 1]
    state = merge(parts)
    assert state["newest"].rows() == [(T0 + 50 * H, "later", "v3")]
    report = finalize(state, policy_id="pricing", classes=CLASSES)   # min_sample by default: 10
    assert report == confidence_report(whole.decisions, whole.outcomes, policy_id="pricing", classes=CLASSES)
    assert report["based_on"] == {
        "policy_version": "v3", "verdict": None, "action": None, "successes": 5, "failures": 3,
        "current_version_successes": 0, "current_version_failures": 0, "min_sample": 10,
    }
    assert (report["similar_decisions"], report["level"]) == (8, "insufficient_data")
