"""Test adapters (registered only here) and helpers for the trusted-adapter tests."""

from __future__ import annotations

import json
from pathlib import Path

from gate.adapters import load_adapter_file

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parent / "fixtures"
ADAPTER_MODE = "trusted_adapter_facts_then_declarative_rulebook"

TEST_RULEBOOK = {
    "schema_version": "rulebook_v1",
    "rulebook_id": "test_adapter_gate",
    "version": "1",
    "input_schema": {"required": ["result"], "properties": {"result": {"type": "integer"}}},
    "rules": [{"rule_id": "approve_positive", "priority": 10,
               "condition": {"field": "result", "operator": "gte", "value": 1},
               "outcome": {"decision": "yes", "verdict": "APPROVE", "action": "proceed", "reason_code": "OK"}}],
    "default_outcome": {"decision": "review", "verdict": "REVIEW", "action": "hold", "reason_code": "NO_MATCH"},
}


def misbehaving():
    return load_adapter_file(FIXTURES / "misbehaving.py")


def probe():
    return load_adapter_file(FIXTURES / "probe.py")


def register_test_adapters(app):
    registry = app.extensions["gate"].service.adapters
    return registry.register(misbehaving()), registry.register(probe())


def invocation(adapter, payload):
    return {"adapter_id": adapter.adapter_id, "version": adapter.version,
            "manifest_hash": adapter.manifest_hash, "input": payload}


def adapter_request(adapter, payload, rulebook=None):
    return {"mode": "rulebook", "binding_mode": ADAPTER_MODE, "rulebook": rulebook or TEST_RULEBOOK,
            "adapter": invocation(adapter, payload), "context": {"workflow": "tests"}}


def sample(name: str) -> dict:
    return json.loads((ROOT / "data" / "requests" / f"{name}.json").read_text())


def decide(client, key, body, **headers):
    return client.post("/api/decide", json=body, headers={"x-api-key": key, **headers})


def escapes():
    return load_adapter_file(FIXTURES / "escapes.py")
