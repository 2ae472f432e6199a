"""What the agent-framework adapter tests share (tests/client/test_openai_agents.py,
test_langgraph.py): a gate (the Flask app on a clock the test moves) reached by the real
`GateClient` through a transport that hands its requests to the app's test client, keys for a
caller and a reviewer, and the tool call the tests make: `apply_discount`, whose arguments are the
facts of the sample pricing rulebook (owner-backed 15% on an annual plan: yes; above 25%: no; a
margin under 20%: held)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gate_client.client import GateClient
from gate_client.integrations.calls import ToolGate
from tests.holds.support import Holds, MovingClock, approved_request

YES = {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"}
NO = {**YES, "discount_percent": 30}
HELD = {**YES, "margin_percent": 12}


class Answer:
    def __init__(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.status_code, self.headers, self._data = status, headers, data

    def __enter__(self) -> Answer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def iter_content(self, size: int):
        yield self._data


class FlaskTransport:
    """A `requests.Session` stand-in for `GateClient(session=...)`: each request goes to the app's
    test client. `rewrite(path, body)` may change a 2xx JSON body on its way back (tampering)."""

    def __init__(self, app: Any) -> None:
        self.client = app.test_client()
        self.rewrite: Callable[[str, dict], dict] | None = None
        self.paths: list[str] = []

    def request(self, method: str, url: str, *, data: bytes | None = None, params: dict | None = None,
                headers: dict | None = None, **_: object) -> Answer:
        path = urlsplit(url).path
        self.paths.append(f"{method} {path}")
        answer = self.client.open(path, method=method, data=data, query_string=params, headers=headers)
        body = answer.get_data()
        if self.rewrite is not None and answer.status_code < 300:
            body = json.dumps(self.rewrite(path, json.loads(body))).encode()
        return Answer(answer.status_code, dict(answer.headers), body)

    def close(self) -> None:
        pass


class AgentGate:
    """The gate, its clock, the reviewer's calls and a `ToolGate` over the real client."""

    def __init__(self, app: Any, clock: MovingClock, caller: str, reviewer: str) -> None:
        self.app, self.clock = app, clock
        self.transport = FlaskTransport(app)
        self.client = GateClient("http://gate.test", caller, session=self.transport,
                                 anchors=app.extensions["gate"].signing.trust_anchors(), sleep=lambda _s: None)
        self.reviewer = Holds(app.test_client(), reviewer)
        self.tools = ToolGate(self.client, approved_request())

    def resolve(self, decision_id: str, decision: str) -> dict:
        answer = self.reviewer.resolve(decision_id, decision, "CHECKED")
        assert answer.status_code == 201, answer.get_json()
        return answer.get_json()["event"]

    def expire(self) -> None:
        self.clock.advance(86_400 + 1)  # past the default queue's deadline: silence expires the hold
        assert self.app.extensions["gate"].holds.sweep() >= 1

    def holds(self) -> list[dict]:
        return self.reviewer.inbox("?state=all").get_json()["holds"]


def unreachable_client() -> GateClient:
    """A client of a gate that does not answer (a closed loopback port), not retried."""
    from tests.client.live_gate import free_port

    return GateClient(f"http://127.0.0.1:{free_port()}", "dg_key", retries=0, timeout=2)


def flip_to_yes(path: str, body: dict) -> dict:
    """A man in the middle turns the gate's `no` or `review` into `yes`."""
    if path == "/api/decide":
        body.update(verdict="yes", c="yes", action="apply_discount", reason_code="WITHIN_DISCOUNT_POLICY")
    return body
