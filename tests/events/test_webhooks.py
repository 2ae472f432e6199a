"""Events out through HTTP and a real receiver (docs/events.md): subscriptions, Standard Webhooks
signatures checked by the `standardwebhooks` package, order per scope, retries while a receiver is
down, disabling after sustained failure (an event itself), replay, secret rotation with overlap,
SSRF refusals, permissions and scope isolation."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select

from gate.ledger.tables import event_outbox, release_events, webhook_subscriptions
from tests.events.receiver import Receiver
from tests.releases.support import ALL, Api, version

LOOPBACK = {"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}


class MovableClock:
    """Real time, moved forward by hand (the receiver checks timestamps against real time, within
    five minutes, so tests move it by seconds until they mean to be out of tolerance)."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def now(self) -> datetime:
        return datetime.now(UTC) + self.offset


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def subscribe(api: Api, receiver: Receiver, **body):
    response = api.client.post("/api/events/subscriptions", json={"url": receiver.url, **body},
                               headers=api.headers())
    assert response.status_code == 201, response.get_json()
    receiver.secrets.append(response.get_json()["secret"])
    return response.get_json()["subscription"]


def dispatch(app, passes: int = 3) -> None:
    for _ in range(passes):
        app.extensions["gate"].events.delivery.dispatch_once("test-dispatcher")


def release_burst(api: Api) -> None:
    assert api.publish(version("2026-01")).status_code == 201
    assert api.publish(version("2026-02", approve_limit=10)).status_code == 201
    assert api.act("activate", version="2026-01").status_code == 201
    assert api.act("shadow", version="2026-02").status_code == 201
    assert api.act("halt", reason="enough shadow").status_code == 201
    assert api.act("canary", version="2026-02", percent=10).status_code == 201
    assert api.act("halt").status_code == 201
    assert api.act("activate", version="2026-02").status_code == 201
    assert api.act("rollback").status_code == 201


EXPECTED_TYPES = ["rulebook.published", "rulebook.published", "release.activated", "release.shadow",
                  "release.halted", "release.canary", "release.halted", "release.activated",
                  "release.rolled_back"]


def test_release_transitions_reach_the_receiver_signed_in_order_with_their_hashes(backend, gate, admin, receiver):
    subscribe(admin, receiver, **{"from": "beginning"})
    release_burst(admin)
    dispatch(gate)
    assert receiver.rejected == 0
    assert [e["type"].removeprefix("dev.decision-gate.") for e in receiver.accepted] == EXPECTED_TYPES
    assert receiver.sequences() == list(range(1, 10))
    assert {h["content-type"] for h in receiver.headers} == {"application/cloudevents+json"}
    # every release event's hash in the data is the signed event of the history
    history = admin.history().get_json()
    hashes = [e["event_hash"] for e in history["events"]]
    assert [e["data"]["event_hash"] for e in receiver.accepted if e["type"].startswith("dev.decision-gate.release")] \
        == hashes
    first = receiver.accepted[2]
    assert first["specversion"] == "1.0" and first["source"] == "urn:decision-gate:scope:tenant_a"
    assert first["data"]["version"] == "2026-01" and first["subject"] == "pricing_exception"
    # a second dispatcher pass sends nothing again
    dispatch(gate)
    assert len(receiver.accepted) == 9


def test_no_event_without_its_fact_and_a_refused_transition_announces_nothing(gate, admin, receiver):
    release_burst(admin)
    assert admin.act("halt").status_code == 409  # nothing to halt: refused, no event
    ledger = gate.extensions["gate"].ledger
    with ledger.engine.connect() as connection:
        events = connection.execute(select(func.count()).select_from(release_events)  # the key grants aside
                                    .where(release_events.c.rulebook_id != "@api-keys")).scalar()
        outbox = connection.execute(select(event_outbox.c.event_type, event_outbox.c.seq)
                                    .order_by(event_outbox.c.seq)).all()
    assert events == 7 and len(outbox) == 9
    assert [seq for _, seq in outbox] == list(range(1, 10))


