"""Batch counterfactuals: one draft rulebook (or patched rulebook) evaluated over many stored
decisions, and what the change would have meant given the outcomes we know.

The engine does not evaluate rulebooks itself: the caller passes `replay`, a function that adds
`new_verdict` (yes / no / review; null when the decision cannot be replayed, e.g. its facts are
not in the record) and `new_rule_id` to a LazyFrame of decisions. `workbench.migration.draft_replay`
supplies one backed by the gate's evaluator; a vectorized Rulebook→Polars compiler plugs in the
same way. Formulas in docs/intelligence.md, "Batch counterfactuals":

* transitions: counts of (stored verdict → draft verdict) over the replayable decisions;
* caught_failures: `yes` → `no`/`review` on a decision whose latest outcome failed;
  lost_successes: the same on one that succeeded;
* unobserved_approvals: `no`/`review` → `yes`: the action was never taken, so its outcome
  cannot be known and is counted apart, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import polars as pl

from gate.vocabulary import VERDICTS
from workbench.engines.common import (
    FAILURE,
    SUCCESS,
    class_expr,
    merge_frames,
    merge_sample,
    merge_top,
    sample_block,
    sample_partial,
    top_per_group,
    with_latest_outcome,
)

Replay = Callable[[pl.LazyFrame], pl.LazyFrame]
TRANSITION_HOW = {"decisions": "sum"}


def partial(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str],
            replay: Replay) -> dict[str, pl.DataFrame]:
    joined = replay(with_latest_outcome(decisions, outcomes)).with_columns(class_expr(classes))
    transitions = joined.group_by("verdict", "new_verdict", "effect").agg(
        pl.len().cast(pl.Int64).alias("decisions"))
    changed = top_per_group(
        joined.filter(pl.col("new_verdict").is_not_null() & (pl.col("new_verdict") != pl.col("verdict")))
        .select(pl.lit("changed").alias("kind"), "created_at", "decision_id"), ["kind"])
    t, c = pl.collect_all([transitions, changed])
    return {
        "sample": sample_partial(joined),
        "transitions": merge_frames([t.with_columns(pl.col("new_verdict").fill_null("(not_replayable)"))],
                                    ["verdict", "new_verdict", "effect"], TRANSITION_HOW),
        "changed": c,
    }


def merge(partials: Sequence[Mapping[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    return {
        "sample": merge_sample([p["sample"] for p in partials]),
        "transitions": merge_frames([p["transitions"] for p in partials], ["verdict", "new_verdict", "effect"],
                                    TRANSITION_HOW),
        "changed": merge_top([p["changed"] for p in partials], ["kind"]),
    }


def finalize(state: Mapping[str, pl.DataFrame], classes: Mapping[str, str], *, draft: Mapping[str, Any]) -> dict[str, Any]:
    rows = list(state["transitions"].iter_rows(named=True)) if state["transitions"].height else []
    replayed = [r for r in rows if r["new_verdict"] != "(not_replayable)"]
    pairs: dict[tuple[str, str], int] = {}
    for r in replayed:
        pairs[(r["verdict"], r["new_verdict"])] = pairs.get((r["verdict"], r["new_verdict"]), 0) + r["decisions"]
    order: dict[str, int] = {v: i for i, v in enumerate(VERDICTS)}
    transitions = [{"from": a, "to": b, "count": n}
                   for (a, b), n in sorted(pairs.items(), key=lambda kv: (order.get(kv[0][0], 9), order.get(kv[0][1], 9), kv[0]))]
    withdrawn = [r for r in replayed if r["verdict"] == "yes" and r["new_verdict"] != "yes"]
    granted = [r for r in replayed if r["verdict"] != "yes" and r["new_verdict"] == "yes"]
    changed = state["changed"]
    return {
        "draft": dict(draft),
        "decisions_evaluated": sum(r["decisions"] for r in replayed),
        "decisions_changed": sum(r["decisions"] for r in replayed if r["verdict"] != r["new_verdict"]),
        "not_replayable": sum(r["decisions"] for r in rows if r["new_verdict"] == "(not_replayable)"),
        "transitions": transitions,
        "outcome_impact": {
            "caught_failures": sum(r["decisions"] for r in withdrawn if r["effect"] == FAILURE),
            "lost_successes": sum(r["decisions"] for r in withdrawn if r["effect"] == SUCCESS),
            "withdrawn_without_known_outcome": sum(r["decisions"] for r in withdrawn
                                                   if r["effect"] not in (FAILURE, SUCCESS)),
            "unobserved_approvals": sum(r["decisions"] for r in granted),
        },
        "changed_decision_ids": changed["decision_id"].to_list() if changed.height else [],
        "sample": sample_block(state["sample"], classes),
    }


def counterfactuals(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, classes: Mapping[str, str],
                    replay: Replay, *, draft: Mapping[str, Any]) -> dict[str, Any]:
    return finalize(merge([partial(decisions, outcomes, classes, replay)]), classes, draft=draft)
