"""The Iceberg layout (workbench.dataset.iceberg, docs/dataset.md "Iceberg layout"): the same ledger
exported both ways gives identical reports and dry-runs; a second export adds exactly one snapshot
per table with only the new rows; pyiceberg's own reader, through the catalog alone, reads the
rows the gate's readers read; SQLite and PostgreSQL catalogs; and a missing snapshot, a changed
data file, a crash mid-commit or a foreign catalog are refused or recovered, never half-reported."""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
import pytest

from gate.ledger import stream
from tests.conftest import PG_ADMIN_URL, PG_AVAILABLE
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset import iceberg
from workbench.dataset.export import export_ledger
from workbench.dataset.integrity import iter_all, table_dataset
from workbench.dataset.load import DatasetError as LoadError
from workbench.dataset.load import from_dataset, scan_table
from workbench.dataset.location import DatasetError, open_location
from workbench.dataset.schema import TABLES
from workbench.migration import DryRunError, dry_run
from workbench.reports.policy import (
    ReportParams,
    anomaly_report,
    benchmark_report,
    confidence_report,
    effectiveness_report,
)

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 8, 1, tzinfo=UTC)
POLICY = "pricing_exception"
EVERY = ReportParams(limit=None, min_sample=5, threshold=0.0, max_items=100)
RECENT = ReportParams(limit=20, min_sample=3, threshold=0.0, max_items=100)
CREATED = "2026-08-01T00:00:00.000Z"


def draft() -> dict:
    rulebook = json.loads((ROOT / "gate" / "data" / "rulebooks" / "pricing-exception.json").read_text())
    rulebook["version"] = rulebook["version"] + "-draft"
    rulebook["rules"][0]["condition"]["value"] = 18  # block discounts above 18 % instead of 25 %
    return rulebook


def fill(writer, count, *, start=0, scopes=("acme", "globex/eu", "initech"), receipts_month=6):
    for index in range(start, start + count):
        scope = scopes[index % len(scopes)]
        record = writer.decide(scope, at(1 + index % 5, 1 + index % 27, ms=index), discount=5 + index % 30,
                               margin=12 + index % 25)
        writer.receipt("outcome", scope, record, at(receipts_month, 1 + index % 27, ms=index),
                       ("succeeded", "failed", "pending", "reverted")[index % 4])
        if index % 3 == 0:
            writer.receipt("execution", scope, record, at(receipts_month, 1 + index % 27, 1), "executed")
        if index % 5 == 0:
            writer.receipt("crm_sync", scope, record, at(receipts_month, 2 + index % 26, 2), "written")


