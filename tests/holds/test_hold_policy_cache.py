"""The hold policy a held decide reads is kept by the version the database states (issue 68,
docs/operating.md "The hold policy a decide reads"): a change made between two decides, by this
app or by another one on the same ledger (another worker), applies to the second; while nothing
changed, a held decide reads one small version statement and none of the policy's bodies."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import event, insert

from gate.ledger.tables import hold_events
from tests.holds.support import Holds, held_request, policy, queue

FINANCE = policy({"default": queue(), "finance": queue(deadline=600)},
                 routes=[{"policy_id": "pricing_exception", "rule_id": "review_thin_margin", "queue": "finance",
                          "priority": "urgent"}])


@pytest.fixture
def keys(issue_key):
    return {"caller": issue_key(permissions="decide")["api_key"],
            "admin": issue_key(permissions="decide,admin")["api_key"]}


def _queue_of_next_hold(app, keys) -> str:
    """Decide a held request on `app` and return the queue its hold opened in."""
    caller = Holds(app.test_client(), keys["caller"])
    answer = caller.decide(held_request())
    assert answer.status_code == 200 and answer.get_json()["verdict"] == "review", answer.get_json()
    hold = caller.client.get(f"/api/holds/{answer.get_json()['decision_id']}", headers={"x-api-key": keys["admin"]})
    assert hold.status_code == 200, hold.get_json()
    return str(hold.get_json()["hold"]["queue"])


def _put(app, keys, body) -> None:
    answer = Holds(app.test_client(), keys["admin"]).put_policy(body)
    assert answer.status_code == 200, answer.get_json()


def test_a_change_between_two_decides_applies_to_the_second(make_app, keys, backend):
    app = make_app()
    assert _queue_of_next_hold(app, keys) == "default"
    assert _queue_of_next_hold(app, keys) == "default"  # kept: nothing changed
    _put(app, keys, FINANCE)
    assert _queue_of_next_hold(app, keys) == "finance"
    _put(app, keys, policy())
    assert _queue_of_next_hold(app, keys) == "default"


def test_a_change_made_through_another_app_on_the_same_ledger_applies_to_the_next_decide(make_app, keys, backend):
    """Two apps on one ledger, as two `gate serve` workers: each keeps its own policy, and each
    sees the other's change at its next decide."""
    first, second = make_app(), make_app()
    assert _queue_of_next_hold(first, keys) == "default" and _queue_of_next_hold(second, keys) == "default"
    _put(second, keys, FINANCE)
    assert _queue_of_next_hold(first, keys) == "finance"
    _put(first, keys, policy())
    assert _queue_of_next_hold(second, keys) == "default"
    assert _queue_of_next_hold(first, keys) == "default"


def test_a_policy_step_of_the_hold_chain_written_before_issue_52_is_seen_too(make_app, keys):
    """A scope whose governance chain is empty keeps the hold chain's newest `policy_set` step
    (written by a gate before issue 52): one appearing under a kept default is read at once."""
    app = make_app()
    assert _queue_of_next_hold(app, keys) == "default"
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(insert(hold_events).values(
            scope="tenant_a", seq=1, decision_id=None, action="policy_set", event_hash="0" * 64,
            created_at="2026-01-01T00:00:00.000Z", event_json=json.dumps({"policy": FINANCE})))
    assert _queue_of_next_hold(app, keys) == "finance"


@pytest.mark.parametrize("governed", [False, True], ids=["default-policy", "governed-policy"])
def test_a_held_decide_reads_no_policy_body_while_nothing_changed(make_app, keys, backend, governed):
    app = make_app()
    # The governance chain's head and the rulebook's release state are each cached for 1 s of the
    # monotonic clock; a loaded CI host has twice taken longer between the two decides, and the
    # second re-read a head as it should (the release state's the second time). The bounds are the
    # serving process's choice: set long here so that only the hold policy's version is read.
    runtime = app.extensions["gate"]
    runtime.releases.safeguards.cache_seconds = 600
    runtime.releases.reader.cache_seconds = 600
    if governed:
        _put(app, keys, FINANCE)
    _queue_of_next_hold(app, keys)  # the first decide reads the policy
    statements: list[str] = []
    engine = app.extensions["gate"].ledger.engine

    def count(_conn, _cursor, statement, *_rest):
        statements.append(" ".join(statement.split()).lower())

    event.listen(engine, "before_cursor_execute", count)
    try:
        caller = Holds(app.test_client(), keys["caller"])
        assert caller.decide(held_request()).get_json()["verdict"] == "review"
    finally:
        event.remove(engine, "before_cursor_execute", count)
    assert statements, "the decide ran no statement through the engine"
    governance = [s for s in statements if "release_events" in s]
    assert len(governance) == 1, governance  # the version: one statement
    assert "event_json" not in governance[0] and "max(" in governance[0]
    bodies = [s for s in statements if "event_json" in s and ("release_events" in s or "hold_events" in s)]
    assert bodies == []