def test_a_receiver_down_for_a_stretch_gets_everything_in_order_when_it_returns(gate, admin, receiver, clock):
    subscription = subscribe(admin, receiver)
    receiver.failing = True
    release_burst(admin)
    dispatch(gate, passes=2)
    assert receiver.accepted == []
    view = admin.client.get(f"/api/events/subscriptions/{subscription['subscription_id']}/deliveries",
                            headers=admin.headers()).get_json()
    assert view["lag"] == 9 and view["succeeded"] == 0 and view["attempts"] >= 1
    failure = view["last_failures"][0]
    assert failure["status_code"] == 500 and failure["excerpt"] == "<b>down for maintenance</b>"  # as text
    assert view["subscription"]["next_attempt_at"] is not None
    # retried only after its backoff: a pass before it posts nothing
    posted = len(receiver.headers)
    dispatch(gate, passes=1)
    assert len(receiver.headers) == posted
    receiver.failing = False
    for _ in range(12):  # backoff doubles from 5 s: move the clock past each retry
        clock.offset += timedelta(seconds=70)
        dispatch(gate, passes=1)
    assert receiver.sequences() == list(range(1, 10))
    view = admin.client.get(f"/api/events/subscriptions/{subscription['subscription_id']}/deliveries",
                            headers=admin.headers()).get_json()
    assert view["lag"] == 0 and view["subscription"]["failing_since"] is None


def test_sustained_failure_disables_the_subscription_with_an_event_of_its_own(gate, admin, receiver, clock):
    subscription = subscribe(admin, receiver)
    receiver.failing = True
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    clock.offset += timedelta(hours=27)
    dispatch(gate, passes=1)
    shown = admin.client.get(f"/api/events/subscriptions/{subscription['subscription_id']}",
                             headers=admin.headers()).get_json()["subscription"]
    assert shown["status"] == "disabled" and "26 hours" in shown["disabled_reason"]
    events = admin.client.get("/api/events", headers=admin.headers()).get_json()["events"]
    assert [e["type"] for e in events] == ["dev.decision-gate.rulebook.published",
                                           "dev.decision-gate.subscription.disabled"]
    assert events[1]["data"]["subscription_id"] == subscription["subscription_id"]
    # enabled again by hand, it carries on from where it stopped
    receiver.failing = False
    clock.offset = timedelta()
    response = admin.client.patch(f"/api/events/subscriptions/{subscription['subscription_id']}",
                                  json={"status": "active"}, headers=admin.headers())
    assert response.status_code == 200
    dispatch(gate)
    assert receiver.sequences() == [1, 2]


def test_replay_sends_an_event_again_with_the_same_id(gate, admin, receiver):
    subscription = subscribe(admin, receiver, **{"from": "beginning"})
    release_burst(admin)
    dispatch(gate)
    url = f"/api/events/subscriptions/{subscription['subscription_id']}/replay"
    response = admin.client.post(url, json={"seq": 3}, headers=admin.headers())
    assert response.status_code == 202 and response.get_json()["queued"] == 1
    dispatch(gate)
    assert receiver.sequences() == [*range(1, 10), 3]
    assert receiver.headers[-1]["webhook-id"] == receiver.headers[2]["webhook-id"]
    since = (datetime.now(UTC) - timedelta(hours=1)).isoformat()
    until = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    assert admin.client.post(url, json={"since": since, "until": until},
                             headers=admin.headers()).get_json()["queued"] == 9
    assert admin.client.post(url, json={"seq": 99}, headers=admin.headers()).status_code == 404
    assert admin.client.post(url, json={"since": "yesterday"}, headers=admin.headers()).status_code == 400


