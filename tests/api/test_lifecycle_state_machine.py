"""Issue 6 standing harness: a hypothesis state machine over the lifecycle (decide → execute →
outcome → packet → verify) that interleaves tampering with the stored rows.

Every tamper step changes the ledger by SQL, the way someone with database access would, and
must be caught right away, with the check named, by hosted verify (`GET /api/decision/{id}/verify`)
or the scope's chain view. Decisions that were never touched must keep verifying, and their
packets must keep verifying, whatever was done to their neighbours. Each example gets fresh
scopes, so examples do not see each other's damage. The budget is fixed (seeded, bounded
examples and steps) so the run stays within seconds.
"""

from __future__ import annotations

import json
import secrets
from typing import ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from sqlalchemy import delete, select, update

from gate.keys.apikeys import new_api_key
from gate.ledger.tables import chain_links, decisions, lifecycle_receipts

pytestmark = pytest.mark.usefixtures("backend")

EXECUTION = {"execution_status": "executed", "action_taken": "apply_discount", "target_system": "billing"}
OUTCOME = {"outcome_status": "succeeded", "action_executed": True, "observed_metrics": {"margin": 31.5}}


def _edit_record_json(member, value):
    def tamper(machine, decision_id):
        record = json.loads(machine.column(decision_id, "record_json"))
        record[member] = value
        machine.set_columns(decision_id, record_json=json.dumps(record))
    return tamper


def _set_column(column, value):
    def tamper(machine, decision_id):
        machine.set_columns(decision_id, **{column: value})
    return tamper


def _edit_request_json(machine, decision_id):
    request = json.loads(machine.column(decision_id, "request_json"))
    request["context"]["inputs"]["discount_percent"] = 99
    machine.set_columns(decision_id, request_json=json.dumps(request))


def _edit_link_json(machine, decision_id):
    with machine.engine.begin() as connection:
        link = json.loads(connection.execute(select(chain_links.c.link_json).where(
            chain_links.c.decision_id == decision_id)).scalar())
        link["policy_version"] = "0.0.0-forged"
        connection.execute(update(chain_links).where(chain_links.c.decision_id == decision_id)
                           .values(link_json=json.dumps(link)))


# name -> (tamper(machine, decision_id), where it must be caught, the check it must name)
DECISION_TAMPERS = {
    "record verdict": (_edit_record_json("verdict", "no"), "verify", "record_hash"),
    "record evaluation dropped": (_edit_record_json("evaluation", None), "verify", "output_hash"),
    "verdict column": (_set_column("verdict", "no"), "verify", "ledger_columns"),
    "policy_id column": (_set_column("policy_id", "forged"), "verify", "ledger_columns"),
    "policy_version column": (_set_column("policy_version", "0.0.0"), "verify", "ledger_columns"),
    "created_at column": (_set_column("created_at", "2001-01-01T00:00:00.000Z"), "verify", "ledger_columns"),
    "policy_bundle_hash column": (_set_column("policy_bundle_hash", "a" * 64), "verify", "ledger_columns"),
    "key_id column": (_set_column("key_id", "key_forged"), "verify", "ledger_row_hash"),
    "row signature removed": (_set_column("row_signature", None), "verify", "ledger_row_signature"),
    "stored request": (_edit_request_json, "verify", "ledger_input_hash"),
    "chain link": (_edit_link_json, "verify", "chain_link"),
    "row moved to another scope": (None, "other scope verify", "ledger_scope"),
    "row deleted": (None, "chain view", "decision_hashes"),
    "another record copied in": (None, "verify", "ledger_decision_id"),
}
RECEIPT_TAMPERS = ("receipt deleted", "receipt moved to another decision", "receipt edited", "receipt column edited")


