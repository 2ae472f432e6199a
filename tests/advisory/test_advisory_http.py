"""The advisory legacy modes through `POST /api/decide`: real records, stored, chained, verifiable,
never a production approval; the HTTP LLM advisor against a local fake provider, failures closed."""

from __future__ import annotations

import copy
import json
import socket
import time

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import decisions
from gate_client.routing import route
from tests.advisory.fake_llm import FakeLLM

APPROVING = {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"}
CONTRACT = {"authority": "advisory_only", "production_verdict": False}


def advisory_body(mode=None, inputs=None, **context):
    body = {"question": "Approve a 15% annual-plan discount exception?",
            "context": {"workflow": "billing_discount_gate", "source_record_id": "sub_1042",
                        "requested_action": "apply_discount", "inputs": dict(APPROVING if inputs is None else inputs),
                        **context}}
    if mode:
        body["mode"] = mode
    return body


def decide(client, key, body, **headers):
    return client.post("/api/decide", data=json.dumps(body),
                       headers={"x-api-key": key, "content-type": "application/json", **headers})


def stored_count(app) -> int:
    with app.extensions["gate"].ledger.read() as connection:
        return connection.execute(select(func.count()).select_from(decisions)).scalar_one()


@pytest.mark.parametrize("mode", [None, "single"])
def test_an_advisory_approval_is_a_stored_record_that_never_reads_as_yes(app, client, api_key, mode, backend):
    response = decide(client, api_key, advisory_body(mode))
    assert response.status_code == 200, response.json
    record = response.json
    assert record["decision_contract"] == CONTRACT and record["production_binding_required"] is True
    assert record["advisory_verdict"] == "yes" and record["v"] == "approved"
    assert record["verdict"] == "review" and record["c"] == "unclear"
    assert record["action"] == "hold_for_binding_decision"
    assert record["mode"] == "single"
    assert record["policy_id"] == "advisory.pricing_exception" and record["policy_version"] == "2026-11-01"
    vote = record["advisory"]["advisors"][0]
    assert vote["kind"] == "policy_pattern_rulebook" and vote["decision"] == "yes"
    assert vote["policy_pattern"]["rulebook_id"] == "pricing_exception"
    assert vote["evaluation"]["reason_code"] == "WITHIN_DISCOUNT_POLICY"
    assert "Offline advisor" in vote["rationale"]
    assert record["advisory"]["combining_rule"]["rule_id"] == "single_advisor_v1"
    assert record["evidence"] == ["ADVISORY_ONLY", "WITHIN_DISCOUNT_POLICY"]
    assert response.headers["x-decision-id"] == record["decision_id"]
    # SECURITY: the caller's routing helper holds it.
    assert route(200, record) == "review"
    # Stored, chained and verifiable like a binding record.
    headers = {"x-api-key": api_key}
    stored = client.get(f"/api/decision/{record['decision_id']}", headers=headers)
    assert stored.status_code == 200 and stored.json["record_hash"] == record["record_hash"]
    hosted = client.get(f"/api/decision/{record['decision_id']}/verify", headers=headers).json
    assert hosted["verified"] is True, hosted["failed_checks"]
    assert hosted["record_kind"] == "advisory"
    assert hosted["checks"]["output_hash"] is True and hosted["checks"]["record_members"] is True
    offline = client.post("/api/decision/verify", json={"record": record, "input": advisory_body(mode)}).json
    assert offline["verified"] is True and offline["checks"]["input_hash"] is True
    chain = client.get(f"/api/decision/chains/{record['audit_chain']['chain_id']}", headers=headers).json
    assert chain["verification"]["valid"] is True and chain["chain_size"] == 1


@pytest.mark.parametrize("member, value", [
    ("decision_contract", {"authority": "advisory_only", "production_verdict": True}),
    ("production_binding_required", False),
    ("advisory_verdict", "no"),
    ("c", "yes"),
    ("v", "denied"),
])
def test_a_tampered_advisory_record_fails_verification(client, api_key, member, value):
    record = decide(client, api_key, advisory_body()).json
    forged = copy.deepcopy(record)
    forged[member] = value
    result = client.post("/api/decision/verify", json={"record": forged}).json
    assert result["verified"] is False and result["integrity_valid"] is False
    assert {"output_hash", "compact_verdict"} & set(result["failed_checks"])


def test_a_forged_yes_verdict_breaks_the_record_hash(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    forged = dict(record, verdict="yes", c="yes")
    result = client.post("/api/decision/verify", json={"record": forged}).json
    assert result["verified"] is False and "record_hash" in result["failed_checks"]


def test_an_advisory_denial_blocks(client, api_key):
    record = decide(client, api_key, advisory_body(inputs={**APPROVING, "discount_percent": 40})).json
    assert (record["advisory_verdict"], record["verdict"], record["c"], record["v"]) == ("no", "no", "no", "denied")
    assert record["action"] == "block_action" and "DISCOUNT_ABOVE_CEILING" in record["evidence"]
    assert route(200, record) == "block"


def test_without_a_matching_pattern_the_offline_advisor_says_review(client, api_key):
    body = {"question": "Should we rename the workspace?", "context": {"workflow": "workspace_admin"}}
    record = decide(client, api_key, body).json
    assert record["advisory_verdict"] == "review" and record["verdict"] == "review"
    assert record["policy_id"] == "advisory.general" and record["policy_version"] == "decision_advisory_v1"
    assert record["evidence"] == ["ADVISORY_ONLY", "NO_MATCHING_POLICY_PATTERN"]


def test_context_policy_pattern_picks_the_pattern_by_pattern_or_policy_id(client, api_key):
    inputs = {"amount": 90, "order_age_days": 3, "customer_tier": "silver", "prior_refunds_90d": 0, "fraud_score": 0.05}
    for name in ("refund_review", "refund_approval"):
        body = {"question": "Refund?", "context": {"policy_pattern": name, "inputs": inputs}}
        record = decide(client, api_key, body).json
        assert record["policy_id"] == "advisory.refund_approval" and record["advisory_verdict"] == "yes"
        assert record["advisory"]["policy_pattern"] == "refund_review"


def test_missing_inputs_make_the_offline_advisor_hold(client, api_key):
    record = decide(client, api_key, advisory_body(inputs={"discount_percent": 5})).json
    vote = record["advisory"]["advisors"][0]
    assert vote["evaluation"]["status"] == "needs_input" and "margin_percent" in vote["evaluation"]["missing_fields"]
    assert record["advisory_verdict"] == "review" and record["verdict"] == "review"


def test_runtime_mode_needs_and_records_the_structured_context(client, api_key):
    refused = decide(client, api_key, {"mode": "runtime", "question": "Approve?", "context": {"workflow": "x"}})
    assert refused.status_code == 400 and refused.json["errors"][0]["field"] == "context.inputs"
    record = decide(client, api_key, advisory_body("runtime")).json
    assert record["mode"] == "runtime" and record["advisory_verdict"] == "yes"
    from gate.protocol.canonical import sha256_hex
    assert record["advisory"]["runtime_context_hash"] == sha256_hex(APPROVING)


def test_multi_without_a_second_advisor_is_unavailable_and_stores_nothing(app, client, api_key):
    response = decide(client, api_key, advisory_body("multi"))
    assert response.status_code == 503 and response.json["error"] == "ADVISOR_UNAVAILABLE"
    assert response.json["c"] == "unclear" and stored_count(app) == 0


@pytest.mark.parametrize("body, status, code, field", [
    ({"mode": "single"}, 400, "REQUEST_INVALID", "question"),
    ({"question": "   "}, 400, "REQUEST_INVALID", "question"),
    ({"question": "x" * 2001}, 400, "REQUEST_INVALID", "question"),
    ({"question": "q", "context": []}, 400, "REQUEST_INVALID", "context"),
    ({"question": "q", "context": {"inputs": [1]}}, 400, "REQUEST_INVALID", "context.inputs"),
    ({"question": "q", "context": {"policy_pattern": "nope"}}, 400, "REQUEST_INVALID", "context.policy_pattern"),
    ({"question": "q", "mode": "single", "rulebook": {}}, 400, "REQUEST_INVALID", "rulebook"),
    ({"question": "q", "binding_mode": "direct_declarative_rulebook"}, 400, "REQUEST_INVALID", "binding_mode"),
    ({"question": "q", "response_view": "huge"}, 400, "REQUEST_INVALID", "response_view"),
    ({"question": "q", "mode": "chatty"}, 400, "REQUEST_INVALID", "mode"),
    ({"question": "q", "action": "apply_discount"}, 422, "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN", None),
    ({"question": "q", "context": {"inputs": {"a": "x" * 70_000}}}, 422, "EVALUATION_INPUT_TOO_LARGE", None),
])
def test_bad_advisory_requests_are_refused_and_store_nothing(app, client, api_key, body, status, code, field):
    response = decide(client, api_key, body)
    assert response.status_code == status, response.json
    assert response.json["error"] == code and response.json["c"] == "unclear"
    if field:
        assert response.json["errors"][0]["field"] == field
    assert stored_count(app) == 0


def test_advisory_idempotency_replays_and_conflicts(client, api_key, backend):
    first = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-1"})
    again = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-1"})
    assert again.headers["x-idempotency-status"] == "replayed" and again.json == first.json
    other = decide(client, api_key, advisory_body(inputs={**APPROVING, "discount_percent": 10}),
                   **{"x-idempotency-key": "adv-1"})
    assert other.status_code == 409 and other.json["error"] == "SVC_API_IDEMPOTENCY_CONFLICT"


def test_advisory_modes_can_be_switched_off(make_app, api_key):
    client = make_app({"GATE_ADVISORY_MODES": "false"}).test_client()
    response = decide(client, api_key, advisory_body())
    assert response.status_code == 422 and response.json["error"] == "LEGACY_MODE_UNAVAILABLE"
    assert client.get("/api/decision/status").json["supported_modes"] == ["rulebook"]


def test_the_status_lists_the_advisory_modes(client):
    body = client.get("/api/decision/status").json
    assert body["supported_modes"] == ["rulebook", "single", "multi", "runtime"]
    assert body["advisory_modes"]["production_verdict"] is False


# --------------------------------------------------------------------------- HTTP LLM advisor


@pytest.fixture
def llm():
    with FakeLLM() as fake:
        yield fake


# The advisor timeout of a test whose outcome is not the timeout: the answer or the failure under
# test is what happens, never a 1 s timeout first on a loaded host (issue 53, defect 6).
GENEROUS_TIMEOUT = "60"


def llm_env(fake, models="model-a", **extra):
    return {"GATE_ADVISOR_BASE_URL": fake.url, "GATE_ADVISOR_MODEL": models, "GATE_ADVISOR_TIMEOUT": GENEROUS_TIMEOUT,
            **extra}


def timeout_for(error: str) -> str:
    """1 s where the timeout is the failure under test, `GENEROUS_TIMEOUT` otherwise."""
    return "1" if error == "ADVISOR_TIMEOUT" else GENEROUS_TIMEOUT


def test_single_asks_the_configured_llm_with_the_key_from_a_file(make_app, api_key, llm, tmp_path):
    key_file = tmp_path / "advisor.key"
    key_file.write_text("sk-test-0123456789\n")
    llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "Within policy.", "evidence": ["LLM_OK"]})
    client = make_app(llm_env(llm, GATE_ADVISOR_API_KEY_FILE=str(key_file))).test_client()
    response = decide(client, api_key, advisory_body())
    assert response.status_code == 200, response.json
    record = response.json
    vote = record["advisory"]["advisors"][0]
    assert vote["advisor_id"] == "http_llm:model-a" and vote["kind"] == "http_llm" and vote["status"] == "ok"
    assert vote["provider"] == "127.0.0.1:" + llm.url.split(":")[2].split("/")[0]
    assert len(vote["response_hash"]) == 64 and "sk-test" not in json.dumps(record)
    assert (record["verdict"], record["c"], record["advisory_verdict"]) == ("review", "unclear", "yes")
    sent = llm.requests[0]
    assert sent["path"] == "/v1/chat/completions"
    assert sent["headers"]["Authorization"] == "Bearer sk-test-0123456789"
    assert sent["body"]["model"] == "model-a" and sent["body"]["temperature"] == 0
    user = json.loads(sent["body"]["messages"][1]["content"])
    assert user["question"].startswith("Approve") and user["context"]["inputs"] == APPROVING
    assert client.get(f"/api/decision/{record['decision_id']}/verify",
                      headers={"x-api-key": api_key}).json["verified"] is True


