"""A tool call decided by a gate: what the agent-framework adapters share (docs/integrations.md,
"Agent frameworks"). Needs only the client; the framework adapters build on it.

A call is decided once. Its facts come from its arguments (`facts`, by default the arguments
themselves) and go into the application's request: a template whose `context.inputs` (or, for a
template that names a trusted adapter, its `adapter.input`) become the facts, or a function that
builds the whole request. `GateClient.route` decides, verifies offline and routes the answer.

What the adapter stores with the run (the run context, the graph state) is the call's entry, a
JSON object: `tool`, `arguments`, `request`, `idempotency_key`, `record` (the Decision Record, or
null when there is none), `resolution` (the hold's signed resolution, once it arrived), `route`
(`proceed`, `deny` or `review`), `held` (the gate held the call: it waits for a resolution) and
`reason`.

`ToolGate.allows` is the one door to running the tool: offline, with the client's anchors, it
proceeds only for the very call the entry was decided for and only on a record that verifies,
is bound to the request and says `yes`, or on a verified approving resolution of the hold. A
`no`, a denial, an expiry, an open hold, an advisory or tampered record, a resolution that does
not verify, and every error (the gate unreachable, a request the facts could not be built into)
are not approved.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from gate_client.client import REVIEW, GateClient, Route

Facts = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]
RequestBuilder = Callable[[str, Mapping[str, Any]], Mapping[str, Any]]

__all__ = ["STATE_KEY", "Facts", "RequestBuilder", "ToolGate", "pending", "tool_arguments"]

STATE_KEY = "decision_gate"  # where a run keeps its calls' entries (the run context, the graph state)


def tool_arguments(tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """The default facts of a call: its arguments, as the model gave them."""
    return dict(arguments)


def pending(entry: Mapping[str, Any] | None) -> bool:
    """Whether the entry's call waits on an open hold (held, and no resolution yet)."""
    return bool(entry and entry.get("held") is True and entry.get("resolution") is None)


class ToolGate:
    """One gate client and the application's request for a tool call's facts."""

    def __init__(self, client: GateClient, request: Mapping[str, Any] | RequestBuilder, *,
                 facts: Facts = tool_arguments) -> None:
        self.client, self.request, self.facts = client, request, facts

    def request_for(self, tool: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The decide request of a call: its facts in the application's request."""
        facts = dict(self.facts(tool, arguments))
        if callable(self.request):
            return dict(self.request(tool, facts))
        body = copy.deepcopy(dict(self.request))
        if isinstance(body.get("adapter"), Mapping):
            body["adapter"] = {**body["adapter"], "input": facts}
        else:
            body["context"] = {**(body.get("context") or {}), "inputs": facts}
        return body

    def decide(self, tool: str, arguments: Mapping[str, Any], *, idempotency_key: str | None = None) -> dict[str, Any]:
        """Decide a call through the gate (`GateClient.route`); its entry. Never raises: a request
        the facts cannot be built into is an entry that is not approved."""
        arguments = dict(arguments)
        try:
            request = self.request_for(tool, arguments)
        except Exception as error:  # noqa: BLE001 - the application's mapping failed: the call is refused, never run
            return _entry(tool, arguments, None, Route(REVIEW, f"the call's request could not be built: "
                                                               f"{type(error).__name__}: {error}"))
        try:
            route = self.client.route(request, idempotency_key=idempotency_key)
        except (TypeError, ValueError) as error:  # facts that are not JSON (NaN, objects): nothing was sent
            route = Route(REVIEW, f"the call's request is not JSON: {error}")
        return _entry(tool, arguments, request, route)

    def resolve(self, entry: Mapping[str, Any], resolution: Any = None, *, wait: float = 0) -> dict[str, Any]:
        """The entry of a held call with its hold's resolution: `resolution` as given (a resumed
        graph's value), checked offline, or, without it, the gate's answer after waiting up to
        `wait` seconds (`GateClient.route_by_resolution`). A call still open stays pending; a call
        that was not held is returned as it is."""
        if not pending(entry):
            return dict(entry)
        route = self.client.route_by_resolution(entry["record"], resolution, wait=wait)
        if route.resolution is None and route.error is None and resolution is None:
            return {**entry, "reason": route.reason}  # still open: wait again later
        return {**entry, "resolution": route.resolution, "route": route.route, "reason": route.reason}

    def allows(self, entry: Any, tool: str, arguments: Mapping[str, Any]) -> Route:
        """Whether the call may run now, offline: only the call this entry decided, on a verified
        `yes` bound to its request or a verified approving resolution of its hold.

        SECURITY: the entry lives with the run, where the application (or whoever can write its
        stored state) can change it, so nothing in it is taken on trust: the record is verified
        again with the client's pinned anchors and bound to the stored request, the stored
        arguments must be the call's, and a resolution is verified again against the record. The
        `route` and `held` members are never read here."""
        if not isinstance(entry, Mapping):
            return Route(REVIEW, "the gate has not decided this call")
        if entry.get("tool") != tool or entry.get("arguments") != dict(arguments):
            return Route(REVIEW, "the gate's decision was for another call")
        record, request = entry.get("record"), entry.get("request")
        if not isinstance(record, Mapping) or not isinstance(request, Mapping):
            return Route(REVIEW, str(entry.get("reason") or "the gate gave no Decision Record"))
        check = self.client.check(record, request)  # verified, bound to this call's request
        if not check.held:  # a verified yes proceeds; a no, an advisory or tampered record never does
            return check
        if entry.get("resolution") is None:
            return Route(REVIEW, "the hold has no resolution yet: not approved", dict(record))
        return self.client.route_by_resolution(record, entry["resolution"])


def _entry(tool: str, arguments: dict[str, Any], request: dict[str, Any] | None, route: Route) -> dict[str, Any]:
    return {"tool": tool, "arguments": arguments, "request": request, "idempotency_key": route.idempotency_key,
            "record": route.record, "resolution": None, "route": route.route, "held": route.held,
            "reason": route.reason}
