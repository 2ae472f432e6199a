"""`gate_client.integrations.calls.ToolGate`, the part both agent-framework adapters share
(docs/integrations.md, "Agent frameworks"), through the real client and a real gate: how a call's
facts become its request, that a mapping that fails or facts that are not JSON are refused without
a request, and that `allows` lets only the decided call run."""

from __future__ import annotations

import math

from gate_client.client import REVIEW, Route
from gate_client.integrations.calls import ToolGate, pending
from tests.client.agent_support import HELD, NO, YES
from tests.holds.support import approved_request


def test_the_facts_go_into_the_template_or_the_builder_makes_the_request(agent_gate):
    template = approved_request()
    body = ToolGate(agent_gate.client, template).request_for("apply_discount", YES)
    assert body == {**template, "context": {**template["context"], "inputs": YES}}
    assert template["context"]["inputs"] != {} and body["context"] is not template["context"]
    with_adapter = {"adapter": {"adapter_id": "agent_action_risk", "input": {}}, "context": {"workflow": "w"}}
    assert ToolGate(agent_gate.client, with_adapter).request_for("refund", {"amount": 5}) == {
        "adapter": {"adapter_id": "agent_action_risk", "input": {"amount": 5}}, "context": {"workflow": "w"}}
    renamed = ToolGate(agent_gate.client, lambda tool, facts: {"tool": tool, "facts": facts},
                       facts=lambda tool, arguments: {"cents": arguments["amount"] * 100})
    assert renamed.request_for("refund", {"amount": 5}) == {"tool": "refund", "facts": {"cents": 500}}


def test_a_mapping_that_fails_or_facts_that_are_not_json_are_refused_and_nothing_is_sent(agent_gate):
    broken = ToolGate(agent_gate.client, approved_request(), facts=lambda tool, arguments: arguments["missing"])
    entry = broken.decide("apply_discount", YES)
    assert entry["reason"] == "the call's request could not be built: KeyError: 'missing'"
    assert (entry["route"], entry["held"], entry["record"], entry["request"]) == (REVIEW, False, None, None)
    assert not broken.allows(entry, "apply_discount", YES).proceed
    entry = ToolGate(agent_gate.client, approved_request()).decide("apply_discount", {**YES, "margin_percent": math.nan})
    assert entry["reason"].startswith("the call's request is not JSON: ") and entry["record"] is None
    assert agent_gate.transport.paths == []


def test_allows_lets_only_the_call_the_entry_decided_run(agent_gate):
    tools = agent_gate.tools
    entry = tools.decide("apply_discount", YES)
    assert tools.allows(entry, "apply_discount", YES).proceed
    assert tools.allows(entry, "apply_discount", NO).reason == "the gate's decision was for another call"
    assert tools.allows(entry, "refund", YES).reason == "the gate's decision was for another call"
    assert tools.allows(None, "apply_discount", YES).reason == "the gate has not decided this call"
    refused = tools.decide("apply_discount", NO)  # what the entry says of itself is not read
    assert not tools.allows({**refused, "route": "proceed", "held": False}, "apply_discount", NO).proceed
    # the record of one request does not let another request's call run
    swapped = {**entry, "request": tools.request_for("apply_discount", NO)}
    assert "input_hash" in tools.allows(swapped, "apply_discount", YES).reason
    held = tools.decide("apply_discount", HELD)
    assert pending(held) and tools.allows(held, "apply_discount", HELD).route == REVIEW
    # the hold's approval lets its call run, and never beside another hold's record
    approval = agent_gate.resolve(held["record"]["decision_id"], "approve")
    assert tools.allows({**held, "resolution": approval}, "apply_discount", HELD).proceed
    assert not tools.allows({**held, "resolution": approval, "record": tools.decide("apply_discount", {
        **HELD, "margin_percent": 11})["record"]}, "apply_discount", HELD).proceed


def test_an_advisory_or_unverified_review_is_no_hold_to_wait_on(agent_gate):
    held = agent_gate.client.route(agent_gate.tools.request_for("apply_discount", HELD))
    assert held.held
    advisory = {**held.record, "decision_contract": {"production_verdict": False, "authority": "advisory_only"}}
    assert not Route(REVIEW, "", advisory, held.verification).held
    assert not Route(REVIEW, "", held.record, {**held.verification, "verified": False}).held
    assert not Route(REVIEW, "", None, held.verification).held
    assert not Route(REVIEW, "", {**held.record, "verdict": "yes"}, held.verification).held
