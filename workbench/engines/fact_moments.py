"""Numeric facts: per (fact path, month) the count, sum and sum of squares of its values,
plus the decisions with the most extreme values (evidence for drift).

A fact is a field path into the facts object (`applicant.income`), exactly as a Rulebook v1
`field` names it and as the typed facts table stores it (`workbench.dataset.facts`: object keys only,
keys a field path can name, paths of at most 160 characters). It is numeric when every value it
takes in the sample is a number (booleans are not numbers, as in Rulebook v1; a JSON `null` is
no value); a path that ever holds another kind (string, boolean, array, object) is counted in
`non_numeric` and the finalizer drops it, so the verdict does not depend on how the sample was
partitioned.

The input is the typed facts table of the decisions (`fact_columns`: `<path>::t` the kind,
`<path>::n` the number), so no JSON is decoded for typed rows; `facts_state = partial` rows
(a value the columns cannot hold exactly, or more paths than the table keeps) are flattened
from their `facts_json` one by one with the same rules; `absent` rows hold no facts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import polars as pl

from workbench.engines import fact_columns as fc
from workbench.engines.common import EVIDENCE_IDS, merge_frames

FACTS_HOW = {"n": "sum", "total": "sum", "total_sq": "sum", "non_numeric": "sum"}
_FACTS_SCHEMA = {"fact": pl.String, "month": pl.String, **dict.fromkeys(FACTS_HOW, pl.Float64)}
_EXTREME_SCHEMA = {"fact": pl.String, "month": pl.String, "value": pl.Float64, "decision_id": pl.String}
_LONG_SCHEMA = {"decision_id": pl.String, "month": pl.String, "fact": pl.String, "value": pl.Float64,
                "non_numeric": pl.Boolean}


def _empty() -> dict[str, pl.DataFrame]:
    return {"facts": pl.DataFrame(schema=_FACTS_SCHEMA), "fact_high": pl.DataFrame(schema=_EXTREME_SCHEMA),
            "fact_low": pl.DataFrame(schema=_EXTREME_SCHEMA)}


def table_paths(names: Sequence[str]) -> list[str]:
    """The fact paths of a typed facts table's column names (sorted)."""
    suffix = "::t"
    return sorted(name[: -len(suffix)] for name in names if name.endswith(suffix))


