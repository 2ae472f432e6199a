"""Batch counterfactuals: transitions, outcome impact and the not-replayable bucket."""

from __future__ import annotations

from datetime import timedelta

import polars as pl
from workbench_support import CLASSES, T0, decision, frames, outcome

from workbench.engines import counterfactuals


def _replay(frame: pl.LazyFrame) -> pl.LazyFrame:
    amount = pl.col("facts_json").str.json_path_match("$.amount").cast(pl.Int64, strict=False)
    return frame.with_columns(
        pl.when(amount.is_null()).then(None).when(amount > 50).then(pl.lit("no")).otherwise(pl.lit("yes"))
        .alias("new_verdict"),
        pl.lit(None, pl.String).alias("new_rule_id"),
    )


def test_transitions_and_outcome_impact():
    ds = [
        decision("a", at=T0, verdict="yes", facts={"amount": 90}),                       # yes→no, failed: caught
        decision("b", at=T0 + timedelta(hours=1), verdict="yes", facts={"amount": 80}),  # yes→no, succeeded: lost
        decision("c", at=T0 + timedelta(hours=2), verdict="no", facts={"amount": 10}),   # no→yes: unobserved
        decision("d", at=T0 + timedelta(hours=3), verdict="yes", facts={"amount": 10}),  # unchanged
        decision("e", at=T0 + timedelta(hours=4), verdict="review", facts=None),         # cannot replay
        decision("f", at=T0 + timedelta(hours=5), verdict="yes", facts={"amount": 70}),  # yes→no, no outcome
    ]
    os_ = [outcome("ra", "a", "failed", at=T0 + timedelta(days=1)),
           outcome("rb", "b", "succeeded", at=T0 + timedelta(days=1))]
    f = frames(ds, os_)
    report = counterfactuals.counterfactuals(f.decisions, f.outcomes, CLASSES, _replay, draft={"rulebook_hash": "h"})
    assert report["decisions_evaluated"] == 5 and report["not_replayable"] == 1
    assert report["decisions_changed"] == 4
    assert report["transitions"] == [{"from": "yes", "to": "yes", "count": 1}, {"from": "yes", "to": "no", "count": 3},
                                     {"from": "no", "to": "yes", "count": 1}]
    assert report["outcome_impact"] == {"caught_failures": 1, "lost_successes": 1,
                                        "withdrawn_without_known_outcome": 1, "unobserved_approvals": 1}
    assert report["changed_decision_ids"] == ["f", "c", "b", "a"]
    assert report["draft"] == {"rulebook_hash": "h"} and report["sample"]["decisions_considered"] == 6
