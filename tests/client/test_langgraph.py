"""`gate_client.integrations.langgraph` running a real LangGraph graph (no LLM: a node that makes the
tool call the test scripts; an in-memory checkpointer) against a real gate (docs/integrations.md,
"Agent frameworks"): a node acts only on a verified `yes` or a verified approving resolution; a
`review` `interrupt()`s and resumes with `Command(resume=…)` carrying the hold's resolution; `no`,
a denial, an expiry, a forged or missing resolution, an unreachable gate and a tampered record are
refused; the record and the resolution are kept in the graph's state."""

from __future__ import annotations

import copy
import itertools
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command

from gate_client.integrations.calls import ToolGate
from gate_client.integrations.langgraph import GraphGate, merge_calls
from tests.client.agent_support import HELD, NO, YES, flip_to_yes, unreachable_client
from tests.holds.support import approved_request

THREADS = itertools.count(1)


class State(TypedDict, total=False):
    arguments: dict[str, Any]
    outcome: str
    decision_gate: Annotated[dict[str, Any], merge_calls]


class Billing:
    """A graph of one node that applies a discount once the gate lets it (call id `call_1`)."""

    def __init__(self, tools: ToolGate) -> None:
        self.gate = GraphGate(tools)
        self.ran: list[dict[str, Any]] = []

        def apply_discount(state: State) -> dict[str, Any]:
            call = self.gate.require("apply_discount", state["arguments"], call_id="call_1")
            if not call.proceed:
                return {**call.update(), "outcome": call.reason}
            self.ran.append(state["arguments"])
            return {**call.update(), "outcome": "applied"}

        graph = StateGraph(State)
        graph.add_node("apply_discount", apply_discount)
        graph.add_edge(START, "apply_discount")
        graph.add_edge("apply_discount", END)
        self.graph = graph.compile(checkpointer=InMemorySaver())
        self.config = {"configurable": {"thread_id": f"thread-{next(THREADS)}"}}

    def invoke(self, start: Any) -> dict[str, Any]:
        return self.graph.invoke(start, self.config)

    def held(self, arguments: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """Run until the gate holds the call: the result and the interrupt's payload."""
        result = self.invoke({"arguments": arguments})
        [held] = result["__interrupt__"]
        assert self.ran == [] and "outcome" not in result
        return result, held.value["decision_gate"]


def entry(result: dict[str, Any]) -> dict[str, Any]:
    return result["decision_gate"]["call_1"]


def test_a_verified_yes_acts_without_interrupting(agent_gate):
    billing = Billing(agent_gate.tools)
    result = billing.invoke({"arguments": YES})
    assert "__interrupt__" not in result and result["outcome"] == "applied" and billing.ran == [YES]
    stored = entry(result)
    assert (stored["route"], stored["held"], stored["record"]["verdict"]) == ("proceed", False, "yes")
    assert stored["idempotency_key"].startswith("langgraph-")


def test_a_no_is_refused_without_interrupting(agent_gate):
    billing = Billing(agent_gate.tools)
    result = billing.invoke({"arguments": NO})
    assert "__interrupt__" not in result and billing.ran == []
    assert result["outcome"] == "verified no (DISCOUNT_ABOVE_CEILING)" and entry(result)["record"]["verdict"] == "no"


def test_a_review_interrupts_and_resumes_with_the_verified_approval(agent_gate):
    billing = Billing(agent_gate.tools)
    result, payload = billing.held(HELD)
    assert payload["tool"] == "apply_discount" and payload["record"]["verdict"] == "review"
    assert payload["decision_id"] == payload["record"]["decision_id"]
    assert billing.gate.resume(result["__interrupt__"]) is None  # the hold is open: nothing to resume with
    event = agent_gate.resolve(payload["decision_id"], "approve")
    command = billing.gate.resume(result["__interrupt__"])
    assert command.resume == {result["__interrupt__"][0].id: {"resolution": event}}
    resumed = billing.invoke(command)
    assert resumed["outcome"] == "applied" and billing.ran == [HELD]
    stored = entry(resumed)  # the record and the resolution kept with the run
    assert stored["record"] == payload["record"] and stored["resolution"] == event
    assert billing.graph.get_state(billing.config).values["decision_gate"]["call_1"] == stored
    # The node ran again from its start: its second decide was the first one's replay, one hold.
    assert agent_gate.transport.paths.count("POST /api/decide") == 2
    assert [hold["decision_id"] for hold in agent_gate.holds()] == [payload["decision_id"]]


def test_a_denied_hold_is_refused(agent_gate):
    billing = Billing(agent_gate.tools)
    result, payload = billing.held(HELD)
    agent_gate.resolve(payload["decision_id"], "deny")
    resumed = billing.invoke(billing.gate.resume(result["__interrupt__"]))
    assert resumed["outcome"] == "verified resolution: denied" and billing.ran == []
    assert entry(resumed)["resolution"]["outcome"] == "denied"


def test_an_expired_hold_is_refused(agent_gate):
    billing = Billing(agent_gate.tools)
    result, _ = billing.held(HELD)
    agent_gate.expire()
    resumed = billing.invoke(billing.gate.resume(result["__interrupt__"]))
    assert resumed["outcome"] == "verified resolution: expired" and billing.ran == []


def test_a_forged_or_missing_resolution_is_refused(agent_gate):
    other = Billing(agent_gate.tools)
    _, other_payload = other.held({**HELD, "margin_percent": 11})
    elsewhere = agent_gate.resolve(other_payload["decision_id"], "approve")  # a genuine approval of another hold
    unbound = ("the resolution failed verification: decision_id is not the decision record's; "
               "record_hash is not the decision record's")
    missing = "resumed without the hold's resolution: not approved"
    for margin, given, reason in ((12, {"resolution": elsewhere}, unbound),
                                  (13, "forged", "the resolution failed verification: "),
                                  (14, {"approved": True}, missing),
                                  (15, "approved", missing)):
        billing = Billing(agent_gate.tools)
        _, payload = billing.held({**HELD, "margin_percent": margin})
        value = given
        if given == "forged":  # the hold's own denial, its outcome turned into an approval
            denied = agent_gate.resolve(payload["decision_id"], "deny")
            value = {"resolution": {**copy.deepcopy(denied), "outcome": "approved", "action": "approve"}}
        resumed = billing.invoke(Command(resume=value))
        assert resumed["outcome"].startswith(reason) and billing.ran == [], (margin, resumed["outcome"])
        assert entry(resumed)["record"] == payload["record"]


def test_an_unreachable_gate_refuses(agent_gate):
    billing = Billing(ToolGate(unreachable_client(), approved_request()))
    result = billing.invoke({"arguments": YES})
    assert "__interrupt__" not in result and billing.ran == []
    assert result["outcome"].startswith("no usable answer from the gate: TRANSPORT")
    assert entry(result)["record"] is None


def test_a_tampered_record_refuses(agent_gate):
    agent_gate.transport.rewrite = flip_to_yes
    for arguments in (NO, HELD):
        billing = Billing(agent_gate.tools)
        result = billing.invoke({"arguments": arguments})
        assert "__interrupt__" not in result and billing.ran == []
        assert result["outcome"].startswith("record failed offline verification: ") and "record_hash" in result["outcome"]


def test_a_gate_unreachable_while_resuming_resumes_nothing(agent_gate):
    billing = Billing(agent_gate.tools)
    result, _ = billing.held(HELD)
    agent_gate.tools.client = unreachable_client()
    assert billing.gate.resume(result["__interrupt__"]) is None and billing.ran == []
