"""The history's versions from the decisions files' footers (`history.footer_versions`): the
same rows as a read of every decision (`summarize_decisions`), a file whose statistics do not
settle it read instead; and the file checks, done by several threads, still name the first bad
file in the manifest's order."""

from __future__ import annotations

import sys
from pathlib import Path

import polars as pl
import pytest

from workbench.dataset import integrity
from workbench.dataset.location import DatasetError, open_location
from workbench.migration import history as hist

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dryrun_data

KEYS = ["scope", "policy_version", "rulebook_hash"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    root = tmp_path_factory.mktemp("versions") / "history"
    dryrun_data.generate(root, 3_000, 5)
    return root


def _decision_files(root: Path) -> list[str]:
    return sorted(str(path) for path in (root / "decisions").rglob("*.parquet"))


def _read(rulebook_id: str, files: list[str]) -> pl.DataFrame:
    every = hist.scans_of_files(rulebook_id, None, (), decision_files=files, outcome_files=[], facts_files=[])[0]
    return hist.summarize_decisions(every).collect().sort(KEYS)


def test_footers_give_the_versions_of_a_read(generated):
    files = _decision_files(generated)
    known, rest = hist.footer_versions(dryrun_data.RULEBOOK_ID, files)
    assert rest == []  # every file of the export: one version of one rulebook per row group
    merged = hist.merge_versions([known]).sort(KEYS)
    assert merged.equals(_read(dryrun_data.RULEBOOK_ID, files))
    assert merged.schema == _read(dryrun_data.RULEBOOK_ID, files).schema
    other, rest = hist.footer_versions("another_rulebook", files)
    assert other.height == 0 and rest == []  # settled: none of its decisions


def test_files_the_statistics_do_not_settle_are_read(generated, tmp_path):
    files = _decision_files(generated)
    edited = []
    for index, path in enumerate(files[:3]):
        frame = pl.read_parquet(path)
        half = pl.int_range(pl.len()) % 2 == 0
        if index == 0:  # two versions in one row group
            frame = frame.with_columns(pl.when(half).then(pl.lit("1.1.0")).otherwise(pl.col("policy_version"))
                                       .alias("policy_version"))
        elif index == 1:  # another rulebook's decisions beside this one's, and a decision without a time
            frame = frame.with_columns(
                pl.when(half).then(pl.lit("other")).otherwise(pl.col("policy_id")).alias("policy_id"),
                pl.when(pl.int_range(pl.len()) == 1).then(None).otherwise(pl.col("created_at")).alias("created_at"))
        else:  # no rulebook hash
            frame = frame.with_columns(pl.lit(None, pl.String).alias("rulebook_hash"))
        target = tmp_path / Path(path).relative_to(generated)
        target.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(target)
        edited.append(str(target))
    mixed = [*edited, *files[3:]]
    _known, rest = hist.footer_versions(dryrun_data.RULEBOOK_ID, mixed)
    assert rest == edited
    history = hist.history_of_files(dryrun_data.RULEBOOK_ID, None, (), decision_files=mixed, outcome_files=[],
                                    facts_files=[], source={})
    expected = _read(dryrun_data.RULEBOOK_ID, mixed)
    assert history.versions.sort(KEYS).equals(expected)
    assert set(expected["policy_version"]) == {"1.0.0", "1.1.0"} and expected["rulebook_hash"].null_count() == 1


@pytest.mark.parametrize("threads", [1, 3])
def test_the_first_bad_file_is_named_whatever_the_threads(generated, tmp_path, monkeypatch, threads):
    monkeypatch.setattr(integrity, "CHECK_THREADS", threads)
    manifest = hist.read_manifest(generated)[0]
    entries = [*integrity.listed_files(manifest, "decisions"), *integrity.listed_files(manifest, "outcomes"),
               *integrity.listed_files(manifest, "facts", dryrun_data.RULEBOOK_ID)]
    assert len(entries) > 70  # more than one window of checks
    location = open_location(str(generated))
    assert len(integrity.check_files(location, entries)) == len(entries)
    wrong = [integrity.ListedFile(e.kind, e.path, e.rows, "0" * 64 if i in (5, 70) else e.sha256, e.bytes)
             for i, e in enumerate(entries)]
    with pytest.raises(DatasetError, match=entries[5].path):
        integrity.check_files(location, wrong)
    with pytest.raises(DatasetError, match=entries[70].path):
        integrity.check_files(location, wrong[6:])