def test_rotation_signs_with_both_secrets_during_the_overlap(gate, admin, receiver):
    subscription = subscribe(admin, receiver)
    old = receiver.secrets[0]
    response = admin.client.post(f"/api/events/subscriptions/{subscription['subscription_id']}/rotate",
                                 json={"overlap_seconds": 3600}, headers=admin.headers())
    assert response.status_code == 200
    new = response.get_json()["secret"]
    assert new != old and new.startswith("whsec_")
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate)
    assert len(receiver.accepted) == 1  # the old secret still verifies
    receiver.secrets = [new]
    assert admin.publish(version("2026-02", approve_limit=10)).status_code == 201
    dispatch(gate)
    assert len(receiver.accepted) == 2 and receiver.rejected == 0  # and the new one does
    assert len(receiver.headers[-1]["webhook-signature"].split(" ")) == 2
    # with no overlap the old secret stops at once
    response = admin.client.post(f"/api/events/subscriptions/{subscription['subscription_id']}/rotate",
                                 json={"overlap_seconds": 0}, headers=admin.headers())
    receiver.secrets = [new]
    assert admin.publish(version("2026-03", approve_limit=11)).status_code == 201
    dispatch(gate, passes=1)
    assert receiver.rejected == 1


@pytest.mark.parametrize("url", [
    "http://10.0.0.5/hook", "http://192.168.1.10/hook", "http://172.16.0.1/hook", "http://127.0.0.1:9/hook",
    "http://169.254.169.254/latest/meta-data", "http://[::1]/hook", "http://[fe80::1]/hook",
    "http://0.0.0.0/hook", "http://localhost/hook", "ftp://example.com/hook", "http://user:pw@example.com/h",
    "http://exa mple.com/", "", 7,
    # IPv6 spellings of internal IPv4 addresses (issue 52 item 8): the address inside is judged
    "http://[::127.0.0.1]:8490/", "http://[64:ff9b::7f00:1]/", "http://[2002:7f00:1::]/",
    "http://[::ffff:0:7f00:1]/", "http://[64:ff9b:1::7f00:1]/", "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:a9fe:a9fe::]/", "http://[::a9fe:a9fe]/", "http://[::ffff:0:a9fe:a9fe]/",
    "http://[64:ff9b::a00:1]/", "http://[::ffff:127.0.0.1]/", "http://[2001:0:a00:1:ffff:ffff:80ff:fffe]/",
    "http://[64:ff9b:1:7f08:8:808:808:808]/",
    # ISATAP interface identifiers under a global prefix (issue 64 item 7), and port 0 of a public address
    "http://[2600::5efe:7f00:1]/", "http://[2600::200:5efe:a9fe:a9fe]/", "http://93.184.216.34:0/hook",
])
def test_addresses_inside_are_refused_without_an_allowance(make_app, issue_key, url):
    app = make_app()  # no GATE_WEBHOOK_ALLOW_HOSTS
    api = Api(app.test_client(), issue_key(permissions="decide,admin")["api_key"])
    response = api.client.post("/api/events/subscriptions", json={"url": url}, headers=api.headers())
    assert response.status_code == 400
    assert response.get_json()["error"] == "EVENT_TARGET_REFUSED"
    with app.extensions["gate"].ledger.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(webhook_subscriptions)).scalar() == 0


@pytest.mark.parametrize("url, reason", [
    ("https://user:pw@hooks.example.com/in", "credentials"), ("https://user@hooks.example.com/in", "credentials"),
    ("ftp://hooks.example.com/in", "http or https"), ("file://hooks.example.com/in", "http or https"),
    ("https://hooks.example.com/in\x00", "control characters"), ("https://hooks.example.com/a\tb", "control"),
    ("https://hooks.example.com/a\x7f", "control characters"), ("https://hooks.example.com:0/in", "port"),
])
def test_each_guard_refuses_alone_for_a_host_that_resolves_public(make_app, issue_key, url, reason):
    """The host resolves to a public address here (as it would on the internet), so nothing but
    the guard under test refuses the URL; the same host without the fault is subscribed."""
    app = make_app()
    app.extensions["gate"].events.delivery._resolve = lambda host, port: ["93.184.216.34"]
    api = Api(app.test_client(), issue_key(permissions="decide,admin")["api_key"])
    response = api.client.post("/api/events/subscriptions", json={"url": url}, headers=api.headers())
    assert response.status_code == 400
    assert response.get_json()["error"] == "EVENT_TARGET_REFUSED" and reason in response.get_json()["message"]
    with app.extensions["gate"].ledger.engine.connect() as connection:
        assert connection.execute(select(func.count()).select_from(webhook_subscriptions)).scalar() == 0
    clean = api.client.post("/api/events/subscriptions", json={"url": "https://hooks.example.com/in"},
                            headers=api.headers())
    assert clean.status_code == 201, clean.get_json()


