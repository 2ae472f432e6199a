"""Exact answers of the advisory service (`gate.services.advisory`) over HTTP: the panel it forms
per mode, what `/api/runtime-config` says of it, and what it stores. Every test builds its own app,
ledger and fake provider."""

from __future__ import annotations

import json

from sqlalchemy import select

from gate.ledger.tables import decisions
from gate.rulebook.patterns import load_patterns
from tests.advisory.fake_llm import FakeLLM
from tests.advisory.test_advisory_http import GENEROUS_TIMEOUT, advisory_body, decide


def llm_env(llm, models):
    return {"GATE_ADVISOR_BASE_URL": llm.url, "GATE_ADVISOR_MODEL": models, "GATE_ADVISOR_TIMEOUT": GENEROUS_TIMEOUT}


def test_the_runtime_config_describes_the_offline_panel(client):
    assert client.get("/api/runtime-config").json["advisory"] == {
        "advisory_version": "decision_advisory_v1", "offline_advisor": "policy_pattern_rulebook",
        "http_advisors": [], "single_advisor": "policy_pattern_rulebook", "multi_available": False}


def test_the_runtime_config_describes_the_http_advisors(make_app):
    with FakeLLM() as llm:
        client = make_app(llm_env(llm, "model-a,model-b")).test_client()
        provider = llm.url.split("/")[2]
        assert client.get("/api/runtime-config").json["advisory"] == {
            "advisory_version": "decision_advisory_v1", "offline_advisor": "policy_pattern_rulebook",
            "http_advisors": [{"advisor_id": "http_llm:model-a", "model": "model-a", "provider": provider},
                              {"advisor_id": "http_llm:model-b", "model": "model-b", "provider": provider}],
            "single_advisor": "http_llm:model-a", "multi_available": True}


def test_one_http_advisor_makes_multi_available(make_app, api_key):
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "no", "rationale": "no"})
        client = make_app(llm_env(llm, "model-a")).test_client()
        assert client.get("/api/runtime-config").json["advisory"]["multi_available"] is True
        record = decide(client, api_key, advisory_body("multi")).json
    assert [v["advisor_id"] for v in record["advisory"]["advisors"]] == [
        "policy_pattern_rulebook", "http_llm:model-a"]
    assert record["advisory"]["tally"] == {"yes": 1, "no": 1, "review": 0, "failed": 0}
    assert record["advisory_verdict"] == "review"  # one no of two is not more than half


def test_multi_without_an_http_advisor_names_the_panel_it_has(client, api_key):
    response = decide(client, api_key, advisory_body("multi"))
    assert response.status_code == 503
    body = response.json
    assert (body["error"], body["mode"], body["advisors"]) == (
        "ADVISOR_UNAVAILABLE", "multi", ["policy_pattern_rulebook"])


def test_single_asks_only_the_first_http_advisor(make_app, api_key):
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "no", "rationale": "no"})
        llm.behaviour["model-b"] = ("answer", {"decision": "yes", "rationale": "yes"})
        client = make_app(llm_env(llm, "model-a,model-b")).test_client()
        record = decide(client, api_key, advisory_body("single")).json
        assert [sent["body"]["model"] for sent in llm.requests] == ["model-a"]
    assert [v["advisor_id"] for v in record["advisory"]["advisors"]] == ["http_llm:model-a"]
    assert record["advisory_verdict"] == "no"


def test_the_stored_row_carries_the_panel_hash_and_the_callers_request_id(app, client, api_key):
    record = decide(client, api_key, advisory_body(), **{"x-request-id": "trace-42"}).json
    assert record["request_id"] == "trace-42"
    other = decide(client, api_key, advisory_body()).json
    assert other["request_id"] and other["request_id"] != "trace-42"
    with app.extensions["gate"].ledger.read() as connection:
        rows = dict(connection.execute(select(decisions.c.decision_id, decisions.c.rulebook_hash)).all())
    assert rows == {record["decision_id"]: record["policy_hash"], other["decision_id"]: other["policy_hash"]}


def test_the_provider_is_asked_the_requests_mode_question_context_and_pattern(make_app, api_key):
    pattern = load_patterns().for_workflow("billing_discount_gate")
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "review", "rationale": "unsure"})
        client = make_app(llm_env(llm, "model-a")).test_client()
        for mode in ("single", "multi"):
            body = advisory_body(mode)
            assert decide(client, api_key, body).status_code == 200
            user = json.loads(llm.requests[-1]["body"]["messages"][1]["content"])
            policy_pattern = {"pattern_id": pattern.pattern_id, "summary": pattern.body["summary"]}
            assert user == {"mode": mode, "question": body["question"], "context": body["context"],
                            "policy_pattern": policy_pattern}


def test_the_stored_advisory_row_and_its_audit_chain_are_signed(app, client, api_key):
    record = decide(client, api_key, advisory_body()).json
    # pipeline.store is given the signer: it signs the row and the record's audit chain
    assert record["receipt_signature"] and isinstance(record["audit_chain_signature"], str)
    assert record["audit_chain_signature"]
    with app.extensions["gate"].ledger.read() as connection:
        (signature,) = connection.execute(select(decisions.c.row_signature)).scalars().all()
    assert signature


def test_a_replayed_key_answers_the_stored_record_without_asking_the_advisors_again(make_app, api_key):
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "no", "rationale": "no"})
        client = make_app(llm_env(llm, "model-a")).test_client()
        first = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-7"})
        llm.behaviour["model-a"] = ("status", 500)  # asked again, the provider would fail the request
        again = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-7"})
        assert len(llm.requests) == 1
    assert (first.status_code, again.status_code) == (200, 200)
    assert again.headers["x-idempotency-status"] == "replayed" and again.json == first.json


def test_an_advisory_review_opens_its_hold_with_the_facts_it_was_asked_about(client, issue_key):
    """A `review` answer holds the action like a rulebook's: the reviewer sees the facts the
    advisors were given (context.inputs), not an empty hold."""
    key = issue_key(permissions="decide,resolve")["api_key"]
    facts = {"discount_percent": 15, "margin_percent": 9, "note": "<b>unmatched</b>"}
    answer = decide(client, key, advisory_body(inputs=facts, workflow="no_such_workflow"))
    assert answer.status_code == 200, answer.get_json()
    record = answer.get_json()
    assert record["verdict"] == "review", record
    hold = client.get(f"/api/holds/{record['decision_id']}", headers={"x-api-key": key}).get_json()["hold"]
    assert hold["facts"] == facts and hold["state"] == "open"
