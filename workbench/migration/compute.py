"""The vectorized dry-run: every historical decision of a rulebook re-evaluated under a draft.

Steps (all lazy until the one `collect_all`, run on Polars' streaming engine so memory stays
bounded by the aggregates, not by the history):

1. `replay`: the rulebook's decisions (stored verdict, rule, reason: the *old* side) joined
   with their typed facts and evaluated by the compiled draft (`rulebook_polars.evaluate`).
2. Rows the typed columns cannot hold exactly (`facts_state` partial, or no facts row) are
   read back with their `facts_json` and evaluated one by one by the scalar evaluator (the
   ground truth); their results are patched in. Rows without facts stay `unreplayable`.
3. Each decision gets its latest outcome (by `reported_at`, then `receipt_id`) and its
   effectiveness class (`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`: success, failure,
   excluded, open), `none` when no outcome was reported, and `unobservable` when the stored
   verdict was `no`: a blocked decision was never executed, so what a flip to `yes` would
   have done has no observed outcome.
4. One small cube (old/new verdict × old/new rule × old/new reason × replay × outcome class →
   count), a per-month review count, and the most recent flips. Everything in the result is
   derived from these (`workbench.migration.summary`).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp
from workbench.migration.draft import Draft
from workbench.migration.history import History

__all__ = ["Computed", "compute", "CUBE_KEYS"]

CUBE_KEYS = ["old_verdict", "new_verdict", "old_rule", "new_rule", "old_reason", "new_reason",
             "new_status", "replay", "outcome_class"]
FLIP_COLUMNS = ["decision_id", "created_at", "scope", "old_verdict", "new_verdict", "old_rule", "new_rule",
                "old_reason", "new_reason", "outcome_status", "outcome_class"]
UNOBSERVABLE, NO_OUTCOME = "unobservable", "none"
_RESULT = ["replay", "status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id"]


class Computed:
    """The frames a dry-run's summary is built from (all small)."""

    def __init__(self, cube: pl.DataFrame, months: pl.DataFrame, flips: pl.DataFrame,
                 versions: pl.DataFrame, scalar_rows: int, flips_limit: int) -> None:
        self.cube = cube
        self.months = months
        self.flips = flips
        self.versions = versions
        self.scalar_rows = scalar_rows
        self.flips_limit = flips_limit
        self.changes: dict[str, int] = {}


def _old_side(history: History) -> pl.LazyFrame:
    return history.decisions.select(
        "decision_id", "created_at", "scope", "month",
        pl.col("verdict").alias("old_verdict"), pl.col("matched_rule_id").alias("old_rule"),
        pl.col("reason_code").alias("old_reason"), pl.col("application_verdict").alias("old_application_verdict"),
        pl.col("action").alias("old_action"),
    )


def _scalar_results(history: History, draft: Draft) -> pl.DataFrame:
    """Evaluate, with the scalar evaluator, the rows whose facts are not fully typed."""
    states = history.facts.select("decision_id", fc.STATE_COLUMN)
    pending = (history.decisions.select("decision_id", "facts_json")
               .join(states, on="decision_id", how="left")
               .filter(pl.col(fc.STATE_COLUMN).is_null() | (pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL))
               .select("decision_id", "facts_json")
               .collect(engine="streaming"))
    rows = {name: [] for name in ["decision_id", *_RESULT]}
    evaluate = draft.scalar.evaluate
    for decision_id, text in pending.iter_rows():
        rows["decision_id"].append(decision_id)
        if text is None:
            rows["replay"].append(rp.REPLAY_NONE)
            for name in _RESULT[1:]:
                rows[name].append(None)
            continue
        e = evaluate(json.loads(text))
        rows["replay"].append(rp.REPLAY_SCALAR)
        rows["status"].append(e.status)
        rows["verdict"].append(e.decision)
        rows["application_verdict"].append(e.application_verdict)
        rows["action"].append(e.action)
        rows["reason_code"].append(e.reason_code)
        rows["matched_rule_id"].append(e.matched_rule_id)
    return pl.DataFrame(rows, schema={name: pl.String for name in rows})