@pytest.fixture
def writer(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def catalog_uri(request, tmp_path):
    """A SQLite catalog file, or a throw-away PostgreSQL catalog database (dropped afterwards;
    skipped where PostgreSQL does not answer)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'catalog' / 'catalog.db'}"
        return
    if not PG_AVAILABLE:
        pytest.skip("PostgreSQL does not answer at " + PG_ADMIN_URL)
    import psycopg

    name = f"gate_iceberg_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield PG_ADMIN_URL.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://") + "/" + name
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def lake(root: Path, catalog_uri: str | None = None) -> iceberg.IcebergTarget:
    return iceberg.default_target(str(root), root.parent, catalog_uri=catalog_uri)


def reports(frames, own_scope: str) -> dict:
    out = {
        "effectiveness": effectiveness_report(frames, POLICY, EVERY),
        "anomalies": anomaly_report(frames, POLICY, EVERY),
        "confidence": confidence_report(frames, POLICY, EVERY),
        "benchmarks": benchmark_report(frames, POLICY, EVERY, own_scope=own_scope,
                                       opted_in={"acme", "globex/eu", "initech"}),
    }
    # The reports differ only in the dataset they name (`source`) and so in their seal.
    return {kind: {k: v for k, v in body.items() if k != "source" and not k.endswith("_hash")}
            for kind, body in out.items()}


def rows(frame: pl.LazyFrame, key: str) -> pl.DataFrame:
    return frame.collect().sort(key)


def test_both_layouts_give_identical_reports_and_dry_runs(writer, tmp_path, catalog_uri):
    fill(writer, 60)
    parquet, ice = tmp_path / "parquet", tmp_path / "ice"
    export_ledger(writer.ledger, str(parquet), now=NOW)
    result = export_ledger(writer.ledger, str(ice), now=NOW, lakehouse=lake(ice, catalog_uri))
    assert result.run == 1 and result.manifest["layout"] == "iceberg" and "rollups" not in result.manifest
    # A reader of the Parquet file lists fails on this layout instead of reading empty tables.
    with pytest.raises(DatasetError, match="is an Iceberg table"):
        table_dataset(open_location(str(ice)), "decisions", result.manifest)
    # The location's own files: the facts and the holds (part files in either layout; this history's
    # holds are all open, so it has no hold events).
    assert {entry.kind for entry in iter_all(result.manifest)} == {"facts", "holds"}
    for table, key in (("decisions", "decision_id"), ("outcomes", "receipt_id"), ("executions", "receipt_id"),
                       ("crm_syncs", "receipt_id"), ("chain_links", "decision_id"), ("holds", "decision_id")):
        assert rows(scan_table(ice, table), key).equals(rows(scan_table(parquet, table), key)), table
        assert rows(scan_table(ice, table, ["globex/eu"]), key).equals(
            rows(scan_table(parquet, table, ["globex/eu"]), key))
    for scopes in (None, ["acme"]):
        whole = (from_dataset(ice, scopes=scopes, policy_id=POLICY), from_dataset(parquet, scopes=scopes,
                                                                                 policy_id=POLICY))
        assert whole[0].rollup is None and whole[1].rollup is not None  # Parquet answers from its rollups
        assert reports(whole[0], "acme") == reports(whole[1], "acme")
        assert reports(replace(whole[1], rollup=None), "acme") == reports(whole[1], "acme")
    recent = [from_dataset(root, scopes=["acme"], policy_id=POLICY, limit=RECENT.limit) for root in (ice, parquet)]
    assert reports(recent[0], "acme") == reports(recent[1], "acme")
    for scope in (None, "initech"):
        runs = [dry_run(draft(), POLICY, scope=scope, dataset=root, created_at=CREATED).result
                for root in (ice, parquet)]
        assert runs[0]["decisions_total"] > 0 and runs[0]["decisions_changed"] > 0
        assert runs[0]["source"]["dataset_hash"] != runs[1]["source"]["dataset_hash"]
        assert {k: v for k, v in runs[0].items() if k != "source"} == {k: v for k, v in runs[1].items() if k != "source"}


def test_a_second_export_adds_one_snapshot_per_table_with_only_the_new_rows(writer, tmp_path, catalog_uri):
    fill(writer, 30)
    root = tmp_path / "ice"
    first = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root, catalog_uri)).manifest
    catalog = iceberg.open_catalog(catalog_uri, first["iceberg"]["warehouse"])
    before = {name: {s.snapshot_id for s in catalog.load_table(f"gate.{name}").snapshots()} for name in TABLES}
    assert all(len(ids) == 1 for ids in before.values())
    fill(writer, 9, start=30, receipts_month=7)  # receipts after the first run's watermark
    second = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root, catalog_uri))
    assert second.run == 2
    manifest = second.manifest
    assert manifest["previous_dataset_hash"] == first["dataset_hash"]
    for name in TABLES:
        table = catalog.load_table(f"gate.{name}")
        new = {s.snapshot_id for s in table.snapshots()} - before[name]
        named = manifest["iceberg"]["tables"][name]
        assert new == {named["snapshot_id"]} and table.current_snapshot().snapshot_id == named["snapshot_id"]
        snapshot = table.snapshot_by_id(named["snapshot_id"])
        assert snapshot.parent_snapshot_id == first["iceberg"]["tables"][name]["snapshot_id"]
        assert snapshot.summary["gate.export.run"] == "2"
        assert int(snapshot.summary["added-records"]) == second.new_rows[name] > 0
        assert int(snapshot.summary["total-records"]) == manifest["tables"][name]["rows"]
        # Only the new rows: the snapshot's added files are exactly the run's, and nothing repeats.
        assert sum(f["rows"] for f in named["files"] if f["run"] == 2) == second.new_rows[name]
    counts = stream.receipt_counts(writer.ledger)
    assert manifest["tables"]["decisions"]["rows"] == 39 and manifest["tables"]["outcomes"]["rows"] == counts["outcome"]
    decisions = scan_table(root, "decisions").collect()
    assert decisions["decision_id"].n_unique() == decisions.height == 39
    # A run with nothing new adds no snapshot and writes nothing.
    again = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root, catalog_uri))
    assert again.run is None
    assert len(list(catalog.load_table("gate.decisions").snapshots())) == 2


def test_pyiceberg_reads_the_same_rows_through_the_catalog_alone(writer, tmp_path, catalog_uri):
    """A second Arrow reader: pyiceberg's scan of the manifest's snapshot, found through the catalog
    (no manifest file list, no gate reader), gives the rows the gate's Polars readers give."""
    from pyiceberg.catalog.sql import SqlCatalog

    fill(writer, 24)
    root = tmp_path / "ice"
    manifest = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root, catalog_uri)).manifest
    fill(writer, 6, start=24)
    manifest = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root, catalog_uri)).manifest
    catalog = SqlCatalog(manifest["iceberg"]["catalog_name"], uri=catalog_uri, warehouse=manifest["iceberg"]["warehouse"])
    for name, key in (("decisions", "decision_id"), ("outcomes", "receipt_id"), ("chain_links", "decision_id")):
        table = catalog.load_table(("gate", name))
        arrow = table.scan(snapshot_id=manifest["iceberg"]["tables"][name]["snapshot_id"]).to_arrow()
        theirs = pl.from_arrow(arrow).with_columns(pl.col(pl.Datetime("us", "UTC")).cast(pl.Datetime("ms", "UTC")))
        ours = scan_table(root, name).collect()
        assert theirs.columns == ours.columns and theirs.height == manifest["tables"][name]["rows"]
        assert theirs.sort(key).equals(ours.sort(key))
        # The current snapshot is the manifest's: a plain "read the table" gets the same rows.
        assert table.scan().to_arrow().num_rows == ours.height