def test_multi_records_every_vote_and_the_combining_rule(make_app, api_key, llm):
    llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
    llm.behaviour["model-b"] = ("answer", {"decision": "no", "rationale": "too generous", "evidence": ["MARGIN_RISK"]})
    client = make_app(llm_env(llm, "model-a,model-b")).test_client()
    record = decide(client, api_key, advisory_body("multi")).json
    advisory = record["advisory"]
    assert [v["advisor_id"] for v in advisory["advisors"]] == [
        "policy_pattern_rulebook", "http_llm:model-a", "http_llm:model-b"]
    assert [v["decision"] for v in advisory["advisors"]] == ["yes", "yes", "no"]
    assert advisory["combining_rule"]["rule_id"] == "unanimous_yes_majority_no_v1"
    assert advisory["tally"] == {"yes": 2, "no": 1, "review": 0, "failed": 0}
    assert advisory["combined_decision"] == "review" and record["verdict"] == "review"
    assert record["evidence_manifest"]["sources"][2]["model"] == "model-b"
    llm.behaviour["model-b"] = ("answer", {"decision": "yes", "rationale": "fine"})
    unanimous = decide(client, api_key, advisory_body("multi")).json
    assert unanimous["advisory_verdict"] == "yes" and unanimous["c"] == "unclear"
    assert unanimous["policy_hash"] == record["policy_hash"]  # same panel, same advisory policy


