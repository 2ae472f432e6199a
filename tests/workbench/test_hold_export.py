"""The export carries held actions (issue 43, item 6): the `holds` table (one row per hold state the
export saw, read back as one row per hold) and the `hold_events` table (the scope's signed hold
chain), listed and digested in the signed manifest like the record tables; a dataset written
before them still loads (empty frames) and its next export backfills them."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime

import polars as pl
import pytest

from gate.holds import events as hold_events
from gate.vocabulary import HOLD_STATES
from tests.workbench.hold_support import HoldWriter
from tests.workbench.ledger_support import at
from workbench.dataset import integrity
from workbench.dataset.export import export_ledger
from workbench.dataset.load import DatasetError as LoadError
from workbench.dataset.load import holds_from_dataset, scan_table
from workbench.dataset.location import open_location, read_manifest, write_manifest
from workbench.dataset.schema import HOLD_TABLES

POLICY = "pricing_exception"
FIRST = datetime(2026, 3, 1, tzinfo=UTC)
SECOND = datetime(2026, 3, 2, tzinfo=UTC)


@pytest.fixture
def writer(database_url, tmp_path):
    writer = HoldWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def seed(writer):
    """Four held decisions in acme (one approved, one denied, one expired by the clock, one open)
    and one decision that is not held; an outcome of the approved one."""
    held = [writer.held("acme", at(1, 1 + i)) for i in range(4)]
    writer.decide("acme", at(1, 9))  # approved by the rulebook: no hold
    writer.approve("acme", held[0], at(1, 1, 15))
    writer.deny("acme", held[1], at(1, 2, 13))
    assert writer.sweep(at(1, 4, 11)) == 0  # nothing due yet
    assert writer.sweep(at(1, 4, 13)) == 1  # held[2] (opened 01-03 12:00) passed its one-day deadline
    writer.receipt("outcome", "acme", held[0], at(1, 20), "failed")
    return held


def export(writer, root, now):
    return export_ledger(writer.ledger, str(root), now=now, settle_seconds=0, signer=writer.signing.receipt_signer())


def states(root, writer):
    frames = holds_from_dataset(root, policy_id=POLICY, trust=writer.signing.trust_anchors())
    return {row["decision_id"]: row for row in frames.holds.collect().iter_rows(named=True)}, frames


def test_hold_states_agree_with_the_holds_module():
    assert HOLD_STATES == hold_events.STATES


def test_the_export_lists_holds_and_hold_events_in_the_signed_manifest(writer, tmp_path):
    held = seed(writer)
    root = tmp_path / "ds"
    manifest = export(writer, root, FIRST).manifest
    assert manifest["tables"]["holds"]["rows"] == 4 and manifest["tables"]["hold_events"]["rows"] == 3
    # The manifest verifies with the gate's keys and every listed file, hold tables included, matches it.
    assert integrity.signature_problem(manifest, writer.signing.trust_anchors()) is None
    listed = list(integrity.iter_all(manifest))
    assert {entry.kind for entry in listed} >= set(HOLD_TABLES)
    assert len(integrity.check_files(open_location(str(root)), listed)) == len(listed)
    # The hold chain's head the dataset was cut at, and the watermark the next run starts from.
    chain = writer.holds.history_document("acme")["events"]
    assert manifest["hold_chains"]["acme"] == {"seq": 3, "head_event_hash": chain[-1]["event_hash"],
                                               "as_of": "2026-03-01T00:00:00.000Z"}
    assert manifest["watermarks"]["acme"]["hold_seq"] == 3
    rows, frames = states(root, writer)
    assert frames.as_of == FIRST
    assert {rows[r["decision_id"]]["state"] for r in held} == set(HOLD_STATES)
    approved = rows[held[0]["decision_id"]]
    assert (approved["state"], approved["resolved_by"], approved["approvals"], approved["approvals_needed"]) == \
        ("approved", "key_reviewer", 1, 1)
    assert approved["resolved_at"] == at(1, 1, 15) and approved["opened_at"] == at(1, 1)
    assert (approved["rule_id"], approved["queue"], approved["record_hash"]) == \
        ("review_thin_margin", "default", held[0]["record_hash"])
    assert rows[held[2]["decision_id"]]["resolved_by"] == "clock"
    assert rows[held[3]["decision_id"]]["resolved_at"] is None
    # The held decisions' outcome records come with the holds (and only theirs).
    assert frames.outcomes.collect()["decision_id"].to_list() == [held[0]["decision_id"]]
    # The hold events are the scope's signed chain, each event as stored.
    events = scan_table(root, "hold_events").sort("seq").collect()
    assert [json.loads(text) for text in events["event_json"]] == chain
    # A decision's events, read back from the dataset, verify offline with the gate's keys.
    mine = [json.loads(text) for text in events.filter(pl.col("decision_id") == held[0]["decision_id"])["event_json"]]
    assert hold_events.hold_events_problems(held[0], mine, writer.signing.trust_anchors()) == []
    assert events.select("action", "vote", "outcome", "actor_kind", "actor").rows() == [
        ("vote", "approve", "approved", "api_key", "key_reviewer"),
        ("vote", "deny", "denied", "api_key", "key_reviewer"),
        ("expire", None, "expired", "clock", "clock")]


def test_a_later_run_appends_the_changed_and_new_holds_and_readers_see_one_row_each(writer, tmp_path):
    held = seed(writer)
    root = tmp_path / "ds"
    export(writer, root, FIRST)
    writer.approve("acme", held[3], at(1, 4, 20))  # the open hold closes (before its deadline, 01-05 12:00)
    later = writer.held("acme", at(2, 2))  # a new held decision
    second = export(writer, root, SECOND)
    assert second.new_rows["holds"] == 2 and second.new_rows["hold_events"] == 1 and second.new_rows["decisions"] == 1
    assert second.manifest["tables"]["holds"]["rows"] == 6
    rows, frames = states(root, writer)
    assert len(rows) == 5 and frames.as_of == SECOND
    assert rows[held[3]["decision_id"]]["state"] == "approved" and rows[later["decision_id"]]["state"] == "open"
    # Nothing new: nothing is written.
    assert export(writer, root, SECOND).run is None


def test_a_dataset_without_hold_tables_loads_empty_and_its_next_export_backfills_them(writer, tmp_path):
    held = seed(writer)
    root = tmp_path / "ds"
    manifest = export(writer, root, FIRST).manifest
    # As an export of an earlier release wrote it: no hold tables, no hold watermark, no hold cut.
    for name in HOLD_TABLES:
        del manifest["tables"][name]
        shutil.rmtree(root / name)
    del manifest["hold_chains"]
    del manifest["watermarks"]["acme"]["hold_seq"]
    manifest["previous_dataset_hash"] = manifest["dataset_hash"]
    write_manifest(open_location(str(root)), integrity.seal(manifest, writer.signing.receipt_signer()))
    rows, frames = states(root, writer)
    assert rows == {} and frames.outcomes.collect().height == 0 and frames.as_of == FIRST
    backfilled = export(writer, root, SECOND)
    assert backfilled.new_rows["decisions"] == 0
    assert backfilled.new_rows["holds"] == 4 and backfilled.new_rows["hold_events"] == 3
    rows, _ = states(root, writer)
    assert sorted(rows) == sorted(r["decision_id"] for r in held)
    assert read_manifest(open_location(str(root)))["watermarks"]["acme"]["hold_seq"] == 3


def test_a_changed_hold_file_refuses_the_dataset(writer, tmp_path):
    seed(writer)
    root = tmp_path / "ds"
    export(writer, root, FIRST)
    part = next((root / "holds").rglob("*.parquet"))
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(LoadError, match="does not match its sha256"):
        states(root, writer)


def test_the_approvals_column_counts_the_closing_vote_once_whether_the_row_lists_it_or_not():
    """Since issue 56 an approved hold's row lists its closing vote; a row stored before lists only
    the votes before it. Both count every approval, once."""
    from workbench.dataset.convert import holds_table
    vote = {"actor": "key_a", "holder": "key:key_a", "event_hash": "e1"}
    base = {"decision_id": "dec_1", "scope": "acme", "policy_id": POLICY, "policy_version": "1",
            "rule_id": "review_thin_margin", "reason_code": "R", "queue": "default", "priority": "normal",
            "opened_at": "2026-03-01T00:00:00.000Z", "deadline_at": "2026-03-02T00:00:00.000Z",
            "resolved_at": "2026-03-01T01:00:00.000Z", "resolved_by": "key_b", "record_hash": "h",
            "last_event_seq": 2, "approvals_needed": 2}
    rows = [{**base, "state": "approved", "approvals_json": json.dumps([vote, {**vote, "event_hash": "e2"}])},
            {**base, "state": "approved", "approvals_json": json.dumps([vote])},
            {**base, "state": "denied", "approvals_json": json.dumps([vote])},
            {**base, "state": "open", "approvals_json": "[]", "resolved_at": None, "resolved_by": None}]
    assert holds_table(rows).column("approvals").to_pylist() == [2, 2, 1, 0]
