"""Ledger rows → Arrow tables: exact schemas, values read from the stored records, facts as
canonical JSON, timestamps in UTC milliseconds."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from gate.ledger import stream
from gate.protocol.canonical import canonical_text
from gate.receipts import outcome_hash_of
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.dataset import convert
from workbench.dataset.schema import (
    CHAIN_LINKS,
    DECISION_ANALYSIS_COLUMNS,
    DECISIONS,
    EXECUTIONS,
    TABLES,
    with_partitions,
)


@pytest.fixture
def writer(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def rows_of(batches):
    return [row for batch in batches for row in batch]


def test_decisions_table_has_the_schema_and_the_record_values(writer):
    yes = writer.decide("acme", at(3, 31, 23, 59, 999))
    no = writer.decide("acme", at(4, 1), discount=40)
    table = convert.decisions_table(rows_of(stream.iter_decisions(writer.ledger)))
    assert table.schema == with_partitions(DECISIONS)
    got = {row["decision_id"]: row for row in table.to_pylist()}
    first = got[yes["decision_id"]]
    assert first["verdict"] == "yes" and first["matched_rule_id"] == "approve_owner_backed"
    assert first["reason_code"] == "WITHIN_DISCOUNT_POLICY" and first["action"] == "apply_discount"
    assert first["application_verdict"] == "APPROVE" and first["evidence"] == ["WITHIN_DISCOUNT_POLICY"]
    assert first["binding_mode"] == "direct_declarative_rulebook"
    assert first["record_hash"] == yes["record_hash"] and first["receipt_hash"] == yes["receipt_hash"]
    assert first["input_hash"] == yes["input_hash"] and first["policy_bundle_hash"] == yes["policy_bundle_hash"]
    assert first["policy_id"] == "pricing_exception" and first["policy_version"] == "2026-11-01"
    assert first["chain_position"] == 1 and first["scope"] == "acme" and first["month"] == "2026-03"
    assert first["created_at"].isoformat() == "2026-03-31T23:59:00.999000+00:00"
    assert first["facts_json"] == canonical_text(
        {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"})
    second = got[no["decision_id"]]
    assert second["verdict"] == "no" and second["matched_rule_id"] == "block_deep_discount"
    assert second["month"] == "2026-04" and json.loads(second["facts_json"])["discount_percent"] == 40


def test_default_outcome_has_no_matched_rule_and_adapter_facts_are_used(writer):
    record = writer.decide("acme", at(1, 2), discount=22)  # no rule matches: default outcome
    row = rows_of(stream.iter_decisions(writer.ledger))[0]
    assert convert.decisions_table([row]).to_pylist()[0]["matched_rule_id"] is None
    assert record["reason_code"] == "NO_RULE_MATCHED"
    # Adapter mode: no context.inputs, the record's adapter_facts are the facts.
    stored = json.loads(row["record_json"])
    stored["adapter_facts"] = {"b": 2, "a": 1}
    request = json.loads(row["request_json"])
    del request["context"]["inputs"]
    adapted = dict(row, record_json=json.dumps(stored), request_json=json.dumps(request))
    assert convert.decisions_table([adapted]).to_pylist()[0]["facts_json"] == '{"a":1,"b":2}'
    del stored["adapter_facts"]
    bare = dict(adapted, record_json=json.dumps(stored))
    assert convert.decisions_table([bare]).to_pylist()[0]["facts_json"] is None


def test_receipts_and_chain_links_tables(writer):
    record = writer.decide("globex", at(2, 28, 23))
    outcome = writer.receipt("outcome", "globex", record, at(3, 1), "reverted")
    sync = writer.receipt("crm_sync", "globex", record, at(3, 2), "conflict")
    outcomes = convert.receipts_table(rows_of(stream.iter_receipts(writer.ledger, "outcome")))
    assert outcomes.schema == with_partitions(EXECUTIONS)
    [row] = outcomes.to_pylist()
    assert row["receipt_id"] == outcome["outcome_id"] and row["status"] == "reverted"
    assert row["receipt_hash"] == outcome["outcome_hash"] and row["month"] == "2026-03"
    assert json.loads(row["receipt_json"]) == outcome and row["decision_id"] == record["decision_id"]
    assert outcome_hash_of(json.loads(row["receipt_json"])) == row["receipt_hash"]
    [srow] = convert.receipts_table(rows_of(stream.iter_receipts(writer.ledger, "crm_sync"))).to_pylist()
    assert srow["status"] == "conflict" and srow["receipt_id"] == sync["sync_id"]
    links = convert.chain_links_table(rows_of(stream.iter_chain_decisions(writer.ledger, "globex")))
    assert links.schema == with_partitions(CHAIN_LINKS)
    [link] = links.to_pylist()
    chain = record["audit_chain"]
    assert link["chain_position"] == 1 and link["decision_id"] == record["decision_id"]
    assert link["merkle_root"] == stream.chain_heads_of(writer.ledger, "globex")[0]["merkle_root"]
    assert link["month"] == "2026-02" and chain["chain_id"] == link["chain_id"]


def test_empty_batches_give_empty_tables_of_every_schema():
    for name, schema in TABLES.items():
        assert convert.empty_table(name).schema == with_partitions(schema)
    assert convert.decisions_table([]).num_rows == 0
    assert convert.receipts_table([]).schema == with_partitions(EXECUTIONS)
    assert isinstance(convert.chain_links_table([]), pa.Table)


def test_analysis_columns_are_decision_columns_in_table_order():
    # The one list the rollups, the dashboard's recent reads and the dry-run read.
    assert [name for name in DECISIONS.names if name in DECISION_ANALYSIS_COLUMNS] == list(DECISION_ANALYSIS_COLUMNS)


def test_frame_of_keeps_the_arrow_types():
    table = convert.decisions_table([])
    frame = convert.frame_of(table)
    assert frame.columns == table.column_names and frame.height == 0
    assert str(frame.schema["created_at"]) == "Datetime(time_unit='ms', time_zone='UTC')"
