"""The dry-run's typed, serializable result, derived from the computed cube.

`DryRunResult` is JSON (the manifest's `dry_run` member is a copy of it), so the reports render it
without touching Polars, and the same result is signed, written and shown everywhere.

Counts are over decisions of the rulebook in the chosen scope. *Replayed* decisions are the
ones with facts (vector or scalar); *unreplayable* ones (no facts in the record) are counted in
their own bucket and take no part in transitions, drift or the review forecast.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

import polars as pl

from gate.privacy.removal import InputsRemoved, inputs_removed
from gate.vocabulary import VERDICTS
from workbench.engines import rulebook_polars as rp
from workbench.migration.baseline import HISTORY, Baseline
from workbench.migration.compute import FLIP_COLUMNS, NO_OUTCOME, UNOBSERVABLE, Computed
from workbench.migration.draft import Draft
from workbench.migration.history import History, HistorySource
from workbench.migration.holdcost import HoldCost, hold_cost
from workbench.migration.impact import CostModel, Impact, impact

__all__ = ["LISTED_FLIP_SCHEMA", "TRANSITION_SCHEMA", "DryRunResult", "summarize"]

# The types of the result's row lists, for a frame built from them (`pl.DataFrame(rows, schema=…)`):
# never inferred from the first rows, where a column may be null throughout (the newest flips have
# no outcome yet) and refuse a later value.
LISTED_FLIP_SCHEMA: dict[str, pl.DataType] = {name: pl.String() for name in FLIP_COLUMNS}  # created_at as ISO text
TRANSITION_SCHEMA: dict[str, pl.DataType] = {"from": pl.String(), "to": pl.String(), "count": pl.Int64()}
DEFAULT_RULE = None  # a null rule id: the default outcome decided (or needs_input)


# The result's fixed rows (docs/dry-run.md). `from` is a keyword: these two are declared by call.
Transition = TypedDict("Transition", {"from": str, "to": str, "count": int})
RuleTransition = TypedDict("RuleTransition", {"from": str, "to": str, "old_rule": str | None,
                                              "new_rule": str | None, "count": int})


# One (stored verdict, draft verdict) pair of the replayed flips, by the outcome class of their
# latest outcome record (`none`: no record; `unobservable`: blocked, never executed).
OutcomeCell = TypedDict("OutcomeCell", {"from": str, "to": str, "count": int, "success": int, "failure": int,
                                        "excluded": int, "open": int, "none": int, "unobservable": int})


class Outcomes(TypedDict):
    """`outcomes`: the flips by outcome class, and what they say the draft would have done."""

    by_transition: list[OutcomeCell]
    caught_failures: int
    blocked_successes: int
    unobserved_new_approvals: int
    unobserved_new_reviews: int
    flips_without_outcome: int


class DraftIdentity(TypedDict):
    """`draft`: which rulebook version the dry-run replayed, and its rules' order."""

    rulebook_id: str
    version: str
    rulebook_hash: str
    rule_order: list[str]


class HistoryVersion(TypedDict):
    """A version of the rulebook in the dry-run's scope (`History.versions_in_scope`): its decisions,
    the first and the last (ISO text)."""

    policy_version: str
    rulebook_hash: str
    decisions: int
    first: str
    last: str


class Unreplayable(TypedDict):
    count: int
    by_verdict: dict[str, int]


class Flips(TypedDict):
    """`flips`: how many decisions the draft changes, and the newest of them listed (`FLIP_COLUMNS`)."""

    count: int
    listed: list[dict[str, str | None]]  # FLIP_COLUMNS → text (created_at as ISO text), null where unknown
    listed_limit: int


# A row of `drift_by_rule` or `drift_by_reason`: {rule_id | reason_code, before, after, delta}, the
# rule id or reason code null where none was stored or decided (the default outcome).
DriftRow = dict[str, str | int | None]


class MonthLoad(TypedDict):
    month: str
    replayed: int
    review_before: int
    review_after: int


class RuleFiring(TypedDict):
    """A draft rule, in its order: its priority and how often it decided, before and under the draft."""

    rule_id: str
    priority: int
    fired_in_history: int
    fires_under_draft: int


