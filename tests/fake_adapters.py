"""A fake trusted-adapter registry with the `AdapterRegistry` interface (resolve, run -> AdapterRun).

It stands in for the operator's registry in replay tests: one adapter, `refund_window@1.0.0`,
whose facts are `days_since_purchase` = request_day - purchase_day (+ `bias`, to simulate an
adapter whose output drifted) and whose implementation hash can be changed (a new build).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from gate.errors import GateError
from gate.protocol.canonical import sha256_hex

ADAPTER_ID = "refund_window"
VERSION = "1.0.0"
MANIFEST = {"adapter_id": ADAPTER_ID, "version": VERSION, "implementation_revision": "r1",
            "input_schema": {"type": "object", "required": ["purchase_day", "request_day"]},
            "output_schema": {"type": "object", "required": ["days_since_purchase"]}}
MANIFEST_HASH = sha256_hex(MANIFEST)

RULEBOOK = {
    "schema_version": "rulebook_v1", "rulebook_id": "refund_window_gate", "version": "2026-11-01",
    "input_schema": {"required": ["days_since_purchase"], "properties": {"days_since_purchase": {"type": "integer"}}},
    "rules": [{"rule_id": "approve_within_window", "priority": 10,
               "condition": {"field": "days_since_purchase", "operator": "lte", "value": 30},
               "outcome": {"decision": "yes", "verdict": "APPROVE", "action": "refund", "reason_code": "WITHIN_WINDOW"}}],
    "default_outcome": {"decision": "no", "verdict": "DENY", "action": "decline_refund", "reason_code": "OUTSIDE_WINDOW"},
}


def adapter_request(purchase_day: int = 100, request_day: int = 120) -> dict:
    return {"mode": "rulebook", "binding_mode": "trusted_adapter_facts_then_declarative_rulebook",
            "rulebook": copy.deepcopy(RULEBOOK),
            "adapter": {"adapter_id": ADAPTER_ID, "version": VERSION, "manifest_hash": MANIFEST_HASH,
                        "input": {"purchase_day": purchase_day, "request_day": request_day}},
            "context": {"workflow": "refund_gate", "source_record_id": "order_7"}}


class Registered:
    """The `RegisteredAdapter` members decide and the registries read."""

    adapter_id, version, manifest_hash, manifest = ADAPTER_ID, VERSION, MANIFEST_HASH, MANIFEST

    def dependency(self) -> dict:
        return {"adapter_id": ADAPTER_ID, "version": VERSION, "manifest_hash": MANIFEST_HASH}


REGISTERED = Registered()  # the one registered adapter every run names, as a registry holds one


@dataclass(frozen=True)
class AdapterRun:
    facts: dict
    trusted_adapter: dict
    adapter_facts: dict
    adapter: Registered = REGISTERED


class FakeRegistry:
    def __init__(self) -> None:
        self.registered = True
        self.implementation_hash = "1" * 64
        self.bias = 0
        self.runs = 0

    def get(self, adapter_id: str, version: str):
        return Registered() if self.registered and (adapter_id, version) == (ADAPTER_ID, VERSION) else None

    def manifests(self) -> list[dict]:
        return [{**MANIFEST, "manifest_hash": MANIFEST_HASH}] if self.registered else []

    def resolve(self, invocation: dict[str, Any]) -> Registered:
        if not self.registered or (invocation.get("adapter_id"), invocation.get("version")) != (ADAPTER_ID, VERSION):
            raise GateError("TRUSTED_ADAPTER_NOT_REGISTERED", "not registered",
                            adapter_id=invocation.get("adapter_id"), version=invocation.get("version"))
        if invocation.get("manifest_hash") != MANIFEST_HASH:
            raise GateError("TRUSTED_ADAPTER_MANIFEST_MISMATCH", "manifest differs",
                            expected_manifest_hash=invocation.get("manifest_hash"),
                            registered_manifest_hash=MANIFEST_HASH)
        return Registered()

    def run(self, invocation: dict[str, Any]) -> AdapterRun:
        self.resolve(invocation)
        self.runs += 1
        data = invocation["input"]
        facts = {"days_since_purchase": data["request_day"] - data["purchase_day"] + self.bias}
        block = {"manifest_version": "trusted_adapter_manifest_v1", "adapter_id": ADAPTER_ID, "version": VERSION,
                 "implementation_revision": "r1", "implementation_hash": self.implementation_hash,
                 "manifest_hash": MANIFEST_HASH, "input_hash": sha256_hex(data), "output_hash": sha256_hex(facts),
                 "execution_isolation": "one_shot_worker_process", "capability_enforcement": "audit_hooks",
                 "execution_timeout_ms": 1000}
        facts = {**data, **facts}  # like the registry's: input plus derived output
        block["output_hash"] = sha256_hex(facts)
        return AdapterRun(facts=facts, trusted_adapter=block, adapter_facts=facts)
