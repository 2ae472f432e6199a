"""Exact answers of `workbench.engines.common`'s small pieces (issue 22, item 5): the report
numbers (`iso`, `ratio`, `r4`, `wilson`, `odds_shift`, `evidence`, `severity`, `percentile`),
the outcome classes and the sample block, and the partial merges. Each test builds its own
frames; `test_engine_latest_join.py` holds the latest-outcome join against a reference."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import polars as pl
import pytest

from workbench.engines import common

T = datetime(2026, 5, 21, tzinfo=UTC)
CLASSES = {"succeeded": "success", "failed": "failure", "cancelled": "excluded", "pending": "open"}
SAMPLE_SCHEMA = {"status": pl.String, "decisions": pl.Int64, "outcome_records": pl.Int64,
                 "first_at": pl.Datetime("us", "UTC"), "last_at": pl.Datetime("us", "UTC")}


def test_iso_writes_utc_milliseconds():
    assert common.iso(None) is None
    assert common.iso(T) == "2026-05-21T00:00:00.000Z"
    assert common.iso(T.replace(hour=13, minute=4, second=9, microsecond=5000)) == "2026-05-21T13:04:09.005Z"
    assert common.iso(T.replace(microsecond=999_999)) == "2026-05-21T00:00:00.999Z"


def test_ratio_is_none_without_a_denominator():
    assert common.ratio(1, 4) == 0.25
    assert common.ratio(3, 2) == 1.5
    assert common.ratio(1, 0) is None and common.ratio(0, 0) is None


def test_r4_rounds_to_four_places_and_refuses_what_json_cannot_hold():
    assert common.r4(None) is None
    assert common.r4(0.123456) == 0.1235 and common.r4(-1.23456) == -1.2346 and common.r4(1.0) == 1.0
    assert common.r4(2.00004) == 2.0 and common.r4(7) == 7
    small = common.r4(-0.00001)  # rounds to -0.0: reported as a positive zero
    assert small == 0.0 and math.copysign(1.0, small) == 1.0
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError, match="finite"):
            common.r4(bad)


def test_wilson_interval_to_the_value_and_its_clamps():
    assert common.wilson(0, 0) is None and common.wilson(0, -1) is None
    low, high = common.wilson(5, 10)
    assert (round(low, 10), round(high, 10)) == (0.2365895936, 0.7634104064)
    low, high = common.wilson(1, 3)
    assert (round(low, 10), round(high, 10)) == (0.0614903153, 0.7923450449)
    low, high = common.wilson(1, 3, z=1.0)
    assert (round(low, 10), round(high, 10)) == (0.1356432231, 0.6143567769)
    # the unclamped ends of 0/10 and 10/10 lie a rounding error past 0 and 1
    assert common.wilson(0, 10)[0] == 0.0 and round(common.wilson(0, 10)[1], 10) == 0.2775401688
    assert common.wilson(5, 5)[1] == 1.0 and common.wilson(10, 10)[1] == 1.0 and round(common.wilson(10, 10)[0], 10) == 0.7224598312
    low, high = common.wilson(1, 1)
    assert (round(low, 10), high) == (0.2065432915, 1.0)


def test_odds_shift_with_half_counts_in_every_cell():
    odds, z = common.odds_shift(3, 10, 1, 10)  # (3.5 * 9.5) / (7.5 * 1.5)
    assert round(odds, 10) == round(33.25 / 11.25, 10)
    assert round(z, 10) == round(math.log(33.25 / 11.25) / math.sqrt(1 / 3.5 + 1 / 7.5 + 1 / 1.5 + 1 / 9.5), 10)
    assert round(z, 10) == 0.9930061781
    odds, z = common.odds_shift(0, 4, 2, 4)  # (0.5 * 2.5) / (4.5 * 2.5)
    assert round(odds, 10) == round(1 / 9, 10) and round(z, 10) == -1.2638957426
    odds, z = common.odds_shift(2, 4, 2, 4)
    assert odds == 1.0 and z == 0.0


def test_evidence_and_severity_edges():
    assert common.evidence(-1.5) == 0.5 and common.evidence(1.5) == 0.5
    assert common.evidence(3.0) == 1.0 and common.evidence(-6.0) == 1.0 and common.evidence(0.0) == 0.0
    assert common.evidence(2.4) == pytest.approx(0.8, abs=1e-12)
    assert [common.severity(s) for s in (0.75, 0.7499, 0.5, 0.4999, 1.0, 0.0)] == [
        "high", "medium", "medium", "low", "high", "low"]


def test_percentile_interpolates_between_closest_ranks():
    assert common.percentile([], 0.5) is None
    assert common.percentile([5.0], 0.9) == 5.0
    assert common.percentile([4, 1, 3, 2], 0.0) == 1
    assert common.percentile([4, 1, 3, 2], 0.25) == 1.75
    assert common.percentile([4, 1, 3, 2], 0.5) == 2.5
    assert common.percentile([4, 1, 3, 2], 1.0) == 4
    assert common.percentile([1, 2, 10], 0.75) == 6.0
    assert common.percentile(iter([3.0, 1.0]), 0.5) == 2.0


def test_class_expr_names_no_outcome_and_unknown_statuses():
    frame = pl.DataFrame({"status": ["succeeded", None, "mystery", "failed"],
                          "other": ["cancelled", "pending", None, "x"]})
    assert frame.select(common.class_expr(CLASSES)).to_series().to_list() == [
        "success", "none", "unclassified", "failure"]
    got = frame.select(common.class_expr(CLASSES, "other"))
    assert got.columns == ["effect"] and got.schema["effect"] == pl.String
    assert got.to_series().to_list() == ["excluded", "open", "none", "unclassified"]


def _sample(rows):
    return pl.DataFrame(rows, schema=SAMPLE_SCHEMA, orient="row")


def test_class_counts_and_the_sample_block():
    sample = _sample([("succeeded", 3, 4, T, T + timedelta(days=2)),
                      ("failed", 2, 2, T - timedelta(days=1), T),
                      ("mystery", 1, 1, T, T),
                      (None, 4, 0, T + timedelta(hours=1), T + timedelta(days=3, milliseconds=7))])
    assert common.class_counts(sample, CLASSES) == {"success": 3, "failure": 2, "excluded": 0, "open": 0,
                                                    "unclassified": 1, "none": 4}
    assert common.sample_block(sample, CLASSES) == {
        "decisions_considered": 10,
        "decisions_with_outcome": 6,
        "outcome_records": 7,
        "latest_outcome_counts": {"failed": 2, "mystery": 1, "succeeded": 3},
        "outcome_classes": {"success": 3, "failure": 2, "excluded": 0, "open": 0, "unclassified": 1},
        "first_decision_at": "2026-05-20T00:00:00.000Z",
        "last_decision_at": "2026-05-24T00:00:00.007Z",
    }
    assert list(common.sample_block(sample, CLASSES)["latest_outcome_counts"]) == ["failed", "mystery", "succeeded"]


def test_an_empty_sample_block_and_times_that_are_missing():
    empty = common.sample_block(pl.DataFrame(), CLASSES)
    assert empty == {"decisions_considered": 0, "decisions_with_outcome": 0, "outcome_records": 0,
                     "latest_outcome_counts": {}, "outcome_classes": dict.fromkeys(
                         ("success", "failure", "excluded", "open", "unclassified"), 0),
                     "first_decision_at": None, "last_decision_at": None}
    assert common.class_counts(pl.DataFrame(), CLASSES) == dict.fromkeys(
        ("success", "failure", "excluded", "open", "unclassified", "none"), 0)
    sample = _sample([("succeeded", 1, 1, None, None), ("failed", 1, 1, T, T + timedelta(days=1))])
    block = common.sample_block(sample, CLASSES)
    assert (block["first_decision_at"], block["last_decision_at"]) == ("2026-05-21T00:00:00.000Z",
                                                                       "2026-05-22T00:00:00.000Z")
    none = common.sample_block(_sample([("failed", 2, 3, None, None)]), CLASSES)
    assert (none["first_decision_at"], none["last_decision_at"], none["outcome_records"]) == (None, None, 3)


def test_merge_frames_combines_equal_keys_and_sorts_nulls_last():
    how = {"n": "sum", "lo": "min", "hi": "max"}
    a = pl.DataFrame({"k": ["b", None, "a"], "n": [1, 2, 3], "lo": [5, 1, 2], "hi": [5, 1, 2]})
    b = pl.DataFrame({"k": ["a", "b"], "n": [10, 20], "lo": [1, 9], "hi": [1, 9]})
    empty = pl.DataFrame(schema=a.schema)
    got = common.merge_frames([a, empty, b], ["k"], how)
    assert got.columns == ["k", "n", "lo", "hi"]
    assert got.rows() == [("a", 13, 1, 2), ("b", 21, 5, 9), (None, 2, 1, 1)]
    none = common.merge_frames([empty], ["k", "j"], how)
    assert none.height == 0
    assert none.schema == {"k": pl.String, "j": pl.String, "n": pl.Int64, "lo": pl.Int64, "hi": pl.Int64}
    assert common.frames_empty_like(["x"], {"v": "sum"}).schema == {"x": pl.String, "v": pl.Int64}


def test_merge_top_keeps_the_newest_k_per_key_of_every_frame():
    def ev(rows):
        return pl.DataFrame(rows, schema={"g": pl.String, "created_at": pl.Datetime("us", "UTC"),
                                          "decision_id": pl.String}, orient="row")

    first = ev([("a", T, "d3"), ("a", T - timedelta(days=2), "d1"), ("b", T, "d9")])
    second = ev([("a", T, "d2"), ("a", T - timedelta(days=1), "d4")])
    assert common.merge_top([first, ev([]), second], ["g"], k=2).rows() == [
        ("a", T, "d2"), ("a", T, "d3"), ("b", T, "d9")]
    assert common.merge_top([first, second], ["g"]).rows() == [
        ("a", T, "d2"), ("a", T, "d3"), ("a", T - timedelta(days=1), "d4"), ("a", T - timedelta(days=2), "d1"),
        ("b", T, "d9")]
    nothing = common.merge_top([ev([])], ["g"])
    assert nothing.height == 0 and nothing.columns == []


def _joined():
    return pl.DataFrame({
        "scope": ["s1", "s1", "s2", "s1", "s2"],
        "status": ["failed", None, "failed", "failed", "succeeded"],
        "outcome_records": [2, 0, 1, 3, 1],
        "created_at": [T, T + timedelta(days=1), T + timedelta(days=2), T - timedelta(days=1), T],
    }).lazy()


def test_sample_partial_per_status_and_per_partition():
    whole = common.sample_partial(_joined())
    assert whole.columns == ["status", "decisions", "outcome_records", "first_at", "last_at"]
    assert whole.schema["decisions"] == pl.Int64 and whole.schema["outcome_records"] == pl.Int64
    assert whole.rows() == [("failed", 3, 6, T - timedelta(days=1), T + timedelta(days=2)),
                            ("succeeded", 1, 1, T, T),
                            (None, 1, 0, T + timedelta(days=1), T + timedelta(days=1))]
    by = common.sample_partial(_joined(), by=["scope"])
    assert by.rows() == [("s1", "failed", 2, 5, T - timedelta(days=1), T),
                         ("s1", None, 1, 0, T + timedelta(days=1), T + timedelta(days=1)),
                         ("s2", "failed", 1, 1, T + timedelta(days=2), T + timedelta(days=2)),
                         ("s2", "succeeded", 1, 1, T, T)]


def test_sample_of_groups_equals_the_sample_partial():
    groups = common.sample_groups(_joined().with_columns(day=pl.col("created_at").dt.day()), ["scope", "day"])
    groups = groups.collect()
    assert groups.schema["decisions"] == pl.Int64 and groups.height == 5
    assert common.sample_of_groups(groups).equals(common.sample_partial(_joined()))
    assert common.sample_of_groups(groups, by=["scope"]).equals(common.sample_partial(_joined(), by=["scope"]))


def test_merge_sample_adds_the_partials():
    one = common.sample_partial(_joined().filter(pl.col("scope") == "s1"))
    two = common.sample_partial(_joined().filter(pl.col("scope") == "s2"))
    assert common.merge_sample([one, pl.DataFrame(), two]).equals(common.sample_partial(_joined()))
    assert common.merge_sample([pl.DataFrame()]).equals(pl.DataFrame())


def test_latest_outcome_per_decision_with_its_record_count():
    outcomes = pl.DataFrame({
        "decision_id": ["a", "a", "a", "b", "z"],
        "receipt_id": ["r2", "r1", "r0", "r5", "r9"],
        "reported_at": [T, T, T - timedelta(days=1), T, T],
        "status": ["failed", "succeeded", "pending", "cancelled", "failed"]}).lazy()
    latest = common.latest_outcomes(outcomes).collect().sort("decision_id")
    assert latest.rows() == [("a", "failed", 3), ("b", "cancelled", 1), ("z", "failed", 1)]
    assert latest.schema["outcome_records"] == pl.Int64
    decisions = pl.DataFrame({"decision_id": ["c", "a", "b"], "created_at": [T, T, T]}).lazy()
    joined = common.with_latest_outcome(decisions, outcomes).collect().sort("decision_id")  # a join: any order
    assert joined.select("decision_id", "status", "outcome_records").rows() == [
        ("a", "failed", 3), ("b", "cancelled", 1), ("c", None, 0)]
    assert joined.schema["outcome_records"] == pl.Int64
    runs = common.join_runs(decisions, latest).collect()
    assert runs.columns == ["decision_id", "created_at", "status", "outcome_records"]
    assert runs.select("decision_id", "status", "outcome_records").rows() == [
        ("c", None, 0), ("a", "failed", 3), ("b", "cancelled", 1)]
