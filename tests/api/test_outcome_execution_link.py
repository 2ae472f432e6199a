"""Issue 41 item 7: an Outcome Record names the execution receipt it follows.

A client that follows the reference's lifecycle example sends the execution receipt's
`execution_receipt_id` and `execution_hash` with the outcome. Over HTTP on SQLite and
PostgreSQL: the example's outcome is stored (201) with the link, `outcome_hash` stays over the
reference's member list, the link shows in the packet and the chain view; a link that names an
unknown receipt, another decision's receipt or a wrong hash is 409
SVC_OUTCOME_EXECUTION_MISMATCH with nothing stored; the packet verifies offline through
`gate verify` (a subprocess) and fails once the link is edited.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from gate.ledger.tables import idempotency_claims, lifecycle_receipts, outcome_latest, receipt_heads
from gate.protocol.canonical import sha256_hex
from gate.receipts import OUTCOME_HASH_MEMBERS, hash_preimage, outcome_hash_of
from tests.cli_in_process import gate_in_process

pytestmark = pytest.mark.usefixtures("backend")

GATE = str(Path(sys.executable).parent / "gate")
TABLES = (lifecycle_receipts, idempotency_claims, outcome_latest, receipt_heads)


def _decide(client, api_key, sample_request):
    return client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json


def execution_example(record):
    """Every member the spec's execution request table names (the reference's example)."""
    return {
        "execution_status": "executed", "action_taken": "apply_discount", "target_system": "billing",
        "target_object_id": "sub_1042", "mutation": "discount.create", "execution_id": "job_981",
        "external_ref": "ticket_4411", "decision_record_hash": record["record_hash"],
        "decision_receipt_hash": record["receipt_hash"],
        "action_binding": record["action_binding"],
        "state_before_hash": "sha256:" + "a" * 64, "state_after_hash": "sha256:" + "b" * 64,
        "executor": {"type": "worker", "id": "billing-worker-3"},
    }


def outcome_example(record, execution):
    """The spec's outcome request members plus the execution receipt's id and hash, as the
    reference's published lifecycle example sends them."""
    return {
        "outcome_status": "succeeded", "action_taken": "apply_discount", "action_executed": True,
        "target_system": "billing", "target_object_id": "sub_1042", "mutation": "discount.create",
        "external_ref": "ticket_4411", "decision_record_hash": record["record_hash"],
        "decision_receipt_hash": record["receipt_hash"], "observed_metrics": {"margin": 31.5},
        "execution_receipt_id": execution["execution_receipt_id"],
        "execution_hash": execution["execution_hash"],
    }


def counts(app):
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return {table.name: connection.execute(select(func.count()).select_from(table)).scalar()
                for table in TABLES}


def post(client, api_key, record, path, body, key=None):
    headers = {"x-api-key": api_key, **({"x-idempotency-key": key} if key else {})}
    return client.post(f"/api/decision/{record['decision_id']}/{path}", json=body, headers=headers)


@pytest.fixture
def lifecycle(client, api_key, sample_request):
    """A decision with one execution receipt (the example's)."""
    record = _decide(client, api_key, sample_request)
    execution = post(client, api_key, record, "execution", execution_example(record))
    assert execution.status_code == 201, execution.json
    return record, execution.json["execution"]


def test_the_reference_example_is_stored_with_its_link(app, client, api_key, lifecycle):
    record, execution = lifecycle
    created = post(client, api_key, record, "outcome", outcome_example(record, execution), key="out-1")
    assert created.status_code == 201, created.json
    outcome = created.json["outcome"]
    assert outcome["execution_receipt_id"] == execution["execution_receipt_id"]
    assert outcome["execution_hash"] == execution["execution_hash"]
    # outcome_hash is over the reference's list: the link is beside it, not in it.
    assert outcome["outcome_hash"] == outcome_hash_of(outcome) == created.headers["x-decision-outcome-hash"]
    unlinked = {name: value for name, value in outcome.items() if name not in ("execution_receipt_id", "execution_hash")}
    assert outcome_hash_of(unlinked) == outcome["outcome_hash"]
    assert outcome["outcome_hash"] == sha256_hex(hash_preimage(outcome, OUTCOME_HASH_MEMBERS))

    listed = client.get(f"/api/decision/{record['decision_id']}/outcome", headers={"x-api-key": api_key}).json
    assert listed["outcome_records"] == [outcome]
    packet = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key}).json
    assert packet["outcome_records"] == [outcome]
    chain = client.get(f"/api/decision/chains/{record['audit_chain']['chain_id']}",
                       headers={"x-api-key": api_key}).json
    assert chain["execution_links"] == [{
        "chain_position": record["audit_chain"]["chain_position"], "decision_id": record["decision_id"],
        "outcome_id": outcome["outcome_id"], "outcome_hash": outcome["outcome_hash"],
        "execution_receipt_id": execution["execution_receipt_id"],
        "execution_hash": execution["execution_hash"], "valid": True}]
    assert chain["verification"]["checks"]["execution_links"] is True and chain["verification"]["valid"]
    hosted = client.get(f"/api/decision/{record['decision_id']}/verify", headers={"x-api-key": api_key}).json
    assert hosted["verified"] is True, hosted


