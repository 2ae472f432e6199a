"""The OpenAI Agents SDK behind a gate (docs/integrations.md, "Agent frameworks"; extra
`openai-agents`): a function tool decided per call, a `review` surfaced as the SDK's interruption.

    from gate_client.integrations.calls import ToolGate
    from gate_client.integrations.openai_agents import GateApproval

    approval = GateApproval(ToolGate(client, request_template))
    agent = Agent(name="billing", tools=[approval.protect(refund)])
    context = {}                                          # the run context: a dict
    result = await Runner.run(agent, "…", context=context)
    while result.interruptions:                           # held by the gate: wait for the reviewers
        state = await approval.settle(result, wait=30)    # approves or rejects what has closed
        result = await Runner.run(agent, state)

`protect(tool)` gives a copy of a `FunctionTool` two hooks. Its `needs_approval` decides the call
through the gate (facts from its arguments, `calls.ToolGate`) and stores the call's entry in the
run context under `decision_gate.calls.<call id>`; it asks for approval only when the gate held
the call. Its tool input guardrail is the one door to running the tool: `ToolGate.allows`, offline,
so a `no`, a denial, an expiry, an open hold, any error and an approval the application gives by
hand in the `RunState` are refused (the model reads why) and the tool does not run.

`settle` waits for the held calls' resolutions (`GateClient.route_by_resolution`), stores them with
the call's entry, approves an interruption whose resolution verifies as an approval and rejects one
denied, expired or unverifiable; one still open stays pending. The context must be a dict (it is
serialized with the `RunState`); with another context nothing is stored and every call is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping, MutableMapping
from typing import Any

from agents import FunctionTool, RunContextWrapper, RunResult, RunResultStreaming, RunState
from agents.items import ToolApprovalItem
from agents.tool_guardrails import (
    ToolGuardrailFunctionOutput,
    ToolInputGuardrail,
    ToolInputGuardrailData,
)

from gate.strict_json import JsonValue
from gate_client.client import DENY, PROCEED
from gate_client.integrations.calls import STATE_KEY, ToolGate, pending

__all__ = ["CONTEXT_KEY", "REFUSED", "GateApproval", "calls"]

CONTEXT_KEY = STATE_KEY
REFUSED = "Decision Gate did not approve this call: "  # what the model reads instead of the tool's output


def calls(context: Any) -> MutableMapping[str, Any] | None:
    """The entries stored in a run context (`decision_gate.calls`), by call id; None for a context
    that is not a dict."""
    if not isinstance(context, MutableMapping):
        return None
    store = context.setdefault(CONTEXT_KEY, {})
    if not isinstance(store, MutableMapping):
        return None
    entries = store.setdefault("calls", {})
    return entries if isinstance(entries, MutableMapping) else None


class GateApproval:
    """The gate's `needs_approval` and tool guardrail for function tools, and the settling of a
    paused run's interruptions."""

    def __init__(self, gate: ToolGate) -> None:
        self.gate = gate
        self.tools: set[str] = set()  # the names of the tools protect() gave out
        self.guardrail: ToolInputGuardrail[Any] = ToolInputGuardrail(self._guard, name="decision_gate")

    def protect(self, tool: FunctionTool) -> FunctionTool:
        """A copy of `tool` decided through the gate: its `needs_approval` and its guardrail."""
        async def needs_approval(context: RunContextWrapper[Any], params: dict[str, JsonValue], call_id: str) -> bool:
            return await self.needs_approval(tool.name, context, params, call_id)

        guardrails = [*(tool.tool_input_guardrails or []), self.guardrail]
        self.tools.add(tool.name)
        return dataclasses.replace(tool, needs_approval=needs_approval, tool_input_guardrails=guardrails)

    async def needs_approval(self, tool: str, context: RunContextWrapper[Any], params: Mapping[str, JsonValue],
                             call_id: str) -> bool:
        """Decide the call (once: a stored entry for the same call is reused); True only when the
        gate held it. A call the gate refused is not asked about: the guardrail refuses it."""
        entries = calls(context.context)
        if entries is None:
            return False
        entry = entries.get(call_id)
        if not (isinstance(entry, Mapping) and entry.get("tool") == tool and entry.get("arguments") == dict(params)):
            entry = await asyncio.to_thread(self.gate.decide, tool, params)
            entries[call_id] = entry
        return pending(entry)

    def _guard(self, data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        # SECURITY: the one door to running a protected tool. needs_approval only chooses whether
        # to pause; an approval in the RunState (given by hand, or by settle) is not trusted here:
        # the call runs only when ToolGate.allows, offline, finds a verified yes or a verified
        # approving resolution for this very call; everything else, errors included, is refused.
        tool = data.context
        entries = calls(tool.context)
        entry = entries.get(tool.tool_call_id) if entries is not None else None
        try:
            arguments = json.loads(tool.tool_arguments or "{}")
        except ValueError:
            arguments = None
        if entries is None:
            reason = "the run context is not a dict: the gate's decision cannot be kept with the run"
        elif not isinstance(arguments, Mapping):
            reason = "the call's arguments are not a JSON object"
        else:
            route = self.gate.allows(entry, tool.tool_name, arguments)
            if route.proceed:
                return ToolGuardrailFunctionOutput.allow(output_info={"route": route.route, "reason": route.reason})
            reason = route.reason
        return ToolGuardrailFunctionOutput.reject_content(REFUSED + reason,
                                                          output_info={"route": "refused", "reason": reason})

    async def settle(self, run: RunResult | RunResultStreaming | RunState[Any, Any], *,
                     wait: float = 0) -> RunState[Any, Any]:
        """The paused run's state with the protected calls settled: approved on a verified `yes` or
        a resolution that verifies as an approval, rejected on anything else that is final (a
        denial, an expiry, an unverifiable answer), left pending while the hold is open (waiting up
        to `wait` seconds for each). A call the SDK paused before `needs_approval` saw it (arguments
        it had to coerce) is decided here."""
        if isinstance(run, RunResult | RunResultStreaming):
            context, interruptions = run.context_wrapper.context, list(run.interruptions)
        else:  # a RunState restored from storage: it keeps the context on its wrapper (no public accessor)
            context, interruptions = getattr(run._context, "context", None), run.get_interruptions()
        entries = calls(context)
        settled: list[tuple[ToolApprovalItem, dict[str, JsonValue]]] = []
        for interruption in interruptions:
            call_id = getattr(interruption, "call_id", None)
            if entries is None or not isinstance(call_id, str) or interruption.tool_name not in self.tools:
                continue
            stored = entries.get(call_id)
            entry: dict[str, JsonValue] = dict(stored) if isinstance(stored, Mapping) else await asyncio.to_thread(
                self._decide, interruption.tool_name or "", interruption.arguments)
            if pending(entry):
                entry = await asyncio.to_thread(self.gate.resolve, entry, wait=wait)
            entries[call_id] = entry
            settled.append((interruption, entry))
        state = run.to_state() if isinstance(run, RunResult | RunResultStreaming) else run
        for interruption, entry in settled:
            if entry["route"] == PROCEED:
                state.approve(interruption)
            elif not pending(entry) or entry["route"] == DENY:
                state.reject(interruption, rejection_message=REFUSED + str(entry["reason"]))
        return state

    def _decide(self, tool: str, arguments: str | None) -> dict[str, JsonValue]:
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        if not isinstance(parsed, Mapping):
            return {"tool": tool, "arguments": None, "record": None, "resolution": None, "route": "review",
                    "held": False, "reason": "the call's arguments are not a JSON object"}
        return self.gate.decide(tool, parsed)
