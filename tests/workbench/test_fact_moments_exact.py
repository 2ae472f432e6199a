"""Fact moments to the exact value (issue 22, item 5): per (fact, month) the count, sum, sum of
squares and non-numeric count, and the k largest and smallest values with their decisions (ties
by decision id), from the typed facts table and from the JSON, per partition and merged.
`test_fact_moments.py` checks that the two readings agree on a larger ledger."""

from __future__ import annotations

import math
from datetime import timedelta

import polars as pl
import pytest
from workbench_support import T0, decision, frames

from workbench.dataset.convert import frame_of
from workbench.dataset.facts import facts_table
from workbench.engines import fact_moments as fm

FEB = T0 + timedelta(days=40)
BIG = 2**60  # beyond 2^53: the typed table cannot hold it, its row is partial
COLUMNS = ["fact", "month", "n", "total", "total_sq", "non_numeric"]


def _decisions():
    return [decision("d1", at=T0, facts={"x": 1, "s": "a", "o": {"y": 2}}),
            decision("d2", at=T0, facts={"x": 3, "o": {"y": 4}}, scope="tenant_b"),
            decision("d3", at=T0, facts={"x": True, "n": None}),
            decision("d4", at=FEB, facts={"x": 5.5, "big": BIG}),
            decision("d5", at=FEB, facts=None),
            decision("d6", at=FEB, facts={"x": -2})]


def _facts(ds):
    return frame_of(facts_table(frames(ds, []).decisions.collect().to_arrow()))


MOMENTS = [("big", "2026-02", 1.0, float(BIG), float(BIG) ** 2, 0.0),
           ("o", "2026-01", 0.0, 0.0, 0.0, 2.0),            # an object: no number, twice not one
           ("o.y", "2026-01", 2.0, 6.0, 20.0, 0.0),
           ("s", "2026-01", 0.0, 0.0, 0.0, 1.0),
           ("x", "2026-01", 2.0, 4.0, 10.0, 1.0),           # 1 and 3; true is not a number
           ("x", "2026-02", 2.0, 3.5, 34.25, 0.0)]          # 5.5 and -2 (n: only null, no fact)
HIGH = [("big", "2026-02", float(BIG), "d4"), ("o.y", "2026-01", 4.0, "d2"), ("o.y", "2026-01", 2.0, "d1"),
        ("x", "2026-01", 3.0, "d2"), ("x", "2026-01", 1.0, "d1"), ("x", "2026-02", 5.5, "d4"),
        ("x", "2026-02", -2.0, "d6")]
LOW = [("big", "2026-02", float(BIG), "d4"), ("o.y", "2026-01", 2.0, "d1"), ("o.y", "2026-01", 4.0, "d2"),
       ("x", "2026-01", 1.0, "d1"), ("x", "2026-01", 3.0, "d2"), ("x", "2026-02", -2.0, "d6"),
       ("x", "2026-02", 5.5, "d4")]


@pytest.mark.parametrize("typed", [False, True])
def test_moments_and_extremes_from_the_json_and_the_typed_table(typed):
    ds = _decisions()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None)
    assert state["facts"].columns == COLUMNS
    assert state["facts"].rows() == MOMENTS
    assert state["fact_high"].columns == ["fact", "month", "value", "decision_id"]
    assert state["fact_high"].rows() == HIGH and state["fact_low"].rows() == LOW


@pytest.mark.parametrize("typed", [False, True])
def test_per_partition(typed):
    ds = _decisions()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None, by=["scope"])
    assert state["facts"].columns == ["scope", *COLUMNS]
    assert state["facts"].rows() == [
        ("tenant_a", "big", "2026-02", 1.0, float(BIG), float(BIG) ** 2, 0.0),
        ("tenant_a", "o", "2026-01", 0.0, 0.0, 0.0, 1.0), ("tenant_a", "o.y", "2026-01", 1.0, 2.0, 4.0, 0.0),
        ("tenant_a", "s", "2026-01", 0.0, 0.0, 0.0, 1.0), ("tenant_a", "x", "2026-01", 1.0, 1.0, 1.0, 1.0),
        ("tenant_a", "x", "2026-02", 2.0, 3.5, 34.25, 0.0),
        ("tenant_b", "o", "2026-01", 0.0, 0.0, 0.0, 1.0), ("tenant_b", "o.y", "2026-01", 1.0, 4.0, 16.0, 0.0),
        ("tenant_b", "x", "2026-01", 1.0, 3.0, 9.0, 0.0)]
    assert state["fact_high"].rows() == [
        ("tenant_a", "big", "2026-02", float(BIG), "d4"), ("tenant_a", "o.y", "2026-01", 2.0, "d1"),
        ("tenant_a", "x", "2026-01", 1.0, "d1"), ("tenant_a", "x", "2026-02", 5.5, "d4"),
        ("tenant_a", "x", "2026-02", -2.0, "d6"), ("tenant_b", "o.y", "2026-01", 4.0, "d2"),
        ("tenant_b", "x", "2026-01", 3.0, "d2")]
    assert state["fact_low"].rows()[3:5] == [("tenant_a", "x", "2026-02", -2.0, "d6"),
                                             ("tenant_a", "x", "2026-02", 5.5, "d4")]


