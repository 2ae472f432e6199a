"""POST /api/decide through the real HTTP interface (Flask test client), on SQLite and PostgreSQL."""

from __future__ import annotations

import copy
import json

import pytest

from gate.protocol.canonical import sha256_hex
from gate.protocol.records import receipt_hash, record_hash

pytestmark = pytest.mark.usefixtures("backend")


def post(client, body, key, **headers):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return client.post("/api/decide", data=data, headers={"x-api-key": key, "content-type": "application/json", **headers})


def count_decisions(app) -> int:
    from sqlalchemy import func, select

    from gate.ledger.tables import decisions

    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(decisions)).scalar()


def test_approval_is_a_full_signed_record(client, api_key, sample_request):
    response = post(client, sample_request, api_key)
    assert response.status_code == 200, response.json
    record = response.json
    assert record["decision_record_version"] == "decision_record_v1"
    assert (record["verdict"], record["c"], record["v"]) == ("yes", "yes", "APPROVE")
    assert record["application_verdict"] == "APPROVE"
    assert record["matched_rule_id"] == "approve_owner_backed"
    assert record["reason_code"] == "WITHIN_DISCOUNT_POLICY"
    assert record["evidence"] == ["WITHIN_DISCOUNT_POLICY"]
    assert record["status"] == "ok"
    assert record["evaluator_version"] == "svc_rulebook_v1"
    assert record["rulebook"]["hash"] == sha256_hex(sample_request["rulebook"])
    assert record["policy_hash"] == record["source_hash"] == record["rulebook"]["hash"]
    assert record["policy_bundle_hash"] == record["rulebook_attestation"]["bundle_hash"]
    assert record["input_hash"] == sha256_hex(sample_request)
    assert record["record_hash"] == record_hash(record)
    assert record["receipt_hash"] == receipt_hash(record)
    assert record["receipt_signature"].startswith("ed25519:")
    assert record["runtime_binding"] == {
        "production_core": "hybrid_declarative_rulebook_with_trusted_adapters",
        "binding_mode": "direct_declarative_rulebook",
        "verdict_authority": "declarative_rulebook",
        "customer_supplied_code": "rejected",
    }
    contract = record["rulebook_contract"]
    assert contract["schema_url"] == "/schemas/rulebook-v1.schema.json"
    schema_bytes = client.get("/schemas/rulebook-v1.schema.json").data
    assert contract["schema_hash"] == __import__("hashlib").sha256(schema_bytes).hexdigest()
    registry = record["rulebook_registry"]
    assert registry["rulebook_registry_version"] == "decision_rulebook_registry_v1"
    assert registry["registry_attestation"]["status"] == "signed"
    assert record["action_binding"]["proposed_action"] == "apply_discount"
    assert record["verify_url"] == f"/api/decision/{record['decision_id']}/verify"
    assert record["evaluation"]["matched"] is True
    assert {"field", "operator", "passed"} <= set(record["evaluation"]["checks"][0])
    headers = response.headers
    assert headers["x-decision-id"] == record["decision_id"]
    assert headers["x-decision-record-hash"] == record["record_hash"]
    assert headers["x-decision-receipt-hash"] == record["receipt_hash"]
    assert headers["x-decision-receipt-signature"] == record["receipt_signature"]
    assert headers["x-idempotency-status"] == "created"
    assert headers["x-decision-verify-url"] == record["verify_url"]
    assert headers["X-RateLimit-Limit"] == "10000"
    assert int(headers["X-Usage-Monthly-Remaining"]) == 10_000 - 1


@pytest.mark.parametrize(
    "inputs, verdict, application_verdict, rule",
    [
        ({"discount_percent": 30, "margin_percent": 40, "owner_approved": True}, "no", "BLOCK", "block_deep_discount"),
        ({"discount_percent": 10, "margin_percent": 12, "owner_approved": True}, "review", "REVIEW", "review_thin_margin"),
        ({"discount_percent": 10, "margin_percent": 30, "owner_approved": False}, "review", "REVIEW", None),
    ],
)
def test_priority_order_selects_the_outcome(client, api_key, sample_request, inputs, verdict, application_verdict, rule):
    sample_request["context"]["inputs"] = inputs
    record = post(client, sample_request, api_key).json
    assert (record["verdict"], record["application_verdict"], record["matched_rule_id"]) == (verdict, application_verdict, rule)
    assert record["c"] == {"yes": "yes", "no": "no", "review": "unclear"}[verdict]


