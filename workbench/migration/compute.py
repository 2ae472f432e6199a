"""The vectorized dry-run: every historical decision of a rulebook re-evaluated under a draft.

Steps (all lazy until the one `collect_all`, run on Polars' streaming engine so memory stays
bounded by the aggregates, not by the history):

1. `replay`: the replay base (`History.base`: each decision's stored verdict, rule and reason,
   the *old* side, with its typed facts) evaluated by the compiled draft
   (`rulebook_polars.evaluate`).
2. Rows the typed columns cannot hold exactly (`facts_state` partial, or no facts row) are
   read back with their `facts_json` and evaluated one by one by the scalar evaluator (the
   ground truth); their results are patched in. Rows without facts stay `unreplayable`.
3. Each flipped decision gets its latest outcome (by `reported_at`, then `receipt_id`) and its
   effectiveness class (`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`: success, failure,
   excluded, open), `none` when no outcome was reported, and `unobservable` when the stored
   verdict was `no`: a blocked decision was never executed, so what a flip to `yes` would
   have done has no observed outcome.
4. A small cube (old/new verdict × old/new rule × old/new reason × new status × replay →
   count), the flips' outcome classes, a per-month review count, per-field change counts and
   the most recent flips. Everything in the result is derived from these
   (`workbench.migration.summary`).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl

from gate.clock import iso_ms
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp
from workbench.migration.draft import Draft
from workbench.migration.history import History

__all__ = ["CUBE_KEYS", "Computed", "Passes", "compute", "latest_outcomes"]

CUBE_KEYS = ["old_verdict", "new_verdict", "old_rule", "new_rule", "old_reason", "new_reason", "new_status", "replay"]
FLIP_COLUMNS = ["decision_id", "created_at", "scope", "old_verdict", "new_verdict", "old_rule", "new_rule",
                "old_reason", "new_reason", "outcome_status", "outcome_class"]
UNOBSERVABLE, NO_OUTCOME = "unobservable", "none"
_RESULT = ["replay", "status", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id"]


class Computed:
    """The frames a dry-run's summary is built from (all small)."""

    def __init__(self, cube: pl.DataFrame, outcome_cube: pl.DataFrame, months: pl.DataFrame, flips: pl.DataFrame,
                 versions: pl.DataFrame, changes: dict[str, int], scalar_rows: int, flips_limit: int,
                 impact_tally: dict[tuple[str, str, str, bool], int] | None = None, as_of: str | None = None) -> None:
        self.cube = cube
        # (old verdict, new verdict, outcome class, younger than the horizon) → flips (migration.impact)
        self.impact_tally = impact_tally or {}
        self.as_of = as_of
        self.outcome_cube = outcome_cube
        self.months = months
        self.flips = flips
        self.versions = versions
        self.changes = changes
        self.scalar_rows = scalar_rows
        self.flips_limit = flips_limit


_OLD = ["old_verdict", "old_rule", "old_reason", "old_application_verdict", "old_action"]
_KEEP = ["decision_id", "created_at", "scope", "month", *_OLD]
_NEW = {"status": "new_status", "verdict": "new_verdict", "reason_code": "new_reason", "matched_rule_id": "new_rule",
        "application_verdict": "new_application_verdict", "action": "new_action"}


def _partial_rows(history: History) -> pl.DataFrame:
    return (history.base.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL)
            .select(*_KEEP, "facts_json").collect(engine="streaming"))


def _scalar_rows(pending: pl.DataFrame, draft: Draft) -> pl.DataFrame:
    """The rows whose facts are not fully typed (`pending`: `_KEEP` and `facts_json`), evaluated
    one by one by the scalar evaluator (`replay` scalar), or `unreplayable` when they carry no
    facts at all."""
    results: dict[str, list[Any]] = {name: [] for name in _RESULT}
    evaluate = draft.scalar.evaluate
    for text in pending["facts_json"]:
        if text is None:
            results["replay"].append(rp.REPLAY_NONE)
            for name in _RESULT[1:]:
                results[name].append(None)
            continue
        e = evaluate(json.loads(text))
        results["replay"].append(rp.REPLAY_SCALAR)
        results["status"].append(e.status)
        results["verdict"].append(e.decision)
        results["application_verdict"].append(e.application_verdict)
        results["action"].append(e.action)
        results["reason_code"].append(e.reason_code)
        results["matched_rule_id"].append(e.matched_rule_id)
    return pending.drop("facts_json").with_columns(
        [pl.Series(name, values, dtype=pl.String) for name, values in results.items()])