def _many():
    # 14 values of v in January: 0 (twice: d00, d13), 1, ..., 12 with 12 twice (d12 and d99 ... by id)
    values = {f"d{i:02d}": float(i) for i in range(13)} | {"d13": 0.0, "d99": 12.0}
    return [decision(did, at=T0, facts={"v": v}) for did, v in values.items()]


@pytest.mark.parametrize("typed", [False, True])
def test_the_ten_most_extreme_values_ties_by_decision_id(typed):
    ds = _many()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None)
    assert state["facts"].rows() == [("v", "2026-01", 15.0, 78.0 + 12.0, 650.0 + 144.0, 0.0)]
    assert state["fact_high"].select("value", "decision_id").rows() == [
        (12.0, "d12"), (12.0, "d99"), (11.0, "d11"), (10.0, "d10"), (9.0, "d09"), (8.0, "d08"), (7.0, "d07"),
        (6.0, "d06"), (5.0, "d05"), (4.0, "d04")]
    assert state["fact_low"].select("value", "decision_id").rows() == [
        (0.0, "d00"), (0.0, "d13"), (1.0, "d01"), (2.0, "d02"), (3.0, "d03"), (4.0, "d04"), (5.0, "d05"),
        (6.0, "d06"), (7.0, "d07"), (8.0, "d08")]


def test_ties_at_the_kth_value_keep_the_smallest_decision_ids():
    # eleven equal values: the ten smallest ids, in either direction
    ds = [decision(f"d{i:02d}", at=T0, facts={"v": 7}) for i in range(11)][::-1]
    for typed in (False, True):
        state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None)
        expected = [(7.0, f"d{i:02d}") for i in range(10)]
        assert state["fact_high"].select("value", "decision_id").rows() == expected, typed
        assert state["fact_low"].select("value", "decision_id").rows() == expected, typed


def test_extremes_keep_k_per_group_in_order():
    values = pl.LazyFrame({"fact": ["a", "a", "a", "b", "a"], "month": ["m"] * 5,
                           "value": [1.0, 3.0, 2.0, 5.0, 3.0], "decision_id": ["p", "q", "r", "s", "o"]})
    assert fm.extremes(values, descending=True, k=2).collect().rows() == [
        ("a", "m", 3.0, "o"), ("a", "m", 3.0, "q"), ("b", "m", 5.0, "s")]
    assert fm.extremes(values, descending=False, k=2).collect().rows() == [
        ("a", "m", 1.0, "p"), ("a", "m", 2.0, "r"), ("b", "m", 5.0, "s")]
    assert fm.extremes(values, descending=True).collect().height == 5


def test_merged_partials_add_up_and_keep_the_extremes():
    ds = _decisions()
    first = fm.facts_partial(frames(ds[:3], []).decisions)
    second = fm.facts_partial(frames(ds[3:], []).decisions)
    merged = fm.merge_facts([first, second])
    assert merged["facts"].sort("fact", "month").rows() == MOMENTS
    assert merged["fact_high"].rows() == HIGH and merged["fact_low"].rows() == LOW
    again = fm.merge_facts([fm.facts_partial(frames(ds[:2], []).decisions), fm.facts_partial(frames(ds[1:3], []).decisions)])
    assert {(f, m): n for f, m, n, *_ in again["facts"].rows()}[("x", "2026-01")] == 3.0  # d2 counted twice