class ReviewLoad(TypedDict):
    """`review_load`: the review queue before and under the draft, and what a hold costs."""

    before: int
    after: int
    delta: int
    relative_change: float | None
    months: int
    per_month_before: float
    per_month_after: float
    by_month: list[MonthLoad]
    hold_cost: HoldCost


class DryRunResult(TypedDict):
    """A dry-run's result: JSON, one member per figure (docs/dry-run.md). `summarize` writes it;
    the manifest's `dry_run` member, the reports, the pages and the notebooks read it as it is."""

    rulebook_id: str
    scope: str | None
    draft: DraftIdentity
    source: HistorySource
    history_versions: list[HistoryVersion]
    decisions_total: int
    decisions_evaluated: int
    decisions_unreplayable: int
    decisions_scalar: int
    decisions_changed: int
    decisions_reason_changed: int
    decisions_rule_changed: int
    needs_input: int
    transitions: list[Transition]
    rule_transitions: list[RuleTransition]
    drift_by_rule: list[DriftRow]
    drift_by_reason: list[DriftRow]
    outcomes: Outcomes
    review_load: ReviewLoad
    unreplayable: Unreplayable
    rules: list[RuleFiring]
    rules_never_fired_in_history: list[str]
    rules_never_firing_under_draft: list[str]
    flips: Flips
    impact: Impact | None
    baseline: Baseline
    notes: list[str]
    inputs_removed: InputsRemoved


def _source_of(history: History) -> HistorySource:
    """The history's source, as the result names it (a copy: the result is a value of its own)."""
    if history.source is None:  # a worker's share: its client summarizes the whole history
        raise ValueError("a dry-run is summarized from a history with its source, not a cluster worker's share")
    return history.source.copy()


def _rows(frame: pl.DataFrame) -> list[dict[str, str | None]]:
    """The listed flips' rows (`LISTED_FLIP_SCHEMA`: every column text)."""
    return frame.to_dicts()


def _count(cube: pl.DataFrame, expr: pl.Expr | None = None) -> int:
    frame = cube if expr is None else cube.filter(expr)
    return int(frame["count"].sum()) if frame.height else 0


def _drift(cube: pl.DataFrame, old: str, new: str, name: str) -> list[DriftRow]:
    before = cube.group_by(old).agg(pl.col("count").sum().alias("before")).rename({old: name})
    after = cube.group_by(new).agg(pl.col("count").sum().alias("after")).rename({new: name})
    merged = before.join(after, on=name, how="full", coalesce=True, nulls_equal=True)
    merged = merged.with_columns(pl.col("before").fill_null(0), pl.col("after").fill_null(0))
    merged = merged.with_columns((pl.col("after") - pl.col("before")).alias("delta"))
    merged = merged.sort([pl.col("delta").abs(), name], descending=[True, False], nulls_last=True)
    return merged.select(name, "before", "after", "delta").to_dicts()


def _cell(tally: Mapping[tuple[str, str, str], int], old: str, new: str) -> OutcomeCell:
    """The flips from `old` to `new`, in all and by outcome class."""
    def of(name: str) -> int:
        return tally.get((old, new, name), 0)

    total = sum(count for (o, n, _), count in tally.items() if (o, n) == (old, new))
    return {"from": old, "to": new, "count": total, "success": of("success"), "failure": of("failure"),
            "excluded": of("excluded"), "open": of("open"), "none": of(NO_OUTCOME), "unobservable": of(UNOBSERVABLE)}