def _typed(typed: pl.DataFrame, paths: list[str], by: list[str],
           extreme_ids: bool = True) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The typed rows' moments per (fact, month) (`typed`: the typed rows of the facts table, in
    memory: `by`, `month`, `decision_id` when `extreme_ids`, and each path's `t` and `n`), and candidates for each path's k largest and
    k smallest values per month with their decision: every value at or beyond the least
    extreme of those months' k-th extremes (a superset of each month's k largest and smallest,
    ties included; `extremes` keeps exactly those). One grouped pass over the table however
    many paths (wide, then one row per (fact, month)), then one filter for the candidates
    (none, and no extreme in the grouped pass, when `extreme_ids` is False)."""
    if not paths:
        return pl.DataFrame(schema=_keyed(by, _FACTS_SCHEMA)), pl.DataFrame(schema=_keyed(by, _EXTREME_SCHEMA))
    aggs = []
    for i, path in enumerate(paths):
        number = _number(path)
        kind = pl.col(fc.column(path, "t"))
        other = kind.is_not_null() & (kind != fc.KIND_NULL) & (kind != fc.KIND_NUMBER)
        aggs += [number.count().cast(pl.Float64).alias(f"{i}:n"), number.sum().alias(f"{i}:total"),
                 (number * number).sum().alias(f"{i}:total_sq"),
                 other.sum().cast(pl.Float64).alias(f"{i}:non_numeric")]
        if extreme_ids:
            aggs += [number.drop_nulls().top_k(EVIDENCE_IDS).min().alias(f"{i}:high"),
                     number.drop_nulls().bottom_k(EVIDENCE_IDS).max().alias(f"{i}:low")]
    wide = typed.group_by(*by, "month").agg(aggs)
    moments = pl.concat([wide.select(*by, pl.lit(path, dtype=pl.String).alias("fact"), "month",
                                     *[pl.col(f"{i}:{name}").alias(name) for name in FACTS_HOW])
                         for i, path in enumerate(paths)], how="vertical_relaxed")
    # A (fact, month) without a value has no row, as from the JSON (a path only ever null is no fact).
    moments = moments.filter((pl.col("n") > 0) | (pl.col("non_numeric") > 0))
    extreme = [pl.DataFrame(schema=_keyed(by, _EXTREME_SCHEMA))]
    for i, path in enumerate(paths if extreme_ids else ()):
        sides = [(cuts, descending) for name, descending in ((f"{i}:high", True), (f"{i}:low", False))
                 if (cuts := wide.select(*by, "month", pl.col(name).alias("_cut")).drop_nulls("_cut")).height]
        if not sides:
            continue
        # One pass over the path's values keeps those near either side's cuts (`_beyond` keeps
        # exactly these rows of either side), so each side reads a few rows, not the table.
        near = [pl.col("value") >= cuts["_cut"].min() if descending else pl.col("value") <= cuts["_cut"].max()
                for cuts, descending in sides]
        values = typed.lazy().select(*by, "month", _number(path).alias("value"), "decision_id").filter(
            pl.any_horizontal(near)).collect()
        extreme.extend(_beyond(values, cuts, descending, by).select(*by, pl.lit(path).alias("fact"), "month",
                                                                   "value", "decision_id")
                       for cuts, descending in sides)
    return moments, pl.concat(extreme, how="vertical_relaxed").unique(
        subset=[*by, "fact", "month", "decision_id"], maintain_order=True)


def _beyond(values: pl.DataFrame, cuts: pl.DataFrame, descending: bool, by: list[str]) -> pl.DataFrame:
    """Candidates for each group's k most extreme values, ties by decision id (`extremes`
    keeps exactly those): the values beyond the group's k-th extreme (`_cut`, fewer than k),
    and the k smallest decision ids among the values equal to it."""
    keys = [*by, "month"]
    floor = cuts["_cut"].min() if descending else cuts["_cut"].max()
    near = pl.col("value") >= floor if descending else pl.col("value") <= floor
    # A null partition key is a partition of its own (as `group_by` makes it): it meets its cut.
    rows = values.lazy().filter(near).join(cuts.lazy(), on=keys, how="inner", nulls_equal=True)
    beyond = pl.col("value") > pl.col("_cut") if descending else pl.col("value") < pl.col("_cut")
    tied = (rows.filter(pl.col("value") == pl.col("_cut")).group_by(keys)
            .agg(pl.col("value").first(), pl.col("decision_id").bottom_k(EVIDENCE_IDS)).explode("decision_id"))
    out = pl.collect_all([rows.filter(beyond).select(*keys, "value", "decision_id"), tied.select(*keys, "value", "decision_id")])
    return pl.concat(out, how="vertical_relaxed")


def _number(path: str) -> pl.Expr:
    """A path's value where its kind is a number (null elsewhere)."""
    return pl.when(pl.col(fc.column(path, "t")) == fc.KIND_NUMBER).then(pl.col(fc.column(path, "n")))


def _keyed(by: Sequence[str], schema: dict[str, Any]) -> dict[str, Any]:
    return {**dict.fromkeys(by, pl.String), **schema}


def _moments(long: pl.LazyFrame, by: list[str]) -> pl.LazyFrame:
    return long.group_by(*by, "fact", "month").agg(
        pl.col("value").count().cast(pl.Float64).alias("n"),
        pl.col("value").sum().alias("total"),
        (pl.col("value") * pl.col("value")).sum().alias("total_sq"),
        pl.col("non_numeric").sum().cast(pl.Float64).alias("non_numeric"))


def _json_long(rows: pl.DataFrame) -> pl.DataFrame:
    """Rows flattened from their `facts_json`, one by one, with the typed table's path rules
    (`fact_columns.flatten`, the export's own)."""
    out: dict[str, list[Any]] = {name: [] for name in _LONG_SCHEMA}
    for decision_id, month, text in rows.select("decision_id", "month", "facts_json").iter_rows():
        if text is None:
            continue
        paths, _ = fc.flatten(json.loads(text))
        for path, value in paths.items():
            if value is None:
                continue
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            out["decision_id"].append(decision_id)
            out["month"].append(month)
            out["fact"].append(path)
            out["value"].append(float(value) + 0.0 if number else None)  # + 0.0: as the typed column, no -0.0
            out["non_numeric"].append(not number)
    return pl.DataFrame(out, schema=_LONG_SCHEMA)


