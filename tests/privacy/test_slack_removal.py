"""Issue 67: a removal of a decision's inputs (retention or erasure, the one home
`InputRemoval.remove`) reaches the Slack message of its hold. In the removal's transaction the
stored blocks (`slack_messages`) lose the hold's facts and buttons for one line saying its inputs
were removed, a digest keeping its other holds' blocks, and the message is marked stale; the
notifier's Slack pass sends them (`chat.update`, to a real HTTP server standing for Slack) and
clears the mark. A message Slack says is gone is not tried again; a server error is. On SQLite
and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from gate.clock import FixedClock
from gate.ledger.tables import slack_messages
from gate.services.removal import InputRemoval
from tests.holds.support import Holds
from tests.holds.test_channels import (  # noqa: F401 - fixtures
    SECRET,
    _blocks_of,
    _channels,
    _held,
    _pass,
    _policy,
    _reviewer_key,
    clock,
    grants,
    keys,
    slack_api,
    smtp,
)

NOTE = "note-of-ada-lovelace-91"  # a fact's value shown in the message; never sent once removed
OTHER = "note-of-alan-turing-42"
SHOW = ["facts.margin_percent", "facts.note"]


@pytest.fixture
def gate(make_app, backend, clock, smtp, slack_api, grants):  # noqa: F811
    return make_app({"GATE_SLACK_BOT_TOKEN": "xoxb-test", "GATE_SLACK_API_URL": slack_api.url,
                     "GATE_SLACK_SIGNING_SECRET": SECRET, "GATE_GRANTS_FILE": str(grants)}, clock=clock)


def _told(gate, keys, slack_api, clock, every=0):  # noqa: F811
    """Two held decisions told to Slack (one message each, or one digest); their records."""
    admin = Holds(gate.test_client(), keys["admin"])
    assert admin.put_policy(_policy(_channels(every=every, email=()), show=SHOW)).status_code == 200
    if not every:  # two messages: Slack gives each its own ts
        slack_api.answers.extend((200, {"ok": True, "channel": "C0123CHANNEL", "ts": f"1700000000.000{n}00"})
                                 for n in (1, 2))
    first, second = _held(gate, keys, note=NOTE), _held(gate, keys, margin_percent=11, note=OTHER)
    if every:
        clock.advance(every + 1)
    assert _pass(gate, "slack") == (1 if every else 2)
    assert NOTE in json.dumps(slack_api.calls) and OTHER in json.dumps(slack_api.calls)
    return first, second


def _remove(gate, decision_id, cause="retention"):
    removal = InputRemoval(gate.extensions["gate"].ledger, FixedClock(datetime.now(UTC)))
    assert removal.remove("tenant_a", [decision_id], removal.cause(cause, "30 days")) == [decision_id]


def _stored(gate):
    with gate.extensions["gate"].ledger.read() as connection:
        return [dict(row) for row in connection.execute(select(slack_messages)).mappings()]


def test_a_removal_rewrites_the_message_in_slack_and_in_the_ledger(gate, keys, slack_api, clock):  # noqa: F811
    first, second = _told(gate, keys, slack_api, clock)
    _remove(gate, first["decision_id"])
    rows = {row["decision_id"]: row for row in _stored(gate)}
    assert NOTE not in rows[first["decision_id"]]["blocks_json"] and rows[first["decision_id"]]["stale"] == 1
    assert OTHER in rows[second["decision_id"]]["blocks_json"] and rows[second["decision_id"]]["stale"] == 0
    told = len(slack_api.calls)
    assert _pass(gate, "slack") == 1
    (method, update, _), = slack_api.calls[told:]
    assert method == "chat.update" and update["ts"] == "1700000000.000100"
    sent = json.dumps(update)
    assert NOTE not in sent
    assert _blocks_of(slack_api.calls[-1]) == [{
        "type": "section", "block_id": f"removed:{first['decision_id']}",
        "text": {"type": "plain_text", "text": f"Decision {first['decision_id']}: inputs removed (retention).",
                 "emoji": False}}]
    assert [row["stale"] for row in _stored(gate)] == [0, 0]
    assert _pass(gate, "slack") == 0 and len(slack_api.calls) == told + 1  # sent once


def test_a_digest_keeps_its_other_hold_s_buttons(gate, keys, slack_api, clock):  # noqa: F811
    first, second = _told(gate, keys, slack_api, clock, every=120)
    _remove(gate, first["decision_id"], "erasure")
    assert _pass(gate, "slack") == 1
    method, update, _ = slack_api.calls[-1]
    blocks = _blocks_of(slack_api.calls[-1])
    assert method == "chat.update" and NOTE not in json.dumps(update) and OTHER in json.dumps(update)
    assert blocks[0]["text"]["text"] == f"Decision {first['decision_id']}: inputs removed (erasure)."
    assert blocks[2]["block_id"] == f"hold:{second['decision_id']}"
    assert [b["action_id"] for b in blocks[2]["elements"]][:2] == ["hold_approve", "hold_deny"]
    assert len(blocks) == 3
    for row in _stored(gate):  # both rows of the one message hold what was sent
        assert json.loads(row["blocks_json"]) == blocks and row["stale"] == 0


def test_a_gone_message_is_not_tried_again_and_a_server_error_is(gate, keys, slack_api, clock):  # noqa: F811
    first, _second = _told(gate, keys, slack_api, clock)
    _remove(gate, first["decision_id"])
    slack_api.answers.append((500, {"ok": False}))
    told = len(slack_api.calls)
    assert _pass(gate, "slack") == 0 and len(slack_api.calls) == told + 1
    assert [row["stale"] for row in _stored(gate) if row["decision_id"] == first["decision_id"]] == [1]
    clock.advance(60)  # past the breaker's first open time
    slack_api.answers.append((200, {"ok": False, "error": "message_not_found"}))
    assert _pass(gate, "slack") == 0 and len(slack_api.calls) == told + 2
    assert [row["stale"] for row in _stored(gate)] == [0, 0]
    assert _pass(gate, "slack") == 0 and len(slack_api.calls) == told + 2  # not tried again
    rows = {row["decision_id"]: row for row in _stored(gate)}
    assert NOTE not in rows[first["decision_id"]]["blocks_json"]


def test_a_removal_while_the_update_is_on_its_way_is_sent_on_the_next_pass(gate, keys, slack_api, clock):  # noqa: F811
    """The mark is cleared only if the blocks are still those sent: the other hold's removal,
    filed while Slack answers the first update, leaves the message marked for the next pass."""
    first, second = _told(gate, keys, slack_api, clock, every=120)
    _remove(gate, first["decision_id"])
    slack_api.answers.append(lambda: (_remove(gate, second["decision_id"]), (200, {"ok": True}))[1])
    assert _pass(gate, "slack") == 1 and OTHER in json.dumps(slack_api.calls[-1])
    assert {row["stale"] for row in _stored(gate)} == {1}
    assert _pass(gate, "slack") == 1
    sent = json.dumps(slack_api.calls[-1])
    assert OTHER not in sent and NOTE not in sent and "hold:" not in sent
    assert {row["stale"] for row in _stored(gate)} == {0}


def test_a_closed_hold_s_update_never_writes_removed_facts_back(gate, keys, slack_api, clock):  # noqa: F811
    """A closed hold's update made from the blocks before a removal filed while it is on its way
    is not stored over the rewritten blocks; the next pass sends those."""
    first, _second = _told(gate, keys, slack_api, clock, every=120)
    reviewer = Holds(gate.test_client(), _reviewer_key(gate))
    assert reviewer.resolve(first["decision_id"], "deny").status_code == 201
    slack_api.answers.append(lambda: (_remove(gate, first["decision_id"]), (200, {"ok": True}))[1])
    assert _pass(gate, "slack") == 1 and NOTE in json.dumps(slack_api.calls[-1])  # made before the removal
    assert all(NOTE not in row["blocks_json"] and row["stale"] == 1 for row in _stored(gate))
    assert _pass(gate, "slack") == 1 and NOTE not in json.dumps(slack_api.calls[-1])
    assert "inputs removed (retention)" in json.dumps(slack_api.calls[-1])