def _outcomes(outcome_cube: pl.DataFrame) -> Outcomes:
    tally: dict[tuple[str, str, str], int] = {}  # (old verdict, new verdict, outcome class) → flips; one pass
    for old, new, name, count in outcome_cube.select("old_verdict", "new_verdict", "outcome_class",
                                                     "count").iter_rows():
        tally[(old, new, name)] = tally.get((old, new, name), 0) + int(count)
    cells = [_cell(tally, old, new) for old in VERDICTS for new in VERDICTS if old != new]
    cell = {(c["from"], c["to"]): c for c in cells}
    return {
        "by_transition": cells,
        # yes→no on a decision that later failed: the draft would have caught the failure.
        "caught_failures": cell[("yes", "no")]["failure"] + cell[("review", "no")]["failure"],
        # yes→no on a decision that later succeeded: the draft would have blocked a success.
        "blocked_successes": cell[("yes", "no")]["success"] + cell[("review", "no")]["success"],
        # no→yes: approvals of decisions that were blocked, whose outcome was never observed.
        "unobserved_new_approvals": cell[("no", "yes")]["count"],
        "unobserved_new_reviews": cell[("no", "review")]["count"],
        "flips_without_outcome": sum(c["none"] for c in cells),
    }


def _review_load(replayed: pl.DataFrame, months: pl.DataFrame, holds: pl.LazyFrame | None,
                 cost: CostModel) -> ReviewLoad:
    """The review queue before and under the draft, and what a hold costs (`hold_cost`: measured
    from the history's closed holds, or said not to be)."""
    before = _count(replayed, pl.col("old_verdict") == "review")
    after = _count(replayed, pl.col("new_verdict") == "review")
    per_month: list[MonthLoad] = [
        {"month": row["month"], "replayed": row["replayed"], "review_before": row["review_before"],
         "review_after": row["review_after"]} for row in months.sort("month").iter_rows(named=True)]
    count = len(per_month) or 1
    per_month_before, per_month_after = round(before / count, 3), round(after / count, 3)
    return {
        "before": before, "after": after, "delta": after - before,
        "relative_change": None if before == 0 else round((after - before) / before, 6),
        "months": len(per_month),
        "per_month_before": per_month_before, "per_month_after": per_month_after,
        "by_month": per_month,
        "hold_cost": hold_cost(holds, per_month_before=per_month_before, per_month_after=per_month_after,
                               review_cost=cost.review),
    }


NOTES = [
    ("A decision whose stored verdict was no was blocked and never executed: for a flip from no "
     "the outcome the draft's verdict would have had cannot be observed (outcome class unobservable)."),
    ("Outcome classes are those of the latest outcome record per decision; none means no outcome "
     "was reported for that decision."),
    ("Decisions without stored facts cannot be replayed; they are counted under unreplayable and "
     "take no part in transitions, drift or the review forecast."),
    ("Decisions whose inputs were removed (by the facts' retention or an erasure) are among the "
     "unreplayable and are counted apart under inputs_removed, by cause; none is ever counted as changed."),
]
_ISO_MS = "%Y-%m-%dT%H:%M:%S%.3fZ"


def _transitions(replayed: pl.DataFrame) -> list[Transition]:
    """The replayed decisions of every (stored verdict, draft verdict) pair, zeros included."""
    return [{"from": old, "to": new,
             "count": _count(replayed, (pl.col("old_verdict") == old) & (pl.col("new_verdict") == new))}
            for old in VERDICTS for new in VERDICTS]


def _rule_transitions(replayed: pl.DataFrame) -> list[RuleTransition]:
    """The replayed decisions per (verdicts, stored rule, draft rule), largest first."""
    cells = (replayed.group_by(["old_verdict", "new_verdict", "old_rule", "new_rule"])
             .agg(pl.col("count").sum()).sort(["count", "old_rule", "new_rule", "old_verdict", "new_verdict"],
                                              descending=[True, False, False, False, False], nulls_last=True))
    return [{"from": r["old_verdict"], "to": r["new_verdict"], "old_rule": r["old_rule"],
             "new_rule": r["new_rule"], "count": r["count"]} for r in cells.iter_rows(named=True)]


def _rules(cube: pl.DataFrame, replayed: pl.DataFrame, draft: Draft) -> list[RuleFiring]:
    """Each rule of the draft, in its order: its priority, how often it decided in the history
    and how often it decides the replayed decisions under the draft."""
    fired_history = {r["old_rule"]: r["count"] for r in
                     cube.group_by("old_rule").agg(pl.col("count").sum()).iter_rows(named=True)}
    fired_draft = {r["new_rule"]: r["count"] for r in
                   replayed.group_by("new_rule").agg(pl.col("count").sum()).iter_rows(named=True)}
    by_id = {rule["rule_id"]: rule for rule in draft.rulebook["rules"]}
    return [{"rule_id": rule_id, "priority": int(by_id[rule_id].get("priority", 0)),
             "fired_in_history": int(fired_history.get(rule_id, 0)),
             "fires_under_draft": int(fired_draft.get(rule_id, 0))} for rule_id in draft.order]