def facts_partial(decisions: pl.LazyFrame | pl.DataFrame, facts: pl.LazyFrame | pl.DataFrame | None = None,
                  by: Sequence[str] = (), *, extreme_ids: bool = True) -> dict[str, pl.DataFrame]:
    """`facts` (fact, month → n, total, total_sq, non_numeric), `fact_high` / `fact_low`
    (the EVIDENCE_IDS largest / smallest values per fact and month, with their decision).

    `facts`: the typed facts table of exactly these decisions (`decision_id`, `month`,
    `facts_state`, `facts_json`, typed columns), as an exported dataset holds it; without it,
    every decision's `facts_json` is flattened one by one (the live ledger's bounded samples).
    `by`: partition key columns (of the decisions, and of the facts rows when given); every
    table is then per partition, keys first. `extreme_ids` False: `fact_high` and `fact_low` are
    left empty (the moments alone: no decision's value is ranked)."""
    by = list(by)
    if facts is None:
        rows = decisions.lazy().filter(pl.col("facts_json").is_not_null()).select(
            "decision_id", "month", "facts_json", *by).collect()
        typed_moments = pl.DataFrame(schema=_keyed(by, _FACTS_SCHEMA))
        typed_candidates = pl.DataFrame(schema=_keyed(by, _EXTREME_SCHEMA))
    else:
        facts = facts.lazy()
        paths = table_paths(facts.collect_schema().names())
        state = pl.col(fc.STATE_COLUMN)
        ids = ["decision_id"] if extreme_ids else []  # a string per row: read only to name extremes
        # One read of the table's states and typed columns; both passes of `_typed` are in memory.
        read = facts.select(*by, "month", *ids, fc.STATE_COLUMN,
                            *[fc.column(path, part) for path in paths for part in ("t", "n")]).collect()
        # Read `facts_json` only when some row needs it (most tables have no partial row).
        needed = facts.filter(state == fc.STATE_PARTIAL).select("decision_id", "month", "facts_json", *by)
        rows = needed.collect() if (read.get_column(fc.STATE_COLUMN) == fc.STATE_PARTIAL).any() else pl.DataFrame(
            schema=needed.collect_schema())
        typed = read.filter(state == fc.STATE_TYPED).drop(fc.STATE_COLUMN)
        typed_moments, typed_candidates = _typed(typed, paths, by, extreme_ids)
    long = _json_long(rows).lazy()
    if by:  # each flattened value carries its decision's partition keys
        long = long.join(rows.lazy().select("decision_id", *by), on="decision_id", how="left").select(
            *by, *_LONG_SCHEMA)
    values = long.filter(pl.col("value").is_not_null()).select(*by, "fact", "month", "value", "decision_id")
    if not extreme_ids:
        values = values.filter(pl.lit(False))
    json_moments, json_high, json_low = pl.collect_all(
        [_moments(long, by), _candidates(values, True, by), _candidates(values, False, by)])
    merged = merge_frames([typed_moments, json_moments.select(*by, *_FACTS_SCHEMA)], [*by, "fact", "month"],
                          FACTS_HOW)
    if not merged.height:
        return _empty()
    high = pl.concat([typed_candidates, json_high], how="vertical_relaxed").lazy()
    low = pl.concat([typed_candidates, json_low], how="vertical_relaxed").lazy()
    return {"facts": merged, "fact_high": extremes(high, descending=True, by=by).collect(),
            "fact_low": extremes(low, descending=False, by=by).collect()}


def _candidates(values: pl.LazyFrame, descending: bool, by: Sequence[str] = ()) -> pl.LazyFrame:
    """The values at or beyond each (fact, month)'s k-th extreme (only these reach the sort)."""
    groups = [*by, "fact", "month"]
    if descending:
        return values.filter(pl.col("value") >= pl.col("value").top_k(EVIDENCE_IDS).min().over(groups))
    return values.filter(pl.col("value") <= pl.col("value").bottom_k(EVIDENCE_IDS).max().over(groups))


def extremes(values: pl.LazyFrame, *, descending: bool, k: int = EVIDENCE_IDS,
             by: Sequence[str] = ()) -> pl.LazyFrame:
    """Per (fact, month) the k most extreme values; ties by decision id (deterministic)."""
    groups = [*by, "fact", "month"]
    return (
        values.sort(["value", "decision_id"], descending=[descending, False])
        .group_by(groups, maintain_order=True)
        .head(k)
        .sort([*groups, "value", "decision_id"], descending=[*([False] * len(groups)), descending, False],
              nulls_last=True)
    )


def merge_facts(partials: Sequence[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    def cat(name: str) -> pl.LazyFrame:
        return pl.concat([p[name] for p in partials], how="vertical_relaxed").lazy()

    return {
        "facts": merge_frames([p["facts"] for p in partials], ["fact", "month"], FACTS_HOW),
        "fact_high": extremes(cat("fact_high"), descending=True).collect(),
        "fact_low": extremes(cat("fact_low"), descending=False).collect(),
    }