def test_no_facts_give_empty_tables_with_their_columns():
    ds = [decision("d1", at=T0, facts=None), decision("d2", at=T0, facts={"n": None})]
    for facts in (None, _facts(ds)):
        state = fm.facts_partial(frames(ds, []).decisions, facts)
        assert state["facts"].height == 0 and state["facts"].columns == COLUMNS
        assert state["fact_high"].height == state["fact_low"].height == 0
        assert state["fact_low"].schema == {"fact": pl.String, "month": pl.String, "value": pl.Float64,
                                            "decision_id": pl.String}


def test_table_paths_are_the_kind_columns():
    assert fm.table_paths(["b::t", "b::n", "a.c::t", "x", "t", "d::tt"]) == ["a.c", "b"]
    assert fm.table_paths([]) == []


def _wide():
    """25 values of v in January (0 to 24, with 9 three times) and 25 in February (100 to 124):
    more than twice k per month, so each side's candidates are its own."""
    jan = [*range(9), 9, 9, 9, *range(10, 23)]
    rows = [decision(f"a{i:02d}", at=T0, facts={"v": v}) for i, v in enumerate(jan)]
    rows += [decision(f"b{i:02d}", at=FEB, facts={"v": 100 + i}) for i in range(25)]
    return rows


@pytest.mark.parametrize("typed", [False, True])
def test_each_month_keeps_its_own_extremes_with_ties_at_the_cut(typed):
    ds = _wide()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None)
    low = state["fact_low"].select("month", "value", "decision_id").rows()
    high = state["fact_high"].select("month", "value", "decision_id").rows()
    # January's ten smallest: 0 to 8 and the first of the three 9s by decision id
    assert low[:10] == [("2026-01", float(v), f"a{v:02d}") for v in range(9)] + [("2026-01", 9.0, "a09")]
    assert low[10:] == [("2026-02", 100.0 + i, f"b{i:02d}") for i in range(10)]
    assert high[:10] == [("2026-01", float(22 - i), f"a{24 - i:02d}") for i in range(10)]
    assert high[10:] == [("2026-02", 124.0 - i, f"b{24 - i:02d}") for i in range(10)]


def test_a_typed_table_without_fact_columns_gives_empty_tables():
    ds = [decision("d1", at=T0, facts=None), decision("d2", at=FEB, facts=None)]
    facts = _facts(ds)
    assert fm.table_paths(facts.columns) == []
    state = fm.facts_partial(frames(ds, []).decisions, facts, by=["scope"])
    assert state["facts"].height == 0 and state["fact_high"].height == 0


def test_no_facts_give_typed_empty_extremes_on_both_sides():
    ds = [decision("d1", at=T0, facts=None)]
    for facts in (None, _facts(ds)):
        state = fm.facts_partial(frames(ds, []).decisions, facts)
        expected = {"fact": pl.String, "month": pl.String, "value": pl.Float64, "decision_id": pl.String}
        assert state["fact_high"].schema == expected and state["fact_low"].schema == expected


def test_a_negative_zero_in_the_json_is_read_as_zero():
    # as the typed column stores it: a JSON -0.0 is the number 0.0, shown without its sign
    ds = [decision("d1", at=T0, facts={"v": -0.0})]
    assert ds[0]["facts_json"] == '{"v":-0.0}'
    state = fm.facts_partial(frames(ds, []).decisions)
    [(value, decision_id)] = state["fact_high"].select("value", "decision_id").rows()
    assert decision_id == "d1" and value == 0.0 and math.copysign(1.0, value) == 1.0
    [(value, _)] = state["fact_low"].select("value", "decision_id").rows()
    assert math.copysign(1.0, value) == 1.0


@pytest.mark.parametrize("typed", [False, True])
def test_without_extreme_ids_only_the_moments(typed):
    # d4's row is partial (BIG) in the typed table: its values come from the JSON in both readings
    ds = _decisions()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None, extreme_ids=False)
    assert state["facts"].rows() == MOMENTS
    assert state["fact_high"].height == state["fact_low"].height == 0
    assert state["fact_high"].columns == state["fact_low"].columns == ["fact", "month", "value", "decision_id"]


