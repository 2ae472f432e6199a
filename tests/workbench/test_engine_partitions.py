"""Whole-dataset aggregate == merge of per-partition aggregates, for every engine.

Partitions are the dataset's (scope, month) directories of decisions; each carries all
outcome records of its decisions (outcomes co-partitioned by decision_id)."""

from __future__ import annotations

import polars as pl
import pytest
from workbench_support import CLASSES, frames, random_ledger

from workbench.engines import anomalies, benchmarks, counterfactuals, effectiveness


def _replay(frame: pl.LazyFrame) -> pl.LazyFrame:
    amount = pl.col("facts_json").str.json_path_match("$.amount").cast(pl.Int64, strict=False)
    return frame.with_columns(
        pl.when(pl.col("facts_json").is_null()).then(None)
        .when(amount > 700).then(pl.lit("no")).otherwise(pl.lit("yes")).alias("new_verdict"),
        pl.lit(None, pl.String).alias("new_rule_id"),
    )


ENGINES = {
    "effectiveness": (lambda d, o: effectiveness.partial(d, o), effectiveness.merge,
                      lambda s: effectiveness.finalize(s, CLASSES, min_sample=10)),
    "anomalies": (lambda d, o: anomalies.partial(d, o, CLASSES), anomalies.merge,
                  lambda s: anomalies.finalize(s, CLASSES, min_sample=10, threshold=0.0, max_items=100)),
    "benchmarks": (lambda d, o: benchmarks.partial(d, o, CLASSES, own_scope="tenant_a"), benchmarks.merge,
                   lambda s: benchmarks.finalize(s, CLASSES, own_scope="tenant_a",
                                                 opted_in={"tenant_a", "tenant_b", "tenant_c", "tenant_d"},
                                                 min_cohort_scopes=2, min_cohort_decisions=30)),
    "counterfactuals": (lambda d, o: counterfactuals.partial(d, o, CLASSES, _replay), counterfactuals.merge,
                        lambda s: counterfactuals.finalize(s, CLASSES, draft={"rulebook_hash": "x"})),
}


def _partitions(decisions: pl.DataFrame, outcomes: pl.DataFrame):
    keys = decisions.select("scope", "month").unique().sort(["scope", "month"]).rows()
    for scope, month in keys:
        part = decisions.filter((pl.col("scope") == scope) & (pl.col("month") == month))
        yield part.lazy(), outcomes.join(part.select("decision_id"), on="decision_id", how="semi").lazy()


@pytest.mark.parametrize("engine", sorted(ENGINES))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_whole_equals_merge_of_partitions(engine, seed):
    partial, merge, finalize = ENGINES[engine]
    f = frames(*random_ledger(seed, scopes=("tenant_a", "tenant_b", "tenant_c", "tenant_d")))
    decisions, outcomes = f.decisions.collect(), f.outcomes.collect()
    whole = finalize(merge([partial(decisions.lazy(), outcomes.lazy())]))
    parts = [partial(d, o) for d, o in _partitions(decisions, outcomes)]
    assert len(parts) > 10
    assert finalize(merge(parts)) == whole
    # merging is associative and order-free: merge halves, then the merged halves, reversed
    half = len(parts) // 2
    assert finalize(merge([merge(parts[half:]), merge(list(reversed(parts[:half])))])) == whole


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_engines_are_deterministic_and_notice_the_injected_signals(engine):
    partial, merge, finalize = ENGINES[engine]
    f = frames(*random_ledger(7))
    first = finalize(merge([partial(f.decisions, f.outcomes)]))
    shuffled_d = f.decisions.collect().sample(fraction=1.0, shuffle=True, seed=3).lazy()
    shuffled_o = f.outcomes.collect().sample(fraction=1.0, shuffle=True, seed=4).lazy()
    assert finalize(merge([partial(shuffled_d, shuffled_o)])) == first
    if engine == "anomalies":
        ids = {a["anomaly_id"] for a in first["anomalies"]}
        assert {"fact_drift:fact:amount", "failure_rate_shift:matched_rule_id:escalate",
                "verdict_mix_shift:policy_version:v2"} <= ids


KEYED = {
    "effectiveness": lambda d, o, by=(): effectiveness.partial(d, o, by=by),
    "anomalies": lambda d, o, by=(): anomalies.partial(d, o, CLASSES, None, by=by),
    "benchmarks": lambda d, o, by=(): benchmarks.partial(d, o, CLASSES, own_scope=None, by=by),
}


@pytest.mark.parametrize("engine", sorted(KEYED))
def test_a_keyed_partial_holds_each_partitions_own_partial(engine):
    """`partial(…, by=keys)` (how the report rollups are computed, all partitions at once) gives,
    row for row, what `partial` gives for each partition alone, led by the partition's keys."""
    f = frames(*random_ledger(5, scopes=("tenant_a", "tenant_b", "tenant_c")))
    decisions, outcomes = f.decisions.collect(), f.outcomes.collect()
    keys = ["k_scope", "k_month"]
    keyed_frames = decisions.with_columns(pl.col("scope").alias("k_scope"), pl.col("month").alias("k_month"))
    keyed = KEYED[engine](keyed_frames.lazy(), outcomes.lazy(), keys)
    compared, parts = 0, 0
    for part, part_outcomes in _partitions(decisions, outcomes):
        parts += 1
        first = part.select("scope", "month").collect().row(0)
        alone = KEYED[engine](part, part_outcomes)
        for name, frame in alone.items():
            mine = keyed[name].filter((pl.col("k_scope") == first[0]) & (pl.col("k_month") == first[1])).drop(keys)
            if frame.height or mine.height:
                assert mine.equals(frame), (name, first)
                compared += 1
    assert parts > 10 and compared >= parts  # every partition's sample at least
