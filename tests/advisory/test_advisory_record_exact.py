"""Exact members of advisory Decision Records (`gate.advisory.record`) made by `POST /api/decide`,
and what `POST /api/decision/verify` says of them and of their forgeries.

Every test decides its own records on its own ledger and reads the members it needs whole.
"""

from __future__ import annotations

import copy

import pytest

from gate.advisory.advisors import MULTI_RULE, RULES, Combined, Vote
from gate.advisory.record import build_advisory_record
from gate.protocol.canonical import sha256_hex
from gate.protocol.records import action_binding_from_context, decision_urls
from gate.rulebook.patterns import load_patterns
from gate.vocabulary import DECISION_PROTOCOL_VERSION, DECISION_RECORD_VERSION, EVALUATOR_VERSION
from tests.advisory.fake_llm import FakeLLM
from tests.advisory.test_advisory_http import APPROVING, GENEROUS_TIMEOUT, advisory_body, decide


def llm_app(make_app, llm, models):
    env = {"GATE_ADVISOR_BASE_URL": llm.url, "GATE_ADVISOR_MODEL": models, "GATE_ADVISOR_TIMEOUT": GENEROUS_TIMEOUT}
    return make_app(env).test_client()


def verify(client, record):
    return client.post("/api/decision/verify", json={"record": record}).json


def offline_identity(pattern_id="pricing_exception"):
    pattern = load_patterns().find(pattern_id)
    return {"advisor_id": "policy_pattern_rulebook", "kind": "policy_pattern_rulebook",
            "evaluator_version": EVALUATOR_VERSION, "pattern_id": pattern.pattern_id,
            "pattern_hash": pattern.body["pattern_hash"], "rulebook_hash": pattern.rulebook_hash}


def test_a_single_record_has_exactly_its_members(client, api_key):
    body = advisory_body()
    record = decide(client, api_key, body).json
    assert (record["decision_protocol_version"], record["decision_record_version"], record["status"]) == (
        DECISION_PROTOCOL_VERSION, DECISION_RECORD_VERSION, "ok")
    assert "idempotency_key" not in record
    assert record["action_binding"] == action_binding_from_context(body["context"]) != {}
    urls = decision_urls(record["decision_id"])
    assert [record[name] for name in ("decision_url", "replay_url", "verify_url")] == [
        urls["decision_url"], urls["replay_url"], urls["verify_url"]]
    assert record["policy_hash"] == sha256_hex({"advisory_version": "decision_advisory_v1", "mode": "single",
                                                "combining_rule": "single_advisor_v1",
                                                "advisors": [offline_identity()]})
    assert record["receipt_signature"] and record["receipt_key_id"]
    assert verify(client, record)["verified"] is True


def test_a_multi_record_keeps_every_vote_and_its_source(make_app, api_key):
    with FakeLLM() as llm:
        llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok", "evidence": ["LLM_A"]})
        llm.behaviour["model-b"] = ("status", 500)
        client = llm_app(make_app, llm, "model-a,model-b")
        record = decide(client, api_key, advisory_body("multi")).json
    pattern = load_patterns().find("pricing_exception")
    advisory = record["advisory"]
    assert {k: v for k, v in advisory.items() if k != "advisors"} == {
        "advisory_version": "decision_advisory_v1", "mode": "multi", "question": advisory_body()["question"],
        "policy_pattern": "pricing_exception",
        "combining_rule": {"rule_id": MULTI_RULE, "description": RULES[MULTI_RULE]},
        "tally": {"yes": 2, "no": 0, "review": 0, "failed": 1}, "combined_decision": "review"}
    assert record["evidence"] == ["ADVISORY_ONLY", "WITHIN_DISCOUNT_POLICY", "LLM_A"]
    provider = llm.url.split("/")[2]
    assert record["evidence_manifest"] == {"codes": record["evidence"], "sources": [
        {"id": "policy_pattern_rulebook", "type": "advisor_vote", "kind": "policy_pattern_rulebook",
         "decision": "yes", "status": "ok", "pattern_id": "pricing_exception",
         "rulebook_id": pattern.rulebook["rulebook_id"], "rulebook_version": pattern.rulebook["version"],
         "rulebook_hash": pattern.rulebook_hash},
        {"id": "http_llm:model-a", "type": "advisor_vote", "kind": "http_llm", "decision": "yes",
         "status": "ok", "model": "model-a"},
        {"id": "http_llm:model-b", "type": "advisor_vote", "kind": "http_llm", "decision": "review",
         "status": "failed", "model": "model-b"}]}
    http = [{"advisor_id": f"http_llm:{m}", "kind": "http_llm", "model": m, "provider": provider}
            for m in ("model-a", "model-b")]
    assert record["policy_hash"] == sha256_hex({"advisory_version": "decision_advisory_v1", "mode": "multi",
                                                "combining_rule": "unanimous_yes_majority_no_v1",
                                                "advisors": [offline_identity(), *http]})


