"""Issue 6 defects 7, 8 and 10 through HTTP, on SQLite and PostgreSQL where storage is involved.

Each test checks its list of inputs in turn on one app per backend (an app and its ledger cost
more than the requests); a failure names the input.

Before the fixes: lone surrogates answered 500 on database writes (and a failed receipt write
left its idempotency claim pending); `limit=²` answered 500 and `limit=١` read as 1; NUL in a
rulebook version answered 503 on PostgreSQL and 200 on SQLite; text/plain, form-encoded and
UTF-16-labelled bodies were parsed as UTF-8 JSON; `1e-400` silently became 0.
"""

from __future__ import annotations

import copy
import json
from urllib.parse import quote

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import decisions, idempotency_claims, lifecycle_receipts

pytestmark = pytest.mark.usefixtures("backend")

RECEIPT_PATHS = ("execution", "outcome", "crm-sync")


@pytest.fixture
def record(client, api_key, sample_request):
    response = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    return response.json


def rows(app, table) -> int:
    with app.extensions["gate"].ledger.engine.connect() as connection:
        return connection.execute(select(func.count()).select_from(table)).scalar()


def post_text(client, url, text, headers, content_type="application/json"):
    return client.post(url, data=text.encode("utf-8"), headers={**headers, "content-type": content_type})


def receipt_body(path, record, **changes):
    body = {
        "execution": {"execution_status": "executed", "decision_record_hash": record["record_hash"],
                      "decision_receipt_hash": record["receipt_hash"]},
        "outcome": {"outcome_status": "succeeded", "decision_record_hash": record["record_hash"]},
        "crm-sync": {"sync_status": "written", "crm_provider": "hubspot", "crm_object_id": "deal_1"},
    }[path]
    return {**body, **changes}


# ----------------------------------------------------------------- defect 7: lone surrogates

SURROGATE = "\\ud800"  # as it appears in JSON text


def _decide_with(sample, where):
    body = copy.deepcopy(sample)
    marker = "SURROGATE_HERE"
    if where == "workflow":
        body["context"]["workflow"] = marker
    elif where == "source_record_id":
        body["context"]["source_record_id"] = marker
    elif where == "inputs":
        body["context"]["inputs"]["note"] = marker
    elif where == "inputs_key":
        body["context"]["inputs"][marker] = 1
    elif where == "rulebook_action":
        body["rulebook"]["rules"][0]["action"] = marker
    elif where == "rulebook_version":
        body["rulebook"]["version"] = marker
    return json.dumps(body).replace(marker, "x" + SURROGATE)


def test_a_lone_surrogate_in_a_decide_is_a_400_and_stores_nothing(app, client, api_key, sample_request):
    for where in ("workflow", "source_record_id", "inputs", "inputs_key", "rulebook_action", "rulebook_version"):
        before = rows(app, decisions)
        response = post_text(client, "/api/decide", _decide_with(sample_request, where), {"x-api-key": api_key})
        assert response.status_code == 400, (where, response.json)
        assert response.json["error"] == "JSON_INVALID" and response.json["path"].startswith("$."), where
        assert rows(app, decisions) == before, where


def test_a_lone_surrogate_in_a_receipt_is_a_400_and_leaves_no_claim(app, client, api_key, record):
    for stored, (path, field) in enumerate((("execution", "execution_id"), ("outcome", "external_ref"),
                                            ("crm-sync", "field_mapping"))):
        url = f"/api/decision/{record['decision_id']}/{path}"
        headers = {"x-api-key": api_key, "x-idempotency-key": f"sur-{path}"}
        value = {"x" + "MARK": "crm_field"} if field == "field_mapping" else "x" + "MARK"
        text = json.dumps(receipt_body(path, record, **{field: value})).replace("MARK", SURROGATE)
        response = post_text(client, url, text, headers)
        assert response.status_code == 400 and response.json["error"] == "JSON_INVALID", path
        # Only the receipts corrected before this one (and their completed claims) are stored.
        assert rows(app, lifecycle_receipts) == stored and rows(app, idempotency_claims) == stored, path
        corrected = client.post(url, json=receipt_body(path, record), headers=headers)
        assert corrected.status_code == 201, (path, corrected.json)


def test_paired_surrogates_are_text(client, api_key, sample_request):
    text = json.dumps(dict(sample_request, context={**sample_request["context"], "workflow": "emoji 😀"}))
    assert "\\ud83d\\ude00" in text
    assert post_text(client, "/api/decide", text, {"x-api-key": api_key}).status_code == 200


def test_a_failed_receipt_write_releases_its_claim(app, client, api_key, record, monkeypatch):
    store = app.extensions["gate"].lifecycle.store
    real_store = store.store

    def crash(*args, **kwargs):
        raise RuntimeError("simulated driver failure")

    monkeypatch.setattr(store, "store", crash)
    url = f"/api/decision/{record['decision_id']}/outcome"
    headers = {"x-api-key": api_key, "x-idempotency-key": "crash-1"}
    failed = client.post(url, json=receipt_body("outcome", record), headers=headers)
    assert failed.status_code == 500 and failed.json["c"] == "unclear"
    assert rows(app, idempotency_claims) == 0  # released, not pending
    monkeypatch.setattr(store, "store", real_store)
    retried = client.post(url, json=receipt_body("outcome", record, external_ref="corrected"), headers=headers)
    assert retried.status_code == 201, retried.json
    assert retried.headers["x-idempotency-status"] == "created"


# ----------------------------------------------------------------- defect 8: integer parameters

BAD_INTEGERS = ["²", "١", "1²", "٣٠", "１", " 1", "+1", "-1", "1.0", "0x1", "1e2", ""]


