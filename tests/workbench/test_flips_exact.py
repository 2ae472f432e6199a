"""Exact values of `workbench.migration.flips` on tiny frames: the latest outcome, the buckets,
the classes of the flips, the flips file and the run's own folder (docs/mutation-testing.md)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from workbench.migration import flips
from workbench.migration.flips import FLIP_COLUMNS


def _flip(decision_id: str, old: str, status: str | None) -> dict:
    return {"decision_id": decision_id, "created_at": "2026-01-01T00:00:00.000Z", "scope": "s", "old_verdict": old,
            "new_verdict": "review", "old_rule": "a", "new_rule": "b", "old_reason": "A", "new_reason": "B",
            "outcome_status": status}


def test_latest_outcomes_by_time_then_receipt_id():
    outcomes = pl.LazyFrame({
        "decision_id": ["d1", "d1", "d1", "d2", "d2"],
        "reported_at": [3, 1, 3, 5, 4],
        "receipt_id": ["r2", "r9", "r1", "r0", "r9"],
        "status": ["succeeded", "pending", "failed", "reverted", "succeeded"],
    })
    got = flips.latest_outcomes(outcomes).collect().sort("decision_id")
    assert got.columns == ["decision_id", "outcome_status"]
    assert got.rows() == [("d1", "succeeded"), ("d2", "reverted")]


def test_buckets_for_rounds_up_with_at_least_one():
    per = flips.FLIPS_PER_BUCKET
    assert [flips.buckets_for(n) for n in (0, 1, per - 1, per, per + 1, 2 * per, 2 * per + 1)] == [1, 1, 1, 1, 2, 2, 3]


def test_in_bucket_splits_the_ids_exactly_once():
    ids = pl.DataFrame({"decision_id": [f"dec_{i}" for i in range(400)]})
    assert ids.filter(flips.in_bucket(0, 1)).height == 400
    seen = [ids.filter(flips.in_bucket(b, 3))["decision_id"].to_list() for b in range(3)]
    assert all(30 < len(part) < 250 for part in seen)
    assert sorted(i for part in seen for i in part) == sorted(ids["decision_id"].to_list())
    hashes = ids.select(pl.col("decision_id").hash(0x5EED)).to_series()
    assert seen[1] == ids.filter(hashes % 3 == 1)["decision_id"].to_list()


def test_the_bitmap_of_no_hashes_and_of_one():
    ids = pl.DataFrame({"decision_id": [f"dec_{i}" for i in range(5_000)]})
    none = ids.select(flips.may_be_selected(pl.Series([], dtype=pl.UInt64)).alias("p"))["p"]
    assert none.dtype == pl.Boolean and none.sum() == 0 and none.len() == 5_000
    one = ids.head(1).select(flips._id_hash()).to_series()
    passed = ids.select(flips.may_be_selected(one).alias("p"))["p"]
    assert passed[0] and passed.sum() < 5  # 65,536 bits: a few ids at most share the low bits


def test_the_bitmap_has_at_least_bits_per_selected_bits_a_hash(monkeypatch):
    # With 100,000 hashes the bitmap has 2**22 bits (32 a hash, rounded up to a power of two):
    # of 200,000 other ids, about 200,000 * 100,000 / 2**22 (4,800) pass; with 16 bits a hash twice that.
    ids = pl.DataFrame({"decision_id": [f"x{i}" for i in range(300_000)]})
    chosen, others = ids.head(100_000), ids.tail(200_000)
    hashes = chosen.select(flips._id_hash()).to_series()
    passed = others.select(flips.may_be_selected(hashes).alias("p"))["p"].sum()
    assert 3_800 < passed < 6_000
    monkeypatch.setattr(flips, "_MAX_BITS", 1 << 20)
    capped = others.select(flips.may_be_selected(hashes).alias("p"))["p"].sum()
    assert 16_000 < capped < 22_000  # 2**20 bits: four times as many pass


def test_classified_gives_each_flip_its_class_in_order():
    rows = pl.DataFrame([_flip("d1", "no", "succeeded"), _flip("d2", "yes", None), _flip("d3", "yes", "failed"),
                         _flip("d4", "review", "succeeded"), _flip("d5", "yes", "weird"), _flip("d6", "no", None),
                         _flip("d7", "yes", "cancelled")])
    got = flips.classified(rows)
    assert got.columns == FLIP_COLUMNS
    assert got.select("decision_id", "outcome_status", "outcome_class").rows() == [
        ("d1", "succeeded", "unobservable"), ("d2", None, "none"), ("d3", "failed", "failure"),
        ("d4", "succeeded", "success"), ("d5", "weird", "unknown"), ("d6", None, "unobservable"),
        ("d7", "cancelled", "excluded")]
    assert got["outcome_class"].dtype == pl.String


def test_outcome_records_and_write_flips_in_buckets(tmp_path):
    flipped = pl.DataFrame([_flip(f"d{i}", "yes", None) for i in range(60)]).drop("outcome_status")
    outcomes = pl.LazyFrame({
        "decision_id": ["d1", "d1", "d2", "zz", "d59"],
        "reported_at": pl.Series([1, 2, 1, 1, 1]).cast(pl.Datetime("ms", "UTC")),
        "receipt_id": ["r1", "r2", "r3", "r4", "r5"],
        "status": ["pending", "succeeded", "failed", "failed", "reverted"],
        "extra": [1, 2, 3, 4, 5],
    })
    lookup = flips.outcome_records(outcomes, flipped.lazy().select("decision_id"), tmp_path / "records.parquet")
    records = pq.ParquetFile(tmp_path / "records.parquet")
    assert records.schema_arrow.names == ["decision_id", "reported_at", "receipt_id", "status"]
    assert records.metadata.row_group(0).column(0).compression == "LZ4"
    kept = pl.read_parquet(tmp_path / "records.parquet")["decision_id"].to_list()
    assert {"d1", "d2", "d59"} <= set(kept)
    path = tmp_path / "flips.parquet"
    parts = list(flips.write_flips(path, flipped.lazy(), lookup, 3))
    assert len(parts) == 3 and all(p.columns == FLIP_COLUMNS for p in parts)
    written = pl.read_parquet(path)
    assert written.columns == FLIP_COLUMNS
    assert written.equals(pl.concat(parts))
    file = pq.ParquetFile(path)
    assert file.metadata.num_row_groups == 3
    assert file.metadata.row_group(0).column(0).compression == "ZSTD"
    got = {r["decision_id"]: (r["outcome_status"], r["outcome_class"]) for r in written.iter_rows(named=True)}
    assert len(got) == 60 and got["d1"] == ("succeeded", "success") and got["d2"] == ("failed", "failure")
    assert got["d59"] == ("reverted", "failure") and got["d3"] == (None, "none")
    for bucket, part in enumerate(parts):
        assert part["decision_id"].to_list() == flipped.filter(flips.in_bucket(bucket, 3))["decision_id"].to_list()


def test_write_flips_in_one_bucket_keeps_the_order_and_closes_the_file(tmp_path):
    flipped = pl.DataFrame([_flip(f"d{i}", "no", None) for i in (5, 1, 3)]).drop("outcome_status")
    path = tmp_path / "flips.parquet"
    parts = list(flips.write_flips(path, flipped.lazy(),
                                   lambda rows, bucket: rows.with_columns(pl.lit(None, pl.String).alias("outcome_status")), 1))
    assert len(parts) == 1
    assert pl.read_parquet(path)["decision_id"].to_list() == ["d5", "d1", "d3"]


def test_spill_folder_beside_a_file_and_removed(tmp_path):
    beside = tmp_path / "out" / "flips.parquet"
    beside.parent.mkdir()
    with flips.spill_folder(beside) as folder:
        assert folder.parent == beside.parent and folder.name.startswith(".dry-run-") and folder.is_dir()
        assert list(folder.iterdir()) == []
        (folder / "x").write_text("x")
    assert not folder.exists()
    with pytest.raises(RuntimeError), flips.spill_folder(None) as other:
        assert Path(other).is_dir() and other.parent != beside.parent
        raise RuntimeError
    assert not other.exists()


def test_in_bucket_of_two_buckets_splits_the_ids():
    ids = pl.DataFrame({"decision_id": [f"dec_{i}" for i in range(400)]})
    halves = [ids.filter(flips.in_bucket(b, 2))["decision_id"].to_list() for b in range(2)]
    assert all(100 < len(half) < 300 for half in halves)
    assert sorted(halves[0] + halves[1]) == sorted(ids["decision_id"].to_list())


def test_write_flips_passes_on_a_failure_before_its_first_write(tmp_path):
    def failing(rows, bucket):
        raise RuntimeError("lookup failed")
    flipped = pl.DataFrame([_flip("d1", "yes", None)]).drop("outcome_status")
    with pytest.raises(RuntimeError, match="lookup failed"):
        list(flips.write_flips(tmp_path / "flips.parquet", flipped.lazy(), failing, 2))
    assert not (tmp_path / "flips.parquet").exists()


def _passing(ids: pl.DataFrame, hashes: pl.Series, bits: int) -> list[str]:
    low = set((hashes & (bits - 1)).to_list())
    return ids.filter((flips._id_hash() & (bits - 1)).is_in(list(low)))["decision_id"].to_list()


@pytest.mark.parametrize(("selected", "bits"), [(1, 1 << 16), (2_048, 1 << 16), (2_049, 1 << 17), (4_096, 1 << 17)])
def test_the_bitmap_is_the_least_power_of_two_of_32_bits_a_hash_and_at_least_2_16(selected, bits):
    # An id passes exactly when its hash's low bits are those of a selected one's: the bitmap's size decides
    # which ids pass (2,048 hashes fill 2**16 bits at 32 a hash; one more needs 2**17).
    ids = pl.DataFrame({"decision_id": [f"y{i}" for i in range(100_000)]})
    hashes = ids.head(selected).select(flips._id_hash()).to_series()
    passed = ids.filter(flips.may_be_selected(hashes))["decision_id"].to_list()
    assert passed == _passing(ids, hashes, bits)
    assert passed != _passing(ids, hashes, bits * 2)
