"""Fixtures the events tests share: a gate on this test's ledger that may call loopback
receivers, with a clock the test moves, and an admin key on it."""

from __future__ import annotations

import pytest

from tests.events.test_webhooks import LOOPBACK, MovableClock
from tests.releases.support import ALL, Api


@pytest.fixture
def clock():
    return MovableClock()


@pytest.fixture
def gate(make_app, clock):
    return make_app(env=LOOPBACK, clock=clock)


@pytest.fixture
def admin(gate, issue_key):
    return Api(gate.test_client(), issue_key(permissions=ALL + ",admin")["api_key"])
