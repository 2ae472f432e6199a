"""Replay of adapter decisions: the pinned invocation is re-run and its lineage compared (fake registry)."""

from __future__ import annotations

import pytest

from gate.settings import Settings
from gate_cli.served_app import create_app
from tests.api.test_replay import assert_error, ledger_state
from tests.fake_adapters import FakeRegistry, adapter_request


@pytest.fixture
def adapter_app(gate_env):
    registry = FakeRegistry()
    app = create_app(Settings.from_env(gate_env), adapters=registry)
    app.testing = True
    yield app, registry
    app.extensions["gate"].ledger.dispose()


def _decide(client, key, body):
    response = client.post("/api/decide", json=body, headers={"x-api-key": key})
    assert response.status_code == 200, response.json
    return response.json


def _replay(client, key, decision_id, path="replay", payload=None):
    return client.post(f"/api/decision/{decision_id}/{path}", json=payload, headers={"x-api-key": key})


def test_adapter_decision_replays_historically_by_rerunning_the_adapter(adapter_app, api_key):
    app, registry = adapter_app
    client = app.test_client()
    record = _decide(client, api_key, adapter_request())
    assert record["trusted_adapter"]["output_hash"] and record["adapter_facts"]["days_since_purchase"] == 20
    runs, before = registry.runs, ledger_state(app)
    body = _replay(client, api_key, record["decision_id"]).json
    assert registry.runs == runs + 1  # re-run, not read back
    assert body["replay_status"] == "matched", body["drift"]
    assert body["replay_against"]["trusted_adapter"]["output_hash"] == record["trusted_adapter"]["output_hash"]
    assert body["decision"]["runtime_binding"]["adapter_authority"] == "facts_only"
    assert ledger_state(app) == before


@pytest.mark.parametrize("change,code,field", [
    (lambda r: setattr(r, "bias", 1), "REPLAY_LINEAGE_MISMATCH", "trusted_adapter.output_hash"),
    (lambda r: setattr(r, "implementation_hash", "2" * 64), "REPLAY_LINEAGE_MISMATCH",
     "trusted_adapter.implementation_hash"),
    (lambda r: setattr(r, "registered", False), "REPLAY_LINEAGE_UNAVAILABLE", None),
])
def test_adapter_drift_is_409(adapter_app, api_key, change, code, field):
    app, registry = adapter_app
    client = app.test_client()
    record = _decide(client, api_key, adapter_request())
    change(registry)
    response = _replay(client, api_key, record["decision_id"])
    assert_error(response, code)
    assert response.json["lineage_component"] == "adapter"
    if field:
        assert response.json["field"] == field
        assert response.json["expected"] == record["trusted_adapter"][field.split(".")[1]]


def test_current_mode_reports_adapter_output_drift_instead_of_refusing(adapter_app, api_key):
    app, registry = adapter_app
    client = app.test_client()
    record = _decide(client, api_key, adapter_request(100, 130))  # 30 days: approved at the edge
    registry.bias = 1
    body = _replay(client, api_key, record["decision_id"], "diff").json
    assert body["replay_status"] == "drifted"
    assert body["compared"]["verdict"] == {"stored": "yes", "replayed": "no", "matched": False}
    registry.registered = False
    assert_error(_replay(client, api_key, record["decision_id"], "diff"), "REPLAY_LINEAGE_UNAVAILABLE")


def test_override_replaces_adapter_facts_in_current_mode(adapter_app, api_key):
    app, registry = adapter_app
    client = app.test_client()
    record = _decide(client, api_key, adapter_request())
    runs = registry.runs
    body = _replay(client, api_key, record["decision_id"], "diff", {"input": {"days_since_purchase": 45}}).json
    assert registry.runs == runs  # an override is the facts: no adapter runs
    assert body["compared"]["verdict"]["replayed"] == "no"
    assert body["decision"]["runtime_binding"]["binding_mode"] == "direct_declarative_rulebook"


def test_counterfactuals_patch_the_stored_adapter_facts(adapter_app, api_key):
    app, registry = adapter_app
    client = app.test_client()
    record = _decide(client, api_key, adapter_request())
    runs = registry.runs
    response = client.post(f"/api/decision/{record['decision_id']}/counterfactuals", headers={"x-api-key": api_key},
                           json={"scenarios": [{"scenario_id": "late", "context_patch": {"inputs": {"days_since_purchase": 40}}}]})
    assert response.status_code == 200, response.json
    assert registry.runs == runs
    scenario = response.json["scenarios"][0]
    assert scenario["verdict"] == "no" and scenario["recommendation"] == "would_block"
