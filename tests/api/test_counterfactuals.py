"""POST /api/decision/{id}/counterfactuals over HTTP: scenarios, headers, limits, errors, no writes."""

from __future__ import annotations

import copy

import pytest

from gate.protocol.canonical import sha256_hex
from gate.replay.whatif import MAX_SCENARIOS, merge_patch
from gate.rulebook import get_evaluator
from tests.api.test_replay import assert_error, decide, ledger_state, sql


def _post(client, key, decision_id, body):
    return client.post(f"/api/decision/{decision_id}/counterfactuals", json=body, headers={"x-api-key": key})


SCENARIOS = [
    {"scenario_id": "deep_discount", "label": "30 % discount", "context_patch": {"inputs": {"discount_percent": 30}}},
    {"scenario_id": "thin_margin", "context_patch": {"inputs": {"margin_percent": 12}}},
    {"scenario_id": "no_owner", "context_patch": {"inputs": {"owner_approved": None}}},
    {"scenario_id": "same", "label": "nothing changes", "context_patch": {"source_record_id": "sub_1042"}},
    {"scenario_id": "other_object", "context_patch": {"source_record_id": "sub_9"}},
]


def test_scenarios_are_simulations_with_the_spec_headers(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    before = ledger_state(app)
    response = _post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS})
    assert response.status_code == 200, response.json
    body = response.json
    assert response.headers["x-decision-counterfactuals-version"] == "decision_counterfactuals_v1"
    assert response.headers["x-decision-counterfactual-scenarios"] == str(len(SCENARIOS))
    assert response.headers["x-decision-counterfactual-hash"] == body["counterfactual_hash"]
    assert body["counterfactual_hash"] == sha256_hex({k: v for k, v in body.items() if k != "counterfactual_hash"})
    assert body["simulation_only"] is True and body["authorizes_mutation"] is False
    by_id = {s["scenario_id"]: s for s in body["scenarios"]}
    assert [s["scenario_id"] for s in body["scenarios"]] == [s["scenario_id"] for s in SCENARIOS]
    for scenario in body["scenarios"]:
        assert {"scenario_id", "label", "verdict", "action", "changed", "diff", "recommendation"} <= set(scenario)
        assert scenario["simulation_only"] is True and "record_hash" not in scenario
    assert by_id["deep_discount"]["label"] == "30 % discount"
    assert (by_id["deep_discount"]["verdict"], by_id["deep_discount"]["recommendation"]) == ("no", "would_block")
    assert by_id["thin_margin"]["verdict"] == "review"
    assert by_id["thin_margin"]["recommendation"] == "would_hold_for_review"
    assert by_id["no_owner"]["application_verdict"] == "NEEDS_INPUT"
    assert by_id["no_owner"]["recommendation"] == "collect_required_input"
    assert (by_id["same"]["changed"], by_id["same"]["diff"], by_id["same"]["recommendation"]) == (False, [], "unchanged")
    assert by_id["same"]["label"] == "nothing changes" and by_id["other_object"]["label"] == "other_object"
    assert by_id["other_object"]["changed"] and by_id["other_object"]["diff"][0]["field"] == "action_binding"
    assert by_id["other_object"]["verdict"] == "yes"
    diff = {d["field"]: d for d in by_id["deep_discount"]["diff"]}
    assert diff["verdict"] == {"field": "verdict", "stored": "yes", "scenario": "no"}
    assert ledger_state(app) == before


def test_scenarios_use_the_gates_evaluator_over_the_merged_facts(client, api_key, sample_request):
    """One meaning per number: each scenario equals the gate evaluator on the merge-patched facts."""
    record = decide(client, api_key, sample_request)
    body = _post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS}).json
    rulebook = sample_request["rulebook"]
    evaluator = get_evaluator(rulebook, sha256_hex(rulebook))
    for given, got in zip(SCENARIOS, body["scenarios"], strict=True):
        facts = merge_patch(sample_request["context"], given["context_patch"]).get("inputs", {})
        expected = evaluator.evaluate(facts)
        assert (got["verdict"], got["application_verdict"], got["matched_rule_id"]) == (
            expected.decision, expected.application_verdict, expected.matched_rule_id)


def test_scenarios_evaluate_against_the_current_rulebook(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    newer = copy.deepcopy(sample_request["rulebook"])
    newer["version"] = "2026-12-01"
    newer["rules"][0]["condition"]["value"] = 10
    app.extensions["gate"].service.register_rulebook("tenant_a", newer)
    body = _post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS[3:4]}).json
    assert body["evaluated_against"]["rulebook"]["version"] == "2026-12-01"
    assert body["baseline"]["verdict"] == "no"  # the unpatched facts under the current rulebook
    assert body["scenarios"][0]["changed"] and body["scenarios"][0]["recommendation"] == "would_block"


