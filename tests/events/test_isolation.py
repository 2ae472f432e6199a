"""One party's receivers never stall another's deliveries (issue 53/2, docs/events.md "Isolation"):
concurrent deliveries with a bound per scope, a circuit breaker per endpoint, and the Standard
Webhooks answers (410 disables; 429, 502, 503, 504 with `Retry-After` throttle that endpoint).
Every receiver here is a real HTTP server on loopback verifying with `standardwebhooks`."""

from __future__ import annotations

import time
from datetime import datetime, timedelta

import pytest

from gate.events import breaker
from tests.events.receiver import Receiver
from tests.events.test_webhooks import LOOPBACK, dispatch, subscribe
from tests.releases.support import ALL, Api, version
from tests.server.support import call, server_factory  # noqa: F401 (the fixture)


@pytest.fixture
def receivers():
    made: list[Receiver] = []

    def make() -> Receiver:
        made.append(Receiver())
        return made[-1]

    yield make
    for receiver in made:
        receiver.close()


def _at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _subscription(api: Api, subscription_id: str) -> dict:
    response = api.client.get(f"/api/events/subscriptions/{subscription_id}", headers=api.headers())
    return response.get_json()["subscription"]


def _events(api: Api) -> list[dict]:
    return api.client.get("/api/events", headers=api.headers()).get_json()["events"]


def test_a_410_disables_the_subscription_with_an_event_of_its_own(gate, admin, receivers):
    gone, other = receivers(), receivers()
    gone.answer = (410, {})
    subscription = subscribe(admin, gone)
    subscribe(admin, other)
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    shown = _subscription(admin, subscription["subscription_id"])
    assert shown["status"] == "disabled" and shown["disabled_reason"] == "the receiver answered 410 Gone"
    assert len(gone.headers) == 1 and gone.rejected == 0  # verified, answered 410 once, never again
    assert [e["type"] for e in _events(admin)][-1] == "dev.decision-gate.subscription.disabled"
    dispatch(gate, passes=2)
    assert len(gone.headers) == 1
    assert [e["type"] for e in other.accepted] == ["dev.decision-gate.rulebook.published",
                                                   "dev.decision-gate.subscription.disabled"]


def test_a_410_to_a_replay_disables_too(gate, admin, receivers):
    receiver = receivers()
    subscription = subscribe(admin, receiver)
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    receiver.answer = (410, {})
    url = f"/api/events/subscriptions/{subscription['subscription_id']}/replay"
    assert admin.client.post(url, json={"seq": 1}, headers=admin.headers()).status_code == 202
    dispatch(gate, passes=1)
    assert _subscription(admin, subscription["subscription_id"])["status"] == "disabled"


@pytest.mark.parametrize("status", [429, 502, 503, 504])
def test_retry_after_throttles_the_endpoint_for_every_subscription_to_it(gate, admin, receivers, clock, status):
    busy = receivers()
    first, second = subscribe(admin, busy), subscribe(admin, busy)
    busy.answer = (status, {"Retry-After": "120"})
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    assert len(busy.headers) == 1  # the second subscription to the same endpoint was not tried
    shown = _subscription(admin, first["subscription_id"])
    waited = (_at(shown["next_attempt_at"]) - clock.now()).total_seconds()
    assert 110 < waited <= 120  # the receiver's pause, not the 5 s backoff
    clock.offset += timedelta(seconds=60)
    dispatch(gate, passes=2)
    assert len(busy.headers) == 1  # still throttled, whatever the second subscription's own backoff
    busy.answer = None
    clock.offset += timedelta(seconds=61)  # (within the receiver's five minutes of timestamp tolerance)
    dispatch(gate, passes=2)
    assert [int(e["sequence"]) for e in busy.accepted] == [1, 1]
    assert _subscription(admin, second["subscription_id"])["cursor"] == 1


def test_retry_after_without_a_throttling_status_or_readable_value_is_the_backoff(gate, admin, receivers, clock):
    receiver = receivers()
    subscription = subscribe(admin, receiver)
    receiver.answer = (500, {"Retry-After": "600"})
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    shown = _subscription(admin, subscription["subscription_id"])
    assert (_at(shown["next_attempt_at"]) - clock.now()).total_seconds() <= 5