def test_a_missing_snapshot_or_a_changed_data_file_refuses_the_dataset(writer, tmp_path):
    fill(writer, 12)
    root = tmp_path / "ice"
    manifest = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root)).manifest
    outcome = manifest["iceberg"]["tables"]["outcomes"]["files"][0]
    path = Path(manifest["iceberg"]["warehouse"].removeprefix("file://")) / outcome["path"]
    data = path.read_bytes()
    path.write_bytes(data[:-20] + bytes(20))  # same size, other bytes
    with pytest.raises(LoadError, match="does not match its sha256"):
        from_dataset(root, policy_id=POLICY).outcomes.collect()
    with pytest.raises(DryRunError, match="does not match its sha256"):
        dry_run(draft(), POLICY, dataset=root, created_at=CREATED)
    path.write_bytes(data)
    assert from_dataset(root, policy_id=POLICY).outcomes.collect().height == 12
    catalog = iceberg.open_catalog(lake(root).catalog_uri, manifest["iceberg"]["warehouse"])
    catalog.drop_table("gate.decisions")
    catalog.create_table("gate.decisions", schema=catalog.load_table("gate.outcomes").schema())
    with pytest.raises(LoadError, match="has no snapshot"):
        from_dataset(root, policy_id=POLICY)
    with pytest.raises(DatasetError, match="belongs to another dataset"):
        writer.decide("acme", at(7, 1))
        export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root))


def test_a_crash_between_commits_commits_nothing_and_the_next_run_exports_each_row_once(writer, tmp_path,
                                                                                         monkeypatch):
    fill(writer, 15)
    root = tmp_path / "ice"
    export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root))
    before = (root / "manifest.json").read_bytes()
    fill(writer, 6, start=15)
    real = iceberg.IcebergWriter.commit

    def crash(self):
        real(self)  # every table's snapshot is committed …
        raise RuntimeError("killed before the manifest")  # … and the run dies before its manifest

    monkeypatch.setattr(iceberg.IcebergWriter, "commit", crash)
    with pytest.raises(RuntimeError, match="killed"):
        export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root))
    assert (root / "manifest.json").read_bytes() == before
    assert scan_table(root, "decisions").collect().height == 15  # readers read the manifest's snapshot
    monkeypatch.setattr(iceberg.IcebergWriter, "commit", real)
    result = export_ledger(writer.ledger, str(root), now=NOW, lakehouse=lake(root))
    assert result.run == 2 and result.new_rows["decisions"] == 6
    decisions = scan_table(root, "decisions").collect()
    assert decisions.height == decisions["decision_id"].n_unique() == 21
    catalog = iceberg.open_catalog(lake(root).catalog_uri, result.manifest["iceberg"]["warehouse"])
    table = catalog.load_table("gate.decisions")
    assert table.scan().to_arrow().num_rows == 21  # the failed run's snapshot is not built upon


def test_a_dataset_keeps_its_layout_and_an_unreachable_catalog_writes_nothing(writer, tmp_path):
    fill(writer, 6)
    parquet, ice = tmp_path / "parquet", tmp_path / "ice"
    export_ledger(writer.ledger, str(parquet), now=NOW)
    export_ledger(writer.ledger, str(ice), now=NOW, lakehouse=lake(ice))
    writer.decide("acme", at(7, 1))
    with pytest.raises(DatasetError, match="holds a Parquet dataset"):
        export_ledger(writer.ledger, str(parquet), now=NOW, lakehouse=lake(parquet))
    with pytest.raises(DatasetError, match="holds an Iceberg dataset"):
        export_ledger(writer.ledger, str(ice), now=NOW, layout="parquet")
    with pytest.raises(DatasetError, match="has its Iceberg tables in catalog"):
        export_ledger(writer.ledger, str(ice), now=NOW, lakehouse=lake(ice, f"sqlite:///{tmp_path}/other.db"))
    fresh = tmp_path / "fresh"
    with pytest.raises(DatasetError, match="cannot open the Iceberg catalog"):
        export_ledger(writer.ledger, str(fresh), now=NOW,
                      lakehouse=lake(fresh, "postgresql+psycopg://nobody:secret@127.0.0.1:9/none"))
    assert not (fresh / "manifest.json").exists()
    # Without a target an Iceberg dataset is continued where its manifest says (the workbench's refresh).
    continued = export_ledger(writer.ledger, str(ice), now=NOW)
    assert continued.run == 2 and continued.new_rows["decisions"] == 1 and continued.manifest["layout"] == "iceberg"
    assert scan_table(ice, "decisions").collect().height == 7