def replay(history: History, draft: Draft) -> tuple[pl.LazyFrame, int]:
    """Every decision with old and new outcome columns (`new_verdict`, `new_rule`,
    `new_reason`, `new_status`, `new_application_verdict`, `new_action`) and `replay`
    (vector | scalar | unreplayable); and how many rows went to the scalar evaluator."""
    evaluated = rp.evaluate(history.base, draft.polars).select(*_KEEP, *_RESULT)
    scalar = _scalar_rows(_partial_rows(history), draft)
    if scalar.height:
        # The vector pass leaves these rows null; the scalar evaluator's rows replace them.
        evaluated = pl.concat([evaluated.filter(pl.col("replay") != rp.REPLAY_SCALAR),
                               scalar.lazy().select(evaluated.collect_schema().names())],
                              how="vertical_relaxed")
    scalar_count = int((scalar["replay"] == rp.REPLAY_SCALAR).sum()) if scalar.height else 0
    return evaluated.rename(_NEW), scalar_count


def latest_outcomes(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """The latest outcome status per decision (by reported_at, then receipt_id)."""
    return outcomes.group_by("decision_id").agg(
        pl.col("status").sort_by(["reported_at", "receipt_id"]).last().alias("outcome_status"))


def _flip_by_pick(table: pl.DataFrame) -> pl.Expr:
    """A vector row whose stored verdict differs from the verdict its pick answers (a stored
    verdict that is null is no flip, as `old != new` is null there)."""
    same = [(pl.col("old_verdict") == verdict) & pl.col(rp.PICK).is_in(picks)
            for verdict, picks in table.group_by("verdict").agg(pl.col(rp.PICK)).iter_rows()]
    return pl.col(rp.PICK).is_not_null() & pl.col("old_verdict").is_not_null() & ~pl.any_horizontal(same)


def _field_changes(replayed: pl.DataFrame) -> dict[str, int]:
    """Per outcome field, the replayed decisions whose value changes (one pass over the cube)."""
    count = pl.col("count")
    conditions = {
        # The record stores no status; a stored needs_input decision carries its reason code.
        "status": (pl.col("new_status") == rp.NEEDS_INPUT_STATUS) != (pl.col("old_reason") == rp.NEEDS_INPUT_REASON),
        "verdict": pl.col("old_verdict").ne_missing(pl.col("new_verdict")),
        "application_verdict": pl.col("application_verdict_changed"),
        "action": pl.col("action_changed"),
        "reason_code": pl.col("old_reason").ne_missing(pl.col("new_reason")),
        "matched_rule_id": pl.col("old_rule").ne_missing(pl.col("new_rule")),
    }
    row = replayed.select([count.filter(test).sum().alias(name) for name, test in conditions.items()]).row(0)
    return {name: int(value or 0) for name, value in zip(conditions, row, strict=True)}


class Passes(Protocol):
    """The passes over the history done elsewhere (`workbench.cluster.dryrun`: per partition on a
    cluster's workers): what `_replay_passes` returns, and the latest outcomes of some decisions."""

    def replay(self, history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]: ...

    def latest_outcomes(self, flipped: pl.DataFrame) -> pl.DataFrame: ...


def compute(history: History, draft: Draft, *, flips_limit: int = 200, flips_path: Path | None = None,
            horizon_days: int = 30, passes: Passes | None = None) -> Computed:
    """Run the dry-run: one aggregating pass over the history and one over its flips (the
    flips, not the history, are held in memory); `flips_path` also writes every flip as Parquet.

    The passes over the history group and filter by the draft's pick (`rulebook_polars.PICK`:
    which rule, the default outcome or needs_input), not by the strings it answers; the small
    results are named through `rulebook_polars.outcome_table` afterwards. The rows the scalar
    evaluator replays are few and join in memory. `passes`: those passes made elsewhere (a cluster)."""
    table = rp.outcome_table(draft.polars)
    named = table.rename(_NEW)
    grouped, selected = (passes.replay if passes else _replay_passes)(history, draft, table)
    versions = history.versions_in_scope()
    partial = selected.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL).select(*_KEEP, "facts_json")
    scalar = _scalar_rows(partial, draft).rename(_NEW)
    scalar_rows = int((scalar["replay"] == rp.REPLAY_SCALAR).sum())
    flipped = _flipped(selected, named, scalar)
    # At 100M decisions the flips are millions of rows: what they were selected from, and later
    # the flipped rows themselves, are dropped as soon as the next frame holds what they held.
    del selected, partial
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dry-run") as worker:
        # Outcomes only of the flipped decisions (the history's outcomes are never held in
        # memory), read while the cube is built from the grouped rows (Polars releases the GIL).
        reading = worker.submit(passes.latest_outcomes, flipped) if passes else worker.submit(
            latest_outcomes(history.outcomes.filter(pl.col("decision_id").is_in(flipped["decision_id"].implode())))
            .collect, engine="streaming")
        fine = _fine_cube(grouped, named, scalar)
        cube = fine.group_by(CUBE_KEYS).agg(pl.col("count").sum())
        months = _month_counts(fine)
        changes = _field_changes(fine.filter(pl.col("replay") != rp.REPLAY_NONE))
        flips = _classified_flips(flipped, reading.result())
        del flipped
        if flips_path is not None:  # written while the last aggregates are made
            writing = worker.submit(flips.write_parquet, flips_path)
        outcome_cube = flips.group_by(["old_verdict", "new_verdict", "outcome_class"]).agg(
            pl.len().cast(pl.Int64).alias("count"))
        listed = _newest(flips, flips_limit)
        as_of, tally = impact_tally(flips, versions, horizon_days)
        if flips_path is not None:
            writing.result()  # a failed write raises here
    return Computed(cube, outcome_cube, months, listed, versions, changes, scalar_rows, flips_limit, tally, as_of)