def test_the_breaker_opens_after_three_failures_and_tries_once_when_its_time_is_up(gate, admin, receivers, clock):
    down = receivers()
    down.failing = True
    for _ in range(5):
        subscribe(admin, down)
    assert admin.publish(version("2026-01")).status_code == 201
    dispatch(gate, passes=1)
    assert len(down.headers) == breaker.FAILURES_TO_OPEN  # the other two never reached it
    clock.offset += timedelta(seconds=breaker.OPEN_SECONDS + 1)  # past the breaker and every backoff
    dispatch(gate, passes=1)
    assert len(down.headers) == breaker.FAILURES_TO_OPEN + 1  # one trial; it failed: open again, longer
    clock.offset += timedelta(seconds=breaker.OPEN_SECONDS + 1)
    dispatch(gate, passes=1)
    assert len(down.headers) == breaker.FAILURES_TO_OPEN + 1
    down.failing = False
    clock.offset += timedelta(seconds=2 * breaker.OPEN_SECONDS)
    dispatch(gate, passes=2)
    assert [int(e["sequence"]) for e in down.accepted] == [1] * 5  # closed by the trial's success: all of them


# ------------------------------------------------------------------ a real server, real receivers

ENV = {**LOOPBACK, "GATE_EVENTS_LEASE_SECONDS": "30"}
HANGING = 16


def _first_arrival(receiver: Receiver, count: int, deadline: float) -> float | None:
    while time.monotonic() < deadline:
        if len(receiver.accepted) >= count:
            return time.monotonic()
        time.sleep(0.01)
    return None


@pytest.mark.slow
def test_sixteen_hanging_subscriptions_of_another_scope_delay_no_delivery(server_factory, issue_key, receivers):  # noqa: F811 (the fixture imported above)
    server = server_factory(workers=2, env=ENV)
    hostile = {"x-api-key": issue_key(scope="tenant_b", permissions=ALL + ",admin")["api_key"]}
    ours = {"x-api-key": issue_key(scope="tenant_a", permissions=ALL + ",admin")["api_key"]}
    hanging = []
    for _ in range(HANGING):  # each its own endpoint: no breaker shares what one of them learns
        receiver = receivers()
        receiver.hang = True
        status, _, body = call("POST", server.base + "/api/events/subscriptions", {"url": receiver.url}, hostile)
        assert status == 201, body
        receiver.secrets.append(body["secret"])
        hanging.append(receiver)
    good = receivers()
    status, _, body = call("POST", server.base + "/api/events/subscriptions", {"url": good.url}, ours)
    good.secrets.append(body["secret"])
    assert call("POST", server.base + "/api/decision/rulebooks", version("v1"), hostile)[0] == 201
    deadline = time.monotonic() + 10
    while sum(len(r.headers) for r in hanging) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # tenant_b's receivers now hold deliveries open
    waits = []
    for n, name in enumerate(("v1", "v2", "v3", "v4"), start=1):
        assert call("POST", server.base + "/api/decision/rulebooks", version(name, approve_limit=10 + n), ours)[0] == 201
        sent = time.monotonic()
        arrived = _first_arrival(good, n, sent + 30)
        assert arrived is not None, f"publication {n} never arrived"
        waits.append(arrived - sent)
        time.sleep(1.5)  # across the hanging receivers' time limits and retries
    assert max(waits) < 2.0, waits
    assert good.sequences() == [1, 2, 3, 4] and good.rejected == 0
    assert sum(len(r.headers) for r in hanging) >= 4 and all(r.rejected == 0 for r in hanging)


@pytest.mark.slow
def test_two_tenants_of_one_receiver_host_each_keep_their_deliveries(server_factory, issue_key, receivers):  # noqa: F811 (the fixture imported above)
    """Issue 64/4: one receiver host and port for both tenants (a hosted webhook service): the
    breaker and the concurrency bound are per scope and endpoint, so the 16 hanging subscriptions
    of one tenant never hold back the other's deliveries to the same host."""
    server = server_factory(workers=2, env=ENV)
    hostile = {"x-api-key": issue_key(scope="tenant_b", permissions=ALL + ",admin")["api_key"]}
    ours = {"x-api-key": issue_key(scope="tenant_a", permissions=ALL + ",admin")["api_key"]}
    host = receivers()
    host.hang_prefix = "/hang/"
    for n in range(HANGING):
        status, _, body = call("POST", server.base + "/api/events/subscriptions",
                               {"url": f"{host.base}/hang/{n}"}, hostile)
        assert status == 201, body
        host.secrets.append(body["secret"])
    status, _, body = call("POST", server.base + "/api/events/subscriptions", {"url": host.base + "/tenant-a"}, ours)
    assert status == 201, body
    host.secrets.append(body["secret"])
    assert call("POST", server.base + "/api/decision/rulebooks", version("v1"), hostile)[0] == 201
    deadline = time.monotonic() + 10
    while len(host.headers) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # tenant_b's subscriptions now hold deliveries to the host open
    waits = []
    for n, name in enumerate(("v1", "v2", "v3", "v4"), start=1):
        assert call("POST", server.base + "/api/decision/rulebooks", version(name, approve_limit=10 + n), ours)[0] == 201
        sent = time.monotonic()
        arrived = _first_arrival(host, n, sent + 30)
        assert arrived is not None, f"publication {n} never arrived"
        waits.append(arrived - sent)
        time.sleep(1.5)  # across the hanging deliveries' time limits, so tenant_b's breaker opens
    assert max(waits) < 2.0, waits
    assert host.sequences("tenant_a") == [1, 2, 3, 4] and host.rejected == 0
    assert len(host.headers) >= 4 + 4  # tenant_b's deliveries reached the host and hung there


