"""The vectorized dry-run: every historical decision of a rulebook re-evaluated under a draft.

Steps (each a streaming pass of Polars' engine, so memory is bounded by aggregates and by one
bucket of flips, not by the history nor by its flips):

1. One pass over the replay base (`History.base`: each decision's stored verdict, rule and
   reason, the *old* side, with its typed facts), evaluated by the compiled draft
   (`rulebook_polars.with_pick`): the rows counted by stored outcome, month and the draft's
   pick, and the rows that flip or that the typed columns cannot hold exactly written to a
   file (`workbench.migration.flips`).
2. Rows the typed columns cannot hold exactly (`facts_state` partial, or no facts row) are
   read back with their `facts_json` and evaluated one by one by the scalar evaluator (the
   ground truth). Rows without facts stay `unreplayable`.
3. Each flipped decision gets its latest outcome (by `reported_at`, then `receipt_id`) and its
   effectiveness class (`gate.receipts.values.OUTCOME_EFFECTIVENESS_CLASS`: success, failure,
   excluded, open), `none` when no outcome was reported, and `unobservable` when the stored
   verdict was `no`: a blocked decision was never executed, so what a flip to `yes` would
   have done has no observed outcome (`workbench.migration.flips`: through files, by bucket).
4. A small cube (old/new verdict × old/new rule × old/new reason × new status × replay →
   count), the flips' outcome classes, a per-month review count, per-field change counts and
   the most recent flips. Everything in the result is derived from these
   (`workbench.migration.summary`).

`replay` gives every decision's old and new columns row by row (the benchmark's and the tests'
per-decision check); the dry-run itself never builds them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import polars as pl
import pyarrow.parquet as pq

from gate.clock import iso_ms
from workbench.engines import fact_columns as fc
from workbench.engines import rulebook_polars as rp
from workbench.migration import flips
from workbench.migration.draft import Draft
from workbench.migration.flips import FLIP_COLUMNS, NO_OUTCOME, UNOBSERVABLE, latest_outcomes
from workbench.migration.history import History

__all__ = ["CUBE_KEYS", "FLIP_COLUMNS", "NO_OUTCOME", "UNOBSERVABLE", "Computed", "Passes", "compute", "latest_outcomes"]

CUBE_KEYS = ["old_verdict", "new_verdict", "old_rule", "new_rule", "old_reason", "new_reason", "new_status", "replay"]
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
    """The passes over the history done elsewhere (`workbench.migration.on_cluster`: per partition on a
    cluster's workers): what `_replay_passes` returns, and the latest outcomes of some decisions."""

    def replay(self, history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]: ...

    def latest_outcomes(self, flipped: pl.DataFrame) -> pl.DataFrame: ...


def compute(history: History, draft: Draft, *, flips_limit: int = 200, flips_path: Path | None = None,
            horizon_days: int = 30, passes: Passes | None = None) -> Computed:
    """Run the dry-run: one pass over the history that aggregates as it reads and writes the
    rows it selects (the flips and the partial rows) to a file, one over the outcomes that
    keeps those of the selected decisions, then passes over these files
    (`workbench.migration.flips`): memory holds aggregates, the scalar rows and one bucket of
    flips at a time, never every flip. Every flip is written to `flips_path` (without one, to
    a file of the run's own folder, removed at the end as the others).

    The pass over the history groups and filters by the draft's pick (`rulebook_polars.PICK`:
    which rule, the default outcome or needs_input), not by the strings it answers; the small
    results are named through `rulebook_polars.outcome_table` afterwards. The rows the scalar
    evaluator replays are few and are evaluated in memory. `passes`: the passes over the
    history made elsewhere (a cluster); their selected rows go through the same files."""
    table = rp.outcome_table(draft.polars)
    named = table.rename(_NEW)
    versions = history.versions_in_scope()
    with flips.spill_folder(flips_path) as folder:
        grouped, rows = _selected_rows(history, draft, table, passes, folder / "selected.parquet")
        selected = pl.scan_parquet(folder / "selected.parquet")
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dry-run") as worker:
            # The outcomes of every selected decision (the flips and the few partial rows, whose
            # flips are known only after the scalar evaluator), read while the scalar rows are
            # evaluated and the cube is built (Polars releases the GIL).
            reading = worker.submit(_outcome_lookup, history, passes, selected, folder / "outcomes.parquet")
            partial = selected.filter(pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL).select(*_KEEP, "facts_json")
            scalar = _scalar_rows(partial.collect(), draft).rename(_NEW)
            fine = _fine_cube(grouped, named, scalar)
            cube = fine.group_by(CUBE_KEYS).agg(pl.col("count").sum())
            months = _month_counts(fine)
            changes = _field_changes(fine.filter(pl.col("replay") != rp.REPLAY_NONE))
            lookup = reading.result()
        flips_file = flips_path if flips_path is not None else folder / "flips.parquet"
        every = flips.write_flips(flips_file, _flipped(selected, named, scalar), lookup, flips.buckets_for(rows))
        outcome_cube, listed, as_of, tally = _flip_aggregates(every, flips_limit, versions, horizon_days)
    scalar_rows = int((scalar["replay"] == rp.REPLAY_SCALAR).sum())
    return Computed(cube, outcome_cube, months, listed, versions, changes, scalar_rows, flips_limit, tally, as_of)


def _selected_rows(history: History, draft: Draft, table: pl.DataFrame, passes: Passes | None,
                   path: Path) -> tuple[pl.DataFrame, int]:
    """The replay pass (`_replay_pass`, or `passes` on a cluster): the grouped counts, and the
    selected rows written to `path`; returns the counts and how many rows were selected."""
    if passes is None:
        grouped = _replay_pass(history, draft, table, path)
        return grouped, pq.read_metadata(path).num_rows
    grouped, rows = passes.replay(history, draft, table)
    rows.write_parquet(path, compression=flips.SPILL_COMPRESSION)
    return grouped, rows.height


def _outcome_lookup(history: History, passes: Passes | None, selected: pl.LazyFrame, path: Path) -> flips.Lookup:
    """The latest outcomes of the selected decisions, by bucket (`flips.Lookup`): their records
    kept in one streaming pass over the history's outcomes (`flips.outcome_records`), or on a
    cluster their latest outcomes found by its workers (held in memory, as the cluster's rows)."""
    if passes is None:
        return flips.outcome_records(history.outcomes, selected, path)
    latest = passes.latest_outcomes(selected.select("decision_id", "scope").collect())

    def lookup(rows: pl.DataFrame, bucket: pl.Expr) -> pl.DataFrame:
        return rows.join(latest.filter(bucket), on="decision_id", how="left", maintain_order="left")
    return lookup


def _flip_aggregates(buckets: Iterable[pl.DataFrame], k: int, versions: pl.DataFrame, horizon_days: int
                     ) -> tuple[pl.DataFrame, pl.DataFrame, str | None, dict[tuple[str, str, str, bool], int]]:
    """From every flip (FLIP_COLUMNS, a bucket at a time): the outcome cube (old verdict × new
    verdict × outcome class → flips), the `k` newest flips (newest first, a flip without a time
    before all, then by decision id: the newest of each bucket's newest), `as_of` and the impact
    tally (old verdict × new verdict × outcome class × young → flips; `_as_of`)."""
    as_of, young = _as_of(versions, horizon_days)
    keys = ["old_verdict", "new_verdict", "outcome_class", "young"]
    is_young = (young if young is not None else pl.lit(None, pl.Boolean)).alias("young")
    counts, newest = [], []
    for frame in buckets:
        counts.append(_detached(frame.group_by(*keys[:3], is_young).agg(pl.len().cast(pl.Int64).alias("count"))))
        newest.append(_newest(frame, k))
        del frame
    cells = pl.concat(counts).group_by(keys).agg(pl.col("count").sum())
    outcome_cube = cells.group_by(keys[:3]).agg(pl.col("count").sum())
    tally = {(o, n, c, bool(y)): int(count) for o, n, c, y, count in cells.select(*keys, "count").iter_rows()} \
        if young is not None else {}
    return outcome_cube, _newest(pl.concat(newest), k), as_of, tally


def _newest(flips: pl.DataFrame, k: int) -> pl.DataFrame:
    """`flips.sort(["created_at", "decision_id"], descending=[True, False]).head(k)`, the `k`
    newest flips (a flip without a time before all), without sorting (a copy of) every flip:
    only the rows at or after the k-th newest time (and those without a time, which that sort
    puts first) can be among them. The result holds no buffer of `flips` (`_detached`)."""
    cut = flips.select(pl.col("created_at").drop_nulls().top_k(k).min()).item() if k > 0 else None
    near = pl.col("created_at").is_null() | (pl.col("created_at") >= cut) if cut is not None \
        else pl.col("created_at").is_null()
    candidates = flips.filter(near) if k > 0 else flips.clear()
    return _detached(candidates.sort(["created_at", "decision_id"], descending=[True, False]).head(k))


def _detached(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with its strings copied out: a filtered, gathered or sliced string column refers
    to the buffers it was taken from, so a few rows kept from each bucket would keep every
    bucket alive."""
    return frame.select(_owned(name) if dtype == pl.String else pl.col(name) for name, dtype in frame.schema.items())


def _as_of(versions: pl.DataFrame, horizon_days: int) -> tuple[str | None, pl.Expr | None]:
    """The history's newest decision time (`as_of`, so the figures depend on the data only,
    never on when the dry-run runs) and whether a flip is young: newer than `horizon_days`
    before it. (None, None) for a history without a decision time."""
    newest = versions["last"].max() if versions.height else None
    if not isinstance(newest, datetime):
        return None, None
    return iso_ms(newest), pl.col("created_at") > newest - timedelta(days=horizon_days)


def _replay_plan(history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The one pass over the history, as two queries over the same evaluated rows: (the typed
    and absent rows counted by stored outcome, month and the draft's pick; the vector rows that
    flip and the partial rows, the latter with their facts for the scalar evaluator)."""
    evaluated = rp.with_pick(history.base, draft.polars)
    typed_or_absent = pl.col(fc.STATE_COLUMN).ne_missing(fc.STATE_PARTIAL)
    grouped = evaluated.filter(typed_or_absent).group_by([*_OLD, "month", rp.PICK]).agg(
        pl.len().cast(pl.Int64).alias("count"))
    selected = evaluated.filter(~typed_or_absent | _flip_by_pick(table)).select(
        *_KEEP, fc.STATE_COLUMN, pl.when(~typed_or_absent).then(pl.col("facts_json")).alias("facts_json"), rp.PICK)
    return grouped, selected


def _replay_pass(history: History, draft: Draft, table: pl.DataFrame, selected_path: Path) -> pl.DataFrame:
    """`_replay_plan` in one streaming pass: the grouped counts (small) returned, the selected
    rows written to `selected_path` as they are found (in the history's order)."""
    grouped, selected = _replay_plan(history, draft, table)
    sink = selected.sink_parquet(selected_path, compression=flips.SPILL_COMPRESSION, lazy=True)
    found, _ = pl.collect_all([grouped, sink], engine="streaming")
    return found


def _replay_passes(history: History, draft: Draft, table: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`_replay_plan` in one streaming pass, both results in memory (a partition's, on a
    cluster's worker: `workbench.migration.on_cluster`)."""
    grouped, selected = _replay_plan(history, draft, table)
    found, rows = pl.collect_all([grouped, selected.select(_owned(name) for name in selected.collect_schema().names())],
                                 engine="streaming")
    return found, rows


def _owned(name: str) -> pl.Expr:
    """A column as itself, its strings copied out of the pages they were read from: a filtered
    string column otherwise keeps every read page's buffer alive (at 100M decisions, 8.6M flips
    kept about 1.3 GB of the history's strings)."""
    return pl.col(name) if name in ("created_at", rp.PICK) else pl.concat_str([pl.col(name), pl.lit("")]).alias(name)


_FLIP_ROW = ["decision_id", "created_at", "scope", "old_verdict", "new_verdict", "old_rule", "new_rule",
             "old_reason", "new_reason"]


def _flipped(selected: pl.LazyFrame, named: pl.DataFrame, scalar: pl.DataFrame) -> pl.LazyFrame:
    """The decisions whose verdict flips, in the history's order: the vector rows (their pick
    named through the draft's outcome table) and the rows the scalar evaluator replayed to
    another verdict."""
    pick = pl.col(rp.PICK)
    vector = selected.filter(pl.col(fc.STATE_COLUMN).ne_missing(fc.STATE_PARTIAL)).with_columns(
        pick.replace_strict(named[rp.PICK], named[name], default=None, return_dtype=pl.String).alias(name)
        for name in ("new_verdict", "new_rule", "new_reason"))
    return pl.concat([
        vector.select(_FLIP_ROW),
        scalar.lazy().filter((pl.col("replay") == rp.REPLAY_SCALAR) & (pl.col("old_verdict") != pl.col("new_verdict")))
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