def test_an_idempotent_retry_replays_the_linked_outcome(app, client, api_key, lifecycle):
    record, execution = lifecycle
    body = outcome_example(record, execution)
    created = post(client, api_key, record, "outcome", body, key="out-2")
    before = counts(app)
    replayed = post(client, api_key, record, "outcome", body, key="out-2")
    assert replayed.status_code == 200 and replayed.headers["x-idempotency-status"] == "replayed"
    assert replayed.get_data() == created.get_data()
    assert counts(app) == before
    # The link is part of the payload the key was used with.
    other = post(client, api_key, record, "execution", execution_example(record)).json["execution"]
    moved = post(client, api_key, record, "outcome", outcome_example(record, other), key="out-2")
    assert moved.status_code == 409 and moved.json["error"] == "SVC_OUTCOME_IDEMPOTENCY_CONFLICT"


def _wrong_hash(client, api_key, sample_request, record, execution):
    return {**outcome_example(record, execution), "execution_hash": "f" * 64}


def _other_decisions_receipt(client, api_key, sample_request, record, execution):
    other = _decide(client, api_key, sample_request)
    receipt = post(client, api_key, other, "execution", execution_example(other)).json["execution"]
    return outcome_example(record, receipt)


def _unknown_receipt(client, api_key, sample_request, record, execution):
    return {**outcome_example(record, execution), "execution_receipt_id": "exe_" + "0" * 24}


def _an_outcome_id(client, api_key, sample_request, record, execution):
    outcome = post(client, api_key, record, "outcome", {"outcome_status": "pending"}).json["outcome"]
    return {**outcome_example(record, execution), "execution_receipt_id": outcome["outcome_id"],
            "execution_hash": outcome["outcome_hash"]}


@pytest.mark.parametrize("make_body", [_wrong_hash, _other_decisions_receipt, _unknown_receipt, _an_outcome_id],
                         ids=["wrong-hash", "other-decision", "unknown-id", "not-an-execution"])
def test_a_link_to_no_execution_of_this_decision_is_refused_and_nothing_stored(
        app, client, api_key, sample_request, lifecycle, make_body):
    record, execution = lifecycle
    body = make_body(client, api_key, sample_request, record, execution)
    before = counts(app)
    for key in (None, "out-refused"):
        refused = post(client, api_key, record, "outcome", body, key=key)
        assert refused.status_code == 409, refused.json
        assert refused.json["error"] == "SVC_OUTCOME_EXECUTION_MISMATCH"
        assert refused.json["v"] == "execution_mismatch" and refused.json["c"] == "unclear"
        assert refused.json["supplied"] == {"execution_receipt_id": body["execution_receipt_id"],
                                            "execution_hash": body["execution_hash"]}
        assert counts(app) == before
    # The key was never claimed: the corrected outcome is created under it.
    fixed = post(client, api_key, record, "outcome", outcome_example(record, execution), key="out-refused")
    assert fixed.status_code == 201


def test_the_wrong_hash_answer_names_the_receipts_hash(client, api_key, lifecycle):
    record, execution = lifecycle
    refused = post(client, api_key, record, "outcome", {**outcome_example(record, execution), "execution_hash": "f" * 64})
    assert refused.json["fields"] == ["execution_hash"]
    assert refused.json["expected"] == {"execution_receipt_id": execution["execution_receipt_id"],
                                        "execution_hash": execution["execution_hash"]}


@pytest.mark.parametrize("missing", ["execution_receipt_id", "execution_hash"])
def test_half_a_link_is_request_invalid(app, client, api_key, lifecycle, missing):
    record, execution = lifecycle
    body = outcome_example(record, execution)
    del body[missing]
    before = counts(app)
    refused = post(client, api_key, record, "outcome", body)
    assert refused.status_code == 400 and refused.json["error"] == "REQUEST_INVALID"
    assert {"field": missing, "code": "missing_field"}.items() <= refused.json["errors"][0].items()
    assert counts(app) == before


def test_an_outcome_without_a_link_is_unchanged(client, api_key, lifecycle):
    record, _ = lifecycle
    outcome = post(client, api_key, record, "outcome", {"outcome_status": "succeeded"}).json["outcome"]
    assert "execution_receipt_id" not in outcome and "execution_hash" not in outcome
    chain = client.get(f"/api/decision/chains/{record['audit_chain']['chain_id']}", headers={"x-api-key": api_key}).json
    assert chain["execution_links"] == [] and chain["verification"]["valid"] is True


def _sql(app, statement, **params):
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(text(statement), params)