def test_one_scope_alone_at_a_host_leaves_room_for_another(make_app):
    """The pool's place bound: a scope alone at an endpoint runs at most half the host-wide bound
    there, and a second scope at the same endpoint starts at once."""
    import threading

    from gate.events.pool import FairPool

    release, started = threading.Event(), []
    lock = threading.Lock()

    def run(item: tuple[str, int]) -> bool:
        with lock:
            started.append(item)
        release.wait(10)
        return False

    pool: FairPool[tuple[str, int]] = FairPool(run, workers=8, per_group=8, per_place=4)
    try:
        for n in range(6):
            pool.offer("tenant_b", ("b", n), ("tenant_b", n), place=("http", "127.0.0.1", 80))
        time.sleep(0.3)
        assert sum(1 for g, _ in started if g == "tenant_b") == 2  # half of the host's four
        pool.offer("tenant_a", ("a", 0), ("tenant_a", 0), place=("http", "127.0.0.1", 80))
        time.sleep(0.3)
        assert ("tenant_a", 0) in started  # its share was free: no wait behind tenant_b
        pool.offer("tenant_c", ("c", 0), ("tenant_c", 0), place=("http", "127.0.0.1", 81))
        time.sleep(0.3)
        assert ("tenant_c", 0) in started  # another endpoint: the host's bound is not its
    finally:
        release.set()
        pool.stop()


def test_a_subscription_is_delivered_by_one_thread_at_a_time_in_order(make_app, issue_key, receivers):
    """The dispatcher's pool: many subscriptions at once, each one's events in sequence."""
    from gate.services.events import Dispatcher

    app = make_app(env=LOOPBACK)
    api = Api(app.test_client(), issue_key(permissions=ALL + ",admin")["api_key"])
    targets = [receivers() for _ in range(6)]
    for receiver in targets:
        subscribe(api, receiver)
    for n in range(12):
        assert api.publish(version(f"v{n}", approve_limit=10 + n)).status_code == 201
    dispatcher = Dispatcher(app.extensions["gate"].events, interval=0.05, concurrency=4)
    dispatcher.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(len(r.accepted) < 12 for r in targets):
            time.sleep(0.05)
    finally:
        dispatcher.stop()
    for receiver in targets:
        assert receiver.sequences() == list(range(1, 13))


# ------------------------------------------------------------------ kept connections (issue 53/3)


def test_a_receiver_that_keeps_connections_gets_a_burst_over_one(gate, admin):
    receiver = Receiver(keep_alive=True)
    try:
        subscription = subscribe(admin, receiver)
        for n in range(12):
            assert admin.publish(version(f"v{n}", approve_limit=10 + n)).status_code == 201
        dispatch(gate, passes=1)
        assert receiver.sequences() == list(range(1, 13)) and receiver.rejected == 0
        assert len(set(receiver.peers)) == 1  # one TCP connection for the twelve
        view = admin.client.get(f"/api/events/subscriptions/{subscription['subscription_id']}/deliveries",
                                headers=admin.headers()).get_json()
        assert (view["attempts"], view["succeeded"], view["lag"]) == (12, 12, 0)
    finally:
        receiver.close()


def test_a_connection_the_receiver_dropped_is_replaced_without_a_failed_delivery(gate, admin):
    receiver = Receiver(keep_alive=True)
    receiver.drop_kept = True
    try:
        subscription = subscribe(admin, receiver)
        for n in range(3):
            assert admin.publish(version(f"v{n}", approve_limit=10 + n)).status_code == 201
            dispatch(gate, passes=1)
        assert receiver.sequences() == [1, 2, 3]
        assert len(set(receiver.peers)) == 3  # each post found its kept connection closed and opened one
        view = admin.client.get(f"/api/events/subscriptions/{subscription['subscription_id']}/deliveries",
                                headers=admin.headers()).get_json()
        assert (view["attempts"], view["succeeded"]) == (3, 3)
    finally:
        receiver.close()


def test_a_receiver_that_closes_each_connection_still_gets_everything(gate, admin, receivers):
    receiver = receivers()  # HTTP/1.0: one connection per delivery, never kept
    subscribe(admin, receiver)
    for n in range(4):
        assert admin.publish(version(f"v{n}", approve_limit=10 + n)).status_code == 201
    dispatch(gate, passes=1)
    assert receiver.sequences() == [1, 2, 3, 4] and len(set(receiver.peers)) == 4
