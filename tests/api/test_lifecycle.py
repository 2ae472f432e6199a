"""Execution receipts, outcome records and CRM sync records over HTTP, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text

from gate.ledger.tables import idempotency_claims, lifecycle_receipts
from gate.receipts import execution_hash_of, outcome_hash_of, sync_hash_of

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def record(client, api_key, sample_request):
    return client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json


def execution_body(record, **changes):
    body = {"execution_status": "executed", "action_taken": "apply_discount",
            "decision_record_hash": record["record_hash"], "decision_receipt_hash": record["receipt_hash"],
            "target_system": "billing", "target_object_id": "sub_1042", "mutation": "discount.create",
            "executor": {"type": "worker", "id": "billing-worker-3"},
            "state_before_hash": "sha256:" + "a" * 64, "state_after_hash": "sha256:" + "b" * 64}
    body.update(changes)
    return body


KIND_CASES = {
    "execution": (lambda r: execution_body(r), "execution", "execution_receipt_id", "execution_hash",
                  "x-decision-execution", execution_hash_of),
    "outcome": (lambda r: {"outcome_status": "succeeded", "action_executed": True, "observed_metrics": {"margin": 31.5},
                           "decision_record_hash": r["record_hash"]},
                "outcome", "outcome_id", "outcome_hash", "x-decision-outcome", outcome_hash_of),
    "crm-sync": (lambda r: {"sync_status": "written", "sync_direction": "writeback", "crm_provider": "hubspot",
                            "crm_object_type": "deal", "crm_object_id": "deal_77",
                            "crm_record_url": "https://crm.example/deals/77",
                            "field_mapping": {"verdict": "gate_verdict__c"}},
                 "crm_sync", "sync_id", "sync_hash", "x-decision-crm-sync", sync_hash_of),
}


def count(app, table):
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(table)).scalar()


@pytest.mark.parametrize("path", sorted(KIND_CASES))
def test_created_replayed_conflict(app, client, api_key, record, path):
    make_body, wrapper, id_field, hash_field, header, rehash = KIND_CASES[path]
    url = f"/api/decision/{record['decision_id']}/{path}"
    headers = {"x-api-key": api_key, "x-idempotency-key": f"{path}-1"}
    created = client.post(url, json=make_body(record), headers=headers)
    assert created.status_code == 201, created.json
    receipt = created.json[wrapper]
    assert created.headers[f"{header}-id"] == receipt[id_field]
    assert created.headers[f"{header}-hash"] == receipt[hash_field] == rehash(receipt)
    assert created.headers["x-idempotency-status"] == "created"
    assert receipt["decision_id"] == record["decision_id"]
    replayed = client.post(url, json=make_body(record), headers=headers)
    assert replayed.status_code == 200
    assert replayed.headers["x-idempotency-status"] == "replayed"
    assert replayed.get_data() == created.get_data()
    changed = make_body(record)
    changed["external_ref"] = "changed"
    conflict = client.post(url, json=changed, headers=headers)
    assert conflict.status_code == 409
    code = {"execution": "SVC_EXECUTION", "outcome": "SVC_OUTCOME", "crm-sync": "SVC_CRM_SYNC"}[path]
    assert conflict.json["error"] == f"{code}_IDEMPOTENCY_CONFLICT" and conflict.json["c"] == "unclear"
    assert count(app, lifecycle_receipts) == 1


def test_execution_receipt_binds_to_the_record(client, api_key, record):
    url = f"/api/decision/{record['decision_id']}/execution"
    receipt = client.post(url, json=execution_body(record), headers={"x-api-key": api_key}).json["execution"]
    assert receipt["action_binding_match"] is True
    assert receipt["decision_record_hash"] == record["record_hash"]
    assert receipt["decision_verdict"] == "yes"
    other = client.post(url, json=execution_body(record, target_object_id="sub_9999", action_binding=None),
                        headers={"x-api-key": api_key}).json["execution"]
    assert other["action_binding_match"] is False


@pytest.mark.parametrize("field", ["decision_record_hash", "decision_receipt_hash"])
def test_hash_mismatch_is_refused_and_stores_nothing(app, client, api_key, record, field):
    url = f"/api/decision/{record['decision_id']}/execution"
    response = client.post(url, json=execution_body(record, **{field: "f" * 64}), headers={"x-api-key": api_key})
    assert response.status_code == 409
    assert response.json["error"] == "SVC_EXECUTION_RECORD_MISMATCH"
    assert count(app, lifecycle_receipts) == 0


def test_invalid_bodies_are_400_with_every_problem(client, api_key, record):
    url = f"/api/decision/{record['decision_id']}/execution"
    response = client.post(url, json={"execution_status": "done", "bogus": 1}, headers={"x-api-key": api_key})
    assert response.status_code == 400
    fields = {(e["field"], e["code"]) for e in response.json["errors"]}
    assert ("bogus", "unknown_field") in fields and ("execution_status", "invalid_value") in fields


def test_crm_credentials_are_never_accepted(app, client, api_key, record):
    url = f"/api/decision/{record['decision_id']}/crm-sync"
    body = dict(KIND_CASES["crm-sync"][0](record), access_token="abc")
    response = client.post(url, json=body, headers={"x-api-key": api_key})
    assert response.status_code == 422
    assert response.json["error"] == "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN"
    assert "abc" not in response.get_data(as_text=True)
    url_with_userinfo = dict(KIND_CASES["crm-sync"][0](record), crm_record_url="https://u:p@crm.example/x")
    assert client.post(url, json=url_with_userinfo, headers={"x-api-key": api_key}).status_code in (400, 422)
    assert count(app, lifecycle_receipts) == 0


def test_in_progress_claim_answers_409(app, client, api_key, record):
    """Another writer holds the claim (inserted as the claim protocol does) → 409 in progress."""
    from gate.clock import SystemClock, iso_ms
    from gate.receipts import request_input_hash

    body = execution_body(record)
    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        connection.execute(idempotency_claims.insert().values(
            scope="tenant_a", kind="execution", idempotency_key="busy", decision_id=record["decision_id"],
            input_hash=request_input_hash(body), state="pending", claim_token="t" * 32,
            claimed_at=iso_ms(SystemClock().now()), receipt_id=None))
    url = f"/api/decision/{record['decision_id']}/execution"
    response = client.post(url, json=body, headers={"x-api-key": api_key, "x-idempotency-key": "busy"})
    assert response.status_code == 409
    assert response.json["error"] == "SVC_EXECUTION_IDEMPOTENCY_IN_PROGRESS"
    assert count(app, lifecycle_receipts) == 0


def test_stale_claim_of_a_dead_writer_is_taken_over(app, client, api_key, record):
    from gate.receipts import request_input_hash

    body = execution_body(record)
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(idempotency_claims.insert().values(
            scope="tenant_a", kind="execution", idempotency_key="stale", decision_id=record["decision_id"],
            input_hash=request_input_hash(body), state="pending", claim_token="d" * 32,
            claimed_at="2020-01-01T00:00:00.000Z", receipt_id=None))
    url = f"/api/decision/{record['decision_id']}/execution"
    response = client.post(url, json=body, headers={"x-api-key": api_key, "x-idempotency-key": "stale"})
    assert response.status_code == 201


def test_storage_failure_is_503_and_no_receipt_or_claim_remains(app, client, api_key, record):
    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        if ledger.dialect == "sqlite":
            connection.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON lifecycle_receipts "
                                    "BEGIN SELECT RAISE(FAIL, 'disk full'); END"))
        else:
            connection.execute(text("CREATE OR REPLACE FUNCTION refuse() RETURNS trigger AS $$ "
                                    "BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql"))
            connection.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON lifecycle_receipts "
                                    "FOR EACH ROW EXECUTE FUNCTION refuse()"))
    url = f"/api/decision/{record['decision_id']}/execution"
    headers = {"x-api-key": api_key, "x-idempotency-key": "retry-me"}
    try:
        failed = client.post(url, json=execution_body(record), headers=headers)
        assert failed.status_code == 503
        assert failed.json["error"] == "SVC_EXECUTION_UNAVAILABLE" and failed.json["c"] == "unclear"
        assert count(app, lifecycle_receipts) == 0
        assert count(app, idempotency_claims) == 0
    finally:
        with ledger.engine.begin() as connection:
            connection.execute(text("DROP TRIGGER refuse" + ("" if ledger.dialect == "sqlite" else " ON lifecycle_receipts")))
    retried = client.post(url, json=execution_body(record), headers=headers)
    assert retried.status_code == 201


def test_lists_are_newest_first_and_paged(client, api_key, record):
    url = f"/api/decision/{record['decision_id']}/execution"
    ids = [client.post(url, json=execution_body(record, external_ref=f"r{i}"), headers={"x-api-key": api_key})
           .json["execution"]["execution_receipt_id"] for i in range(5)]
    first = client.get(url + "?limit=2", headers={"x-api-key": api_key}).json
    assert first["total"] == 5 and first["count"] == 2
    seen = [r["execution_receipt_id"] for r in first["execution_receipts"]]
    cursor = first["next_cursor"]
    while cursor:
        page = client.get(url + f"?limit=2&cursor={cursor}", headers={"x-api-key": api_key}).json
        seen += [r["execution_receipt_id"] for r in page["execution_receipts"]]
        cursor = page["next_cursor"]
    assert sorted(seen) == sorted(ids) and len(seen) == 5
    refs = [r["external_ref"] for r in first["execution_receipts"]]
    assert refs == ["r4", "r3"]  # newest first
    for query in ("?limit=0", "?limit=101", "?limit=x", "?cursor=bogus"):
        assert client.get(url + query, headers={"x-api-key": api_key}).status_code == 400


@pytest.mark.parametrize("path", sorted(KIND_CASES))
def test_receipt_ids_come_in_time_order_and_keep_96_random_bits(client, api_key, record, path):
    """As decisions' (gate.clock.ordered_token): the prefix, the milliseconds of the receipt's
    making, 24 random hex digits; later receipts sort after earlier ones and none repeats."""
    import re
    import time

    make_body, key, id_member = KIND_CASES[path][0], KIND_CASES[path][1], KIND_CASES[path][2]
    prefix = {"execution": "exe_", "outcome": "out_", "crm-sync": "crm_"}[path]
    ids = []
    for n in range(6):
        before = time.time_ns() // 1_000_000
        answer = client.post(f"/api/decision/{record['decision_id']}/{path}",
                             json={**make_body(record), "external_ref": f"ref-{n}"}, headers={"x-api-key": api_key})
        assert answer.status_code == 201, answer.json
        ids.append(answer.json[key][id_member])
        assert re.fullmatch(re.escape(prefix) + r"[0-9a-f]{36}", ids[-1]), ids[-1]
        assert before <= int(ids[-1][4:16], 16) <= time.time_ns() // 1_000_000
        time.sleep(0.002)
    assert ids == sorted(ids) and len({receipt_id[16:] for receipt_id in ids}) == len(ids)


@pytest.mark.parametrize("path, code", [("execution", "SVC_EXECUTION_UNAUTHORIZED"), ("outcome", "SVC_OUTCOME_UNAUTHORIZED"),
                                        ("crm-sync", "SVC_CRM_SYNC_UNAUTHORIZED")])
def test_auth_and_scope(client, issue_key, record, path, code):
    url = f"/api/decision/{record['decision_id']}/{path}"
    anonymous = client.post(url, json={})
    assert anonymous.status_code == 401 and anonymous.json["error"] == code
    stranger = issue_key("scope_b")["api_key"]
    for method in ("get", "post"):
        response = getattr(client, method)(url, json={}, headers={"x-api-key": stranger})
        assert response.status_code == 404 and response.json["error"] == "DECISION_NOT_FOUND"


@pytest.mark.parametrize("edit", ["json", "column"])
def test_editing_a_stored_receipt_row_is_reported_by_hosted_verify(app, client, api_key, record, edit):
    import json

    from sqlalchemy import update

    url = f"/api/decision/{record['decision_id']}"
    headers = {"x-api-key": api_key}
    receipt = client.post(url + "/execution", json=execution_body(record), headers=headers).json["execution"]
    client.post(url + "/outcome", json={"outcome_status": "succeeded"}, headers=headers)
    assert client.get(url + "/verify", headers=headers).json["verified"] is True
    if edit == "json":
        values = {"receipt_json": json.dumps(dict(receipt, execution_status="failed"))}
    else:
        values = {"receipt_hash": "0" * 64}
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(update(lifecycle_receipts)
                           .where(lifecycle_receipts.c.receipt_id == receipt["execution_receipt_id"]).values(**values))
    body = client.get(url + "/verify", headers=headers).json
    assert body["verified"] is False and "lifecycle_receipts" in body["failed_checks"]
    expected = "execution_receipts[0].execution_hash" if edit == "json" else "execution_receipts[0].ledger_row"
    assert expected in body["receipt_failures"]
