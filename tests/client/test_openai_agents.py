"""`gate_client.integrations.openai_agents` running the real OpenAI Agents SDK with a scripted model
(the SDK's own `ScriptedModel`, no network) against a real gate (docs/integrations.md, "Agent
frameworks"): a call proceeds only on a verified `yes` or a verified approving resolution; a
`review` is the SDK's interruption, settled from the hold's resolution and resumed (after the
`RunState` went to a string and back); `no`, a denial, an expiry, a hand-given approval, an
unreachable gate and a tampered record are refused and the tool never runs."""

from __future__ import annotations

import threading
import time
from typing import Any

from agents import Agent, RunConfig, Runner, RunState, function_tool
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from gate_client.integrations.calls import ToolGate
from gate_client.integrations.openai_agents import GateApproval
from tests.client.agent_support import HELD, NO, YES, flip_to_yes, unreachable_client
from tests.holds.support import approved_request
from tests.own_loop import run_on_own_loop

QUIET = RunConfig(tracing_disabled=True)
REFUSED = "Decision Gate did not approve this call: "


class Billing:
    """An agent whose one tool, `apply_discount`, the gate guards; the model calls it once with
    `arguments` (call id `call_1`), then answers."""

    def __init__(self, tools: ToolGate, arguments: dict[str, Any], number: type = int) -> None:
        self.ran: list[dict[str, Any]] = []

        def apply_discount(discount_percent, margin_percent, owner_approved, account_tier):
            """Apply a discount to the customer's subscription."""
            self.ran.append({"discount_percent": discount_percent, "margin_percent": margin_percent})
            return "discount applied"

        apply_discount.__annotations__ = {"discount_percent": number, "margin_percent": number,
                                          "owner_approved": bool, "account_tier": str, "return": str}

        self.approval = GateApproval(tools)
        self.model = ScriptedModel([[function_call("apply_discount", arguments, call_id="call_1")],
                                    [assistant_message("done")]])
        tool = self.approval.protect(function_tool(apply_discount))
        self.agent = Agent(name="billing", model=self.model, tools=[tool])
        self.context: dict[str, Any] = {}

    def run(self, start: Any = "apply the discount") -> Any:
        if isinstance(start, str):
            return run_on_own_loop(Runner.run(self.agent, start, context=self.context, run_config=QUIET))
        return run_on_own_loop(Runner.run(self.agent, start, run_config=QUIET))

    def settle(self, run: Any, wait: float = 0) -> RunState:
        return run_on_own_loop(self.approval.settle(run, wait=wait))


def tool_output(result: Any) -> str:
    outputs = [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]
    assert len(outputs) == 1, outputs
    return str(outputs[0])


def entry(context: dict) -> dict:
    return context["decision_gate"]["calls"]["call_1"]


def test_a_verified_yes_runs_the_tool_without_asking(agent_gate):
    billing = Billing(agent_gate.tools, YES)
    result = billing.run()
    assert not result.interruptions and result.final_output == "done"
    assert billing.ran == [{"discount_percent": 15, "margin_percent": 31}]
    assert tool_output(result) == "discount applied"
    stored = entry(billing.context)
    assert (stored["route"], stored["held"], stored["record"]["verdict"]) == ("proceed", False, "yes")
    assert stored["arguments"] == YES and stored["request"]["context"]["inputs"] == YES
    assert agent_gate.transport.paths == ["POST /api/decide"]  # one decide, checked again offline


def test_a_no_is_refused_without_asking_and_the_model_reads_why(agent_gate):
    billing = Billing(agent_gate.tools, NO)
    result = billing.run()
    assert not result.interruptions and billing.ran == []
    assert tool_output(result) == REFUSED + "verified no (DISCOUNT_ABOVE_CEILING)"
    stored = entry(billing.context)
    assert (stored["route"], stored["held"], stored["record"]["verdict"]) == ("deny", False, "no")
    assert agent_gate.holds() == []


def test_a_review_interrupts_and_resumes_on_the_verified_approval(agent_gate):
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    [interruption] = result.interruptions
    assert interruption.name == "apply_discount" and billing.ran == []
    stored = entry(billing.context)
    assert stored["held"] is True and stored["resolution"] is None and stored["record"]["verdict"] == "review"
    [hold] = agent_gate.holds()
    assert hold["decision_id"] == stored["record"]["decision_id"] and hold["state"] == "open"

    open_state = billing.settle(result)  # still open: the interruption stays pending
    assert [item.call_id for item in open_state.get_interruptions()] == ["call_1"]
    assert entry(billing.context)["resolution"] is None

    event = agent_gate.resolve(hold["decision_id"], "approve")
    state = billing.settle(result)
    restored = run_on_own_loop(RunState.from_string(billing.agent, state.to_string()))  # a paused run kept in storage
    resumed = billing.run(restored)
    assert resumed.final_output == "done" and not resumed.interruptions
    assert billing.ran == [{"discount_percent": 15, "margin_percent": 12}]
    kept = entry(resumed.context_wrapper.context)  # the record and the resolution travel with the run
    assert kept["record"] == stored["record"] and kept["resolution"] == event
    assert (kept["route"], kept["reason"]) == ("proceed", "verified approving resolution")
    assert agent_gate.transport.paths.count("POST /api/decide") == 1  # one decide, one hold