def _newest(flips: pl.DataFrame, k: int) -> pl.DataFrame:
    """`flips.sort(["created_at", "decision_id"], descending=[True, False]).head(k)` without
    sorting (a copy of) every flip: only the rows at or after the k-th newest time (and those
    without a time, which that sort puts first) can be among them."""
    cut = flips.select(pl.col("created_at").drop_nulls().top_k(k).min()).item() if k > 0 else None
    near = pl.col("created_at").is_null() | (pl.col("created_at") >= cut) if cut is not None \
        else pl.col("created_at").is_null()
    candidates = flips.filter(near) if k > 0 else flips.clear()
    return candidates.sort(["created_at", "decision_id"], descending=[True, False]).head(k)


def impact_tally(flips: pl.DataFrame, versions: pl.DataFrame,
                 horizon_days: int) -> tuple[str | None, dict[tuple[str, str, str, bool], int]]:
    """The flips by (old verdict, new verdict, outcome class, young): young = newer than
    `horizon_days` before the history's newest decision (`as_of`, so the figures depend on the
    data only, never on when the dry-run runs)."""
    newest = versions["last"].max() if versions.height else None
    if not isinstance(newest, datetime):
        return None, {}
    as_of = iso_ms(newest)
    if not flips.height:
        return as_of, {}
    cutoff = newest - timedelta(days=horizon_days)
    grouped = flips.with_columns((pl.col("created_at") > cutoff).alias("young")).group_by(
        ["old_verdict", "new_verdict", "outcome_class", "young"]).agg(pl.len().alias("count"))
    return as_of, {(o, n, c, bool(y)): int(count) for o, n, c, y, count in grouped.iter_rows()}


