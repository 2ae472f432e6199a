"""`latest_joined` and `latest_rows` (each decision joined to its latest outcome by packing time and
status into integer maxima instead of sorting) give exactly the rows of a plain-Python reference
(`_reference`: each row's records compared one by one) and of `with_latest_outcome`: with timestamp
ties broken by receipt id (tied records of one status and of several), null times and statuses,
statuses no mapping knows, and outcomes too wide to pack."""

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


def _reference(rows: pl.DataFrame, outcomes: pl.LazyFrame) -> pl.DataFrame:
    """`rows` with `status` of each decision's latest outcome record and `outcome_records`, in
    the rows' order, computed record by record: the latest record is the greatest by
    (`reported_at`, `receipt_id`), a null below every value, and of records equal on both the
    last one read; null and 0 for a decision without records."""
    latest: dict[str, tuple[tuple, str | None]] = {}
    counts: dict[str, int] = {}

    def key(value):  # a null sorts before every value
        return (value is not None, value)

    for record in outcomes.collect().iter_rows(named=True):
        owner = record["decision_id"]
        counts[owner] = counts.get(owner, 0) + 1
        order = (key(record["reported_at"]), key(record["receipt_id"]))
        if owner not in latest or order >= latest[owner][0]:
            latest[owner] = (order, record["status"])
    ids = rows.get_column("decision_id").to_list()
    return rows.with_columns(pl.Series("status", [latest[i][1] if i in latest else None for i in ids], pl.String),
                             pl.Series("outcome_records", [counts.get(i, 0) for i in ids], pl.Int64))


def _same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.sort("decision_id").equals(b.sort("decision_id")) and a.schema == b.schema


@pytest.mark.parametrize("seed", range(4))
def test_latest_joined_equals_the_string_join(seed: int) -> None:
    decisions, outcomes = _frames(seed)
    expected = common.with_latest_outcome(decisions, outcomes).collect()
    assert _same(expected, _reference(decisions.collect(), outcomes))
    assert _same(common.latest_joined(decisions, outcomes).collect(), expected)


def _edge_outcomes() -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """Decisions a–h and records that reach every branch of the packing (`latest_rows`)."""
    t = [datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=s) for s in range(3)]
    rows = [
        ("a", "r2", t[1], "failed"), ("a", "r1", t[1], "succeeded"), ("a", "r0", t[0], "pending"),  # tie, two statuses
        ("b", "r1", t[2], "failed"), ("b", "r9", t[2], "failed"), ("b", "r5", t[1], "succeeded"),  # tie, one status
        ("c", "r1", None, "failed"), ("c", "r0", None, "succeeded"),  # no time at all: by receipt id
        ("d", "r1", None, "failed"), ("d", "r0", t[0], "pending"),  # a null time is the earliest
        ("e", "r1", t[2], None), ("e", "r2", t[1], "succeeded"),  # a null status is a status
        ("f", "r1", t[2], "mystery"), ("f", "r2", t[2], "failed"),  # a status no mapping knows, tied
        ("g", None, t[1], "failed"), ("g", "r0", t[1], "succeeded"),  # a null receipt id sorts first
        ("x", "r1", t[0], "failed"),  # a record of no decision here
    ]
    outcomes = pl.DataFrame(rows, schema={"decision_id": pl.String, "receipt_id": pl.String,
                                          "reported_at": pl.Datetime("us", "UTC"), "status": pl.String}, orient="row")
    decisions = pl.DataFrame({"decision_id": list("abcdefgh"), "created_at": t[:1] * 8})
    return decisions.lazy(), outcomes.lazy()


def test_every_tie_and_null_is_settled_as_the_sort_does() -> None:
    decisions, outcomes = _edge_outcomes()
    got = common.latest_joined(decisions, outcomes).collect()
    assert _same(got, common.with_latest_outcome(decisions, outcomes).collect())
    assert _same(got, _reference(decisions.collect(), outcomes))
    assert dict(got.select("decision_id", "status").iter_rows()) == {
        "a": "failed", "b": "failed", "c": "failed", "d": "pending", "e": None, "f": "failed", "g": "succeeded",
        "h": None}


def test_outcomes_too_wide_to_pack_take_the_sort(monkeypatch: pytest.MonkeyPatch) -> None:
    decisions, outcomes = _edge_outcomes()
    expected = common.with_latest_outcome(decisions, outcomes).collect()
    monkeypatch.setattr(common, "_ORDER_RANGE", 8)
    assert _same(common.latest_joined(decisions, outcomes).collect(), expected)


