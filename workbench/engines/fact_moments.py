"""Numeric facts out of `facts_json`: per (fact path, month) the count, sum and sum of squares
of its values, plus the decisions with the most extreme values (evidence for drift).

A fact is a dotted path into the facts object (`applicant.income`). It is numeric when every
value it takes in the sample is a number (booleans are not numbers, as in Rulebook v1);
a path that ever holds another type is counted in `non_numeric` and the finalizer drops it,
so the verdict does not depend on how the sample was partitioned.
"""

from __future__ import annotations

from typing import Sequence

import polars as pl

from workbench.engines.common import EVIDENCE_IDS, merge_frames

FACTS_HOW = {"n": "sum", "total": "sum", "total_sq": "sum", "non_numeric": "sum"}
_EXTREME_SCHEMA = {"fact": pl.String, "month": pl.String, "value": pl.Float64, "decision_id": pl.String}


def _leaves(dtype: pl.DataType, prefix: str) -> list[tuple[str, pl.DataType, list[str]]]:
    out = []
    for field in dtype.fields:  # type: ignore[attr-defined]
        path = f"{prefix}{field.name}"
        if isinstance(field.dtype, pl.Struct):
            out.extend((p, t, [field.name, *chain]) for p, t, chain in _leaves(field.dtype, path + "."))
        else:
            out.append((path, field.dtype, [field.name]))
    return out


def _field_expr(chain: list[str]) -> pl.Expr:
    expr = pl.col("facts")
    for name in chain:
        expr = expr.struct.field(name)
    return expr


def facts_partial(decisions: pl.LazyFrame | pl.DataFrame) -> dict[str, pl.DataFrame]:
    """`facts` (fact, month → n, total, total_sq, non_numeric), `fact_high` / `fact_low`
    (the EVIDENCE_IDS largest / smallest values per fact and month, with their decision).
    One JSON decode and one grouped pass over the rows, whatever the number of facts."""
    rows = (
        decisions.lazy().filter(pl.col("facts_json").is_not_null())
        .select("decision_id", "month", "facts_json")
        .collect()
    )
    empty = {
        "facts": pl.DataFrame(schema={"fact": pl.String, "month": pl.String, **{c: pl.Float64 for c in FACTS_HOW}}),
        "fact_high": pl.DataFrame(schema=_EXTREME_SCHEMA),
        "fact_low": pl.DataFrame(schema=_EXTREME_SCHEMA),
    }
    if not rows.height:
        return empty
    decoded = rows.select("decision_id", "month",
                          rows["facts_json"].str.json_decode(infer_schema_length=None).alias("facts"))
    if not isinstance(decoded.schema["facts"], pl.Struct):
        return empty
    numeric, other = [], []
    for path, dtype, chain in _leaves(decoded.schema["facts"], ""):
        if dtype.is_numeric():
            numeric.append((path, _field_expr(chain).cast(pl.Float64)))
        elif dtype != pl.Null:
            other.append((path, _field_expr(chain)))
    if not numeric and not other:
        return empty
    values = decoded.select("decision_id", "month", *[expr.alias(f"n{i}") for i, (_, expr) in enumerate(numeric)],
                            *[expr.is_not_null().alias(f"o{i}") for i, (_, expr) in enumerate(other)])
    aggs = []
    for i in range(len(numeric)):
        v = pl.col(f"n{i}")
        aggs += [v.is_not_null().sum().cast(pl.Float64).alias(f"n{i}:n"), v.sum().alias(f"n{i}:total"),
                 (v * v).sum().alias(f"n{i}:total_sq")]
    aggs += [pl.col(f"o{i}").sum().cast(pl.Float64).alias(f"o{i}:non_numeric") for i in range(len(other))]
    grouped = values.group_by("month").agg(aggs)
    parts = []
    for i, (path, _) in enumerate(numeric):
        parts.append(grouped.select(pl.lit(path).alias("fact"), "month", pl.col(f"n{i}:n").alias("n"),
                                    pl.col(f"n{i}:total").alias("total"), pl.col(f"n{i}:total_sq").alias("total_sq"),
                                    pl.lit(0.0).alias("non_numeric")))
    for i, (path, _) in enumerate(other):
        parts.append(grouped.select(pl.lit(path).alias("fact"), "month", pl.lit(0.0).alias("n"),
                                    pl.lit(0.0).alias("total"), pl.lit(0.0).alias("total_sq"),
                                    pl.col(f"o{i}:non_numeric").alias("non_numeric")))
    out = {"facts": merge_frames(parts, ["fact", "month"], FACTS_HOW)}
    high, low = [], []
    for i, (path, _) in enumerate(numeric):
        v = pl.col(f"n{i}")
        base = values.lazy().select(pl.lit(path).alias("fact"), "month", v.alias("value"), "decision_id") \
            .filter(pl.col("value").is_not_null())
        # Cost: only the rows at or beyond each month's k-th extreme reach the sort
        high.append(extremes(base.filter(pl.col("value") >= pl.col("value").top_k(EVIDENCE_IDS).min().over("month")),
                             descending=True))
        low.append(extremes(base.filter(pl.col("value") <= pl.col("value").bottom_k(EVIDENCE_IDS).max().over("month")),
                            descending=False))
    if numeric:
        collected = pl.collect_all([*high, *low])
        out["fact_high"] = pl.concat(collected[:len(high)]).sort(["fact", "month", "value", "decision_id"],
                                                                  descending=[False, False, True, False])
        out["fact_low"] = pl.concat(collected[len(high):]).sort(["fact", "month", "value", "decision_id"])
    else:
        out["fact_high"], out["fact_low"] = empty["fact_high"], empty["fact_low"]
    return out


def extremes(values: pl.LazyFrame, *, descending: bool, k: int = EVIDENCE_IDS) -> pl.LazyFrame:
    """Per (fact, month) the k most extreme values; ties by decision id (deterministic)."""
    return (
        values.sort(["value", "decision_id"], descending=[descending, False])
        .group_by(["fact", "month"], maintain_order=True)
        .head(k)
        .sort(["fact", "month", "value", "decision_id"], descending=[False, False, descending, False])
    )


def merge_facts(partials: Sequence[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    def cat(name: str) -> pl.LazyFrame:
        return pl.concat([p[name] for p in partials], how="vertical_relaxed").lazy()

    return {
        "facts": merge_frames([p["facts"] for p in partials], ["fact", "month"], FACTS_HOW),
        "fact_high": extremes(cat("fact_high"), descending=True).collect(),
        "fact_low": extremes(cat("fact_low"), descending=False).collect(),
    }
