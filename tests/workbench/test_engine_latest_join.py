"""`latest_joined` (the integer-keyed join of each decision to its latest outcome) gives exactly
the rows of `with_latest_outcome`, also when decision ids share a key (forced here: every id
of one length gets one key), with timestamp ties broken by receipt id."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from workbench.engines import common


def _frames(seed: int) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = [f"dec_{i:0{rng.choice([3, 4])}d}" for i in range(300)]
    decisions = pl.DataFrame({"decision_id": ids, "created_at": [start + timedelta(minutes=i) for i in range(300)]})
    rows = []
    for n, owner in enumerate(rng.choices([*ids, "other_1", "other_22", "dec_9999"], k=500)):
        rows.append({"receipt_id": f"out_{rng.randrange(50):02d}_{n}", "decision_id": owner,
                     "reported_at": start + timedelta(seconds=rng.randrange(4)),
                     "status": rng.choice(["succeeded", "failed", "pending", "cancelled"])})
    return decisions.lazy(), pl.DataFrame(rows).lazy()


def _same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.sort("decision_id").equals(b.sort("decision_id")) and a.schema == b.schema


@pytest.mark.parametrize("seed", range(4))
def test_latest_joined_equals_the_string_join(seed: int) -> None:
    decisions, outcomes = _frames(seed)
    expected = common.with_latest_outcome(decisions, outcomes).collect()
    assert _same(common.latest_joined(decisions, outcomes).collect(), expected)


@pytest.mark.parametrize("seed", range(4))
def test_shared_keys_are_never_trusted(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    decisions, outcomes = _frames(seed)
    expected = common.with_latest_outcome(decisions, outcomes).collect()
    monkeypatch.setattr(common, "_id_key", lambda column="decision_id": pl.col(column).str.len_bytes()
                        .cast(pl.UInt64).alias(common._KEY))
    assert _same(common.latest_joined(decisions, outcomes).collect(), expected)
    # outcomes of one decision only: keys shared by decisions (not by outcomes) take the integer path
    one = outcomes.filter(pl.col("decision_id") == "dec_001")
    assert _same(common.latest_joined(decisions, one).collect(),
                 common.with_latest_outcome(decisions, one).collect())