def _impact(replayed: pl.DataFrame, computed: Computed, cost: CostModel) -> Impact:
    """`dry_run.impact` (workbench.migration.impact) from the flip tally and the replayed counts."""
    into = _count(replayed, (pl.col("new_verdict") == "review") & (pl.col("old_verdict") != "review"))
    out = _count(replayed, (pl.col("old_verdict") == "review") & (pl.col("new_verdict") != "review"))
    return impact(computed.impact_tally, _count(replayed), cost, as_of=computed.as_of, review_in=into, review_out=out)


def summarize(history: History, draft: Draft, computed: Computed, cost: CostModel | None = None,
              baseline: Baseline | None = None) -> DryRunResult:
    """The dry-run's result: the computed cubes, flips and months read as the report's figures."""
    cube = computed.cube
    replayed = cube.filter(pl.col("replay") != rp.REPLAY_NONE)
    unreplayable = cube.filter(pl.col("replay") == rp.REPLAY_NONE)
    rules = _rules(cube, replayed, draft)
    flips = computed.flips.with_columns(pl.col("created_at").dt.strftime(_ISO_MS))
    changed = _count(replayed, pl.col("old_verdict") != pl.col("new_verdict"))
    versions = computed.versions.sort("first").with_columns(
        pl.col("first").dt.strftime(_ISO_MS), pl.col("last").dt.strftime(_ISO_MS))
    return DryRunResult(
        rulebook_id=history.rulebook_id,
        scope=history.scope,
        draft={"rulebook_id": draft.rulebook["rulebook_id"], "version": draft.rulebook["version"],
               "rulebook_hash": draft.rulebook_hash, "rule_order": list(draft.order)},
        source=_source_of(history),
        history_versions=[{"policy_version": row["policy_version"], "rulebook_hash": row["rulebook_hash"],
                           "decisions": row["decisions"], "first": row["first"], "last": row["last"]}
                          for row in versions.iter_rows(named=True)],
        decisions_total=_count(cube),
        decisions_evaluated=_count(replayed),
        decisions_unreplayable=_count(unreplayable),
        decisions_scalar=computed.scalar_rows,
        decisions_changed=changed,
        decisions_reason_changed=_count(replayed, pl.col("old_reason").ne_missing(pl.col("new_reason"))),
        decisions_rule_changed=_count(replayed, pl.col("old_rule").ne_missing(pl.col("new_rule"))),
        needs_input=_count(replayed, pl.col("new_status") == rp.NEEDS_INPUT_STATUS),
        transitions=_transitions(replayed),
        rule_transitions=_rule_transitions(replayed),
        drift_by_rule=_drift(replayed, "old_rule", "new_rule", "rule_id"),
        drift_by_reason=_drift(replayed, "old_reason", "new_reason", "reason_code"),
        outcomes=_outcomes(computed.outcome_cube),
        review_load=_review_load(replayed, computed.months, history.holds, cost or CostModel()),
        unreplayable={"count": _count(unreplayable),
                      "by_verdict": {v: _count(unreplayable, pl.col("old_verdict") == v) for v in VERDICTS}},
        rules=rules,
        rules_never_fired_in_history=[r["rule_id"] for r in rules if r["fired_in_history"] == 0],
        rules_never_firing_under_draft=[r["rule_id"] for r in rules if r["fires_under_draft"] == 0],
        flips={"count": changed, "listed": _rows(flips), "listed_limit": computed.flips_limit},
        impact=_impact(replayed, computed, cost or CostModel()),
        baseline=(baseline if baseline is not None else HISTORY).copy(),
        notes=list(NOTES),
        inputs_removed=inputs_removed(history.removed),
    )
