"""Shared pieces of the engines: the latest outcome per decision, partial-aggregate merging,
the sample block every report states, and the small statistics the formulas use.

Every engine is written as three pure steps so it can run partition by partition:

    partial(decisions, outcomes, …) → dict of small DataFrames (additive state)
    partial(…, by=keys)              → the partials of every partition at once, each row led by
                                       its partition's key columns (the report rollups)
    merge([partial, …])              → one partial of the same shape
    finalize(partial, …)             → the report body (plain JSON-ready dict)

A partition is a set of decisions (the dataset's `scope=/month=` directories) together with
*all* outcome records of those decisions: outcomes are joined to their decision by
`decision_id`, so a distributed engine co-partitions (shuffles) outcomes by decision. With that
rule, `finalize(merge(partials))` equals `finalize(partial(whole))` (a test proves it).

Only Polars and the standard library are imported here (import-linter contract).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Literal, TypedDict, overload

import polars as pl

# The effectiveness classes of outcome statuses (gate.receipts.values holds the mapping; the
# caller passes it in, the engines only know the class names).
SUCCESS, FAILURE, EXCLUDED, OPEN = "success", "failure", "excluded", "open"
CLASSES = (SUCCESS, FAILURE, EXCLUDED, OPEN)
UNCLASSIFIED = "unclassified"
NO_OUTCOME = "none"

DEFAULT_RULE = "(default_outcome)"  # matched_rule_id is null when the default outcome decided
EVIDENCE_IDS = 10  # decision ids kept as evidence per finding
Z_FULL = 3.0  # |z| at which statistical evidence counts fully


# --------------------------------------------------------------------------- latest outcome


def latest_outcomes(outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """One row per decision: `status` of its latest outcome record, ordered by
    (`reported_at`, `receipt_id`) so equal timestamps still give one deterministic answer,
    and `outcome_records`, how many outcome records the decision has."""
    return outcomes.group_by("decision_id").agg(
        pl.col("status").sort_by(["reported_at", "receipt_id"]).last(),
        pl.len().cast(pl.Int64).alias("outcome_records"),
    )


def with_latest_outcome(decisions: pl.LazyFrame, outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """The decisions, each with `status` (null when it has no outcome) and `outcome_records`."""
    return decisions.join(latest_outcomes(outcomes), on="decision_id", how="left").with_columns(
        pl.col("outcome_records").fill_null(0)
    )


def latest_joined(decisions: pl.LazyFrame, outcomes: pl.LazyFrame) -> pl.LazyFrame:
    """`with_latest_outcome(decisions, outcomes)` (the same rows, in the decisions' order) at a
    fraction of the cost: `latest_rows(decisions.collect(), outcomes)`."""
    return latest_rows(decisions.collect(), outcomes).lazy()


# `latest_rows`' hash join and its group-by by row run on Polars' streaming engine, whose
# executor threads share both out among the cores (the in-memory engine ran them on about one).
_JOIN_ENGINE: Literal["in-memory", "streaming"] = "streaming"

_ORDER_RANGE = 1 << 62  # (time span + 1) × (statuses + 1) must stay below this in an Int64


def _packing(read: pl.DataFrame) -> tuple[pl.Series, pl.Expr, pl.Expr, int] | None:
    """`latest_rows`' packing of (`reported_at`, status) for these records: the status names
    (code 0: null, then the sorted statuses), the `_high` and `_low` expressions and their width;
    None when the records' times and statuses do not fit an Int64."""
    statuses = read.get_column("status").drop_nulls().unique().sort()
    at = pl.col("reported_at").to_physical()
    first, last = read.select(at.min().alias("first"), at.max().alias("last")).row(0)
    width = statuses.len() + 1  # code 0: a null status
    if first is not None and (last - first + 1) * width >= _ORDER_RANGE:
        return None
    code = (pl.col("status").cast(pl.Enum(statuses)).to_physical().cast(pl.Int64) + 1).fill_null(0)
    since = at - pl.lit(first or 0, dtype=pl.Int64)
    names = pl.Series([None, *statuses], dtype=pl.String)
    return names, (since * width + code).alias("_high"), (since * width + (width - 1 - code)).alias("_low"), width


def latest_rows(rows: pl.DataFrame, outcomes: pl.LazyFrame) -> pl.DataFrame:
    """`rows` (decisions, in memory) with `status` and `outcome_records` set beside their own
    columns, in their order: the status of each decision's latest outcome record by
    (`reported_at`, `receipt_id`), as `latest_outcomes` gives it, without a sort nor a
    string-keyed group-by. Each outcome record is matched once to its row's position
    (`_record_rows`; records of no row drop out), and its (`reported_at`, status) is packed into
    one Int64 (time since the earliest record × (statuses + 1) + the status's code, `_packing`),
    grouped by that integer position: a row's greatest packed value holds its latest time and
    the greatest status code at that time; a second maximum, with the codes reversed, holds the
    least. When the two agree, every record at the latest time has that status and `receipt_id`
    cannot change the answer; a row whose records tie on two statuses at the latest time, or
    have no time, is settled by `latest_outcomes` over its own records. The rows' own columns
    are never gathered. Exact for any input; outcomes that do not fit the packing take
    `latest_outcomes` whole."""
    read = outcomes.select("decision_id", "reported_at", "status").collect()
    packing = _packing(read)
    if packing is None:
        return join_runs(rows.lazy(), latest_outcomes(outcomes).collect()).collect()
    names, high, low, width = packing
    ids = rows.get_column("decision_id")
    runs = _record_rows(read.select("decision_id", high, low), ids).group_by("_row").agg(
        pl.col("_high").max(), pl.col("_low").max(), pl.len().cast(pl.Int64).alias("outcome_records"),
    ).with_columns((pl.col("_high") % width).alias("_code")).collect(engine=_JOIN_ENGINE)
    tied = runs.filter(pl.col("_high").is_null() | (pl.col("_code") != width - 1 - pl.col("_low") % width))
    at = runs.get_column("_row")
    code = pl.repeat(0, rows.height, dtype=pl.Int64, eager=True).scatter(at, runs.get_column("_code"))
    if tied.height:
        tied_ids = ids.gather(tied.get_column("_row"))
        settled = latest_outcomes(outcomes.filter(pl.col("decision_id").is_in(tied_ids.implode()))).collect()
        found = pl.DataFrame({"_row": tied.get_column("_row"), "decision_id": tied_ids}).join(
            settled, on="decision_id", how="left", maintain_order="left")
        status_code = pl.col("status").cast(pl.Enum(names.drop_nulls())).to_physical().cast(pl.Int64) + 1
        code = code.scatter(found.get_column("_row"), found.select(status_code.fill_null(0)).to_series())
    records = pl.repeat(0, rows.height, dtype=pl.Int64, eager=True).scatter(at, runs.get_column("outcome_records"))
    return rows.hstack([names.gather(code).alias("status"), records.alias("outcome_records")])


def _id_hash() -> pl.Expr:
    """A decision id's 64-bit hash (`_record_rows`; one function, so a test can make it collide)."""
    return pl.col("decision_id").hash()


def _record_rows(read: pl.DataFrame, ids: pl.Series) -> pl.LazyFrame:
    """The outcome records (`read`: `decision_id`, `_high`, `_low`) each with `_row`, the
    position in `ids` (the rows' decision ids) of its decision; records of no row are left out,
    a record of a repeated id comes once per row. The ids are matched by their 64-bit hashes,
    which join at a fraction of the cost of their text, whenever the rows' hashes are distinct
    (no repeated id, no collision): each record then meets at most one row, and each matched
    pair's ids are compared as text, so a record whose id only shares a hash with a row's is
    dropped, never counted: exact for any input. Otherwise the ids are joined as text."""
    hashed = ids.to_frame().select(_id_hash().alias("_hash")).with_row_index("_row")
    if hashed.get_column("_hash").n_unique() != ids.len():
        index = ids.to_frame().with_row_index("_row")
        return read.lazy().join(index.lazy(), on="decision_id", how="inner").select("_row", "_high", "_low")
    pairs = read.lazy().with_row_index("_record").select(
        "_record", _id_hash().alias("_hash"), "_high", "_low",
    ).join(hashed.lazy(), on="_hash", how="inner").collect(engine=_JOIN_ENGINE)
    same = (read.get_column("decision_id").gather(pairs.get_column("_record"))
            == ids.gather(pairs.get_column("_row"))).fill_null(False)
    return (pairs if same.all() else pairs.filter(same)).lazy().select("_row", "_high", "_low")


def join_runs(decisions: pl.LazyFrame, latest: pl.DataFrame) -> pl.LazyFrame:
    """The decisions, each with `status` and `outcome_records` of `latest` (`latest_outcomes`,
    collected; null and 0 without an outcome record), in their own order. Only the decision ids go through the join
    (kept in the decisions' order; `latest` holds one row per id, so one row comes out per
    decision, and a second row would fail the stacking, never shift it); its two columns are
    then set beside the decisions' other columns, which are never gathered."""
    rows = decisions.collect()
    found = rows.select("decision_id").join(latest, on="decision_id", how="left", maintain_order="left")
    return rows.hstack([found.get_column("status"), found.get_column("outcome_records").fill_null(0)]).lazy()


def class_expr(classes: Mapping[str, str], column: str = "status") -> pl.Expr:
    """The effectiveness class of a latest status: `none` without an outcome, `unclassified`
    for a status the mapping does not know (never silently counted as success or failure)."""
    known = dict(classes)
    return (
        pl.when(pl.col(column).is_null())
        .then(pl.lit(NO_OUTCOME))
        .otherwise(pl.col(column).replace_strict(known, default=UNCLASSIFIED, return_dtype=pl.String))
        .alias("effect")
    )


# --------------------------------------------------------------------------- partials


def merge_frames(frames: Sequence[pl.DataFrame], keys: Sequence[str], how: Mapping[str, str]) -> pl.DataFrame:
    """Merge partial tables: rows with equal `keys` combine column by column with `how`
    (`sum`, `min` or `max`), sorted by the keys so the result does not depend on order."""
    frames = [f for f in frames if f.height]
    if not frames:
        return frames_empty_like(keys, how)
    combined = pl.concat(frames, how="vertical_relaxed")
    aggs = [getattr(pl.col(name), op)().alias(name) for name, op in how.items()]
    return combined.group_by(list(keys)).agg(aggs).sort(list(keys), nulls_last=True)


def frames_empty_like(keys: Sequence[str], how: Mapping[str, str]) -> pl.DataFrame:
    return pl.DataFrame(schema={**dict.fromkeys(keys, pl.String), **dict.fromkeys(how, pl.Int64)})


def merge_top(frames: Sequence[pl.DataFrame], keys: Sequence[str], k: int = EVIDENCE_IDS) -> pl.DataFrame:
    """Merge evidence tables (`keys`, `created_at`, `decision_id`): keep, per key, the `k`
    newest decisions (ties by decision id). Top-k of a union is the top-k of the tops."""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    return top_per_group(pl.concat(frames, how="vertical_relaxed").lazy(), keys, k).collect()


def top_per_group(frame: pl.LazyFrame, keys: Sequence[str], k: int = EVIDENCE_IDS) -> pl.LazyFrame:
    """Per group of `keys`, the k most recent decisions (`created_at` descending, ties by
    `decision_id` ascending), sorted by keys then recency. Only the rows at or after each
    group's k-th most recent time reach the sort, so its cost stays linear in the rows."""
    keys = list(keys)
    recent = pl.col("created_at") >= pl.col("created_at").drop_nulls().top_k(k).min().over(keys)
    return (
        frame.filter(recent)
        .sort(["created_at", "decision_id"], descending=[True, False])
        .group_by(keys, maintain_order=True)
        .head(k)
        .sort([*keys, "created_at", "decision_id"], descending=[*([False] * len(keys)), True, False],
              nulls_last=True)
    )


# --------------------------------------------------------------------------- sample


SAMPLE_HOW = {"decisions": "sum", "outcome_records": "sum", "first_at": "min", "last_at": "max"}


def sample_partial(joined: pl.LazyFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """Per latest status (null = no outcome): decisions, outcome records, first/last decision time.
    `by`: partition key columns of `joined`; the partial of each partition, keys first."""
    return (
        joined.group_by([*by, "status"])
        .agg(
            pl.len().cast(pl.Int64).alias("decisions"),
            pl.col("outcome_records").sum().cast(pl.Int64),
            pl.col("created_at").min().alias("first_at"),
            pl.col("created_at").max().alias("last_at"),
        )
        .sort([*by, "status"], nulls_last=True)
        .collect()
    )


def sample_groups(joined: pl.LazyFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """`sample_partial`'s aggregates per (`keys`, status), so one pass over the joined rows
    serves the sample (`sample_of_groups`) and any count keyed by some of `keys` and status."""
    return joined.group_by([*keys, "status"]).agg(
        pl.len().cast(pl.Int64).alias("decisions"),
        pl.col("outcome_records").sum().cast(pl.Int64),
        pl.col("created_at").min().alias("first_at"),
        pl.col("created_at").max().alias("last_at"),
    )


def sample_of_groups(groups: pl.DataFrame, by: Sequence[str] = ()) -> pl.DataFrame:
    """`sample_partial` of the rows `sample_groups` grouped (per `by` partition, keys first)."""
    return groups.group_by([*by, "status"]).agg(
        pl.col("decisions").sum(), pl.col("outcome_records").sum(), pl.col("first_at").min(),
        pl.col("last_at").max()).sort([*by, "status"], nulls_last=True)


def merge_sample(frames: Sequence[pl.DataFrame]) -> pl.DataFrame:
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    return merge_frames(frames, ["status"], SAMPLE_HOW)


def class_counts(sample: pl.DataFrame, classes: Mapping[str, str]) -> dict[str, int]:
    counts = dict.fromkeys((*CLASSES, UNCLASSIFIED, NO_OUTCOME), 0)
    for row in sample.iter_rows(named=True) if sample.height else ():
        status = row["status"]
        effect = NO_OUTCOME if status is None else classes.get(status, UNCLASSIFIED)
        counts[effect] += int(row["decisions"])
    return counts


class Sample(TypedDict):
    """`sample`: the decisions a report considered and their outcomes (`sample_block`)."""

    decisions_considered: int
    decisions_with_outcome: int
    outcome_records: int
    latest_outcome_counts: dict[str, int]  # by latest outcome status
    outcome_classes: dict[str, int]  # by effectiveness class, and unclassified
    first_decision_at: str | None
    last_decision_at: str | None


def sample_block(sample: pl.DataFrame, classes: Mapping[str, str]) -> Sample:
    """What every report states about its sample: decisions considered, outcome counts by
    (latest) status and by effectiveness class, and the time window of the decisions."""
    rows = list(sample.iter_rows(named=True)) if sample.height else []
    by_status = {r["status"]: int(r["decisions"]) for r in rows if r["status"] is not None}
    decisions = sum(int(r["decisions"]) for r in rows)
    firsts = [r["first_at"] for r in rows if r["first_at"] is not None]
    lasts = [r["last_at"] for r in rows if r["last_at"] is not None]
    counts = class_counts(sample, classes)
    return {
        "decisions_considered": decisions,
        "decisions_with_outcome": decisions - counts[NO_OUTCOME],
        "outcome_records": sum(int(r["outcome_records"]) for r in rows),
        "latest_outcome_counts": dict(sorted(by_status.items())),
        "outcome_classes": {c: counts[c] for c in (*CLASSES, UNCLASSIFIED)},
        "first_decision_at": iso(min(firsts)) if firsts else None,
        "last_decision_at": iso(max(lasts)) if lasts else None,
    }


# --------------------------------------------------------------------------- numbers


def iso(value: datetime | None) -> str | None:
    """UTC timestamp text with milliseconds, the ledger's format (2026-05-21T00:00:00.000Z)."""
    if value is None:
        return None
    return value.strftime("%Y-%m-%dT%H:%M:%S.") + f"{value.microsecond // 1000:03d}Z"


def ratio(numerator: float, denominator: float) -> float | None:
    return None if not denominator else numerator / denominator


@overload
def r4(value: float) -> float: ...
@overload
def r4(value: None) -> None: ...
@overload
def r4(value: float | None) -> float | None: ...


def r4(value: float | None) -> float | None:
    """Reported numbers are rounded to 4 decimals (finite, canonical-JSON safe)."""
    if value is None:
        return None
    if math.isinf(value) or math.isnan(value):
        raise ValueError("a report number must be finite")
    rounded = round(value, 4)
    return 0.0 if rounded == 0 else rounded


def wilson(successes: int, trials: int, z: float = 1.96) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (95% by default); None without trials."""
    if trials <= 0:
        return None
    p = successes / trials
    denom = 1 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def odds_shift(hit1: int, n1: int, hit0: int, n0: int) -> tuple[float, float]:
    """(odds ratio, z) of a proportion hit1/n1 against hit0/n0, with the Haldane–Anscombe
    correction (+0.5 per cell) so empty cells stay finite. z = ln(OR) / SE(ln OR)."""
    a, b = hit1 + 0.5, (n1 - hit1) + 0.5
    c, d = hit0 + 0.5, (n0 - hit0) + 0.5
    log_or = math.log((a * d) / (b * c))
    se = math.sqrt(1 / a + 1 / b + 1 / c + 1 / d)
    return math.exp(log_or), log_or / se


def evidence(z: float) -> float:
    """Statistical evidence in [0, 1]: |z| / 3, saturating at three standard errors."""
    return min(1.0, abs(z) / Z_FULL)


def severity(score: float) -> str:
    return "high" if score >= 0.75 else "medium" if score >= 0.5 else "low"


def percentile(values: Iterable[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (Hyndman–Fan type 7, numpy's default)."""
    ordered = sorted(values)
    if not ordered:
        return None
    h = (len(ordered) - 1) * q
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (h - low) * (ordered[high] - ordered[low])