def test_a_failed_advisor_in_multi_is_recorded_and_cannot_approve(make_app, api_key, llm):
    llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
    llm.behaviour["model-b"] = ("status", 500)
    client = make_app(llm_env(llm, "model-a,model-b")).test_client()
    record = decide(client, api_key, advisory_body("multi")).json
    failed = record["advisory"]["advisors"][2]
    assert failed["status"] == "failed" and failed["error"] == "ADVISOR_HTTP_STATUS" and failed["decision"] == "review"
    assert record["advisory"]["tally"]["failed"] == 1 and record["advisory_verdict"] == "review"


@pytest.mark.parametrize("behaviour, error", [
    (("status", 500), "ADVISOR_HTTP_STATUS"),
    (("status", 401), "ADVISOR_HTTP_STATUS"),
    (("raw", b"not json"), "ADVISOR_RESPONSE_INVALID"),
    (("raw", b'{"choices": []}'), "ADVISOR_RESPONSE_INVALID"),
    (("content", "I think yes"), "ADVISOR_RESPONSE_INVALID"),
    (("answer", {"decision": "approve", "rationale": "x"}), "ADVISOR_RESPONSE_INVALID"),
    (("answer", {"decision": "yes"}), "ADVISOR_RESPONSE_INVALID"),
    (("answer", {"decision": "yes", "rationale": "x", "evidence": ["lower case"]}), "ADVISOR_RESPONSE_INVALID"),
    (("raw", b"{" + b" " * 300_000 + b"}"), "ADVISOR_RESPONSE_INVALID"),
    (("sleep", 2.5), "ADVISOR_TIMEOUT"),
    (("redirect", "http://127.0.0.1:9/elsewhere"), "ADVISOR_HTTP_STATUS"),
])
def test_every_llm_failure_fails_closed_with_502_and_stores_nothing(make_app, api_key, llm, behaviour, error):
    llm.behaviour["model-a"] = behaviour
    app = make_app(llm_env(llm, GATE_ADVISOR_API_KEY="sk-never-shown-123", GATE_ADVISOR_TIMEOUT=timeout_for(error)))
    response = decide(app.test_client(), api_key, advisory_body())
    assert response.status_code == 502, response.json
    body = response.json
    assert body["error"] == "ADVISOR_UPSTREAM_FAILED" and body["c"] == "unclear" and body["v"] == "upstream_failure"
    assert body["advisor_error"] == error and body["advisor_id"] == "http_llm:model-a"
    assert "sk-never-shown" not in response.get_data(as_text=True)
    assert not {"verdict", "record_hash", "advisory_verdict"} & set(body)
    assert stored_count(app) == 0
    if behaviour[0] == "redirect":
        assert len(llm.requests) == 1  # the redirect was not followed