def test_missing_input_is_needs_input_not_an_error(client, api_key, sample_request):
    del sample_request["context"]["inputs"]["margin_percent"]
    sample_request["context"]["inputs"]["owner_approved"] = "yes"
    response = post(client, sample_request, api_key)
    assert response.status_code == 200
    record = response.json
    assert record["status"] == "needs_input"
    assert (record["verdict"], record["c"], record["application_verdict"]) == ("review", "unclear", "NEEDS_INPUT")
    assert record["action"] == "collect_required_input"
    assert record["reason_code"] == "INPUT_SCHEMA_FAILED"
    assert record["matched_rule_id"] is None
    assert record["missing_fields"] == ["margin_percent"]


@pytest.mark.parametrize("how", ["body", "prefer", "header"])
@pytest.mark.parametrize("view", ["minimal", "standard", "full"])
def test_response_views_project_the_same_record(client, api_key, sample_request, how, view):
    headers = {}
    if how == "body":
        sample_request["response_view"] = view
    elif how == "prefer":
        headers["Prefer"] = f"return={view}"
    else:
        headers["x-decision-response-view"] = view
    response = post(client, sample_request, api_key, **headers)
    record = response.json
    for member in ("decision_id", "record_hash", "receipt_hash", "policy_bundle_hash", "verify_url",
                   "receipt_signature", "receipt_key_id", "verdict", "application_verdict", "matched_rule_id"):
        assert member in record, (view, member)
    assert ("evidence_manifest" in record) == (view == "full")
    assert ("integrity" in record) == (view == "full")
    assert ("evidence" in record) == (view != "minimal")
    assert ("action_binding" in record) == (view != "minimal")
    if view == "minimal":
        assert record["decision_url"] == f"/api/decision/{record['decision_id']}"
    if how == "prefer":
        assert response.headers["Preference-Applied"] == f"return={view}"
    # response_view is not part of the input hash
    body = {k: v for k, v in sample_request.items() if k != "response_view"}
    stored = client.get(f"/api/decision/{record['decision_id']}", headers={"x-api-key": api_key}).json
    assert stored["input_hash"] == sha256_hex(body)
    assert stored["record_hash"] == record["record_hash"]


def test_unknown_view_header_is_400_and_unknown_prefer_is_ignored(client, api_key, sample_request):
    bad = post(client, sample_request, api_key, **{"x-decision-response-view": "everything"})
    assert bad.status_code == 400 and bad.json["error"] == "REQUEST_INVALID"
    ignored = post(client, sample_request, api_key, Prefer="return=everything")
    assert ignored.status_code == 200 and "integrity" in ignored.json


def test_idempotent_replay_returns_the_original_record(app, client, api_key, sample_request):
    first = post(client, sample_request, api_key, **{"x-idempotency-key": "order-1042"})
    again = post(client, sample_request, api_key, **{"x-idempotency-key": "order-1042", "Prefer": "return=minimal"})
    assert first.headers["x-idempotency-status"] == "created"
    assert again.status_code == 200
    assert again.headers["x-idempotency-status"] == "replayed"
    for member in ("decision_id", "record_hash", "receipt_hash", "receipt_signature"):
        assert again.json[member] == first.json[member]
    assert "integrity" not in again.json  # projected in the requested view
    assert first.json["idempotency_key"] == "order-1042"
    assert count_decisions(app) == 1


def test_idempotency_conflict_creates_nothing(app, client, api_key, sample_request):
    first = post(client, sample_request, api_key, **{"x-idempotency-key": "k-1"}).json
    changed = copy.deepcopy(sample_request)
    changed["context"]["inputs"]["discount_percent"] = 19
    conflict = post(client, changed, api_key, **{"x-idempotency-key": "k-1"})
    assert conflict.status_code == 409
    body = conflict.json
    assert body["c"] == "unclear" and body["v"] == "idempotency_conflict"
    assert body["error"] == "SVC_API_IDEMPOTENCY_CONFLICT"
    assert body["idempotency_key"] == "k-1"
    assert body["decision_id"] == first["decision_id"]
    assert body["existing_input_hash"] == first["input_hash"]
    assert body["input_hash"] == sha256_hex(changed)
    assert count_decisions(app) == 1


