"""The agent-framework adapter tests' gate (tests/client/agent_support.py)."""

from __future__ import annotations

import pytest

from tests.client.agent_support import AgentGate
from tests.holds.support import MovingClock


@pytest.fixture
def agent_gate(make_app, issue_key) -> AgentGate:
    clock = MovingClock()
    app = make_app(clock=clock)
    return AgentGate(app, clock, issue_key(permissions="decide")["api_key"],
                     issue_key(permissions="decide,resolve")["api_key"])