@pytest.mark.parametrize("typed", [False, True])
def test_without_extreme_ids_per_partition(typed):
    ds = _decisions()
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None, by=["scope"],
                             extreme_ids=False)
    assert [row[:3] for row in state["facts"].rows()][:2] == [("tenant_a", "big", "2026-02"),
                                                             ("tenant_a", "o", "2026-01")]
    assert state["fact_high"].height == state["fact_low"].height == 0
    assert state["fact_high"].columns == ["scope", "fact", "month", "value", "decision_id"]


@pytest.mark.parametrize("typed", [False, True])
def test_each_partition_keeps_its_own_extremes(typed):
    # tenant_a's twelve values all lie above tenant_b's two: each partition's ten are its own
    ds = [decision(f"a{i:02d}", at=T0, facts={"v": 100 + i}) for i in range(12)]
    ds += [decision("b1", at=T0, facts={"v": 1}, scope="tenant_b"),
           decision("b2", at=T0, facts={"v": 2}, scope="tenant_b")]
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None, by=["scope"])
    high = state["fact_high"].select("scope", "value", "decision_id").rows()
    low = state["fact_low"].select("scope", "value", "decision_id").rows()
    assert high == [("tenant_a", 111.0 - i, f"a{11 - i:02d}") for i in range(10)] + [
        ("tenant_b", 2.0, "b2"), ("tenant_b", 1.0, "b1")]
    assert low == [("tenant_a", 100.0 + i, f"a{i:02d}") for i in range(10)] + [
        ("tenant_b", 1.0, "b1"), ("tenant_b", 2.0, "b2")]



@pytest.mark.parametrize("typed", [False, True])
def test_one_month_of_distinct_values_keeps_each_sides_value_at_its_cut(typed):
    # 25 distinct values in one month: the low cut (9) lies below the high cut (15), so the
    # low side's own prefilter alone must keep the value at its cut
    ds = [decision(f"d{v:02d}", at=T0, facts={"v": v}) for v in range(25)]
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None)
    assert state["fact_low"].select("value", "decision_id").rows() == [(float(v), f"d{v:02d}") for v in range(10)]
    assert state["fact_high"].select("value", "decision_id").rows() == [
        (float(v), f"d{v:02d}") for v in range(24, 14, -1)]


def test_a_typed_table_whose_every_row_is_partial_reads_them_all_from_the_json():
    ds = [decision("d1", at=T0, facts={"big": BIG, "x": 2}), decision("d2", at=T0, facts={"big": -BIG})]
    facts = _facts(ds)
    assert facts.get_column("facts_state").to_list() == ["partial", "partial"]
    state = fm.facts_partial(frames(ds, []).decisions, facts)
    assert state["facts"].rows() == [("big", "2026-01", 2.0, 0.0, 2.0 * float(BIG) ** 2, 0.0),
                                     ("x", "2026-01", 1.0, 2.0, 4.0, 0.0)]
    assert state["fact_high"].rows() == [("big", "2026-01", float(BIG), "d1"), ("big", "2026-01", -float(BIG), "d2"),
                                         ("x", "2026-01", 2.0, "d1")]


@pytest.mark.parametrize("typed", [False, True])
def test_a_partition_whose_key_is_null_keeps_its_extremes(typed):
    # A partition key may be null (a decision stored without it): its values are a partition of
    # their own in the moments and in the extremes, in either reading. The typed reading had
    # joined each side's cut on the keys, where null matches nothing, and dropped its extremes.
    ds = [decision("a1", at=T0, facts={"v": 5}), decision("a2", at=T0, facts={"v": 7}),
          decision("n1", at=T0, facts={"v": 1}, scope=None), decision("n2", at=T0, facts={"v": 9}, scope=None)]
    state = fm.facts_partial(frames(ds, []).decisions, _facts(ds) if typed else None, by=["scope"])
    assert [row[:4] for row in state["facts"].rows()] == [("tenant_a", "v", "2026-01", 2.0), (None, "v", "2026-01", 2.0)]
    assert state["fact_high"].select("scope", "value", "decision_id").rows() == [
        ("tenant_a", 7.0, "a2"), ("tenant_a", 5.0, "a1"), (None, 9.0, "n2"), (None, 1.0, "n1")]
    assert state["fact_low"].select("scope", "value", "decision_id").rows() == [
        ("tenant_a", 5.0, "a1"), ("tenant_a", 7.0, "a2"), (None, 1.0, "n1"), (None, 9.0, "n2")]