def test_evidence_is_deduplicated_in_order_and_cut_at_32_codes(make_app, api_key):
    models = [f"m{i}" for i in range(8)]
    with FakeLLM() as llm:
        for i, model in enumerate(models):
            codes = ["SHARED_CODE"] + [f"CODE_{i}_{j}" for j in range(7)]
            llm.behaviour[model] = ("answer", {"decision": "yes", "rationale": "ok", "evidence": codes})
        client = llm_app(make_app, llm, ",".join(models))
        record = decide(client, api_key, advisory_body("multi")).json
    expected = ["ADVISORY_ONLY", "WITHIN_DISCOUNT_POLICY", "SHARED_CODE"] + [
        f"CODE_{i}_{j}" for i in range(8) for j in range(7)]
    assert record["evidence"] == expected[:32]
    assert record["evidence_manifest"]["codes"] == expected[:32]
    assert len(record["evidence_manifest"]["sources"]) == 9


def test_an_offline_vote_without_a_pattern_has_no_lineage_in_its_source(client, api_key):
    record = decide(client, api_key, {"question": "Rename the workspace?"}).json
    assert record["evidence_manifest"]["sources"] == [
        {"id": "policy_pattern_rulebook", "type": "advisor_vote", "kind": "policy_pattern_rulebook",
         "decision": "review", "status": "ok"}]
    assert record["action"] == "hold_for_owner_review" and record["action_binding"] == {}


def test_a_runtime_record_hashes_its_facts_and_others_do_not(client, api_key):
    runtime = decide(client, api_key, advisory_body("runtime")).json["advisory"]
    assert runtime["runtime_context_hash"] == sha256_hex(APPROVING)
    assert "runtime_context_hash" not in decide(client, api_key, advisory_body("single")).json["advisory"]


def test_an_idempotency_key_is_kept_as_given(client, api_key):
    record = decide(client, api_key, advisory_body(), **{"x-idempotency-key": "adv-record-7"}).json
    assert record["idempotency_key"] == "adv-record-7"
    assert verify(client, record)["verified"] is True


@pytest.mark.parametrize("opinion, inputs, reading", [
    ("yes", APPROVING, ("review", "unclear", "approved", "hold_for_binding_decision")),
    ("no", {**APPROVING, "discount_percent": 40}, ("no", "no", "denied", "block_action")),
    ("review", {"discount_percent": 5}, ("review", "unclear", "review", "hold_for_owner_review")),
])
def test_each_opinion_reads_as_the_table_says_and_verifies(client, api_key, opinion, inputs, reading):
    record = decide(client, api_key, advisory_body(inputs=inputs)).json
    assert record["advisory_verdict"] == opinion
    assert (record["verdict"], record["c"], record["v"], record["action"]) == reading
    assert record["decision_contract"] == {"authority": "advisory_only", "production_verdict": False}
    assert record["production_binding_required"] is True
    result = verify(client, record)
    assert result["verified"] is True and result["record_kind"] == "advisory"
    assert result["checks"]["compact_verdict"] is True


