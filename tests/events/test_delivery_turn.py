"""What one delivery costs (issue 68, item 1): a turn's ordered walk checks its subscription's
target once, not once per event, and still follows a DNS answer that moves inside from the next
turn on; a post writes its head and body in one write. Through a real receiver over loopback."""

from __future__ import annotations

import json
import socket

import pytest
from sqlalchemy import event, text

from gate.errors import LedgerUnavailable
from gate.events import webhook
from gate.events.targets import check
from gate.ledger import Ledger
from gate.ledger import outbox as outbox_module
from gate.ledger.outbox import Outbox
from gate.ledger.outbox_write import append_event
from gate.services.governance import SafeguardSettings
from gate.services.root import compose_events
from tests.events.receiver import Receiver
from tests.events.test_webhooks import MovableClock

SCOPE = "acme"


@pytest.fixture
def ledger(database_url):
    made = Ledger(database_url, pool_size=2)
    yield made
    made.dispose()


@pytest.fixture
def receiver():
    made = Receiver()
    yield made
    made.close()


class Resolver:
    """A DNS stand-in for `hooks.example`: answers `answer` and counts the questions."""

    def __init__(self) -> None:
        self.answer, self.asked = "127.0.0.1", 0

    def __call__(self, host: str, port: int) -> list[str]:
        self.asked += 1
        return [self.answer]


def _events(ledger: Ledger, count: int) -> None:
    with ledger.write() as connection:
        for n in range(count):
            append_event(connection, SCOPE, "rulebook.published", f"rb-{n}", "2026-11-28T08:00:00.000Z",
                         {"rulebook_id": f"rb-{n}", "version": "v1", "rulebook_hash": "sha256:" + "0" * 64})


@pytest.mark.usefixtures("backend")
def test_a_turn_checks_its_target_once_and_the_next_turn_follows_a_moved_answer(ledger, receiver):
    resolver = Resolver()
    service = compose_events(ledger, MovableClock(), allow_hosts=("hooks.example",), resolve=resolver,
                             safeguards=SafeguardSettings(ledger))
    port = receiver.server.server_address[1]
    view, secret = service.subscribe(SCOPE, "operator:test", {"url": f"http://hooks.example:{port}/hook",
                                                              "from": "beginning"})
    receiver.secrets.append(secret)
    _events(ledger, 6)
    resolver.asked = 0
    assert service.delivery.dispatch_once("test") == 6
    assert len(receiver.accepted) == 6
    assert resolver.asked == 1  # one check for the turn's six posts (was six)

    resolver.answer = "10.1.2.3"  # the name now points inside: the allowed name is judged as it resolves
    service_refusing = compose_events(ledger, MovableClock(), allow_hosts=(), resolve=resolver,
                                      safeguards=SafeguardSettings(ledger))
    _events(ledger, 2)
    assert service_refusing.delivery.dispatch_once("test") == 1  # refused before any connection: one failed attempt
    assert len(receiver.bodies) == 6
    attempts = service_refusing.deliveries(SCOPE, view["subscription_id"])["last_failures"]
    assert attempts[0]["status_code"] is None and "10.1.2.3" in attempts[0]["excerpt"]


def test_a_post_writes_its_head_and_body_in_one_write(receiver, monkeypatch):
    writes: list[int] = []
    real = socket.socket.sendall

    class Counted(socket.socket):
        def sendall(self, data, flags=0):  # type: ignore[override]
            writes.append(len(data))
            return real(self, data, flags)

    made = socket.create_connection

    def counted(address, timeout=None, *args):  # the connection's socket, counting its writes
        sock = made(address, timeout, *args)
        wrapped = Counted(fileno=sock.detach())
        wrapped.settimeout(timeout)  # the descriptor is non-blocking under a timeout: keep the timeout
        return wrapped

    monkeypatch.setattr(webhook.socket, "create_connection", counted)
    body = b'{"event": "' + b"x" * 3000 + b'"}'
    target = check(receiver.url, {"127.0.0.1"})
    delivered = webhook.post(target, {"content-type": "application/json", "webhook-id": "msg_1"}, body)
    assert delivered.status_code == 401  # not signed for this receiver: it read the whole request all the same
    assert len(writes) == 1 and writes[0] > len(body)
    assert receiver.bodies == [body]