def test_same_idempotency_key_in_two_scopes_is_independent(client, issue_key, sample_request):
    a, b = issue_key("scope_a")["api_key"], issue_key("scope_b")["api_key"]
    ra = post(client, sample_request, a, **{"x-idempotency-key": "shared"}).json
    rb = post(client, sample_request, b, **{"x-idempotency-key": "shared"}).json
    assert ra["decision_id"] != rb["decision_id"]


def test_rulebook_version_cannot_rebind_to_a_new_hash(app, client, api_key, sample_request):
    assert post(client, sample_request, api_key).status_code == 200
    changed = copy.deepcopy(sample_request)
    changed["rulebook"]["rules"][0]["condition"]["value"] = 35
    response = post(client, changed, api_key)
    assert response.status_code == 409
    body = response.json
    assert body["error"] == "RULEBOOK_VERSION_CONFLICT" and body["c"] == "unclear"
    assert body["registered_hash"] == sha256_hex(sample_request["rulebook"])
    assert body["supplied_hash"] == sha256_hex(changed["rulebook"])
    assert count_decisions(app) == 1
    # a new version is fine, and another scope may bind the pair independently
    changed["rulebook"]["version"] = "2026-11-02"
    assert post(client, changed, api_key).status_code == 200


def test_registry_snapshot_is_reused_for_later_decisions(client, api_key, sample_request):
    first = post(client, sample_request, api_key).json
    second = post(client, sample_request, api_key).json
    assert first["rulebook_registry"] == second["rulebook_registry"]
    assert first["decision_id"] != second["decision_id"]


def test_rate_limit_refuses_with_headers_and_creates_nothing(app, client, issue_key, sample_request, monkeypatch):
    # One instant for the three decides: on the wall clock a slow host could send the third into
    # the next minute's window, which would rightly admit it.
    from datetime import UTC, datetime

    from gate.clock import FixedClock

    monkeypatch.setattr(app.extensions["gate"].service, "clock", FixedClock(datetime.now(UTC)))
    key = issue_key(rate_limit=2)["api_key"]
    assert post(client, sample_request, key).status_code == 200
    assert post(client, sample_request, key).status_code == 200
    refused = post(client, sample_request, key)
    assert refused.status_code == 429
    body = refused.json
    assert body == {**body, "c": "unclear", "v": "rate_limited", "error": "SVC_API_RATE_LIMITED"}
    assert 1 <= body["retry_after"] <= 60
    assert refused.headers["Retry-After"] == str(body["retry_after"])
    assert refused.headers["X-RateLimit-Limit"] == "2"
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert int(refused.headers["X-RateLimit-Reset"]) > 0
    assert count_decisions(app) == 2


def test_starter_plan_defaults_to_twenty_per_minute(client, issue_key, sample_request):
    key = issue_key(rate_limit=None)["api_key"]
    response = post(client, sample_request, key)
    assert response.headers["X-RateLimit-Limit"] == "20"
    assert response.headers["X-RateLimit-Remaining"] == "19"


def test_monthly_cap_refuses_and_creates_nothing(app, client, issue_key, sample_request):
    key = issue_key(monthly_cap=2)["api_key"]
    first = post(client, sample_request, key)
    assert first.headers["X-Usage-Monthly-Remaining"] == "1"
    second = post(client, sample_request, key, **{"x-idempotency-key": "cap-2"})
    assert second.headers["X-Usage-Monthly-Remaining"] == "0"
    # an idempotent replay is not a new record: it is served even at the cap
    replay = post(client, sample_request, key, **{"x-idempotency-key": "cap-2"})
    assert replay.status_code == 200 and replay.headers["x-idempotency-status"] == "replayed"
    refused = post(client, sample_request, key)
    assert refused.status_code == 429
    assert refused.json["v"] == "monthly_cap_exceeded"
    assert refused.json["error"] == "SVC_API_MONTHLY_CAP_EXCEEDED"
    assert refused.json["c"] == "unclear"
    assert refused.headers["X-Usage-Monthly-Remaining"] == "0"
    assert int(refused.headers["Retry-After"]) >= 1 and refused.json["retry_after"] == int(refused.headers["Retry-After"])
    assert list(refused.json)[-1] == "retry_after" and "X-RateLimit-Limit" in refused.headers  # as before the handler
    assert count_decisions(app) == 2