@pytest.mark.parametrize("seed", range(4))
def test_no_outcome_at_all_and_one_record_each(seed: int) -> None:
    decisions, outcomes = _frames(seed)
    none = outcomes.filter(pl.lit(False))
    assert _same(common.latest_joined(decisions, none).collect(),
                 common.with_latest_outcome(decisions, none).collect())
    one = outcomes.unique("decision_id", keep="first", maintain_order=True)
    assert _same(common.latest_joined(decisions, one).collect(),
                 common.with_latest_outcome(decisions, one).collect())


@pytest.mark.parametrize("seed", range(4))
def test_latest_rows_keep_the_rows_order_and_equal_the_join_of_runs(seed: int) -> None:
    """`latest_rows` (the records joined to the rows' index, grouped by it) gives the rows of
    the reference in the rows' own order, a repeated decision id included (each of its rows gets
    the decision's latest status and count)."""
    decisions, outcomes = _frames(seed)
    rows = decisions.collect().sample(fraction=1.0, shuffle=True, seed=seed)
    rows = pl.concat([rows, rows.head(7)])  # seven decision ids twice
    expected = _reference(rows, outcomes)
    got = common.latest_rows(rows, outcomes)
    assert got.equals(expected) and got.schema == expected.schema
    assert got.get_column("decision_id").equals(rows.get_column("decision_id"))


def test_latest_rows_settle_ties_and_take_the_sort_when_too_wide(monkeypatch: pytest.MonkeyPatch) -> None:
    decisions, outcomes = _edge_outcomes()
    rows = decisions.collect().reverse()
    expected = common.with_latest_outcome(rows.lazy(), outcomes).collect()
    assert _same(expected, _reference(rows, outcomes))
    assert common.latest_rows(rows, outcomes).equals(_reference(rows, outcomes))
    assert common.latest_rows(rows, outcomes).get_column("decision_id").to_list() == list("hgfedcba")
    monkeypatch.setattr(common, "_ORDER_RANGE", 8)
    assert common.latest_rows(rows, outcomes).equals(_reference(rows, outcomes))


@pytest.mark.parametrize("seed", range(3))
def test_latest_rows_exact_when_decision_id_hashes_collide(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The ids are joined by their hashes only when the rows' hashes are distinct, and every
    matched pair is compared as text: with a hash that collides on purpose (an id's length),
    rows of distinct lengths whose records' ids share a length with some row's (so they match by
    hash, not by text) get only their own records; rows whose hashes repeat take the text join."""
    rng = random.Random(seed)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = ["d" * length for length in range(1, 41)]
    decisions = pl.DataFrame({"decision_id": ids, "created_at": [start] * len(ids)})
    owners = rng.choices([*ids, *("x" * length for length in range(1, 41))], k=300)
    outcomes = pl.DataFrame({
        "receipt_id": [f"r{n:03d}" for n in range(len(owners))], "decision_id": owners,
        "reported_at": [start + timedelta(seconds=rng.randrange(3)) for _ in owners],
        "status": rng.choices(["succeeded", "failed", "pending"], k=len(owners))}).lazy()
    expected = common.with_latest_outcome(decisions.lazy(), outcomes).collect()
    assert _same(expected, _reference(decisions, outcomes))
    monkeypatch.setattr(common, "_id_hash", lambda: pl.col("decision_id").str.len_bytes().cast(pl.UInt64))
    assert common.latest_rows(decisions, outcomes).equals(_reference(decisions, outcomes))
    repeated = pl.concat([decisions, decisions.head(3)])  # equal hashes: the text join
    assert common.latest_rows(repeated, outcomes).equals(_reference(repeated, outcomes))


def test_a_tie_settled_on_a_null_status_leaves_the_status_null() -> None:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    outcomes = pl.DataFrame([("a", "r1", t, None), ("a", "r0", t, "failed"), ("b", "r1", None, None),
                             ("b", "r0", None, "succeeded"), ("c", "r0", t, "failed")],
                            schema={"decision_id": pl.String, "receipt_id": pl.String,
                                    "reported_at": pl.Datetime("us", "UTC"), "status": pl.String},
                            orient="row").lazy()
    rows = pl.DataFrame({"decision_id": ["a", "b", "c"], "created_at": [t] * 3})
    got = common.latest_rows(rows, outcomes)
    assert got.select("decision_id", "status", "outcome_records").rows() == [("a", None, 2), ("b", None, 2),
                                                                              ("c", "failed", 1)]