@pytest.mark.usefixtures("backend")
def test_an_idle_subscription_is_offered_no_turn_and_its_pass_writes_nothing(ledger, receiver):
    """A turn claims and releases its subscription's lease (two write transactions): a
    subscription with no event after its cursor and no replay queued is not offered one, so a
    dispatcher's pass over idle subscriptions writes nothing to the ledger the decides write to."""
    service = compose_events(ledger, MovableClock(), allow_hosts=("127.0.0.1",),
                             safeguards=SafeguardSettings(ledger))
    view, secret = service.subscribe(SCOPE, "operator:test", {"url": receiver.url, "from": "beginning"})
    receiver.secrets.append(secret)
    _events(ledger, 2)
    assert service.delivery.dispatch_once("test") == 2

    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_rest):
        statements.append(statement.lstrip().upper())

    event.listen(ledger.engine, "before_cursor_execute", seen)
    try:
        assert service.delivery.due() == []
        assert service.delivery.dispatch_once("test") == 0
    finally:
        event.remove(ledger.engine, "before_cursor_execute", seen)
    assert statements and not [s for s in statements if s.startswith(("INSERT", "UPDATE", "DELETE"))]

    _events(ledger, 1)  # a new event: due again, and delivered
    assert [row["subscription_id"] for row in service.delivery.due()] == [view["subscription_id"]]
    assert service.delivery.dispatch_once("test") == 1
    assert service.delivery.due() == []
    service.delivery.outbox.add_replays(view["subscription_id"], [1], "2026-11-29T00:00:00.000Z")
    # a replay queued, no new event: due
    assert [row["subscription_id"] for row in service.delivery.due()] == [view["subscription_id"]]
    assert service.delivery.dispatch_once("test") == 1
    assert len(receiver.accepted) == 4 and service.delivery.due() == []


@pytest.mark.usefixtures("backend")
def test_the_scopes_newest_seqs_are_read_for_the_scopes_asked_in_bounded_statements(ledger, monkeypatch):
    monkeypatch.setattr(outbox_module, "HEADS_PER_STATEMENT", 2)
    with ledger.write() as connection:
        for scope, count in (("a", 3), ("c", 1), ("d", 2)):
            for n in range(count):
                append_event(connection, scope, "rulebook.published", f"rb-{n}", "2026-11-28T08:00:00.000Z",
                             {"rulebook_id": f"rb-{n}", "version": "v1", "rulebook_hash": "sha256:" + "0" * 64})
    statements: list[str] = []

    def seen(_conn, _cursor, statement, *_rest):
        statements.append(statement)

    event.listen(ledger.engine, "before_cursor_execute", seen)
    try:  # "b" has no event, "d" is not asked; three scopes asked, two a statement
        assert Outbox(ledger).heads(iter(["c", "b", "a", "a"])) == {"a": 3, "c": 1}
    finally:
        event.remove(ledger.engine, "before_cursor_execute", seen)
    assert len([s for s in statements if "event_sequences" in s]) == 2


@pytest.mark.usefixtures("backend")
def test_an_event_read_for_delivery_is_its_stored_text_and_a_corrupt_one_fails_closed(ledger):
    _events(ledger, 3)
    outbox = Outbox(ledger)
    read = outbox.events_after(SCOPE, 1, limit=5)
    assert [row["seq"] for row in read] == [2, 3] and outbox.events_after(SCOPE, 0, limit=1)[0]["seq"] == 1
    assert read == [outbox.event(SCOPE, 2), outbox.event(SCOPE, 3)]  # as the column type reads each row
    assert json.loads(read[0]["event_json"])["type"].endswith("rulebook.published")
    with ledger.write() as connection:  # an encoded value whose frame does not decompress
        connection.execute(text("UPDATE event_outbox SET event_json = :v WHERE scope = :s AND seq = 3"),
                           {"v": b"\xff\x01not a zstd frame", "s": SCOPE})
    with pytest.raises(LedgerUnavailable):
        outbox.events_after(SCOPE, 1, limit=5)