def test_the_allowance_names_hosts_exactly(make_app, issue_key, receiver):
    app = make_app(env={"GATE_WEBHOOK_ALLOW_HOSTS": "localhost"})
    api = Api(app.test_client(), issue_key(permissions="decide,admin")["api_key"])
    response = api.client.post("/api/events/subscriptions", json={"url": receiver.url}, headers=api.headers())
    assert response.status_code == 400  # 127.0.0.1 is not "localhost": allowed by name only
    local = receiver.url.replace("127.0.0.1", "localhost")
    assert api.client.post("/api/events/subscriptions", json={"url": local}, headers=api.headers()).status_code == 201


def test_bad_subscription_bodies_are_refused(admin, receiver):
    for body, code in [({"url": receiver.url, "event_types": ["release.nope"]}, "EVENT_SUBSCRIPTION_INVALID"),
                       ({"url": receiver.url, "event_types": []}, "EVENT_SUBSCRIPTION_INVALID"),
                       ({"url": receiver.url, "extra": 1}, "EVENT_SUBSCRIPTION_INVALID"),
                       ({"url": receiver.url, "from": "yesterday"}, "EVENT_SUBSCRIPTION_INVALID"),
                       ([receiver.url], "EVENT_SUBSCRIPTION_INVALID")]:
        response = admin.client.post("/api/events/subscriptions", json=body, headers=admin.headers())
        assert response.status_code == 400 and response.get_json()["error"] == code, body


def test_a_subscription_gets_only_the_types_it_asked_for(gate, admin, receiver):
    subscribe(admin, receiver, event_types=["release.halted", "dev.decision-gate.release.rolled_back"])
    release_burst(admin)
    dispatch(gate)
    assert [e["type"] for e in receiver.accepted] == ["dev.decision-gate.release.halted"] * 2 + [
        "dev.decision-gate.release.rolled_back"]


def test_permissions_and_scopes(gate, admin, issue_key, receiver):
    subscription = subscribe(admin, receiver)
    plain = Api(admin.client, issue_key(permissions="decide,publish,release,approve")["api_key"])
    assert plain.client.get("/api/events/subscriptions", headers=plain.headers()).status_code == 403
    assert plain.client.post("/api/events/subscriptions", json={"url": receiver.url},
                             headers=plain.headers()).status_code == 403
    other = Api(admin.client, issue_key(scope="tenant_b", permissions="decide,admin")["api_key"])
    sid = subscription["subscription_id"]
    for method, path, body in [("get", f"/api/events/subscriptions/{sid}", None),
                               ("patch", f"/api/events/subscriptions/{sid}", {"status": "disabled"}),
                               ("post", f"/api/events/subscriptions/{sid}/rotate", {}),
                               ("post", f"/api/events/subscriptions/{sid}/replay", {"seq": 1}),
                               ("get", f"/api/events/subscriptions/{sid}/deliveries", None)]:
        response = getattr(other.client, method)(path, json=body, headers=other.headers())
        assert response.status_code == 404, path
    assert other.client.get("/api/events/subscriptions", headers=other.headers()).get_json()["subscriptions"] == []
    # a listing never shows a secret
    listed = admin.client.get("/api/events/subscriptions", headers=admin.headers()).get_json()
    assert "whsec_" not in json.dumps(listed)


def test_metrics_count_attempts_subscriptions_and_lag(make_app, issue_key, receiver, clock):
    app = make_app(env={**LOOPBACK, "GATE_METRICS_TOKEN": "m" * 24}, clock=clock)
    api = Api(app.test_client(), issue_key(permissions=ALL + ",admin")["api_key"])
    subscribe(api, receiver)
    receiver.failing = True
    failed = 'gate_webhook_attempts_total{kind="ordered",result="failed"} '

    def failed_attempts() -> float:  # the counter is the process's: its series exists at 0 from the start
        text = api.client.get("/metrics", headers={"x-metrics-token": "m" * 24}).get_data(as_text=True)
        return float(text.split(failed, 1)[1].split("\n", 1)[0])

    before = failed_attempts()
    assert api.publish(version("2026-01")).status_code == 201
    dispatch(app, passes=1)
    text = api.client.get("/metrics", headers={"x-metrics-token": "m" * 24}).get_data(as_text=True)
    assert 'gate_webhook_subscriptions{status="active"} 1.0' in text
    assert "gate_webhook_lag_events 1.0" in text
    assert failed_attempts() >= before + 1