def test_a_denied_hold_is_rejected_and_the_tool_never_runs(agent_gate):
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    stored = run_on_own_loop(RunState.from_string(billing.agent, result.to_state().to_string()))  # paused, kept
    agent_gate.resolve(entry(billing.context)["record"]["decision_id"], "deny")
    resumed = billing.run(billing.settle(stored))  # settled from the restored state itself
    assert billing.ran == [] and resumed.final_output == "done"
    assert tool_output(resumed) == REFUSED + "verified resolution: denied"
    assert entry(resumed.context_wrapper.context)["resolution"]["outcome"] == "denied"


def test_an_expired_hold_is_rejected(agent_gate):
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    agent_gate.expire()
    resumed = billing.run(billing.settle(result))
    assert billing.ran == [] and tool_output(resumed) == REFUSED + "verified resolution: expired"
    assert entry(billing.context)["resolution"]["action"] == "expire"


def test_an_approval_given_by_hand_in_the_run_state_does_not_run_the_tool(agent_gate):
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    state = result.to_state()
    state.approve(result.interruptions[0])  # the application approves without the gate
    resumed = billing.run(state)
    assert billing.ran == []
    assert tool_output(resumed) == REFUSED + "the hold has no resolution yet: not approved"


def test_an_unreachable_gate_refuses(agent_gate):
    billing = Billing(ToolGate(unreachable_client(), approved_request()), YES)
    result = billing.run()
    assert not result.interruptions and billing.ran == []
    output = tool_output(result)
    assert output.startswith(REFUSED + "no usable answer from the gate: TRANSPORT") and "POST /api/decide" in output
    stored = entry(billing.context)
    assert stored["record"] is None and stored["route"] == "review" and stored["held"] is False


def test_a_tampered_record_refuses(agent_gate):
    agent_gate.transport.rewrite = flip_to_yes
    for arguments in (NO, HELD):
        billing = Billing(agent_gate.tools, arguments)
        result = billing.run()
        assert not result.interruptions and billing.ran == []  # not even a hold to wait on
        assert tool_output(result).startswith(REFUSED + "record failed offline verification: ")
        assert "record_hash" in tool_output(result) and entry(billing.context)["record"]["verdict"] == "yes"


def test_a_context_that_is_not_a_dict_refuses(agent_gate):
    billing = Billing(agent_gate.tools, YES)
    result = run_on_own_loop(Runner.run(billing.agent, "go", context=None, run_config=QUIET))
    assert billing.ran == [] and agent_gate.transport.paths == []
    assert tool_output(result) == REFUSED + "the run context is not a dict: the gate's decision cannot be kept with the run"


def test_a_call_the_sdk_paused_on_its_own_is_decided_when_settled(agent_gate):
    """Arguments the SDK must coerce (an integer for a `float` parameter) pause the call before
    `needs_approval` sees them; `settle` decides it then: a `yes` is approved, a `no` rejected."""
    for arguments, ran, output in ((YES, [{"discount_percent": 15.0, "margin_percent": 31.0}], "discount applied"),
                                   (NO, [], REFUSED + "verified no (DISCOUNT_ABOVE_CEILING)")):
        billing = Billing(agent_gate.tools, arguments, number=float)
        result = billing.run()
        assert len(result.interruptions) == 1 and "decision_gate" not in billing.context
        resumed = billing.run(billing.settle(result))
        assert billing.ran == ran and tool_output(resumed) == output
        assert entry(billing.context)["arguments"] == arguments


def test_settle_long_polls_and_wakes_when_the_reviewer_approves(agent_gate):
    """`settle(wait=…)` waits on the gate's long-poll: an approval made while it waits ends the wait
    at once (the gate wakes its waiters in this process), not at the wait's end."""
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    decision_id = entry(billing.context)["record"]["decision_id"]
    reviewer = threading.Timer(0.3, agent_gate.resolve, args=(decision_id, "approve"))
    started = time.monotonic()
    reviewer.start()
    state = billing.settle(result, wait=20)
    waited = time.monotonic() - started
    reviewer.join()
    assert 0.3 <= waited < 5, waited
    assert billing.run(state).final_output == "done" and len(billing.ran) == 1
    assert agent_gate.transport.paths[-2:] == ["POST /api/decide", f"GET /api/decision/{decision_id}/resolution"]


def test_a_streamed_run_is_settled_the_same_way(agent_gate):
    billing = Billing(agent_gate.tools, HELD)

    async def streamed() -> Any:
        result = Runner.run_streamed(billing.agent, "apply the discount", context=billing.context, run_config=QUIET)
        async for _ in result.stream_events():
            pass
        return result

    result = run_on_own_loop(streamed())
    assert len(result.interruptions) == 1 and billing.ran == []
    agent_gate.resolve(entry(billing.context)["record"]["decision_id"], "approve")
    resumed = billing.run(billing.settle(result))
    assert resumed.final_output == "done" and len(billing.ran) == 1


def test_a_gate_unreachable_while_settling_leaves_the_call_pending(agent_gate):
    billing = Billing(agent_gate.tools, HELD)
    result = billing.run()
    agent_gate.tools.client = unreachable_client()
    state = billing.settle(result)
    assert [item.call_id for item in state.get_interruptions()] == ["call_1"] and billing.ran == []
    stored = entry(billing.context)
    assert stored["resolution"] is None and stored["reason"].startswith("no usable answer from the gate: TRANSPORT")