def test_an_unreachable_provider_fails_closed(make_app, api_key):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = make_app({"GATE_ADVISOR_BASE_URL": f"http://127.0.0.1:{port}", "GATE_ADVISOR_MODEL": "m"})
    response = decide(app.test_client(), api_key, advisory_body())
    assert response.status_code == 502 and response.json["advisor_error"] == "ADVISOR_UNREACHABLE"
    assert stored_count(app) == 0


@pytest.mark.parametrize("env, message", [
    ({"GATE_ADVISOR_BASE_URL": "http://127.0.0.1:1"}, "GATE_ADVISOR_MODEL is required"),
    ({"GATE_ADVISOR_MODEL": "m"}, "needs GATE_ADVISOR_BASE_URL"),
    ({"GATE_ADVISOR_BASE_URL": "ftp://x", "GATE_ADVISOR_MODEL": "m"}, "http"),
    ({"GATE_ADVISOR_BASE_URL": "https://user:pw@x", "GATE_ADVISOR_MODEL": "m"}, "no credentials"),
    ({"GATE_ADVISOR_BASE_URL": "https://x", "GATE_ADVISOR_MODEL": "m,m"}, "distinct"),
    ({"GATE_ADVISOR_BASE_URL": "https://x", "GATE_ADVISOR_MODEL": "m", "GATE_ADVISOR_API_KEY": "k",
      "GATE_ADVISOR_API_KEY_FILE": "/x"}, "not both"),
    ({"GATE_ADVISOR_API_KEY_FILE": "/nonexistent/key"}, "unreadable"),
    ({"GATE_ADVISOR_TIMEOUT": "0"}, "GATE_ADVISOR_TIMEOUT"),
    ({"GATE_ADVISOR_TIMEOUT": "nan"}, "GATE_ADVISOR_TIMEOUT"),
    ({"GATE_ADVISORY_MODES": "maybe"}, "GATE_ADVISORY_MODES"),
])
def test_unusable_advisor_settings_refuse_to_start(tmp_path, env, message):
    from gate.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=message):
        Settings.from_env({"GATE_HOME": str(tmp_path), **env})