class LifecycleMachine(RuleBasedStateMachine):
    """Model: the decisions of this example's scope, their receipts, and what was tampered."""

    app = None  # set by the test
    exercised: ClassVar[set[str]] = set()  # tamper names applied over the whole run (shared on purpose)
    decision_tampers: tuple[str, ...] = tuple(sorted(DECISION_TAMPERS))
    receipt_tampers: tuple[str, ...] = RECEIPT_TAMPERS
    sample_request = None

    def __init__(self) -> None:
        super().__init__()
        self.client = self.app.test_client()
        self.engine = self.app.extensions["gate"].ledger.engine
        suffix = secrets.token_hex(4)
        self.key = self.new_key(f"sm_a_{suffix}")
        self.other_scope = f"sm_b_{suffix}"
        self.other_key = self.new_key(self.other_scope)
        self.records: dict[str, dict] = {}
        self.receipts: dict[str, list[str]] = {}
        self.tampered: set[str] = set()
        self.chain_id: str | None = None

    # ------------------------------------------------------------------ helpers

    def new_key(self, scope):
        """A key of a fresh scope, stored the way `gate keys create` stores one (without its
        per-call ledger upgrade, which would dominate the run time)."""
        key = new_api_key()
        self.app.extensions["gate"].ledger.insert_api_key({
            "key_id": key.key_id, "key_hash": key.key_hash, "scope": scope, "plan": "starter",
            "rate_limit": 100_000, "monthly_cap": None, "status": "active", "label": None,
            "created_at": "2026-11-01T00:00:00.000Z"})
        return key.api_key

    def headers(self, key=None):
        return {"x-api-key": key or self.key}

    def column(self, decision_id, name):
        with self.engine.connect() as connection:
            return connection.execute(select(decisions.c[name]).where(decisions.c.decision_id == decision_id)).scalar()

    def set_columns(self, decision_id, **values):
        with self.engine.begin() as connection:
            connection.execute(update(decisions).where(decisions.c.decision_id == decision_id).values(**values))

    def intact(self):
        return sorted(set(self.records) - self.tampered)

    def verify(self, decision_id, key=None):
        response = self.client.get(f"/api/decision/{decision_id}/verify", headers=self.headers(key))
        assert response.status_code == 200, response.json
        return response.json

    def chain_view(self):
        response = self.client.get(f"/api/decision/chains/{self.chain_id}?limit=1000", headers=self.headers())
        assert response.status_code == 200, response.json
        return response.json["verification"]

    def assert_caught(self, decision_id, where, check):
        if where == "verify":
            body = self.verify(decision_id)
            assert body["verified"] is False and check in body["failed_checks"], (check, body["failed_checks"])
        elif where == "other scope verify":
            body = self.verify(decision_id, self.other_key)
            assert body["verified"] is False and check in body["failed_checks"], (check, body["failed_checks"])
            view = self.chain_view()
            assert view["valid"] is False and view["checks"]["decision_hashes"] is False
        else:
            view = self.chain_view()
            assert view["valid"] is False and view["checks"][check] is False, view["checks"]

    # ------------------------------------------------------------------ lifecycle

    @initialize()
    def first_decision(self):
        self.decide()

    @rule()
    def decide(self):
        response = self.client.post("/api/decide", json=self.sample_request, headers=self.headers())
        assert response.status_code == 200, response.json
        record = response.json
        self.records[record["decision_id"]] = record
        self.receipts[record["decision_id"]] = []
        self.chain_id = record["audit_chain"]["chain_id"]

    @precondition(lambda self: self.intact())
    @rule(data=st.data(), kind=st.sampled_from(["execution", "outcome"]))
    def report(self, data, kind):
        decision_id = data.draw(st.sampled_from(self.intact()), label="decision")
        record = self.records[decision_id]
        body = dict(EXECUTION if kind == "execution" else OUTCOME, decision_record_hash=record["record_hash"])
        if kind == "execution":
            body["decision_receipt_hash"] = record["receipt_hash"]
        response = self.client.post(f"/api/decision/{decision_id}/{kind}", json=body, headers=self.headers())
        assert response.status_code == 201, response.json
        receipt = response.json[kind]
        self.receipts[decision_id].append(receipt["execution_receipt_id" if kind == "execution" else "outcome_id"])

    @precondition(lambda self: self.intact() and not self.tampered)
    @rule(data=st.data())
    def packet_verifies(self, data):
        decision_id = data.draw(st.sampled_from(self.intact()), label="decision")
        exported = self.client.get(f"/api/decision/{decision_id}/packet", headers=self.headers())
        assert exported.status_code == 200, exported.json
        result = self.client.post("/api/decision/packet/verify", json={"packet": exported.json}).json
        assert result["verified"] is True, result["failed_checks"]
        assert self.chain_view()["valid"] is True

    @invariant()
    def untouched_decisions_verify(self):
        for decision_id in self.intact()[-1:]:
            body = self.verify(decision_id)
            assert body["verified"] is True, (decision_id, body["failed_checks"], body["receipt_failures"])

    # ------------------------------------------------------------------ tampering

    @precondition(lambda self: self.intact() and self.decision_tampers)
    @rule(data=st.data())
    def tamper_a_decision(self, data):
        self.tamper_decision(data, data.draw(st.sampled_from(self.decision_tampers), label="tamper"))

    def tamper_decision(self, data, name):
        decision_id = data.draw(st.sampled_from(self.intact()), label="decision")
        tamper, where, check = DECISION_TAMPERS[name]
        if name == "row moved to another scope":
            self.set_columns(decision_id, scope=self.other_scope)
        elif name == "row deleted":
            with self.engine.begin() as connection:
                connection.execute(delete(decisions).where(decisions.c.decision_id == decision_id))
        elif name == "another record copied in":
            others = [other for other in self.records if other != decision_id and other in self.existing()]
            if not others:
                return
            source = data.draw(st.sampled_from(others), label="source")
            self.set_columns(decision_id, **{name: self.column(source, name) for name in (
                "record_json", "request_json", "input_hash", "record_hash", "receipt_hash")})
        else:
            tamper(self, decision_id)
        self.tampered.add(decision_id)
        self.exercised.add(name)
        self.assert_caught(decision_id, where, check)

    @precondition(lambda self: self.receipt_tampers and any(self.receipts[d] for d in self.intact()))
    @rule(data=st.data())
    def tamper_receipt(self, data):
        name = data.draw(st.sampled_from(self.receipt_tampers), label="tamper")
        decision_id = data.draw(st.sampled_from([d for d in self.intact() if self.receipts[d]]), label="decision")
        receipt_id = data.draw(st.sampled_from(self.receipts[decision_id]), label="receipt")
        where = lifecycle_receipts.c.receipt_id == receipt_id
        with self.engine.begin() as connection:
            if name == "receipt deleted":
                connection.execute(delete(lifecycle_receipts).where(where))
            elif name == "receipt moved to another decision":
                target = "dec_" + secrets.token_hex(12)
                connection.execute(update(lifecycle_receipts).where(where).values(decision_id=target))
            elif name == "receipt edited":
                stored = json.loads(connection.execute(select(lifecycle_receipts.c.receipt_json).where(where)).scalar())
                stored["reported_at"] = "2001-01-01T00:00:00.000Z"
                connection.execute(update(lifecycle_receipts).where(where).values(receipt_json=json.dumps(stored)))
            else:
                connection.execute(update(lifecycle_receipts).where(where).values(reported_at="2001-01-01T00:00:00.000Z"))
        self.tampered.add(decision_id)
        self.exercised.add(name)
        body = self.verify(decision_id)
        check = "receipt_chain" if name != "receipt edited" else "lifecycle_receipts"
        assert body["verified"] is False and check in body["failed_checks"], (name, body["failed_checks"])

    def existing(self):
        with self.engine.connect() as connection:
            return set(connection.execute(select(decisions.c.decision_id)).scalars())


def run_machine(app, sample_request, tampers, *, examples, steps):
    class Machine(LifecycleMachine):
        pass

    Machine.app, Machine.sample_request = app, sample_request
    Machine.decision_tampers = tuple(name for name in tampers if name in DECISION_TAMPERS)
    Machine.receipt_tampers = tuple(name for name in tampers if name in RECEIPT_TAMPERS)
    Machine.exercised = set()
    run_state_machine_as_test(Machine, settings=settings(
        max_examples=examples, stateful_step_count=steps, deadline=None, derandomize=True, database=None,
        suppress_health_check=list(HealthCheck)))
    return Machine.exercised


def test_tampers_interleaved_with_the_lifecycle_are_caught_and_named(app, sample_request):
    exercised = run_machine(app, sample_request, (*DECISION_TAMPERS, *RECEIPT_TAMPERS),
                            examples=10, steps=10)
    # The seeded budget really tampers, across kinds (each kind also has its own test in
    # tests/api/test_ledger_binding.py and tests/api/test_reads_verify.py).
    assert len(exercised) >= 8, sorted(exercised)
