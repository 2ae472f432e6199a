"""Report rollups (workbench.dataset.rollups): a whole-history report from the dataset's stored
per-partition partials is the report from the rows, after every kind of export run (first,
incremental with new decisions, late outcomes of old decisions, a crash mid-run, a dataset
written before rollups existed), and a stale or foreign rollup is never used."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset import integrity, rollups
from workbench.dataset.export import export_ledger
from workbench.dataset.load import from_dataset
from workbench.dataset.synth import synthesize
from workbench.demo import scenario as S
from workbench.reports.policy import (
    ReportParams,
    anomaly_report,
    benchmark_report,
    effectiveness_report,
)

NOW = datetime(2026, 8, 1, tzinfo=UTC)
EVERY = ReportParams(limit=None, min_sample=5, threshold=0.0, max_items=100)


def reports(frames, policy: str, own_scope: str, opted_in: set[str]) -> dict:
    return {
        "effectiveness": effectiveness_report(frames, policy, EVERY),
        "anomalies": anomaly_report(frames, policy, EVERY),
        "benchmarks": benchmark_report(frames, policy, EVERY, own_scope=own_scope, opted_in=opted_in),
    }


def assert_rollups_equal_rows(root, policy: str, *, scopes=None, policy_version=None, own_scope: str,
                              opted_in: set[str]) -> dict:
    frames = from_dataset(root, scopes=scopes, policy_id=policy, policy_version=policy_version, limit=None)
    assert frames.rollup is not None and frames.rollup.usable(OUTCOME_EFFECTIVENESS_CLASS)
    from_rollups = reports(frames, policy, own_scope, opted_in)
    from_rows = reports(replace(frames, rollup=None), policy, own_scope, opted_in)
    assert from_rollups == from_rows  # hashes included: one meaning per number
    return from_rollups


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("rollups") / "ds"
    manifest = synthesize(str(root), decisions=12_000, seed=11)
    return root, manifest


def test_synthetic_dataset_reports_from_rollups_equal_reports_from_rows(synthetic):
    root, manifest = synthetic
    member = manifest["rollups"]
    assert member["version"] == rollups.ROLLUP_VERSION and member["run"] == manifest["runs"] == 1
    assert member["recomputed_partitions"] == member["decision_partitions"] > 10
    scopes = sorted(manifest["chains"])
    opted = set(scopes)
    for policy in S.POLICIES:
        whole = assert_rollups_equal_rows(root, policy, own_scope=scopes[0], opted_in=opted)
        assert whole["effectiveness"]["sample"]["decisions_considered"] > 100
        assert_rollups_equal_rows(root, policy, scopes=scopes[1:3], own_scope=scopes[1], opted_in=opted)
        # a caller's scope outside the selection has no sample in either reading
        outside = assert_rollups_equal_rows(root, policy, scopes=scopes[1:3], own_scope=scopes[0], opted_in=opted)
        assert outside["benchmarks"]["sample"]["decisions_considered"] == 0
    # The degrading policy has two versions: each version alone, and the version-change findings.
    whole = assert_rollups_equal_rows(root, "refund_approval", own_scope=scopes[0], opted_in=opted)
    versions = whole["anomalies"]["checks"]["policy_versions"]
    assert versions["previous"] and versions["current"]
    assert any(a["kind"] == "verdict_mix_shift" for a in whole["anomalies"]["anomalies"])
    for version in (versions["previous"], versions["current"]):
        one = assert_rollups_equal_rows(root, "refund_approval", policy_version=version, own_scope=scopes[2],
                                        opted_in=opted)
        assert 0 < one["effectiveness"]["sample"]["decisions_considered"] < \
            whole["effectiveness"]["sample"]["decisions_considered"]


def test_a_limited_read_or_another_class_mapping_never_uses_the_rollups(synthetic):
    root, manifest = synthetic
    policy = S.POLICIES[0]
    assert from_dataset(root, policy_id=policy, limit=50).rollup is None
    assert from_dataset(root, limit=None).rollup is None  # no policy: not a report selection
    view = from_dataset(root, policy_id=policy, limit=None).rollup
    changed = dict(OUTCOME_EFFECTIVENESS_CLASS, succeeded="failure")
    assert view.usable(OUTCOME_EFFECTIVENESS_CLASS) and not view.usable(changed)
    # A manifest whose rollups belong to another run (an exporter that did not update them) or
    # of another version is ignored: the report is computed from the rows.
    for patch in ({"run": 0}, {"version": "report_rollups_v0"}):
        stale = dict(manifest, rollups=dict(manifest["rollups"], **patch))
        assert rollups.RollupView.of(root, stale, policy_id=policy, policy_version=None, scopes=None) is None
    unhashed = dict(manifest, rollups={k: v for k, v in manifest["rollups"].items() if k != "classes_hash"})
    assert not rollups.RollupView.of(root, unhashed, policy_id=policy, policy_version=None,
                                     scopes=None).usable(OUTCOME_EFFECTIVENESS_CLASS)
    assert rollups.RollupView.of(root, {k: v for k, v in manifest.items() if k != "rollups"}, policy_id=policy,
                                 policy_version=None, scopes=None) is None


# --------------------------------------------------------------------------- the export


@pytest.fixture
def writer(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


SCOPES = ("acme", "globex/eu")


def fill(writer, count, *, start=0, month0=1):
    records = []
    for index in range(start, start + count):
        scope = SCOPES[index % 2]
        record = writer.decide(scope, at(month0 + index % 3, 1 + index % 27, ms=index), discount=5 + index % 30,
                               margin=10 + index % 25)
        writer.receipt("outcome", scope, record, at(month0 + 3, 1 + index % 27, ms=index),
                       ("succeeded", "failed", "pending", "succeeded")[index % 4])
        records.append(record)
    return records


def check(root) -> dict:
    manifest = json.loads((root / "manifest.json").read_text())
    for scope in SCOPES:
        assert_rollups_equal_rows(root, "pricing_exception", own_scope=scope, opted_in=set(SCOPES))
        assert_rollups_equal_rows(root, "pricing_exception", scopes=[scope], own_scope=scope, opted_in={scope})
    return manifest


def test_incremental_runs_recompute_only_the_partitions_they_touch(writer, tmp_path):
    records = fill(writer, 60)
    root = tmp_path / "ds"
    export_ledger(writer.ledger, str(root), now=NOW)
    first = check(root)["rollups"]
    assert first["recomputed_partitions"] == first["decision_partitions"] == 6

    # A late outcome of a January decision of acme (reported in July) and one new July decision
    # of globex/eu: two partitions change, acme/2026-01 (not July, where the outcome was filed)
    # and globex/eu/2026-07.
    january = records[0]  # index 0: acme, January
    assert january["created_at"].startswith("2026-01")
    writer.receipt("outcome", "acme", january, at(7, 2), "reverted")
    fresh = writer.decide("globex/eu", at(7, 3), discount=40)
    writer.receipt("outcome", "globex/eu", fresh, at(7, 4), "failed")
    result = export_ledger(writer.ledger, str(root), now=NOW)
    assert result.run == 2
    second = check(root)["rollups"]
    assert second["run"] == 2 and second["decision_partitions"] == 7 and second["recomputed_partitions"] == 2
    effect = effectiveness_report(from_dataset(root, scopes=["acme"], policy_id="pricing_exception", limit=None),
                                  "pricing_exception", EVERY)
    assert effect["sample"]["latest_outcome_counts"].get("reverted") == 1  # the late outcome counts

    # A run with nothing new writes nothing, rollups included.
    assert export_ledger(writer.ledger, str(root), now=NOW).run is None
    # The previous run's rollups stay while they may be read; older ones go with the next run.
    assert sorted(p.name for p in (root / "rollups").iterdir()) == ["run-000001", "run-000002"]
    writer.decide("acme", at(7, 5))
    export_ledger(writer.ledger, str(root), now=NOW)
    assert sorted(p.name for p in (root / "rollups").iterdir()) == ["run-000002", "run-000003"]
    check(root)


def test_a_crash_while_rolling_up_commits_nothing_and_the_next_run_recovers(writer, tmp_path, monkeypatch):
    fill(writer, 30)
    root = tmp_path / "ds"
    export_ledger(writer.ledger, str(root), now=NOW)
    before = (root / "manifest.json").read_bytes()
    fill(writer, 6, start=30, month0=4)
    real = rollups.update

    def crash(location, manifest, run, files, classes, **kw):
        real(location, manifest, run, files, classes, **kw)  # its files are written …
        raise RuntimeError("killed while rolling up")  # … then the run dies before the commit

    monkeypatch.setattr(rollups, "update", crash)
    with pytest.raises(RuntimeError, match="killed"):
        export_ledger(writer.ledger, str(root), now=NOW)
    assert (root / "manifest.json").read_bytes() == before
    assert sorted(p.name for p in (root / "rollups").iterdir()) == ["run-000001"]
    monkeypatch.setattr(rollups, "update", real)
    result = export_ledger(writer.ledger, str(root), now=NOW)
    assert result.run == 2 and result.new_rows["decisions"] == 6
    member = check(root)["rollups"]  # the six new (scope, month) partitions, not the six of run 1
    assert member["recomputed_partitions"] == 6 and member["decision_partitions"] == 12


def test_a_dataset_exported_before_rollups_gets_them_all_on_its_next_run(writer, tmp_path):
    fill(writer, 30)
    root = tmp_path / "ds"
    export_ledger(writer.ledger, str(root), now=NOW)
    manifest = json.loads((root / "manifest.json").read_text())
    del manifest["rollups"]  # as an earlier gate wrote it (with file digests)
    (root / "manifest.json").write_text(json.dumps(integrity.seal(manifest, None)))
    for path in sorted((root / "rollups").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    (root / "rollups").rmdir()
    frames = from_dataset(root, policy_id="pricing_exception", limit=None)
    assert frames.rollup is None  # reports come from the rows meanwhile
    assert effectiveness_report(frames, "pricing_exception", EVERY)["sample"]["decisions_considered"] == 30
    writer.decide("acme", at(4, 2))
    export_ledger(writer.ledger, str(root), now=NOW)
    member = check(root)["rollups"]
    assert member["recomputed_partitions"] == member["decision_partitions"] == 7


def test_a_partition_larger_than_a_chunk_is_rolled_up_in_pieces(tmp_path, monkeypatch):
    """Memory is bounded by the chunk, not by the largest partition: a month of one scope is read
    a few row groups at a time, its pieces' partials are stored side by side, and the report
    merges them into the same numbers."""
    import polars as pl
    import pyarrow.parquet as pq

    from workbench.dataset.location import open_location

    root = tmp_path / "ds"
    manifest = synthesize(str(root), decisions=3_000, seed=5)
    for entry in manifest["tables"]["decisions"]["files"]:  # small row groups, as a large export has
        path = root / entry["path"]
        pq.write_table(pq.read_table(path), path, row_group_size=40)
        entry.update(integrity.describe_file(open_location(str(root)), entry["path"]))  # listed as rewritten
    monkeypatch.setattr(rollups, "BATCH_DECISIONS", 100)
    rebuilt = dict(manifest)
    rebuilt.pop("rollups")
    rebuilt["rollups"] = rollups.update(open_location(str(root)), rebuilt, 1, [], OUTCOME_EFFECTIVENESS_CLASS,
                                          outcome_partitions=())
    (root / "manifest.json").write_text(json.dumps(integrity.seal(rebuilt, None)))
    sample = pl.read_parquet(root / rebuilt["rollups"]["files"]["effectiveness.sample"])
    keys = [*rollups.KEYS, "status"]
    assert sample.height > sample.select(keys).unique().height  # some partition came in pieces
    scopes = sorted(manifest["chains"])
    for policy in S.POLICIES:
        assert_rollups_equal_rows(root, policy, own_scope=scopes[0], opted_in=set(scopes))
