"""LangGraph behind a gate (docs/integrations.md, "Agent frameworks"; extra `langgraph`): a node
asks the gate before it acts, `interrupt()`s on `review` and resumes with the hold's verified
resolution (`Command(resume=…)`).

    from gate_client.integrations.calls import ToolGate
    from gate_client.integrations.langgraph import CALLS_KEY, GraphGate, merge_calls

    class State(TypedDict):
        amount: int
        decision_gate: Annotated[dict, merge_calls]        # the calls' entries, kept with the run

    gate = GraphGate(ToolGate(client, request_template))

    def refund(state: State) -> dict:
        call = gate.require("refund", {"amount": state["amount"]}, call_id="refund-1")
        if not call.proceed:                                # `no`, denial, expiry, any error
            return {**call.update(), "outcome": call.reason}
        ...                                                 # the action itself
        return {**call.update(), "outcome": "refunded"}

    result = graph.invoke(inputs, config)                   # a checkpointer and a thread_id
    while result.get("__interrupt__"):                      # held by the gate
        command = gate.resume(result["__interrupt__"], wait=30)
        if command is not None:                             # a hold closed: resume with its resolution
            result = graph.invoke(command, config)

`require` decides the call through the gate with an idempotency key made of the thread id and
`call_id`: LangGraph runs a node again from its start when it resumes, and the gate answers that
second decide with the same record (a call id is one call of its thread). A held call
`interrupt()`s with the decision id, record and reason; the resume value is checked offline
(`ToolGate.resolve`), so only a resolution that verifies as an approval of this very record lets
the node act: a denial, an expiry, a forged or missing resolution, and every error do not.
`update()` is the state update that keeps the call's entry (record and resolution) in the graph's
state under `decision_gate`, merged by `merge_calls`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from langgraph.config import get_config
from langgraph.types import Command, Interrupt, interrupt

from gate_client.client import REVIEW, Route
from gate_client.integrations.calls import STATE_KEY, ToolGate, pending

__all__ = ["CALLS_KEY", "GateCall", "GraphGate", "merge_calls"]

CALLS_KEY = STATE_KEY


def merge_calls(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> dict[str, Any]:
    """The state reducer of `decision_gate`: the calls' entries by call id, the newest kept."""
    return {**(left or {}), **(right or {})}


@dataclass(frozen=True)
class GateCall:
    """A call the gate decided: its entry (kept in the state) and whether it may run."""

    call_id: str
    entry: dict[str, Any]
    route: Route

    @property
    def proceed(self) -> bool:
        return self.route.proceed

    @property
    def reason(self) -> str:
        return self.route.reason

    def update(self) -> dict[str, Any]:
        """The state update that keeps this call's entry in the graph state."""
        return {CALLS_KEY: {self.call_id: self.entry}}


class GraphGate:
    """`require` inside a node; `resume` for the application that runs the graph."""

    def __init__(self, gate: ToolGate) -> None:
        self.gate = gate

    def require(self, tool: str, arguments: Mapping[str, Any], *, call_id: str) -> GateCall:
        """Decide the call; on a hold, `interrupt()` until the graph resumes with its resolution."""
        arguments = dict(arguments)
        entry = self.gate.decide(tool, arguments, idempotency_key=self._key(call_id))
        if pending(entry):
            answer = interrupt({CALLS_KEY: {"call_id": call_id, "tool": tool, "reason": entry["reason"],
                                            "decision_id": entry["record"]["decision_id"],
                                            "record": entry["record"]}})
            # SECURITY: the resume value comes from whoever resumes the graph: it is checked
            # offline against this record (ToolGate.resolve, then allows), never taken as an approval.
            resolution = answer.get("resolution") if isinstance(answer, Mapping) else None
            if resolution is None:  # resumed without a resolution: no approval to check
                entry = {**entry, "reason": "resumed without the hold's resolution: not approved"}
                return GateCall(call_id, entry, Route(REVIEW, entry["reason"], entry["record"]))
            entry = self.gate.resolve(entry, resolution)
        return GateCall(call_id, entry, self.gate.allows(entry, tool, arguments))

    def resume(self, interrupts: Iterable[Interrupt], *, wait: float = 0) -> Command[Any] | None:
        """The `Command` that resumes the graph's held calls whose holds have closed, each with its
        resolution as the gate signed it (waiting up to `wait` seconds for each); None while every
        hold is open. The node checks the resolution itself: this only fetches it."""
        values: dict[str, Any] = {}
        for item in interrupts:
            payload = item.value.get(CALLS_KEY) if isinstance(item.value, Mapping) else None
            if not isinstance(payload, Mapping) or not isinstance(payload.get("record"), Mapping):
                continue
            route = self.gate.client.route_by_resolution(payload["record"], wait=wait)
            if route.resolution is not None:
                values[item.id] = {"resolution": route.resolution}
        return Command(resume=values) if values else None

    @staticmethod
    def _key(call_id: str) -> str:
        thread = str((get_config().get("configurable") or {}).get("thread_id", ""))
        digest = hashlib.sha256(f"{thread}\0{call_id}".encode()).hexdigest()
        return f"langgraph-{digest[:40]}"
