"""Exact answers of an advisory decision's replay and diff over HTTP (`gate.advisory.replay`).

Every test decides its own advisory decisions on its own ledger and reads the whole answer it
needs: the refusal's members, the panel replayed against, the override's input hash and record.
"""

from __future__ import annotations

import json

from gate.protocol.canonical import sha256_hex
from gate.rulebook.patterns import load_patterns
from gate.vocabulary import EVALUATOR_VERSION
from tests.advisory.fake_llm import FakeLLM
from tests.advisory.test_advisory_http import APPROVING, GENEROUS_TIMEOUT, advisory_body, decide


def post(client, key, path, body=None):
    return client.post(path, data=json.dumps(body if body is not None else {}),
                       headers={"x-api-key": key, "content-type": "application/json"})


def offline_identity(pattern_id):
    """The offline advisor's identity for a request matched to `pattern_id`, from the registry."""
    pattern = load_patterns().find(pattern_id)
    return {"advisor_id": "policy_pattern_rulebook", "kind": "policy_pattern_rulebook",
            "evaluator_version": EVALUATOR_VERSION, "pattern_id": pattern.pattern_id,
            "pattern_hash": pattern.body["pattern_hash"], "rulebook_hash": pattern.rulebook_hash}


def test_an_explicit_historical_replay_names_the_mode_it_refuses(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    path = f"/api/decision/{record['decision_id']}/replay"
    response = post(client, api_key, path, {"replay_mode": "historical"})
    assert response.status_code == 409
    body = response.json
    assert (body["error"], body["lineage_component"], body["replay_mode"]) == (
        "REPLAY_LINEAGE_UNAVAILABLE", "advisory", "historical")


def test_a_replay_names_the_panel_it_ran_against(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    summary = post(client, api_key, f"/api/decision/{record['decision_id']}/replay").json
    assert summary["replay_mode"] == "current" and summary["input_source"] == "stored"
    assert summary["replay_against"] == {
        "kind": "current_advisory_panel",
        "advisors": [offline_identity("pricing_exception")],
        "policy_id": "advisory.pricing_exception",
        "policy_version": record["policy_version"],
        "policy_hash": record["policy_hash"],
        "rulebook": None,
        "trusted_adapter": None,
    }
    assert summary["replay_status"] == "matched"


def test_a_replay_keeps_the_stored_idempotency_key(client, api_key):
    record = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-replay-1"}).json
    assert record["idempotency_key"] == "adv-replay-1"
    summary = post(client, api_key, f"/api/decision/{record['decision_id']}/replay").json
    assert summary["replay_status"] == "matched", summary["drift"]
    replayed = summary["decision"]
    assert replayed["idempotency_key"] == "adv-replay-1"
    assert replayed["record_hash"] == record["record_hash"]


def test_a_decision_without_a_pattern_replays_and_matches(client, api_key):
    body = {"question": "Should we rename the workspace?", "context": {"workflow": "workspace_admin"}}
    record = decide(client, api_key, body).json
    assert record["advisory"]["policy_pattern"] is None
    summary = post(client, api_key, f"/api/decision/{record['decision_id']}/replay").json
    assert summary["replay_status"] == "matched", summary["drift"]
    assert summary["decision"]["advisory"]["policy_pattern"] is None
    assert summary["replay_against"]["advisors"] == [{"advisor_id": "policy_pattern_rulebook",
                                                      "kind": "policy_pattern_rulebook",
                                                      "evaluator_version": EVALUATOR_VERSION}]
    assert summary["replay_against"]["policy_id"] == "advisory.general"


def test_a_diff_asks_the_panel_with_the_override_as_context_inputs(client, api_key):
    body = advisory_body()
    record = decide(client, api_key, body).json
    blocked = dict(APPROVING, discount_percent=40)
    summary = post(client, api_key, f"/api/decision/{record['decision_id']}/diff", {"input": blocked}).json
    replayed = summary["decision"]
    # The stored request with only context.inputs replaced: the workflow still picks the pattern.
    expected_request = dict(body, context=dict(body["context"], inputs=blocked))
    assert replayed["input_hash"] == sha256_hex(expected_request) != record["input_hash"]
    assert (replayed["policy_id"], replayed["advisory_verdict"], replayed["verdict"]) == (
        "advisory.pricing_exception", "no", "no")
    assert replayed["evidence"] == ["ADVISORY_ONLY", "DISCOUNT_ABOVE_CEILING"]
    assert replayed["advisory"]["advisors"][0]["evaluation"]["facts_hash"] == sha256_hex(blocked)
    # The stored identity is kept: only the input and what follows from it differ.
    assert [replayed[name] for name in ("decision_id", "request_id", "created_at")] == [
        record[name] for name in ("decision_id", "request_id", "created_at")]
    assert summary["compared"]["verdict"] == {"stored": "review", "replayed": "no", "matched": False}


def test_a_diff_of_a_request_without_context_gives_it_one(client, api_key):
    stored = {"question": "Should we rename the workspace?"}
    bare = decide(client, api_key, stored).json
    summary = post(client, api_key, f"/api/decision/{bare['decision_id']}/diff", {"input": {"seats": 3}}).json
    replayed = summary["decision"]
    given = {"question": stored["question"], "context": {"inputs": {"seats": 3}}}
    assert replayed["input_hash"] == sha256_hex(given)
    assert replayed["advisory_verdict"] == "review" and replayed["policy_id"] == "advisory.general"


def test_an_override_the_advisory_checks_refuse_answers_with_their_own_error(client, api_key):
    record = decide(client, api_key, advisory_body("runtime")).json
    assert record["mode"] == "runtime"
    response = post(client, api_key, f"/api/decision/{record['decision_id']}/diff", {"input": {}})
    assert response.status_code == 400, response.json
    assert response.json["error"] == "REQUEST_INVALID"
    assert response.json["errors"][0]["field"] == "context.inputs"


def test_a_multi_decision_replays_against_every_advisor_and_needs_the_panel(make_app, api_key):
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
        env = {"GATE_ADVISOR_BASE_URL": llm.url, "GATE_ADVISOR_MODEL": "model-a", "GATE_ADVISOR_TIMEOUT": GENEROUS_TIMEOUT}
        client = make_app(env).test_client()
        record = decide(client, api_key, advisory_body("multi")).json
        assert record["advisory_verdict"] == "yes"
        summary = post(client, api_key, f"/api/decision/{record['decision_id']}/replay").json
        assert summary["replay_status"] == "matched", summary["drift"]
        provider = llm.url.split("/")[2]
        assert summary["replay_against"]["advisors"] == [
            offline_identity("pricing_exception"),
            {"advisor_id": "http_llm:model-a", "kind": "http_llm", "model": "model-a", "provider": provider}]
    # The same ledger without an HTTP advisor: a multi panel cannot be formed (503, as at decide time).
    alone = make_app().test_client()
    response = post(alone, api_key, f"/api/decision/{record['decision_id']}/replay")
    assert response.status_code == 503, response.json
    assert response.json["error"] == "ADVISOR_UNAVAILABLE"


def test_a_runtime_decision_replays_its_context_hash(client, api_key):
    record = decide(client, api_key, advisory_body("runtime")).json
    assert record["advisory"]["runtime_context_hash"] == sha256_hex(APPROVING)
    summary = post(client, api_key, f"/api/decision/{record['decision_id']}/replay").json
    assert summary["replay_status"] == "matched", summary["drift"]
    assert summary["decision"]["advisory"]["runtime_context_hash"] == sha256_hex(APPROVING)
