"""The dataset follows the ledger's removals (workbench.dataset.rewrite; docs/dataset.md, "Removed
inputs"): after `InputRemoval` removes some decisions' inputs, the next export rewrites exactly the
part files holding them, so no file under the dataset (Parquet part files, Iceberg data and
metadata files) holds one of their fact values, while every other decision's facts are intact, the
manifest verifies and the readers read the new run; older Iceberg snapshots are expired; a run with
no new removal rewrites nothing; a failure mid-rewrite leaves the previous run readable and the next
run completes. On SQLite and PostgreSQL ledgers (`database_url`)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from gate.keys.config import SigningSetup
from gate.privacy.removal import RETENTION
from gate.services.removal import InputRemoval
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset import iceberg, rewrite
from workbench.dataset.export import export_ledger
from workbench.dataset.integrity import check_files, iter_all, signature_problem, table_dataset
from workbench.dataset.location import open_location, read_manifest

NOW = datetime(2026, 6, 1, tzinfo=UTC)
REMOVED_AT = datetime(2026, 5, 20, tzinfo=UTC)
GATE = str(Path(sys.executable).parent / "gate")


def discount(index: int) -> float:
    return 10.013579 + index  # distinctive (no value's text holds another's): its text and float64 bytes are searched


@pytest.fixture
def writer(backend, database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def fill(writer: LedgerWriter, count: int, start: int = 0) -> list[dict]:
    return [writer.decide(("acme", "globex")[index % 2], at(1 + index % 3, 1 + index, ms=index),
                          discount=discount(index)) for index in range(start, start + count)]


def remove(writer: LedgerWriter, records: list[dict]) -> None:
    writer.clock.set(REMOVED_AT)
    removal = InputRemoval(writer.ledger, writer.clock)
    cause = removal.cause(RETENTION, "30 days")
    for scope in ("acme", "globex"):  # each call removes its own scope's decisions only
        removal.remove(scope, [record["decision_id"] for record in records], cause)


def needles(index: int) -> list[bytes]:
    value = discount(index)
    return [repr(value).encode(), struct.pack("<d", value)]


def found_in_files(root: Path, indexes: list[int]) -> dict[int, list[str]]:
    """Per decision index, the files whose bytes or decoded Parquet values hold one of its values."""
    hits: dict[int, list[str]] = {index: [] for index in indexes}
    for path in sorted(root.rglob("*")):
        if not path.is_file():
            continue
        data = path.read_bytes()
        decoded = b""
        if path.suffix == ".parquet":
            decoded = repr(pq.read_table(path).to_pylist()).encode()
        elif path.suffix == ".avro":
            decoded = _avro_text(path)
        for index in indexes:
            if any(needle in data or needle in decoded for needle in needles(index)):
                hits[index].append(str(path.relative_to(root)))
    return hits


def _avro_text(path: Path) -> bytes:
    """An Iceberg manifest or manifest list decoded, every member flattened (the entries' column
    bounds included: they are serialized values)."""
    from pyiceberg.avro.file import AvroFile
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import ManifestEntry, ManifestFile

    kind = ManifestFile if path.name.startswith("snap-") else ManifestEntry
    with AvroFile(PyArrowFileIO().new_input(str(path)), read_types={-1: kind}) as reader:
        return b"".join(_flat(record) for record in reader)


def _flat(value) -> bytes:
    if isinstance(value, Mapping):
        return b"".join(_flat(key) + b"=" + _flat(item) + b";" for key, item in value.items())
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (list, tuple)):
        return b"".join(_flat(item) + b";" for item in value)
    if hasattr(value, "_data"):  # a pyiceberg Record
        return b"".join(_flat(item) + b";" for item in value._data)
    return repr(value).encode()


def decision_rows(location, manifest) -> dict[str, dict]:
    return {row["decision_id"]: row for row in table_dataset(location, "decisions", manifest).to_table().to_pylist()}


def test_an_export_rewrites_the_removed_decisions_rows_and_nothing_else(writer, tmp_path):
    records = fill(writer, 12)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    assert all(found_in_files(out, list(range(12))).values())  # every needle is found before the removal
    before = {path: path.read_bytes() for path in out.rglob("*.parquet")}
    gone = [records[index] for index in (0, 1, 4)]
    remove(writer, gone)

    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.run == 2 and result.inputs_removed is not None
    assert result.inputs_removed["decisions"] == 3 and result.inputs_removed["by_cause"] == {RETENTION: 3}
    assert result.inputs_removed["decision_rows"] == 3 and result.inputs_removed["facts_rows"] == 3
    hits = found_in_files(out, list(range(12)))
    assert [index for index, files in hits.items() if files] == [2, 3, 5, 6, 7, 8, 9, 10, 11], hits
    # only the files of the removed decisions' partitions were rewritten; the others are as they were
    after = {path: path.read_bytes() for path in out.rglob("*.parquet")}
    kept = [path for path in before if path in after and after[path] == before[path]]
    assert len(after) == len(before) and 0 < len(kept) < len(before)
    location = open_location(str(out))
    manifest = read_manifest(location)
    check_files(location, list(iter_all(manifest)))
    assert manifest["last_run"]["inputs_removed"]["decisions"] == 3
    assert manifest["watermarks"]["acme"]["removals"]["count"] + manifest["watermarks"]["globex"]["removals"][
        "count"] == 3
    # the rewritten rows are what an export of the ledger's remainders writes, ids and hashes kept
    fresh = tmp_path / "fresh"
    export_ledger(writer.ledger, str(fresh), now=NOW)
    fresh_location = open_location(str(fresh))
    assert decision_rows(location, manifest) == decision_rows(fresh_location, read_manifest(fresh_location))
    rows = decision_rows(location, manifest)
    assert rows[gone[0]["decision_id"]]["facts_json"] is None and rows[gone[0]["decision_id"]]["verdict"]
    assert json.loads(rows[records[2]["decision_id"]]["facts_json"])["discount_percent"] == discount(2)

    # a run with no new removal rewrites nothing
    files = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    again = export_ledger(writer.ledger, str(out), now=NOW)
    assert again.run is None and again.inputs_removed is None
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == files


def test_a_signed_manifest_still_verifies_after_a_rewrite(writer, tmp_path):
    records = fill(writer, 6)
    signing = SigningSetup.load(tmp_path / "keys.json", None, "hmac")
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW, signer=signing.receipt_signer(), anchors=signing.trust_anchors())
    remove(writer, records[:2])
    result = export_ledger(writer.ledger, str(out), now=NOW, signer=signing.receipt_signer(), anchors=signing.trust_anchors())
    assert result.inputs_removed is not None and result.inputs_removed["files"] > 0
    manifest = read_manifest(open_location(str(out)))
    assert signature_problem(manifest, signing.trust_anchors()) is None


def test_a_failure_mid_rewrite_leaves_the_previous_run_readable_and_the_next_run_completes(
        writer, tmp_path, monkeypatch):
    records = fill(writer, 8)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    remove(writer, records[:3])
    real, calls = rewrite.rewrite_parquet, []

    def failing(*args, **kwargs):
        calls.append(args[2])
        if len(calls) == 2:  # the second file: one rewritten file is already on disk
            raise OSError("disk full")
        return real(*args, **kwargs)

    monkeypatch.setattr(rewrite, "rewrite_parquet", failing)
    with pytest.raises(Exception, match="disk full"):
        export_ledger(writer.ledger, str(out), now=NOW)
    location = open_location(str(out))
    manifest = read_manifest(location)
    assert manifest["runs"] == 1
    check_files(location, list(iter_all(manifest)))
    assert len(decision_rows(location, manifest)) == 8  # the previous run, values and all
    monkeypatch.setattr(rewrite, "rewrite_parquet", real)
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.run == 2 and result.inputs_removed is not None and result.inputs_removed["decisions"] == 3
    hits = found_in_files(out, list(range(8)))
    assert [index for index, files in hits.items() if files] == [3, 4, 5, 6, 7]


def test_a_crash_after_the_manifest_leaves_old_files_the_next_run_deletes(writer, tmp_path, monkeypatch):
    records = fill(writer, 6)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    remove(writer, records[:1])
    monkeypatch.setattr(rewrite, "delete_replaced", lambda location, paths: None)  # "crashed" before deleting
    export_ledger(writer.ledger, str(out), now=NOW)
    assert found_in_files(out, [0])[0]  # the replaced file is still there, listed by no manifest
    monkeypatch.undo()
    fill(writer, 1, start=6)
    export_ledger(writer.ledger, str(out), now=NOW)
    assert not found_in_files(out, [0])[0]


def test_the_iceberg_table_is_rewritten_and_its_older_snapshots_expired(writer, tmp_path):
    records = fill(writer, 9)
    out = tmp_path / "ds"
    target = iceberg.default_target(str(out), tmp_path)
    export_ledger(writer.ledger, str(out), now=NOW, lakehouse=target)
    fill(writer, 3, start=9)
    export_ledger(writer.ledger, str(out), now=NOW)  # a second snapshot per table
    assert all(found_in_files(out, [0, 3]).values())
    remove(writer, [records[0], records[3]])

    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.inputs_removed is not None and result.inputs_removed["decision_rows"] == 2
    hits = found_in_files(out, list(range(12)))
    assert [index for index, files in hits.items() if files] == [1, 2, 4, 5, 6, 7, 8, 9, 10, 11]
    manifest = read_manifest(open_location(str(out)))
    iceberg.check_tables(manifest)
    assert len(iceberg.table_files(manifest, "decisions")) == len(manifest["iceberg"]["tables"]["decisions"]["files"])
    catalog = iceberg.open_catalog(target.catalog_uri, target.warehouse)
    table = catalog.load_table(manifest["iceberg"]["tables"]["decisions"]["identifier"])
    assert [snapshot.snapshot_id for snapshot in table.snapshots()] == \
        [manifest["iceberg"]["tables"]["decisions"]["snapshot_id"]]
    # the current snapshot's manifests list live files only: no deleted entry keeps an old file's bounds
    entries = [entry for manifest_file in table.current_snapshot().manifests(table.io)
               for entry in manifest_file.fetch_manifest_entry(table.io, discard_deleted=False)]
    assert {entry.status.name for entry in entries} <= {"ADDED", "EXISTING"}
    rows = table.scan().to_arrow().to_pylist()
    by_id = {row["decision_id"]: row for row in rows}
    assert by_id[records[0]["decision_id"]]["facts_json"] is None
    assert json.loads(by_id[records[1]["decision_id"]]["facts_json"])["discount_percent"] == discount(1)


def test_gate_export_applies_the_removals(backend, gate_env, tmp_path):
    writer = LedgerWriter(gate_env["GATE_DATABASE_URL"], Path(gate_env["GATE_SIGNING_KEY_FILE"]))
    try:
        records = fill(writer, 4)
        out = tmp_path / "ds"
        env = {**os.environ, **gate_env}
        first = subprocess.run([GATE, "export", "--out", str(out)], env=env, capture_output=True, text=True,
                               timeout=120)
        assert first.returncode == 0, first.stderr
        remove(writer, records[:2])
        done = subprocess.run([GATE, "export", "--out", str(out)], env=env, capture_output=True, text=True,
                              timeout=120)
    finally:
        writer.close()
    assert done.returncode == 0, done.stderr
    assert "inputs removed: 2 decisions (retention 2); 2 decision rows and 2 facts rows rewritten" in done.stdout
    assert "export run 2" in done.stdout and "inputs removed, no new rows" in done.stdout
    hits = found_in_files(out, [0, 1, 2, 3])
    assert [index for index, files in hits.items() if files] == [2, 3]


def test_a_removal_filed_behind_the_mark_is_applied_and_one_inside_the_settle_window_waits(writer, tmp_path):
    records = fill(writer, 6)  # even indexes in acme, odd in globex
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW)
    remove(writer, records[:2])  # both scopes get a mark
    export_ledger(writer.ledger, str(out), now=NOW)
    writer.clock.set(REMOVED_AT.replace(day=1))  # filed after that run, stamped before its mark
    removal = InputRemoval(writer.ledger, writer.clock)
    removal.remove("globex", [records[3]["decision_id"]], removal.cause(RETENTION, "30 days"))
    writer.clock.set(NOW.replace(minute=59, hour=23, day=31, month=5))  # inside the settle window
    removal = InputRemoval(writer.ledger, writer.clock)
    removal.remove("acme", [records[2]["decision_id"]], removal.cause(RETENTION, "30 days"))
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.inputs_removed is not None and result.inputs_removed["by_cause"] == {RETENTION: 2}
    assert [index for index, files in found_in_files(out, list(range(6))).items() if files] == [2, 4, 5]
    later = export_ledger(writer.ledger, str(out), now=NOW.replace(hour=1))
    assert later.inputs_removed is not None and later.inputs_removed["decisions"] == 1
    assert [index for index, files in found_in_files(out, list(range(6))).items() if files] == [4, 5]


def test_an_iceberg_rewrite_that_fails_before_its_manifest_leaves_the_previous_run_readable(
        writer, tmp_path, monkeypatch):
    records = fill(writer, 6)
    out = tmp_path / "ds"
    export_ledger(writer.ledger, str(out), now=NOW, lakehouse=iceberg.default_target(str(out), tmp_path))
    remove(writer, records[:2])

    def crash(*args, **kwargs):
        raise RuntimeError("killed after the Iceberg commit")

    monkeypatch.setattr(iceberg, "record_rewrite", crash)
    with pytest.raises(RuntimeError, match="killed"):
        export_ledger(writer.ledger, str(out), now=NOW)
    manifest = read_manifest(open_location(str(out)))
    assert manifest["runs"] == 1
    iceberg.check_tables(manifest)  # the manifest's snapshot and files, unexpired
    monkeypatch.undo()
    result = export_ledger(writer.ledger, str(out), now=NOW)
    assert result.run == 2 and result.inputs_removed is not None and result.inputs_removed["decision_rows"] == 2
    manifest = read_manifest(open_location(str(out)))
    iceberg.check_tables(manifest)
    assert [index for index, files in found_in_files(out, list(range(6))).items() if files] == [2, 3, 4, 5]
    target = iceberg.target_of(manifest)
    table = iceberg.open_catalog(target.catalog_uri, target.warehouse).load_table("gate.decisions")
    assert [snapshot.snapshot_id for snapshot in table.snapshots()] == \
        [manifest["iceberg"]["tables"]["decisions"]["snapshot_id"]]
