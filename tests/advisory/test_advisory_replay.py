"""Replay and diff of advisory (legacy-mode) decisions over HTTP: current mode by default, against
the gate's advisor panel; historical refused (409); never written; failures fail closed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import decisions
from tests.advisory.fake_llm import FakeLLM
from tests.advisory.test_advisory_http import APPROVING, GENEROUS_TIMEOUT, advisory_body, decide


def post(client, key, path, body=None):
    return client.post(path, data=json.dumps(body if body is not None else {}),
                       headers={"x-api-key": key, "content-type": "application/json"})


def rows(app) -> int:
    with app.extensions["gate"].ledger.read() as connection:
        return connection.execute(select(func.count()).select_from(decisions)).scalar_one()


@pytest.mark.parametrize("body", [None, {"replay_mode": "current"}])
def test_an_advisory_decision_replays_in_current_mode_and_matches(app, client, api_key, body, backend):
    record = decide(client, api_key, advisory_body()).json
    before = rows(app)
    response = post(client, api_key, f"/api/decision/{record['decision_id']}/replay", body)
    assert response.status_code == 200, response.json
    summary = response.json
    assert summary["replay_mode"] == "current"
    assert summary["replay_against"]["kind"] == "current_advisory_panel"
    assert summary["replay_against"]["policy_hash"] == record["policy_hash"]
    assert summary["replay_status"] == "matched" and summary["drift"] == []
    assert summary["compared"]["record_hash"] == {"stored": record["record_hash"],
                                                  "replayed": record["record_hash"], "matched": True}
    # The replayed projection is still advisory: never a production approval.
    assert summary["decision"]["verdict"] == "review"
    assert rows(app) == before


def test_historical_replay_of_an_advisory_decision_is_unavailable_lineage(client, api_key):
    record = decide(client, api_key, advisory_body()).json
    response = post(client, api_key, f"/api/decision/{record['decision_id']}/replay", {"replay_mode": "historical"})
    assert response.status_code == 409
    assert response.json["error"] == "REPLAY_LINEAGE_UNAVAILABLE"
    assert response.json["lineage_component"] == "advisory"


def test_diff_with_an_input_override_reports_the_drift(app, client, api_key):
    record = decide(client, api_key, advisory_body()).json
    assert record["advisory_verdict"] == "yes"
    blocked = dict(APPROVING, owner_approved=False, margin_percent=5)
    response = post(client, api_key, f"/api/decision/{record['decision_id']}/diff", {"input": blocked})
    assert response.status_code == 200, response.json
    summary = response.json
    assert summary["input_source"] == "override"
    assert summary["replay_status"] == "drifted"
    assert {d["field"] for d in summary["drift"]} >= {"record_hash"}
    assert summary["decision"]["verdict"] != "yes"


def test_an_advisor_failure_during_replay_fails_closed_and_writes_nothing(make_app, api_key):
    with FakeLLM() as llm:
        env = {"GATE_ADVISOR_BASE_URL": llm.url, "GATE_ADVISOR_MODEL": "model-a", "GATE_ADVISOR_TIMEOUT": GENEROUS_TIMEOUT}
        app = make_app(env)
        client = app.test_client()
        llm.behaviour["model-a"] = ("answer", {"decision": "yes", "rationale": "ok"})
        record = decide(client, api_key, advisory_body()).json
        llm.behaviour["model-a"] = ("status", 500)
        before = rows(app)
        response = post(client, api_key, f"/api/decision/{record['decision_id']}/replay")
        assert response.status_code == 502
        assert response.json["error"] == "ADVISOR_UPSTREAM_FAILED"
        assert rows(app) == before


def test_with_the_advisory_modes_off_the_replay_has_no_panel(make_app, api_key):
    client = make_app().test_client()
    record = decide(client, api_key, advisory_body()).json
    off = make_app({"GATE_ADVISORY_MODES": "false"}).test_client()
    response = post(off, api_key, f"/api/decision/{record['decision_id']}/replay")
    assert response.status_code == 409 and response.json["lineage_component"] == "advisory"


def test_another_scopes_advisory_decision_is_404(client, api_key, issue_key):
    record = decide(client, api_key, advisory_body()).json
    other = issue_key("tenant_b")["api_key"]
    assert post(client, other, f"/api/decision/{record['decision_id']}/replay").status_code == 404


def test_counterfactuals_of_an_advisory_decision_have_no_rulebook_to_simulate(app, client, api_key):
    record = decide(client, api_key, advisory_body()).json
    before = rows(app)
    response = post(client, api_key, f"/api/decision/{record['decision_id']}/counterfactuals",
                    {"scenarios": [{"scenario_id": "s1", "context_patch": {"inputs": {"owner_approved": False}}}]})
    assert response.status_code == 422, response.json
    assert response.json["error"] == "COUNTERFACTUAL_BASE_INPUT_UNAVAILABLE"
    assert response.json["record_kind"] == "advisory" and "/diff" in response.json["message"]
    assert rows(app) == before
