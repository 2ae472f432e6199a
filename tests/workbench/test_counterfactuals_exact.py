"""Batch counterfactuals to the exact value (issue 22, item 5): every transition in its fixed
order (yes, no, review, then anything else), what counts as withdrawn and granted, the
decisions a draft cannot replay, and the newest changed decisions kept as evidence.
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import counterfactuals

H = timedelta(hours=1)


def _replay(frame: pl.LazyFrame) -> pl.LazyFrame:
    """The draft's verdict is the decision's `to` fact (none: not replayable)."""
    new = pl.col("facts_json").str.json_path_match("$.to")
    return frame.with_columns(new.alias("new_verdict"), pl.lit(None, pl.String).alias("new_rule_id"))


def _run(plan: list[tuple[str, str | None, str | None]]) -> dict:
    """(stored verdict, draft verdict or None, latest outcome status or None) per decision."""
    ds, os_ = [], []
    for i, (verdict, to, status) in enumerate(plan):
        ds.append(decision(f"d{i:02d}", at=T0 + i * H, verdict=verdict, facts=None if to is None else {"to": to}))
        if status is not None:
            os_.append(outcome(f"r{i:02d}", f"d{i:02d}", status, at=T0 + 100 * H))
    f = frames(ds, os_)
    return counterfactuals.counterfactuals(f.decisions, f.outcomes, CLASSES, _replay, draft={"name": "x"})


def test_every_transition_in_order_and_the_outcome_impact():
    report = _run([
        ("review", "yes", None), ("review", "review", None), ("review", "no", None),
        ("no", "review", "failed"), ("no", "no", None), ("no", "yes", "succeeded"),
        ("yes", "review", "failed"), ("yes", "review", "succeeded"), ("yes", "review", "cancelled"),
        ("yes", "no", "pending"), ("yes", "yes", "failed"), ("yes", "maybe", "failed"),
        ("maybe", "yes", None), ("review", None, "failed"), ("yes", None, "failed"),
    ])
    assert report["transitions"] == [
        {"from": "yes", "to": "yes", "count": 1}, {"from": "yes", "to": "no", "count": 1},
        {"from": "yes", "to": "review", "count": 3}, {"from": "yes", "to": "maybe", "count": 1},
        {"from": "no", "to": "yes", "count": 1}, {"from": "no", "to": "no", "count": 1},
        {"from": "no", "to": "review", "count": 1},
        {"from": "review", "to": "yes", "count": 1}, {"from": "review", "to": "no", "count": 1},
        {"from": "review", "to": "review", "count": 1},
        {"from": "maybe", "to": "yes", "count": 1},
    ]
    assert (report["decisions_evaluated"], report["decisions_changed"], report["not_replayable"]) == (13, 10, 2)
    # Withdrawn: yes to anything else (review, no, maybe); granted: anything else to yes.
    assert report["outcome_impact"] == {"caught_failures": 2, "lost_successes": 1,
                                        "withdrawn_without_known_outcome": 2, "unobserved_approvals": 3}
    assert report["changed_decision_ids"] == ["d12", "d11", "d09", "d08", "d07", "d06", "d05", "d03", "d02", "d00"]
    assert report["draft"] == {"name": "x"}


def test_the_evidence_keeps_the_ten_newest_changed_decisions():
    report = _run([("yes", "no", None)] * 12 + [("yes", "yes", None)])
    assert report["changed_decision_ids"] == [f"d{i:02d}" for i in range(11, 1, -1)]
    assert report["decisions_changed"] == 12


def test_nothing_replayable():
    report = _run([("yes", None, "failed"), ("no", None, None)])
    assert report["transitions"] == [] and report["changed_decision_ids"] == []
    assert (report["decisions_evaluated"], report["decisions_changed"], report["not_replayable"]) == (0, 0, 2)
    assert report["outcome_impact"] == dict.fromkeys(
        ("caught_failures", "lost_successes", "withdrawn_without_known_outcome", "unobserved_approvals"), 0)
    empty = _run([])
    assert (empty["transitions"], empty["not_replayable"], empty["changed_decision_ids"]) == ([], 0, [])


def test_verdicts_outside_yes_no_review_come_last_by_name():
    report = _run([("maybe", "yes", None), ("always", "yes", None), ("always", "yes", None), ("yes", "zeta", None),
                   ("yes", "alpha", None), ("yes", "alpha", None), ("no", "yes", None)])
    assert report["transitions"] == [
        {"from": "yes", "to": "alpha", "count": 2}, {"from": "yes", "to": "zeta", "count": 1},
        {"from": "no", "to": "yes", "count": 1},
        {"from": "always", "to": "yes", "count": 2}, {"from": "maybe", "to": "yes", "count": 1},
    ]
