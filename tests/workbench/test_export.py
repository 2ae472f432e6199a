"""The Parquet export: readable by pyarrow alone, incremental (only new files, a rerun changes
nothing), scope filter, manifest contents, crash leftovers, and refusals that write nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest

from gate.ledger import stream
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset.export import export_ledger
from workbench.dataset.integrity import table_dataset
from workbench.dataset.location import (
    DatasetError,
    open_location,
    read_manifest,
)
from workbench.dataset.partwriter import part_name
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, TABLES

NOW = datetime(2026, 6, 1, tzinfo=UTC)


@pytest.fixture
def writer(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def fill(writer, count, *, start=0, scopes=("acme", "globex/eu")):
    for index in range(start, start + count):
        scope = scopes[index % len(scopes)]
        record = writer.decide(scope, at(1 + index % 4, 1 + index % 27, ms=index), discount=5 + index % 30)
        writer.receipt("outcome", scope, record, at(5, 1 + index % 27, ms=index),
                       ("succeeded", "failed", "pending")[index % 3])
        if index % 4 == 0:
            writer.receipt("execution", scope, record, at(5, 1 + index % 27, 1), "executed")
        if index % 10 == 0:
            writer.receipt("crm_sync", scope, record, at(5, 2 + index % 26, 2), "written")


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


def test_dataset_reads_with_pyarrow_alone_and_matches_the_ledger(writer, tmp_path):
    fill(writer, 24)
    out = tmp_path / "ds"
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.run == 1
    # Plain pyarrow, no workbench helper: Hive directories give scope and month back.
    decisions = pads.dataset(str(out / "decisions"), format="parquet", partitioning="hive").to_table()
    assert decisions.num_rows == 24
    assert sorted(set(decisions.column("scope").to_pylist())) == ["acme", "globex/eu"]
    one_file = next((out / "decisions").rglob("*.parquet"))
    assert pq.read_schema(one_file).equals(TABLES["decisions"]) and "scope=" in str(one_file.parent.parent)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["dataset_schema_version"] == DATASET_SCHEMA_VERSION and manifest["synthetic"] is False
    counts = stream.receipt_counts(writer.ledger)
    assert manifest["tables"]["decisions"]["rows"] == 24 == manifest["tables"]["chain_links"]["rows"]
    assert manifest["tables"]["outcomes"]["rows"] == counts["outcome"] == 24
    assert manifest["tables"]["executions"]["rows"] == counts["execution"] == 6
    assert manifest["tables"]["crm_syncs"]["rows"] == counts["crm_sync"] == 3
    for head in stream.chain_heads_of(writer.ledger):
        chain = manifest["chains"][head["scope"]]
        assert (chain["size"], chain["merkle_root"], chain["head_link_hash"]) == \
            (head["size"], head["merkle_root"], head["head_link_hash"])
    assert manifest["ledger_head"]["decisions"] == 24 and len(manifest["ledger_head"]["head_hash"]) == 64
    # Through the manifest, every table reads with its exact schema plus the partition columns.
    location = open_location(str(out))
    for name in TABLES:
        table = table_dataset(location, name, read_manifest(location)).to_table()
        assert table.num_rows == manifest["tables"][name]["rows"]
    # Typed facts per rulebook, for column-wise evaluation (workbench.dataset.facts).
    facts = pads.dataset(str(out / "facts" / "rulebook_id=pricing_exception"), format="parquet",
                         partitioning="hive").to_table()
    assert facts.num_rows == 24 == manifest["facts"]["pricing_exception"]["rows"]
    assert set(facts.column("facts_state").to_pylist()) == {"typed"}
    by_id = dict(zip(decisions.column("decision_id").to_pylist(), decisions.column("facts_json").to_pylist(),
                     strict=True))
    for row in facts.select(["decision_id", "discount_percent::n", "owner_approved::b"]).to_pylist():
        stored = json.loads(by_id[row["decision_id"]])
        assert row["discount_percent::n"] == stored["discount_percent"] and row["owner_approved::b"] is True
    assert sum(entry["rows"] for entry in manifest["facts"]["pricing_exception"]["files"]) == 24
    links = table_dataset(location, "chain_links").to_table().to_pylist()
    acme_last = max((link for link in links if link["scope"] == "acme"), key=lambda link: link["chain_position"])
    assert acme_last["merkle_root"] == manifest["chains"]["acme"]["merkle_root"]


def test_incremental_export_writes_only_new_files_and_a_rerun_changes_nothing(writer, tmp_path):
    fill(writer, 100)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    before = snapshot(out)
    again = export_ledger(writer.ledger, str(out), now=NOW)
    assert again.run is None and snapshot(out) == before  # byte for byte, manifest included

    # 1% new decisions, decided and reported later than everything exported so far.
    record = writer.decide("acme", at(5, 28))
    writer.receipt("outcome", "acme", record, at(5, 29), "succeeded")
    third = export_ledger(writer.ledger, f"file://{out}", now=NOW)
    after = snapshot(out)
    changed = {name for name in after if before.get(name) != after[name]}
    assert all(before[name] == after[name] for name in before if name != "manifest.json")
    new_files = changed - {"manifest.json"}
    assert new_files and all(Path(name).name.startswith("part-000002-") or name.startswith("rollups/run-000002/")
                             for name in new_files)
    assert third.new_rows["decisions"] == 1 and third.new_rows["outcomes"] == 1
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tables"]["decisions"]["rows"] == 101 and manifest["runs"] == 2
    # The report rollups: only the partition the new decision and its outcome landed in was
    # recomputed (workbench.dataset.rollups); the others were carried over from run 1.
    assert manifest["rollups"]["run"] == 2 and manifest["rollups"]["recomputed_partitions"] == 1
    assert manifest["rollups"]["decision_partitions"] == 5  # acme: Jan, Mar, May; globex/eu: Feb, Apr
    decisions = pads.dataset(str(out / "decisions"), format="parquet", partitioning="hive").to_table()
    ids = decisions.column("decision_id").to_pylist()
    assert len(ids) == len(set(ids)) == 101
    assert third.warnings == []


def test_a_receipt_stamped_behind_the_watermark_is_reported(writer, tmp_path):
    fill(writer, 4)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    record = writer.decide("acme", at(5, 28))
    writer.receipt("outcome", "acme", record, at(1, 1), "succeeded")  # a clock in the past
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.new_rows["decisions"] == 1 and result.new_rows["outcomes"] == 0
    assert len(result.warnings) == 1 and "1 outcome receipt(s)" in result.warnings[0]


def test_scope_filter_exports_one_scope_and_later_the_rest(writer, tmp_path):
    fill(writer, 12)
    out = tmp_path / "ds"
    first = export_ledger(writer.ledger, str(out), scope="acme", now=NOW)
    assert first.new_rows["decisions"] == 6
    assert {path.name for path in (out / "decisions").iterdir()} == {"scope=acme"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert set(manifest["chains"]) == {"acme"} and set(manifest["watermarks"]) == {"acme"}
    assert export_ledger(writer.ledger, str(out), scope="acme", now=NOW).run is None
    rest = export_ledger(writer.ledger, str(out), now=NOW)
    assert rest.new_rows["decisions"] == 6 and rest.new_rows["outcomes"] == 6
    assert {path.name for path in (out / "decisions").iterdir()} == {"scope=acme", "scope=globex%2Feu"}


def test_receipts_inside_the_settle_window_wait_for_the_next_run(writer, tmp_path):
    record = writer.decide("acme", at(5, 31, 23, 59))
    writer.receipt("outcome", "acme", record, at(5, 31, 23, 59, 500), "succeeded")
    out = tmp_path / "ds"
    first = export_ledger(writer.ledger, str(out), now=NOW, settle_seconds=120)
    assert first.new_rows["decisions"] == 1 and first.new_rows["outcomes"] == 0
    later = export_ledger(writer.ledger, str(out), now=datetime(2026, 6, 1, 0, 5, tzinfo=UTC))
    assert later.new_rows == {"decisions": 0, "executions": 0, "outcomes": 1, "crm_syncs": 0, "chain_links": 0,
                              "holds": 0, "hold_events": 0, "facts": {}}


def test_a_failed_runs_files_are_removed_by_the_next_run(writer, tmp_path):
    fill(writer, 4)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    leftover = out / "decisions" / "scope=acme" / "month=2026-01" / part_name(2, 0)
    leftover.write_bytes(b"half a file")
    fill(writer, 2, start=4)
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert (result.run == 2 and not leftover.exists()) or leftover.read_bytes() != b"half a file"
    decisions = pads.dataset(str(out / "decisions"), format="parquet", partitioning="hive").to_table()
    assert decisions.num_rows == 6


def test_refusals_write_nothing(writer, tmp_path):
    fill(writer, 2)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    with pytest.raises(DatasetError, match=r"cannot write|is a file"):
        export_ledger(writer.ledger, str(blocker / "ds"), now=NOW)
    with pytest.raises(DatasetError, match="is a file"):
        export_ledger(writer.ledger, str(blocker), now=NOW)

    other = tmp_path / "other"
    other.mkdir()
    (other / "manifest.json").write_text(json.dumps({"dataset_schema_version": "decision_dataset_v0"}))
    with pytest.raises(DatasetError, match="decision_dataset_v0"):
        export_ledger(writer.ledger, str(other), now=NOW)
    assert [path.name for path in other.iterdir()] == ["manifest.json"]

    stranger = tmp_path / "stranger"
    stranger.mkdir()
    (stranger / "notes.txt").write_text("mine")
    with pytest.raises(DatasetError, match="not empty"):
        export_ledger(writer.ledger, str(stranger), now=NOW)
    assert [path.name for path in stranger.iterdir()] == ["notes.txt"]

    synthetic = tmp_path / "synthetic"
    synthetic.mkdir()
    (synthetic / "manifest.json").write_text(json.dumps(
        {"dataset_schema_version": DATASET_SCHEMA_VERSION, "synthetic": True}))
    with pytest.raises(DatasetError, match="synthetic"):
        export_ledger(writer.ledger, str(synthetic), now=NOW)
    with pytest.raises(DatasetError, match="settle"):
        export_ledger(writer.ledger, str(tmp_path / "new"), settle_seconds=-1)


def test_buffered_partitions_hold_only_their_own_rows(tmp_path):
    """Memory is bounded by the rows buffered: a batch spanning several partitions is split into
    copies of each partition's rows, not slices that would keep the whole batch's buffers alive
    until every partition holding a piece of it is written."""
    import pyarrow as pa

    from workbench.dataset.partwriter import PartitionedWriter
    from workbench.dataset.schema import with_partitions

    schema = with_partitions(TABLES["outcomes"])
    rows = 4_000
    columns = {field.name: [None] * rows for field in schema}
    columns.update(receipt_id=[f"out_{i:06d}" for i in range(rows)], decision_id=[f"dec_{i:06d}" for i in range(rows)],
                   reported_at=[datetime(2026, 1 + i % 4, 1, tzinfo=UTC) for i in range(rows)],
                   status=["succeeded"] * rows, receipt_hash=["0" * 64] * rows, receipt_json=["x" * 1_000] * rows,
                   scope=["acme"] * rows, month=[f"2026-0{1 + i % 4}" for i in range(rows)])
    batch = pa.table(columns, schema=schema)
    writer = PartitionedWriter(open_location(str(tmp_path / "ds")), 1, group_rows=10**6, buffer_rows=10**6)
    writer.add("outcomes", batch)
    held = [table.get_total_buffer_size() for partition in writer._partitions.values() for table in partition.buffered]
    assert len(held) == 4 and sum(held) < 1.2 * batch.get_total_buffer_size()  # each about a quarter
    writer.close()
    written = pads.dataset(str(tmp_path / "ds" / "outcomes"), format="parquet", partitioning="hive").to_table()
    assert sorted(written.column("receipt_id").to_pylist()) == sorted(columns["receipt_id"])