def test_signing_required_without_key_is_503_and_stores_nothing(make_app, gate_env, api_key, sample_request, tmp_path):
    app = make_app({"GATE_SIGNING_KEY_FILE": str(tmp_path / "missing.json")})
    response = post(app.test_client(), sample_request, api_key)
    assert response.status_code == 503
    assert response.json["error"] == "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"
    assert response.json["c"] == "unclear"
    assert count_decisions(app) == 0


def test_hmac_receipts_from_an_environment_secret(make_app, api_key, sample_request):
    app = make_app({"GATE_RECEIPT_HMAC_SECRET": "s" * 40, "GATE_RECEIPT_HMAC_KEY_ID": "hmac-test"})
    record = post(app.test_client(), sample_request, api_key).json
    assert record["receipt_signature_algorithm"] == "hmac-sha256"
    assert record["receipt_signature"].startswith("hmac-sha256:")
    assert record["receipt_key_id"] == "hmac-test"
    assert "receipt_public_key_fingerprint" not in record


def test_failed_ledger_write_is_503_and_approves_nothing(app, client, api_key, sample_request):
    from sqlalchemy import text

    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        if ledger.dialect == "sqlite":
            connection.execute(text(
                "CREATE TRIGGER refuse BEFORE INSERT ON decisions BEGIN SELECT RAISE(FAIL, 'disk full'); END"))
        else:
            connection.execute(text(
                "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$ LANGUAGE plpgsql"))
            connection.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION refuse()"))
    try:
        response = post(client, sample_request, api_key)
        assert response.status_code == 503
        assert response.json["error"] == "LEDGER_UNAVAILABLE"
        assert response.json["c"] == "unclear"
        assert "verdict" not in response.json
        assert count_decisions(app) == 0
    finally:
        with ledger.engine.begin() as connection:
            connection.execute(text("DROP TRIGGER refuse" + ("" if ledger.dialect == "sqlite" else " ON decisions")))


def test_bearer_token_is_accepted(client, api_key, sample_request):
    response = client.post("/api/decide", json=sample_request, headers={"Authorization": f"Bearer {api_key}"})
    assert response.status_code == 200


def test_caller_request_id_becomes_the_record_request_id(client, api_key, sample_request):
    response = post(client, sample_request, api_key, **{"x-request-id": "trace-77"})
    assert response.json["request_id"] == "trace-77"
    assert response.headers["x-request-id"] == "trace-77"
    unsafe = post(client, sample_request, api_key, **{"x-request-id": "bad id with spaces"})
    assert unsafe.json["request_id"].startswith("req_")


def test_decision_ids_come_in_time_order_and_keep_96_random_bits(client, api_key, sample_request):
    """`dec_`, the milliseconds of the decision's making (12 hex digits), then 24 random hex digits:
    new ids sort after older ones (each lands at the end of the ledger's index), none repeats, and
    the time they show is the record's own."""
    import re
    import time
    from datetime import datetime

    ids, made = [], []
    for n in range(12):
        before = time.time_ns() // 1_000_000
        body = post(client, {**sample_request, "context": {**sample_request["context"], "request_n": n}}, api_key).json
        ids.append(body["decision_id"])
        made.append((before, time.time_ns() // 1_000_000, body["created_at"]))
        time.sleep(0.002)
    assert all(re.fullmatch(r"dec_[0-9a-f]{36}", decision_id) for decision_id in ids), ids
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert len({decision_id[16:] for decision_id in ids}) == len(ids)  # the random part differs every time
    for decision_id, (before, after, created_at) in zip(ids, made, strict=True):
        shown = int(decision_id[4:16], 16)
        assert before <= shown <= after
        stated = datetime.fromisoformat(created_at.replace("Z", "+00:00")).timestamp() * 1000
        assert abs(stated - shown) < 1000


@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_database_connections_dropped_under_the_app_fail_closed_then_recover(app, client, api_key, sample_request, backend):
    from sqlalchemy import text

    assert post(client, sample_request, api_key).status_code == 200
    ledger = app.extensions["gate"].ledger
    from gate.ledger import Ledger

    admin = Ledger(ledger.url, pool_size=1)
    with admin.engine.connect() as connection:
        connection.execute(text("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                                "WHERE datname = current_database() AND pid <> pg_backend_pid()"))
    admin.dispose()
    statuses = [post(client, sample_request, api_key).status_code for _ in range(4)]
    assert set(statuses) <= {200, 503}, statuses  # never a 500, never an approval without a record
    assert statuses[-1] == 200
    assert count_decisions(app) == 1 + statuses.count(200)