def test_integer_query_parameters_take_ascii_digits_only(client, api_key, record):
    headers = {"x-api-key": api_key}
    chain = record["audit_chain"]["chain_id"]
    decision_id = record["decision_id"]
    urls = [f"/api/decision/chains/{chain}?limit={{}}",
            f"/api/decision/chains/{chain}/inclusion?decision_id={decision_id}&tree_size={{}}",
            f"/api/decision/chains/{chain}/consistency?first={{}}",
            f"/api/decision/chains/{chain}/consistency?first=1&second={{}}",
            *[f"/api/decision/{decision_id}/{path}?limit={{}}" for path in RECEIPT_PATHS],
            f"/api/decision/{decision_id}/packet?execution_limit={{}}",
            f"/api/decision/{decision_id}/packet?chain_limit={{}}"]
    for url in urls:
        assert client.get(url.format("1"), headers=headers).status_code == 200, url
        for bad in BAD_INTEGERS:
            response = client.get(url.format(quote(bad)), headers=headers)
            assert response.status_code == 400, (url, bad, response.status_code)
            assert response.json["error"] == "REQUEST_INVALID" and response.json["c"] == "unclear"


# ----------------------------------------------------------------- defect 10: smaller gaps

def test_control_characters_in_a_rulebook_version_answer_the_same_on_both_ledgers(
        app, client, api_key, sample_request):
    for version in ("1.0\u0000", "1.0\u0007", "\u00851.0", "1.0\u007f"):
        body = copy.deepcopy(sample_request)
        body["rulebook"]["version"] = version
        before = rows(app, decisions)
        response = client.post("/api/decide", json=body, headers={"x-api-key": api_key})
        assert response.status_code == 422, (version, response.json)
        assert response.json["error"] == "RULEBOOK_INVALID", version
        assert any(e["field"].endswith(".version") and "control" in e["message"]
                   for e in response.json["errors"]), version
        assert rows(app, decisions) == before, version


def test_control_characters_in_path_or_query_are_a_400_on_both_ledgers(client, api_key):
    for url in ("/api/decision/dec_x%00", "/api/decision/dec_x%01/verify",
                "/api/decision/chains/ch%00", "/api/decision/rulebooks?rulebook_id=a&version=1%00",
                "/api/decision/rulebooks?hash=%00", "/api/decision/dec_x/outcome?cursor=%1f"):
        response = client.get(url, headers={"x-api-key": api_key})
        assert response.status_code == 400, (url, response.json)
        assert response.json["error"] == "REQUEST_INVALID", url


def test_documented_400_and_413(make_app, client, api_key, record):
    paths = client.get("/openapi.json").json["paths"]
    assert "400" in paths["/api/decision/{decision_id}"]["get"]["responses"]
    assert "413" in paths["/api/decision/{decision_id}/verify"]["post"]["responses"]
    bad_view = client.get(f"/api/decision/{record['decision_id']}?response_view=x", headers={"x-api-key": api_key})
    assert bad_view.status_code == 400 and bad_view.json["error"] == "REQUEST_INVALID"
    small = make_app({"GATE_MAX_BODY_BYTES": "64"}).test_client()
    too_large = small.post(f"/api/decision/{record['decision_id']}/verify", json={"record": record},
                           headers={"x-api-key": api_key})
    assert too_large.status_code == 413 and too_large.json["error"] == "REQUEST_TOO_LARGE"


def test_bodies_that_are_not_json_are_a_415_everywhere(app, client, api_key, record, sample_request):
    headers = {"x-api-key": api_key}
    before = (rows(app, decisions), rows(app, lifecycle_receipts))
    posts = [("/api/decide", sample_request), ("/api/decision/verify", {"record": record}),
             (f"/api/decision/{record['decision_id']}/verify", {"record": record}),
             ("/api/decision/packet/verify", {"packet": {}}),
             *[(f"/api/decision/{record['decision_id']}/{path}", receipt_body(path, record)) for path in RECEIPT_PATHS]]
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "application/json; charset=utf-16",
                         "multipart/form-data; boundary=x", "application/xml"):
        for url, body in posts:
            response = post_text(client, url, json.dumps(body), headers, content_type)
            assert response.status_code == 415, (content_type, url, response.status_code)
            assert response.json["error"] == "UNSUPPORTED_MEDIA_TYPE" and response.json["c"] == "unclear"
            assert response.mimetype == "application/json"
        assert (rows(app, decisions), rows(app, lifecycle_receipts)) == before, content_type


def test_json_media_types_are_accepted(client, api_key, sample_request):
    for content_type in ("application/json", "application/json; charset=UTF-8", "application/json;charset=utf-8",
                         "application/vnd.gate+json"):
        response = post_text(client, "/api/decide", json.dumps(sample_request), {"x-api-key": api_key}, content_type)
        assert response.status_code == 200, (content_type, response.json)


def test_numbers_that_underflow_or_overflow_are_refused(app, client, api_key, sample_request):
    body = copy.deepcopy(sample_request)
    body["context"]["inputs"]["discount_percent"] = "NUMBER"
    for number in ("1e-400", "-2.5e-330", "0." + "0" * 400 + "1", "1e400"):
        text = json.dumps(body).replace('"NUMBER"', number)
        before = rows(app, decisions)
        response = post_text(client, "/api/decide", text, {"x-api-key": api_key})
        assert response.status_code == 400 and response.json["error"] == "JSON_NON_FINITE_NUMBER", number
        assert rows(app, decisions) == before, number
        zero = post_text(client, "/api/decide", text.replace(number, "0e-400"), {"x-api-key": api_key})
        assert zero.status_code == 200, number