# Each forgery keeps `c` the compact form of `verdict`, so only the advisory reading can fail it.
FORGERIES = [
    {"decision_contract": {"authority": "advisory_only", "production_verdict": True}},
    {"production_binding_required": False},
    {"production_binding_required": 1},
    {"verdict": "no", "c": "no"},
    {"v": "denied"},
    {"action": "block_action"},
    {"advisory": "yes"},
    {"advisory_verdict": "no"},
    {"advisory_verdict": "approve"},
]


@pytest.mark.parametrize("changes", FORGERIES)
def test_a_forged_reading_fails_the_compact_verdict_check(client, api_key, changes):
    record = decide(client, api_key, advisory_body()).json
    forged = dict(copy.deepcopy(record), **changes)
    result = verify(client, forged)
    assert result["verified"] is False
    assert result["checks"]["compact_verdict"] is False


def test_a_forged_combined_decision_fails_the_compact_verdict_check(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    forged = copy.deepcopy(record)
    forged["advisory"]["combined_decision"] = "no"
    assert verify(client, forged)["checks"]["compact_verdict"] is False


@pytest.mark.parametrize("kept", ["decision_contract", "advisory", "production_binding_required"])
def test_any_one_advisory_member_makes_a_record_advisory(client, api_key, kept):
    record = decide(client, api_key, advisory_body()).json
    others = {"decision_contract", "advisory", "production_binding_required"} - {kept}
    stripped = {k: v for k, v in record.items() if k not in others}
    result = verify(client, stripped)
    assert result["record_kind"] == "advisory"
    assert result["checks"]["record_members"] is False


OUTPUT_MEMBERS = ("status", "mode", "c", "v", "verdict", "advisory_verdict", "action", "evidence",
                  "decision_contract", "production_binding_required", "advisory")


def test_the_output_hash_binds_exactly_the_advisory_members(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    assert record["output_hash"] == sha256_hex({name: record[name] for name in OUTPUT_MEMBERS})
    # The question is read by no other check: only the output hash notices it changed.
    forged = copy.deepcopy(record)
    forged["advisory"]["question"] = "Something else?"
    result = verify(client, forged)
    assert result["verified"] is False and result["checks"]["output_hash"] is False
    assert result["checks"]["compact_verdict"] is True


# Direct calls of `build_advisory_record`: every argument lands in its own member (through HTTP
# several arguments come from one request, so a swapped or dropped one could pass unnoticed).

def _direct_record(**changes):
    votes = [
        Vote("offline", "policy_pattern_rulebook", "ok", "no", "too much", ("OVER_LIMIT",)),
        Vote("http_llm:m", "http_llm", "ok", "no", "no", ("LLM_NO", "OVER_LIMIT"), details={"model": "m"}),
    ]
    arguments = {
        "decision_id": "dec_direct_1", "request_id": "req-direct-1", "idempotency_key": None,
        "created_at": "2026-11-25T00:00:00.000Z", "input_hash": "ab" * 32, "mode": "runtime",
        "question": "Refund it?", "context": {"workflow": "crm", "source_record_id": "r-1", "amount": 12},
        "facts": {"amount": 12}, "pattern_id": None, "policy_id": "advisory.general",
        "policy_version": "decision_advisory_v1",
        "identities": [{"advisor_id": "offline", "kind": "policy_pattern_rulebook"},
                       {"advisor_id": "http_llm:m", "kind": "http_llm", "model": "m"}],
        "votes": votes, "combined": Combined(MULTI_RULE, "no", {"yes": 0, "no": 2, "review": 0, "failed": 0}),
    }
    return build_advisory_record(**{**arguments, **changes})


def test_a_directly_built_record_has_each_argument_in_its_member():
    record = _direct_record()
    advisory = {
        "advisory_version": "decision_advisory_v1", "mode": "runtime", "question": "Refund it?",
        "policy_pattern": None,
        "advisors": [
            {"advisor_id": "offline", "kind": "policy_pattern_rulebook", "status": "ok", "decision": "no",
             "rationale": "too much", "evidence": ["OVER_LIMIT"]},
            {"advisor_id": "http_llm:m", "kind": "http_llm", "status": "ok", "decision": "no",
             "rationale": "no", "evidence": ["LLM_NO", "OVER_LIMIT"], "model": "m"}],
        "combining_rule": {"rule_id": "unanimous_yes_majority_no_v1",
                           "description": RULES["unanimous_yes_majority_no_v1"]},
        "tally": {"yes": 0, "no": 2, "review": 0, "failed": 0},
        "combined_decision": "no",
        "runtime_context_hash": sha256_hex({"amount": 12}),
    }
    expected = {
        "decision_protocol_version": DECISION_PROTOCOL_VERSION, "decision_record_version": DECISION_RECORD_VERSION,
        "status": "ok", "mode": "runtime", "c": "no", "v": "denied", "verdict": "no", "advisory_verdict": "no",
        "decision_contract": {"authority": "advisory_only", "production_verdict": False},
        "production_binding_required": True, "advisory": advisory,
        "request_id": "req-direct-1", "decision_id": "dec_direct_1",
        "evidence": ["ADVISORY_ONLY", "OVER_LIMIT", "LLM_NO"],
        "evidence_manifest": {"codes": ["ADVISORY_ONLY", "OVER_LIMIT", "LLM_NO"], "sources": [
            {"id": "offline", "type": "advisor_vote", "kind": "policy_pattern_rulebook", "decision": "no",
             "status": "ok"},
            {"id": "http_llm:m", "type": "advisor_vote", "kind": "http_llm", "decision": "no", "status": "ok",
             "model": "m"}]},
        "action": "block_action",
        "action_binding": {"system": "crm", "resource": "r-1", "amount": "12"},
        "policy_id": "advisory.general", "policy_version": "decision_advisory_v1",
        "policy_hash": sha256_hex({"advisory_version": "decision_advisory_v1", "mode": "runtime",
                                   "combining_rule": "unanimous_yes_majority_no_v1",
                                   "advisors": [{"advisor_id": "offline", "kind": "policy_pattern_rulebook"},
                                                {"advisor_id": "http_llm:m", "kind": "http_llm", "model": "m"}]}),
        "input_hash": "ab" * 32,
    }
    expected["output_hash"] = sha256_hex({name: expected[name] for name in OUTPUT_MEMBERS})
    expected.update(replay_url="/api/decision/dec_direct_1/replay", verify_url="/api/decision/dec_direct_1/verify",
                    decision_url="/api/decision/dec_direct_1", created_at="2026-11-25T00:00:00.000Z")
    sealed = {"record_hash", "receipt_hash", "integrity"}
    assert {k: v for k, v in record.items() if k not in sealed} == expected
    assert list(record)[:len(expected)] == list(expected)  # the serialized order
    assert record["integrity"]["input_hash"] == "ab" * 32
    assert record["integrity"]["output_hash"] == expected["output_hash"]
    assert record["integrity"]["replay_url"] == "/api/decision/dec_direct_1/replay"


@pytest.mark.parametrize("given, kept", [
    (None, None), ("", None), ("   ", None), ("  key-1 ", "key-1"),
    ("k" * 301, "k" * 300), ("k" * 300, "k" * 300),
])
def test_a_directly_built_record_keeps_its_bounded_idempotency_key(given, kept):
    record = _direct_record(idempotency_key=given)
    assert record.get("idempotency_key", None) == kept
    assert ("idempotency_key" in record) is (kept is not None)