def test_an_edited_stored_link_is_named_by_the_chain_view_and_hosted_verify(app, client, api_key, lifecycle):
    record, execution = lifecycle
    post(client, api_key, record, "outcome", outcome_example(record, execution))
    _sql(app, "UPDATE lifecycle_receipts SET execution_hash = :h WHERE kind = 'outcome'", h="e" * 64)
    chain = client.get(f"/api/decision/chains/{record['audit_chain']['chain_id']}", headers={"x-api-key": api_key}).json
    assert chain["execution_links"][0]["valid"] is False
    assert chain["verification"]["checks"]["execution_links"] is False and chain["verification"]["valid"] is False
    hosted = client.get(f"/api/decision/{record['decision_id']}/verify", headers={"x-api-key": api_key}).json
    assert hosted["verified"] is False
    # The row no longer repeats its receipt's link, and the row seal covers the link columns.
    assert {"outcome_records[0].ledger_row", "receipt_chain.row_hash"} <= set(hosted["receipt_failures"])


def _gate(args, process=True):
    """`gate ARGS` as a subprocess; `process=False` in process (tests.cli_in_process), for the
    edited packets' `gate verify` runs after the first run here proved the entry point."""
    if not process:
        return gate_in_process(args)
    return subprocess.run([GATE, *args], env=dict(os.environ), capture_output=True, text=True, timeout=120)


def _write_packet(path, packet):
    body = {name: value for name, value in packet.items() if name != "packet_hash"}
    path.write_text(json.dumps({**body, "packet_hash": sha256_hex(body)}))


def test_the_packet_verifies_offline_and_an_edited_link_fails(client, api_key, lifecycle, tmp_path):
    record, execution = lifecycle
    second = post(client, api_key, record, "execution", execution_example(record)).json["execution"]
    post(client, api_key, record, "outcome", outcome_example(record, execution))
    packet = client.get(f"/api/decision/{record['decision_id']}/packet", headers={"x-api-key": api_key}).json
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(client.get("/api/decision/receipt-keys").json))
    _write_packet(tmp_path / "packet.json", packet)
    done = _gate(["verify", str(tmp_path / "packet.json"), "--key-registry", str(registry), "--json"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["verified"] is True

    # Each edit keeps packet_hash right (recomputed), so only the link check can catch it.
    for edit in ({"execution_hash": "f" * 64},
                 {"execution_receipt_id": "exe_" + "1" * 24},
                 {"execution_receipt_id": second["execution_receipt_id"]},
                 {"execution_hash": None}):
        edited = json.loads(json.dumps(packet))
        edited["outcome_records"][0].update(edit)
        _write_packet(tmp_path / "edited.json", edited)
        done = _gate(["verify", str(tmp_path / "edited.json"), "--key-registry", str(registry), "--json"], process=False)
        assert done.returncode == 1, (edit, done.stdout)
        result = json.loads(done.stdout)
        assert "outcome_records[0].execution_link" in result["failed_checks"], edit
        assert "packet_hash" not in result["failed_checks"]


def crm_sync_example(record):
    """Every member the spec's CRM sync request list names, and `field_mapping` (reference facts §6)."""
    return {
        "sync_status": "written", "sync_direction": "writeback", "crm_provider": "hubspot",
        "crm_object_type": "deal", "crm_object_id": "deal_77", "crm_record_url": "https://crm.example/deals/77",
        "decision_record_hash": record["record_hash"], "decision_receipt_hash": record["receipt_hash"],
        "decision_verdict": record["verdict"], "decision_action": record["action"],
        "policy_id": record["policy_id"], "policy_version": record["policy_version"],
        "field_mapping": {"verdict": "gate_verdict__c"},
    }


EXAMPLES = {"execution": lambda record, execution: execution_example(record), "outcome": outcome_example,
            "crm-sync": lambda record, execution: crm_sync_example(record)}


@pytest.mark.parametrize("path, wrapper", [("execution", "execution"), ("outcome", "outcome"),
                                           ("crm-sync", "crm_sync")])
def test_every_member_the_reference_names_is_accepted(client, api_key, lifecycle, path, wrapper):
    """docs/receipts.md §8: each write route takes every member of the reference's published
    request lists (and the path's decision_id) and stores what it was told."""
    record, execution = lifecycle
    body = {"decision_id": record["decision_id"], **EXAMPLES[path](record, execution)}
    created = post(client, api_key, record, path, body)
    assert created.status_code == 201, created.json
    stored = created.json[wrapper]
    assert {name: stored.get(name) for name in body} == body


def test_a_link_outside_a_truncated_packet_fails_closed_and_a_wider_export_verifies(client, api_key, lifecycle):
    record, execution = lifecycle
    post(client, api_key, record, "execution", execution_example(record))  # newer: the one a limit of 1 keeps
    post(client, api_key, record, "outcome", outcome_example(record, execution))
    url = f"/api/decision/{record['decision_id']}/packet"
    narrow = client.get(url + "?execution_limit=1", headers={"x-api-key": api_key}).json
    assert narrow["packet_manifest"]["truncated"]["execution_receipts"] is True
    result = client.post("/api/decision/packet/verify", json={"packet": narrow}).json
    assert result["failed_checks"] == ["outcome_records", "outcome_records[0].execution_link"]
    assert "execution_limit" in result["expected"]["outcome_records[0].execution_link"]
    wide = client.get(url + "?execution_limit=2", headers={"x-api-key": api_key}).json
    assert client.post("/api/decision/packet/verify", json={"packet": wide}).json["failed_checks"] == []