def test_the_settings_repr_never_shows_the_advisor_key(tmp_path):
    from gate.settings import Settings

    settings = Settings.from_env({"GATE_HOME": str(tmp_path), "GATE_ADVISOR_BASE_URL": "https://llm.example",
                                  "GATE_ADVISOR_MODEL": "m", "GATE_ADVISOR_API_KEY": "sk-secret-value"})
    assert settings.advisor_api_key == "sk-secret-value" and "sk-secret" not in repr(settings)


# --------------------------------------------------------------------------- reports and the dataset


def test_reports_and_the_dataset_never_count_an_advisory_approval_as_a_production_approval(app, client, api_key):
    from gate.ledger.stream import iter_decisions
    from workbench.dataset.convert import decisions_table

    headers = {"x-api-key": api_key}
    template = client.get("/api/decision/policy-patterns?pattern_id=pricing_exception").json["policy_pattern"]
    binding = decide(client, api_key, template["decision_request_template"]).json
    assert binding["verdict"] == "yes" and route(200, binding) == "proceed"
    advisory = decide(client, api_key, advisory_body()).json
    assert advisory["advisory_verdict"] == "yes"

    def considered(policy_id):
        body = client.get(f"/api/decision/policies/{policy_id}/effectiveness", headers=headers).json
        return body["sample"]["decisions_considered"]

    assert considered("pricing_exception") == 1  # the binding decision only
    assert considered("advisory.pricing_exception") == 1  # counted separately
    # Outcomes reported on the advisory decision feed the advisory policy's figures, never the binding one's.
    outcome = {"outcome_status": "succeeded", "decision_record_hash": advisory["record_hash"],
               "decision_receipt_hash": advisory["receipt_hash"]}
    assert client.post(f"/api/decision/{advisory['decision_id']}/outcome", json=outcome,
                       headers=headers).status_code == 201
    assert client.get("/api/decision/policies/pricing_exception/effectiveness",
                      headers=headers).json["sample"]["decisions_with_outcome"] == 0
    assert client.get("/api/decision/policies/advisory.pricing_exception/effectiveness",
                      headers=headers).json["sample"]["decisions_with_outcome"] == 1

    ledger = app.extensions["gate"].ledger
    rows = [row for batch in iter_decisions(ledger) for row in batch]
    table = decisions_table(rows).to_pylist()
    by_id = {row["decision_id"]: row for row in table}
    assert by_id[binding["decision_id"]]["verdict"] == "yes"
    exported = by_id[advisory["decision_id"]]
    assert exported["verdict"] == "review" and exported["policy_id"] == "advisory.pricing_exception"
    assert exported["binding_mode"] is None and exported["facts_json"] is not None
    assert sum(1 for row in table if row["verdict"] == "yes") == 1