def _replay_passes(history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The three passes over the history: (the typed and absent rows counted by stored outcome,
    month and the draft's pick; the vector rows that flip and the partial rows, with their facts)."""
    # Pass 1 evaluates the rules and keeps only each row's pick (4 bytes a row); passes 2 and
    # 3 read the stored columns beside it (a lazy horizontal concat is row-aligned), so the
    # rules are evaluated once.
    picks = rp.with_pick(history.base, draft.polars).select(rp.PICK).collect(engine="streaming")
    zipped = pl.concat([history.base.select(*_KEEP, fc.STATE_COLUMN, "facts_json"), picks.lazy()], how="horizontal")
    typed_or_absent = pl.col(fc.STATE_COLUMN).ne_missing(fc.STATE_PARTIAL)
    grouped = zipped.filter(typed_or_absent).group_by([*_OLD, "month", rp.PICK]).agg(
        pl.len().cast(pl.Int64).alias("count"))
    # Pass 3: the vector rows that flip, and the partial rows with their facts for the scalar evaluator.
    selected = zipped.filter(~typed_or_absent | _flip_by_pick(table)).select(
        *[_owned(name) for name in (*_KEEP, fc.STATE_COLUMN, "facts_json")], rp.PICK)
    # Separate streaming passes on purpose: collecting them together shares the replay as a
    # cached subplan, which holds the whole replayed history in memory.
    return grouped.collect(engine="streaming"), selected.collect(engine="streaming")


def _owned(name: str) -> pl.Expr:
    """A column as itself, its strings copied out of the pages they were read from: a filtered
    string column otherwise keeps every read page's buffer alive (at 100M decisions, 8.6M flips
    kept about 1.3 GB of the history's strings)."""
    return pl.col(name) if name == "created_at" else pl.concat_str([pl.col(name), pl.lit("")]).alias(name)


_FLIP_ROW = ["decision_id", "created_at", "scope", "old_verdict", "new_verdict", "old_rule", "new_rule",
             "old_reason", "new_reason"]


def _flipped(selected: pl.DataFrame, named: pl.DataFrame, scalar: pl.DataFrame) -> pl.DataFrame:
    """The decisions whose verdict flips: the vector rows (named through the draft's outcome
    table) and the rows the scalar evaluator replayed to another verdict."""
    vector = selected.filter(pl.col(fc.STATE_COLUMN).ne_missing(fc.STATE_PARTIAL)).select(
        "decision_id", "created_at", "scope", "old_verdict", "old_rule", "old_reason", rp.PICK)
    return pl.concat([
        vector.join(named.select(rp.PICK, "new_verdict", "new_rule", "new_reason"), on=rp.PICK, how="left")
        .select(_FLIP_ROW),
        scalar.filter((pl.col("replay") == rp.REPLAY_SCALAR) & (pl.col("old_verdict") != pl.col("new_verdict")))
        .select(_FLIP_ROW),
    ], how="vertical_relaxed")


def _fine_cube(grouped: pl.DataFrame, named: pl.DataFrame, scalar: pl.DataFrame) -> pl.DataFrame:
    """Counts by the cube's keys, month and whether the application verdict and the action
    change: the vector rows (by pick) and the scalar rows together."""
    return pl.concat([
        grouped.join(named, on=rp.PICK, how="left").with_columns(
            pl.when(pl.col(rp.PICK).is_not_null()).then(pl.lit(rp.REPLAY_VECTOR)).otherwise(pl.lit(rp.REPLAY_NONE))
            .alias("replay")).drop(rp.PICK),
        scalar.group_by([*_OLD, "month", "replay", *_NEW.values()]).agg(pl.len().cast(pl.Int64).alias("count")),
    ], how="diagonal_relaxed").with_columns(
        pl.col("old_application_verdict").ne_missing(pl.col("new_application_verdict"))
        .alias("application_verdict_changed"),
        pl.col("old_action").ne_missing(pl.col("new_action")).alias("action_changed"),
    ).group_by([*CUBE_KEYS, "month", "application_verdict_changed", "action_changed"]).agg(pl.col("count").sum())


def _month_counts(fine: pl.DataFrame) -> pl.DataFrame:
    """Per month: decisions, those replayed, and those in review before and after."""
    in_fine = pl.col("replay") != rp.REPLAY_NONE
    return fine.group_by("month").agg(
        pl.col("count").sum().alias("decisions"),
        pl.col("count").filter(in_fine).sum().alias("replayed"),
        pl.col("count").filter(in_fine & (pl.col("old_verdict") == "review")).sum().alias("review_before"),
        pl.col("count").filter(in_fine & (pl.col("new_verdict") == "review")).sum().alias("review_after"),
    )


def _classified_flips(flipped: pl.DataFrame, outcomes: pl.DataFrame) -> pl.DataFrame:
    """The flips with their latest outcome and its effectiveness class (`unobservable` for a
    decision that was no, NO_OUTCOME without one), as FLIP_COLUMNS."""
    classes = dict(OUTCOME_EFFECTIVENESS_CLASS)
    return flipped.join(outcomes, on="decision_id", how="left").with_columns(
        pl.when(pl.col("old_verdict") == "no").then(pl.lit(UNOBSERVABLE))
        .when(pl.col("outcome_status").is_null()).then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col("outcome_status").replace_strict(classes, default="unknown", return_dtype=pl.String))
        .alias("outcome_class")).select(FLIP_COLUMNS)