def test_a_saved_checkpoint_is_announced_once(backend, gate, admin, receiver, sample_request):
    subscribe(admin, receiver, event_types=["checkpoint.saved"])
    records = [admin.decide(sample_request).get_json() for _ in range(3)]
    chain = records[-1]["audit_chain"]["chain_id"]
    for _ in range(2):  # the same size twice: one stored checkpoint, one event
        assert admin.client.get(f"/api/decision/chains/{chain}/checkpoint", headers=admin.headers()).status_code == 200
    dispatch(gate)
    assert [e["type"] for e in receiver.accepted] == ["dev.decision-gate.checkpoint.saved"]
    data = receiver.accepted[0]["data"]
    assert data["chain_id"] == chain and data["tree_size"] == 3 and len(data["checkpoint_hash"]) == 64


def test_deliveries_can_carry_the_gates_ed25519_signature_from_the_key_registry(gate, admin, receiver):
    import base64

    import nacl.signing

    from gate.keys.signing import raw_public_key_from_pem

    subscribe(admin, receiver, sign_ed25519=True)
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate)
    assert len(receiver.accepted) == 1  # the HMAC signature still verifies with standardwebhooks
    headers = receiver.headers[-1]
    registry = admin.client.get("/api/decision/receipt-keys").get_json()
    key = next(k for k in registry["keys"] if k["key_id"] == headers["webhook-key-id"])
    verify_key = nacl.signing.VerifyKey(raw_public_key_from_pem(key["public_key"]))
    v1a = [s.split(",", 1)[1] for s in headers["webhook-signature"].split(" ") if s.startswith("v1a,")]
    content = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode()
    stored = gate.extensions["gate"].events.outbox.event("tenant_a", 1)["event_json"].encode()
    verify_key.verify(content + stored, base64.b64decode(v1a[0]))  # raises on a bad signature
    assert json.loads(stored) == receiver.accepted[0]
    # a gate without an Ed25519 key refuses the option instead of sending less than asked
    gate.extensions["gate"].events.delivery.signing = None
    response = admin.client.post("/api/events/subscriptions", json={"url": receiver.url, "sign_ed25519": True},
                                 headers=admin.headers())
    assert response.status_code == 400 and "Ed25519" in response.get_json()["message"]


def test_policy_changes_requests_and_approvals_are_announced_with_their_principals(gate, admin, issue_key, receiver):
    subscribe(admin, receiver)
    other = Api(admin.client, issue_key(permissions="decide,approve")["api_key"])
    policy = "/api/decision/release-policy"
    assert admin.client.patch(policy, json={"require_approval": True}, headers=admin.headers()).status_code == 200
    assert admin.client.patch(policy, json={"require_approval": False}, headers=admin.headers()).status_code == 202
    assert admin.publish(version("2026-01")).status_code == 201
    pending = admin.act("activate", version="2026-01").get_json()["state"]["pending"][0]
    assert other.act("approve", request_seq=pending["request_seq"], version="2026-01",
                     rulebook_hash=pending["rulebook_hash"]).status_code == 201
    dispatch(gate)
    types = [e["type"].removeprefix("dev.decision-gate.") for e in receiver.accepted]
    assert types == ["release.policy_changed", "release.policy_change_requested", "rulebook.published",
                     "release.approval_requested", "release.approved"]
    changed = receiver.accepted[0]["data"]
    assert changed["policy_before"]["require_approval"] is False and changed["policy_after"]["require_approval"]
    assert changed["principal"]["kind"] == "api_key"
    approved = receiver.accepted[-1]["data"]
    assert approved["principal"]["id"] != receiver.accepted[3]["data"]["principal"]["id"]
