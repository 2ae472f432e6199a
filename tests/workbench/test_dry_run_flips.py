"""The dry-run's flips go through files, in buckets (`workbench.migration.flips`): the figures and
`flips.parquet` do not depend on how many buckets, nor on hash collisions between decision ids;
the run's own folder of intermediate files is removed whether the run succeeds or fails, and a
folder a killed run left behind is never read.

The history is `benchmarks/dryrun_data.py`'s (every operator kind, partial rows for the scalar
evaluator, decisions without facts, outcomes), small: 4,000 decisions, a few hundred flips."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from workbench.migration import dry_run, flips
from workbench.migration.flips import SPILL_PREFIX

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dryrun_data

CREATED_AT = "2026-11-22T00:00:00.000Z"


@pytest.fixture
def history(tmp_path):
    root = tmp_path / "history"
    dryrun_data.generate(root, 4_000, 3)
    return root


def _run(root: Path, out: Path, **kwargs):
    _old, draft = dryrun_data.rulebooks()
    out.mkdir(parents=True, exist_ok=True)
    run = dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=CREATED_AT, flips_path=out / "flips.parquet",
                  flips_limit=25, **kwargs)
    return run.manifest, pl.read_parquet(out / "flips.parquet")


def test_flips_in_many_buckets_give_the_figures_of_one(history, tmp_path, monkeypatch):
    one, one_flips = _run(history, tmp_path / "one")
    changed = one["dry_run"]["decisions_changed"]
    assert changed > 200 and one["dry_run"]["decisions_scalar"] > 0  # scalar flips are bucketed too
    assert one["dry_run"]["outcomes"]["flips_without_outcome"] < changed  # flips with outcomes
    monkeypatch.setattr(flips, "FLIPS_PER_BUCKET", 40)
    buckets = flips.buckets_for(changed)
    assert buckets > 5
    many, many_flips = _run(history, tmp_path / "many")
    assert many == one and many["dry_run"]["result_hash"] == one["dry_run"]["result_hash"]
    # every flip once, with its latest outcome and class; one row group per bucket
    assert many_flips.height == changed and many_flips["decision_id"].n_unique() == changed
    assert many_flips.sort("decision_id").equals(one_flips.sort("decision_id"))
    assert pq.ParquetFile(tmp_path / "many" / "flips.parquet").metadata.num_row_groups == buckets
    assert pq.ParquetFile(tmp_path / "one" / "flips.parquet").metadata.num_row_groups == 1


def test_each_bucket_holds_its_flips_in_the_historys_order(history, tmp_path, monkeypatch):
    """With several buckets each bucket of `flips.parquet` (a row group) holds exactly the rows of
    the one-bucket file whose decision id hashes into it, in the same order (the history's: the
    vector rows, then the scalar ones), with the same outcome and class."""
    one, one_flips = _run(history, tmp_path / "one")
    monkeypatch.setattr(flips, "FLIPS_PER_BUCKET", 60)
    many, _ = _run(history, tmp_path / "many")
    assert many == one
    written = pq.ParquetFile(tmp_path / "many" / "flips.parquet")
    buckets = written.metadata.num_row_groups
    assert buckets > 3
    for bucket in range(buckets):
        expected = one_flips.filter(flips.in_bucket(bucket, buckets))
        assert expected.height > 0
        assert pl.from_arrow(written.read_row_group(bucket)).equals(expected)


def test_colliding_id_hashes_take_no_other_decisions_outcome(history, tmp_path, monkeypatch):
    """With a hash under which thousands of ids collide (their length), the pass over the outcomes
    keeps every record of every decision with a selected decision's length, and the buckets are
    uneven: the exact join by decision id still gives each flip its own latest outcome."""
    clean, clean_flips = _run(history, tmp_path / "clean")
    monkeypatch.setattr(flips, "_id_hash", lambda: pl.col("decision_id").str.len_bytes().cast(pl.UInt64))
    monkeypatch.setattr(flips, "FLIPS_PER_BUCKET", 100)
    collided, collided_flips = _run(history, tmp_path / "collided")
    assert collided == clean
    assert collided_flips.sort("decision_id").equals(clean_flips.sort("decision_id"))


def test_the_bitmap_keeps_every_selected_id_and_few_others():
    """`may_be_selected` is true for every id whose hash it was given, and for about one other id
    in BITS_PER_SELECTED (its hash's low bits those of a given one): here at most twice that."""
    ids = pl.DataFrame({"decision_id": [f"dec_{i:010d}" for i in range(200_000)]})
    chosen = ids.gather_every(50)
    hashes = chosen.select(flips._id_hash()).to_series()
    passed = ids.with_columns(flips.may_be_selected(hashes).alias("passed"))
    assert passed.join(chosen, on="decision_id", how="semi")["passed"].all()
    others = passed.join(chosen, on="decision_id", how="anti")["passed"].sum()
    assert 0 < others <= 2 * ids.height // flips.BITS_PER_SELECTED


def test_records_of_other_decisions_that_pass_the_bitmap_change_nothing(history, tmp_path, monkeypatch):
    """With a bitmap of two bits nearly every outcome record passes the outcome pass: the exact
    join by decision id still gives each flip its own latest outcome, in one bucket or many."""
    clean, clean_flips = _run(history, tmp_path / "clean")
    monkeypatch.setattr(flips, "_MAX_BITS", 2)
    loose, loose_flips = _run(history, tmp_path / "loose")
    assert loose == clean and loose_flips.equals(clean_flips)
    monkeypatch.setattr(flips, "FLIPS_PER_BUCKET", 100)
    many, many_flips = _run(history, tmp_path / "many")
    assert many == clean and many_flips.sort("decision_id").equals(clean_flips.sort("decision_id"))


def test_the_run_folder_is_removed_after_success_and_failure(history, tmp_path, monkeypatch):
    out = tmp_path / "out"
    _run(history, out)
    assert sorted(p.name for p in out.iterdir()) == ["flips.parquet"]
    seen = []
    real = flips.write_flips

    def failing(path, flipped, lookup, buckets):
        seen.extend(p.name for p in path.parent.glob(f"{SPILL_PREFIX}*/*"))
        yield from real(path, flipped, lookup, buckets)
        raise RuntimeError("killed while classifying")

    monkeypatch.setattr(flips, "write_flips", failing)
    with pytest.raises(RuntimeError, match="killed while classifying"):
        _run(history, tmp_path / "failed")
    assert sorted(seen) == ["outcomes.parquet", "selected.parquet"]  # the run did go through its files
    assert [p.name for p in (tmp_path / "failed").iterdir()] == ["flips.parquet"]
    # Without a flips path, the folder is made in the system's temporary folder, and removed too.
    monkeypatch.setattr(flips, "write_flips", real)
    monkeypatch.setattr(flips.tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _old, draft = dryrun_data.rulebooks()
    dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=history, created_at=CREATED_AT)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_folder_left_by_a_killed_run_is_never_read(history, tmp_path):
    """A run killed mid-way leaves its folder; the next run makes a new one beside it and reads
    only that: files of another history placed there change nothing."""
    clean, _ = _run(history, tmp_path / "clean")
    out = tmp_path / "out"
    stale = out / f"{SPILL_PREFIX}killed"
    stale.mkdir(parents=True)
    empty = pl.DataFrame({"decision_id": ["dec_0000000001"], "status": ["failed"]})
    for name in ("selected.parquet", "outcomes.parquet", "flips.parquet"):
        empty.write_parquet(stale / name)
    again, _ = _run(history, out)
    assert again == clean
    assert sorted(p.name for p in stale.iterdir()) == ["flips.parquet", "outcomes.parquet", "selected.parquet"]
    assert sorted(p.name for p in out.iterdir()) == [f"{SPILL_PREFIX}killed", "flips.parquet"]