@pytest.mark.parametrize("view", ["minimal", "standard", "full"])
def test_response_view_adds_each_simulated_record(client, api_key, sample_request, view):
    record = decide(client, api_key, sample_request)
    body = _post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS[3:4], "response_view": view}).json
    simulated = body["scenarios"][0]["decision"]
    assert simulated["decision_id"] == record["decision_id"] and "receipt_signature" not in simulated
    assert ("evidence_manifest" in simulated) == (view == "full")
    assert ("evidence" in simulated) == (view != "minimal")
    assert "decision" not in _post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS[3:4]}).json["scenarios"][0]


@pytest.mark.parametrize("body,field", [
    ({}, "scenarios"),
    ({"scenarios": []}, "scenarios"),
    ({"scenarios": {"a": 1}}, "scenarios"),
    ({"scenarios": [{"scenario_id": f"s{i}", "context_patch": {}} for i in range(MAX_SCENARIOS + 1)]}, "scenarios"),
    ({"scenarios": [1]}, "scenarios[0]"),
    ({"scenarios": [{"context_patch": {}}]}, "scenarios[0].scenario_id"),
    ({"scenarios": [{"scenario_id": "a b", "context_patch": {}}]}, "scenarios[0].scenario_id"),
    ({"scenarios": [{"scenario_id": "a"}]}, "scenarios[0].context_patch"),
    ({"scenarios": [{"scenario_id": "a", "context_patch": [1]}]}, "scenarios[0].context_patch"),
    ({"scenarios": [{"scenario_id": "a", "context_patch": {"inputs": 5}}]}, "scenarios[0].context_patch.inputs"),
    ({"scenarios": [{"scenario_id": "a", "label": "", "context_patch": {}}]}, "scenarios[0].label"),
    ({"scenarios": [{"scenario_id": "a", "context_patch": {}, "code": "x"}]}, "scenarios[0].code"),
    ({"scenarios": [{"scenario_id": "a", "context_patch": {}}, {"scenario_id": "a", "context_patch": {}}]},
     "scenarios[1].scenario_id"),
])
def test_missing_or_invalid_scenarios_are_400(app, client, api_key, sample_request, body, field):
    record = decide(client, api_key, sample_request)
    before = ledger_state(app)
    response = _post(client, api_key, record["decision_id"], body)
    assert_error(response, "COUNTERFACTUAL_SCENARIOS_INVALID")
    assert field in [e["field"] for e in response.json["errors"]]
    assert response.json["max_scenarios"] == MAX_SCENARIOS
    assert ledger_state(app) == before


@pytest.mark.parametrize("body,code", [
    ({"scenarios": [{"scenario_id": "a", "context_patch": {"inputs": {"x": {"adapter_facts": {}}}}}]},
     "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN"),
    ({"scenarios": [{"scenario_id": "a", "context_patch": {"inputs": {"items": [0] * 10_001}}}]},
     "EVALUATION_INPUT_TOO_LARGE"),
    ({"scenarios": SCENARIOS, "extra": 1}, "REQUEST_INVALID"),
    ({"scenarios": SCENARIOS, "response_view": "all"}, "REQUEST_INVALID"),
])
def test_other_refusals(client, api_key, sample_request, body, code):
    record = decide(client, api_key, sample_request)
    response = _post(client, api_key, record["decision_id"], body)
    assert_error(response, code)
    if code == "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN":
        assert response.json["forbidden_fields"] == ["scenarios[0].context_patch.inputs.x.adapter_facts"]


def test_not_in_scope_is_404_and_a_key_is_required(client, api_key, issue_key, sample_request):
    record = decide(client, api_key, sample_request)
    other = issue_key(scope="tenant_b")["api_key"]
    assert_error(_post(client, other, record["decision_id"], {"scenarios": SCENARIOS}), "DECISION_NOT_FOUND")
    assert_error(_post(client, api_key, "dec_nope", {"scenarios": SCENARIOS}), "DECISION_NOT_FOUND")
    response = client.post(f"/api/decision/{record['decision_id']}/counterfactuals", json={"scenarios": SCENARIOS})
    assert response.status_code == 401


def test_unavailable_base_input_is_422(app, client, api_key, sample_request):
    record = decide(client, api_key, sample_request)
    sql(app, "UPDATE decisions SET request_json = '' WHERE decision_id = :id", id=record["decision_id"])
    assert_error(_post(client, api_key, record["decision_id"], {"scenarios": SCENARIOS}),
                 "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE")


def test_merge_patch_is_rfc_7396():
    target = {"a": "b", "c": {"d": "e", "f": "g"}, "inputs": {"x": 1}}
    patch = {"a": "z", "c": {"f": None}, "inputs": {"y": [1]}}
    assert merge_patch(target, patch) == {"a": "z", "c": {"d": "e"}, "inputs": {"x": 1, "y": [1]}}
    assert target == {"a": "b", "c": {"d": "e", "f": "g"}, "inputs": {"x": 1}}
    assert merge_patch({"a": 1}, {"a": {"b": None}}) == {"a": {}}
