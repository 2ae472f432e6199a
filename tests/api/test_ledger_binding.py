"""Issue 6 defect 4: hosted verify binds the stored record to its row, and the row's own columns
and its decision's receipt rows to the row seals. Each test tampers with the stored rows by SQL,
on SQLite and PostgreSQL, and asserts the named failed check over HTTP."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, select, update

from gate.chain.rowseal import decision_row_hash, receipt_head_payload
from gate.ledger.tables import (
    chain_heads,
    chain_links,
    decisions,
    lifecycle_receipts,
    receipt_heads,
)

pytestmark = pytest.mark.usefixtures("backend")

OUTCOME = {"outcome_status": "succeeded", "action_executed": True, "observed_metrics": {"margin": 31.5}}


def decide(client, key, request, idempotency_key=None):
    headers = {"x-api-key": key} | ({"x-idempotency-key": idempotency_key} if idempotency_key else {})
    response = client.post("/api/decide", json=request, headers=headers)
    assert response.status_code == 200, response.json
    return response.json


def verify(client, key, decision_id):
    response = client.get(f"/api/decision/{decision_id}/verify", headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def sql(app, statement):
    with app.extensions["gate"].ledger.engine.begin() as connection:
        return connection.execute(statement)


def row(app, decision_id):
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return dict(connection.execute(select(decisions).where(decisions.c.decision_id == decision_id))
                    .mappings().one())


def outcome(client, key, record):
    response = client.post(f"/api/decision/{record['decision_id']}/outcome",
                           json=dict(OUTCOME, decision_record_hash=record["record_hash"]),
                           headers={"x-api-key": key})
    assert response.status_code == 201, response.json
    return response.json["outcome"]


def test_untampered_rows_verify_with_every_ledger_check_true(client, api_key, sample_request):
    record = decide(client, api_key, sample_request, idempotency_key="k-1")
    outcome(client, api_key, record)
    outcome(client, api_key, record)
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is True, body["failed_checks"]
    for name in ("ledger_decision_id", "ledger_scope", "ledger_chain_position", "ledger_columns",
                 "ledger_row_hash", "ledger_row_signature", "receipt_chain"):
        assert body["checks"][name] is True, name
    assert body["ledger_column_mismatches"] == [] and body["receipt_failures"] == []


def test_another_decisions_record_copied_onto_a_row_is_named_and_not_served(app, client, api_key, sample_request):
    x = decide(client, api_key, sample_request)
    y = decide(client, api_key, sample_request)
    source = row(app, y["decision_id"])
    sql(app, update(decisions).where(decisions.c.decision_id == x["decision_id"]).values(
        **{name: source[name] for name in ("record_json", "request_json", "input_hash", "record_hash",
                                           "receipt_hash", "created_at", "row_hash", "row_signature")}))
    body = verify(client, api_key, x["decision_id"])
    assert body["verified"] is False
    assert {"ledger_decision_id", "ledger_chain_position", "ledger_row_hash"} <= set(body["failed_checks"])
    # The record is no longer served under the foreign id, nor as a packet, nor receipted.
    headers = {"x-api-key": api_key}
    assert client.get(f"/api/decision/{x['decision_id']}", headers=headers).status_code == 404
    assert client.get(f"/api/decision/{x['decision_id']}/packet", headers=headers).status_code == 404
    assert client.post(f"/api/decision/{x['decision_id']}/outcome", headers=headers,
                       json=dict(OUTCOME, decision_record_hash=y["record_hash"])).status_code == 404
    # The untouched decision still verifies.
    assert verify(client, api_key, y["decision_id"])["verified"] is True


def test_a_row_moved_to_another_scope_is_neither_readable_nor_verified_there(app, client, issue_key, api_key,
                                                                             sample_request):
    record = decide(client, api_key, sample_request)
    other = issue_key(scope="tenant_b")["api_key"]
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(scope="tenant_b"))
    headers = {"x-api-key": other}
    assert client.get(f"/api/decision/{record['decision_id']}", headers=headers).status_code == 404
    assert client.get(f"/api/decision/{record['decision_id']}/packet", headers=headers).status_code == 404
    body = verify(client, other, record["decision_id"])
    assert body["verified"] is False
    assert {"ledger_scope", "ledger_row_hash"} <= set(body["failed_checks"])
    # The owner's chain view names the decision that left its scope.
    chain_id = record["audit_chain"]["chain_id"]
    view = client.get(f"/api/decision/chains/{chain_id}", headers={"x-api-key": api_key}).json
    assert view["verification"]["valid"] is False
    assert view["verification"]["checks"]["decision_hashes"] is False


def test_a_chain_head_relabelled_to_another_scope_is_not_served_there(app, client, issue_key, api_key,
                                                                      sample_request):
    record = decide(client, api_key, sample_request)
    chain_id = record["audit_chain"]["chain_id"]
    other = issue_key(scope="tenant_b")["api_key"]
    sql(app, update(chain_heads).where(chain_heads.c.chain_id == chain_id).values(scope="tenant_b"))
    assert client.get(f"/api/decision/chains/{chain_id}", headers={"x-api-key": other}).status_code == 404
    body = verify(client, api_key, record["decision_id"])
    assert "ledger_scope" in body["failed_checks"]


def test_a_link_moved_to_another_position_is_named(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    sql(app, update(chain_links).where(chain_links.c.decision_id == record["decision_id"]).values(chain_position=7))
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is False and "ledger_chain_position" in body["failed_checks"]


@pytest.mark.parametrize("column, value, named", [
    ("verdict", "no", "ledger_columns"),
    ("policy_id", "another_policy", "ledger_columns"),
    ("policy_version", "9.9.9", "ledger_columns"),
    ("created_at", "2020-01-01T00:00:00.000Z", "ledger_columns"),
    ("policy_bundle_hash", "f" * 64, "ledger_columns"),
    ("rulebook_hash", "e" * 64, "ledger_columns"),
    ("idempotency_key", "forged-key", "ledger_columns"),
    ("key_id", "key_forged", "ledger_row_hash"),
])
def test_an_edited_column_is_named(app, client, api_key, sample_request, column, value, named):
    record = decide(client, api_key, sample_request)
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(**{column: value}))
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is False
    assert {named, "ledger_row_hash"} <= set(body["failed_checks"])
    if named == "ledger_columns":
        assert body["ledger_column_mismatches"] == [column]
    # Re-hashing the row (an unkeyed hash anyone can recompute) still leaves the signature.
    edited = row(app, record["decision_id"])
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(
        row_hash=decision_row_hash(edited)))
    body = verify(client, api_key, record["decision_id"])
    assert "ledger_row_signature" in body["failed_checks"] and "ledger_row_hash" not in body["failed_checks"]


def test_a_removed_row_signature_is_named(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(row_signature=None))
    assert "ledger_row_signature" in verify(client, api_key, record["decision_id"])["failed_checks"]


def test_the_public_bundle_lookup_reads_the_record_not_the_columns(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    bundle_hash = record["policy_bundle_hash"]
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(
        policy_id="forged", policy_version="0", created_at="2000-01-01T00:00:00.000Z", rulebook_hash="0" * 64))
    found = client.get(f"/api/decision/policy-bundles?hash={bundle_hash}").json["policy_bundle"]
    assert (found["id"], found["version"], found["rulebook_hash"], found["first_seen_at"]) == (
        record["policy_id"], record["policy_version"], record["policy_hash"], record["created_at"])
    # A column pointed at an invented hash does not make that hash known.
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(
        policy_bundle_hash="d" * 64))
    assert client.get(f"/api/decision/policy-bundles?hash={'d' * 64}").status_code == 404


def test_a_deleted_outcome_row_is_named(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    first = outcome(client, api_key, record)
    outcome(client, api_key, record)
    sql(app, delete(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == first["outcome_id"]))
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is False and "receipt_chain" in body["failed_checks"]
    assert {"receipt_chain.count", "receipt_chain.sequence"} <= set(body["receipt_failures"])


def test_a_deleted_newest_outcome_with_its_head_rolled_back_is_named(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    first = outcome(client, api_key, record)
    last = outcome(client, api_key, record)
    sql(app, delete(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == last["outcome_id"]))
    assert "receipt_chain.count" in verify(client, api_key, record["decision_id"])["receipt_failures"]
    # The attacker also rolls the head back to the remaining row, but cannot sign it.
    with app.extensions["gate"].ledger.engine.connect() as connection:
        remaining = connection.execute(select(lifecycle_receipts.c.row_hash).where(
            lifecycle_receipts.c.receipt_id == first["outcome_id"])).scalar()
    sql(app, update(receipt_heads).where(receipt_heads.c.decision_id == record["decision_id"]).values(
        count=1, head_row_hash=remaining))
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is False and body["receipt_failures"] == ["receipt_chain.signature"]
    # Nor can it pass an unknown key off as the signer.
    sql(app, update(receipt_heads).where(receipt_heads.c.decision_id == record["decision_id"]).values(
        key_id="key_unknown", signature="ed25519:" + "A" * 86))
    assert verify(client, api_key, record["decision_id"])["receipt_failures"] == ["receipt_chain.signature"]
    assert receipt_head_payload(record["decision_id"], 1, remaining, "x") != receipt_head_payload(
        record["decision_id"], 2, remaining, "x")


def test_a_receipt_pointed_at_another_decision_is_named_on_both(app, client, api_key, sample_request):
    x = decide(client, api_key, sample_request)
    y = decide(client, api_key, sample_request)
    moved = outcome(client, api_key, x)
    outcome(client, api_key, y)
    sql(app, update(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == moved["outcome_id"])
        .values(decision_id=y["decision_id"], sequence=2))
    left = verify(client, api_key, x["decision_id"])
    assert left["verified"] is False and "receipt_chain.count" in left["receipt_failures"]
    arrived = verify(client, api_key, y["decision_id"])
    assert arrived["verified"] is False
    assert {"receipt_chain", "lifecycle_receipts"} <= set(arrived["failed_checks"])
    assert {"receipt_chain.count", "receipt_chain.row_hash"} <= set(arrived["receipt_failures"])


@pytest.mark.parametrize("column, value", [
    ("reported_at", "2020-01-01T00:00:00.000Z"), ("kind", "execution"), ("scope", "tenant_b"),
    ("idempotency_key", "forged"), ("sequence", 5),
])
def test_an_edited_receipt_column_is_named(app, client, api_key, sample_request, column, value):
    record = decide(client, api_key, sample_request)
    receipt = outcome(client, api_key, record)
    sql(app, update(lifecycle_receipts).where(lifecycle_receipts.c.receipt_id == receipt["outcome_id"])
        .values(**{column: value}))
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is False and "receipt_chain" in body["failed_checks"]
    assert "receipt_chain.row_hash" in body["receipt_failures"]


def test_receipt_rows_carry_a_contiguous_chain(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    for _ in range(3):
        outcome(client, api_key, record)
    with app.extensions["gate"].ledger.engine.connect() as connection:
        rows = connection.execute(select(lifecycle_receipts).order_by(lifecycle_receipts.c.sequence)).mappings().all()
        head = connection.execute(select(receipt_heads)).mappings().one()
    assert [r["sequence"] for r in rows] == [1, 2, 3]
    assert [r["previous_row_hash"] for r in rows] == [None, rows[0]["row_hash"], rows[1]["row_hash"]]
    assert head["count"] == 3 and head["head_row_hash"] == rows[2]["row_hash"]
    assert head["signature"].startswith("ed25519:")
    assert json.loads(rows[0]["receipt_json"])["decision_id"] == record["decision_id"]


def test_hmac_signed_rows_and_receipt_heads_verify_and_their_tampering_is_named(make_app, api_key, sample_request):
    app = make_app(hmac_secret=b"ledger-binding-test-secret")
    client = app.test_client()
    record = decide(client, api_key, sample_request)
    assert record["receipt_signature_algorithm"] == "hmac-sha256"
    outcome(client, api_key, record)
    outcome(client, api_key, record)
    body = verify(client, api_key, record["decision_id"])
    assert body["verified"] is True, body["failed_checks"]
    assert body["checks"]["ledger_row_signature"] is True and body["checks"]["receipt_chain"] is True
    with app.extensions["gate"].ledger.engine.connect() as connection:
        signature = connection.execute(select(receipt_heads.c.signature)).scalar()
    assert signature.startswith("hmac-sha256:")
    sql(app, update(receipt_heads).where(receipt_heads.c.decision_id == record["decision_id"]).values(
        signature="hmac-sha256:" + "0" * 64))
    sql(app, update(decisions).where(decisions.c.decision_id == record["decision_id"]).values(
        row_signature="hmac-sha256:" + "0" * 64))
    body = verify(client, api_key, record["decision_id"])
    assert {"ledger_row_signature", "receipt_chain"} <= set(body["failed_checks"])
    assert body["receipt_failures"] == ["receipt_chain.signature"]
