"""Synthetic benchmark datasets: the export's exact schema, the scenario's distributions,
`synthetic: true`, deterministic, typed facts equal to workbench.dataset.facts, refusals."""

from __future__ import annotations

import json

import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from gate.ledger import Ledger
from gate.protocol.canonical import canonical_text
from workbench.dataset.export import export_ledger
from workbench.dataset.facts import facts_table
from workbench.dataset.location import DatasetError
from workbench.dataset.schema import TABLES
from workbench.dataset.synth import synthesize


def read(root, table):
    return pads.dataset(str(root / table), format="parquet", partitioning="hive").to_table()


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    root = tmp_path_factory.mktemp("synth") / "ds"
    progress = []
    manifest = synthesize(str(root), decisions=12_000, seed=4, chunk=5_000,
                          progress=lambda d, t: progress.append((d, t)))
    return root, manifest, progress


def test_manifest_and_schemas(synthetic):
    root, manifest, progress = synthetic
    assert manifest["synthetic"] is True and manifest["generator"] == "workbench.dataset.synth"
    assert json.loads((root / "manifest.json").read_text()) == manifest
    assert progress[-1] == (12_000, 12_000) and len(progress) == 3
    for name, schema in TABLES.items():
        files = list((root / name).rglob("*.parquet"))
        assert files and all(pq.read_schema(path).equals(schema) for path in files), name
        assert read(root, name).num_rows == manifest["tables"][name]["rows"]
    assert manifest["tables"]["decisions"]["rows"] == 12_000
    assert sum(chain["size"] for chain in manifest["chains"].values()) == 12_000


def test_rows_are_consistent(synthetic):
    root, manifest, _ = synthetic
    decisions = read(root, "decisions")
    ids = set(decisions.column("decision_id").to_pylist())
    assert len(ids) == 12_000
    for name in ("executions", "outcomes", "crm_syncs"):
        receipts = read(root, name)
        assert set(receipts.column("decision_id").to_pylist()) <= ids
        assert len(set(receipts.column("receipt_id").to_pylist())) == receipts.num_rows
        for row in receipts.slice(0, 50).to_pylist():
            body = json.loads(row["receipt_json"])
            assert canonical_text(body) == row["receipt_json"] and body["synthetic"] is True
    for row in decisions.slice(0, 300).to_pylist():
        assert canonical_text(json.loads(row["facts_json"])) == row["facts_json"]
        assert row["evidence"] == [row["reason_code"]] and row["month"] == row["created_at"].strftime("%Y-%m")
    links = read(root, "chain_links")
    for scope, chain in manifest["chains"].items():
        positions = sorted(links.filter(pc.equal(links.column("scope"), scope)).column("chain_position").to_pylist())
        assert positions == list(range(1, chain["size"] + 1))
    verdicts = set(decisions.column("verdict").to_pylist())
    assert verdicts == {"yes", "no", "review"}


def test_typed_facts_equal_the_writer_of_the_export(synthetic):
    root, manifest, _ = synthetic
    decisions = read(root, "decisions").sort_by("decision_id")
    for rulebook_id, entry in manifest["facts"].items():
        mine = pads.dataset(str(root / "facts" / f"rulebook_id={rulebook_id}"), format="parquet",
                            partitioning="hive").to_table().sort_by("decision_id")
        of = decisions.filter(pc.equal(decisions.column("policy_id"), rulebook_id))
        expected = facts_table(of)
        assert mine.num_rows == entry["rows"] == of.num_rows
        assert mine.select(expected.schema.names).cast(expected.schema).equals(expected)


def test_deterministic_and_refusals(synthetic, tmp_path):
    root, _, _ = synthetic
    synthesize(str(tmp_path / "again"), decisions=12_000, seed=4, chunk=5_000)
    for name in TABLES:
        assert read(tmp_path / "again", name).equals(read(root, name)), name
    with pytest.raises(DatasetError, match="not empty"):
        synthesize(str(root), decisions=10)
    with pytest.raises(DatasetError, match="decisions"):
        synthesize(str(tmp_path / "zero"), decisions=0)
    ledger = Ledger(f"sqlite:///{tmp_path / 'l.db'}")
    try:
        ledger.upgrade()
        with pytest.raises(DatasetError, match="synthetic"):
            export_ledger(ledger, str(root))
    finally:
        ledger.dispose()
