"""`top_per_group`: the k most recent decisions per group, ties by decision id, without a sort."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import polars as pl

from workbench.engines.common import top_per_group


def reference(rows: list[dict], k: int) -> list[tuple]:
    """By hand: per group, newest first, ties by the smaller decision id; groups in key order."""
    out = []
    for group in sorted({r["g"] for r in rows}):
        members = sorted((r for r in rows if r["g"] == group), key=lambda r: r["decision_id"])
        members.sort(key=lambda r: r["created_at"], reverse=True)
        out.extend((group, r["created_at"], r["decision_id"]) for r in members[:k])
    return out


def test_ties_on_time_go_to_the_smaller_decision_id_and_k_bounds_each_group():
    t = datetime(2026, 3, 1, tzinfo=UTC)
    rows = [{"g": "a", "created_at": t, "decision_id": d} for d in ("d9", "d2", "d5")] + [
        {"g": "a", "created_at": t - timedelta(days=1), "decision_id": "d0"},
        {"g": "b", "created_at": t - timedelta(days=2), "decision_id": "d7"},
    ]
    got = top_per_group(pl.LazyFrame(rows), ["g"], k=2).collect()
    assert got.rows() == [("a", t, "d2"), ("a", t, "d5"), ("b", t - timedelta(days=2), "d7")]


def test_equals_a_full_sort_on_random_frames():
    rng = random.Random(7)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    for _ in range(30):
        rows = [{"g": rng.choice("xyz"), "created_at": base + timedelta(hours=rng.randrange(6)),
                 "decision_id": f"d{i:03d}"} for i in rng.sample(range(500), rng.randrange(1, 60))]
        k = rng.randrange(1, 8)
        got = top_per_group(pl.LazyFrame(rows), ["g"], k=k).collect()
        assert got.rows() == reference(rows, k)