def test_an_advisory_packet_exports_and_verifies(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    response = client.get(f"/api/decision/{record['decision_id']}/packet?include_input=true",
                          headers={"x-api-key": api_key})
    assert response.status_code == 200, response.json
    result = client.post("/api/decision/packet/verify", json={"packet": response.json}).json
    assert result["verified"] is True, result


@pytest.mark.parametrize("behaviour, error", [
    # review: the timeout bounded each socket read, not the exchange: an upstream that sends one
    # byte (or one header) just inside it held the request for minutes.
    (("trickle", 0.25), "ADVISOR_TIMEOUT"),
    (("trickle_headers", 0.25), "ADVISOR_TIMEOUT"),
    # review: http.client's own errors (not OSError) escaped the advisor as a 500.
    (("wire", b"NOT-HTTP garbage\r\n\r\n"), "ADVISOR_RESPONSE_INVALID"),
    (("wire", b"HTTP/1.1 200 OK\r\n" + b"".join(b"x-h%d: 1\r\n" % i for i in range(120)) + b"\r\n{}"),
     "ADVISOR_RESPONSE_INVALID"),
])
def test_a_slow_or_malformed_upstream_fails_closed_within_the_timeout(make_app, api_key, llm, behaviour, error):
    llm.behaviour["model-a"] = behaviour
    app = make_app(llm_env(llm, GATE_ADVISOR_TIMEOUT=timeout_for(error)))
    started = time.monotonic()
    response = decide(app.test_client(), api_key, advisory_body())
    elapsed = time.monotonic() - started
    assert response.status_code == 502, response.get_data(as_text=True)[:300]
    assert response.json["error"] == "ADVISOR_UPSTREAM_FAILED" and response.json["advisor_error"] == error
    if error == "ADVISOR_TIMEOUT":
        assert elapsed < 2.5, elapsed  # the whole exchange, not each read, is bounded by the timeout
    assert stored_count(app) == 0