def replay(history: History, draft: Draft) -> tuple[pl.LazyFrame, int]:
    """Every decision with old and new outcome columns (`new_verdict`, `new_rule`,
    `new_reason`, `new_status`, `new_application_verdict`, `new_action`) and `replay`
    (vector | scalar | unreplayable); and how many rows went to the scalar evaluator."""
    facts = rp.with_fact_columns(history.facts, draft.polars).with_columns(
        pl.col(fc.STATE_COLUMN).fill_null(fc.STATE_PARTIAL))
    joined = _old_side(history).join(facts, on="decision_id", how="left").with_columns(
        pl.col(fc.STATE_COLUMN).fill_null(fc.STATE_PARTIAL))
    evaluated = rp.evaluate(joined, draft.polars)
    keep = ["decision_id", "created_at", "scope", "month", "old_verdict", "old_rule", "old_reason",
            "old_application_verdict", "old_action", *_RESULT]
    evaluated = evaluated.select(keep)
    scalar = _scalar_results(history, draft)
    if scalar.height:
        patched = evaluated.join(scalar.lazy(), on="decision_id", how="left", suffix="__scalar")
        evaluated = patched.with_columns(
            [pl.coalesce(f"{name}__scalar", name).alias(name) for name in _RESULT]
        ).select(keep)
    renamed = evaluated.rename({"status": "new_status", "verdict": "new_verdict", "reason_code": "new_reason",
                                "matched_rule_id": "new_rule", "application_verdict": "new_application_verdict",
                                "action": "new_action"})
    return renamed, int((scalar["replay"] == rp.REPLAY_SCALAR).sum()) if scalar.height else 0


def latest_outcomes(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """The latest outcome status per decision (by reported_at, then receipt_id)."""
    return outcomes.group_by("decision_id").agg(
        pl.col("status").sort_by(["reported_at", "receipt_id"]).last().alias("outcome_status"))


def compute(history: History, draft: Draft, *, flips_limit: int = 200, flips_path: Path | None = None) -> Computed:
    """Run the dry-run's one pass; `flips_path` also writes every flip as Parquet."""
    evaluated, scalar_rows = replay(history, draft)
    classes = dict(OUTCOME_EFFECTIVENESS_CLASS)
    with_outcomes = evaluated.join(latest_outcomes(history.outcomes), on="decision_id", how="left").with_columns(
        pl.when(pl.col("old_verdict") == "no").then(pl.lit(UNOBSERVABLE))
        .when(pl.col("outcome_status").is_null()).then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col("outcome_status").replace_strict(classes, default="unknown", return_dtype=pl.String))
        .alias("outcome_class"))
    cube = with_outcomes.group_by(CUBE_KEYS).agg(pl.len().cast(pl.Int64).alias("count"))
    replayed = pl.col("replay") != rp.REPLAY_NONE
    months = with_outcomes.group_by("month").agg(
        pl.len().alias("decisions"),
        replayed.sum().alias("replayed"),
        (replayed & (pl.col("old_verdict") == "review")).sum().alias("review_before"),
        (replayed & (pl.col("new_verdict") == "review")).sum().alias("review_after"),
    )
    flip = replayed & (pl.col("old_verdict") != pl.col("new_verdict"))
    flips = (with_outcomes.filter(flip).select(FLIP_COLUMNS)
             .sort(["created_at", "decision_id"], descending=[True, False]).head(flips_limit))
    versions = history.decisions.group_by(["policy_version", "rulebook_hash"]).agg(
        pl.len().alias("decisions"), pl.col("created_at").min().alias("first"), pl.col("created_at").max().alias("last"))
    changes = with_outcomes.filter(replayed).select(
        # The record stores no status; a stored needs_input decision carries its reason code.
        ((pl.col("new_status") == rp.NEEDS_INPUT_STATUS) != (pl.col("old_reason") == rp.NEEDS_INPUT_REASON))
        .sum().alias("status"),
        pl.col("old_verdict").ne_missing(pl.col("new_verdict")).sum().alias("verdict"),
        pl.col("old_application_verdict").ne_missing(pl.col("new_application_verdict")).sum()
        .alias("application_verdict"),
        pl.col("old_action").ne_missing(pl.col("new_action")).sum().alias("action"),
        pl.col("old_reason").ne_missing(pl.col("new_reason")).sum().alias("reason_code"),
        pl.col("old_rule").ne_missing(pl.col("new_rule")).sum().alias("matched_rule_id"),
    )
    frames = [cube, months, flips, versions, changes]
    if flips_path is not None:
        frames.append(with_outcomes.filter(flip).select(FLIP_COLUMNS).sink_parquet(flips_path, lazy=True))
    results = pl.collect_all(frames, engine="streaming")
    computed = Computed(results[0], results[1], results[2], results[3], scalar_rows, flips_limit)
    computed.changes = {name: int(value or 0) for name, value in results[4].row(0, named=True).items()}
    return computed
