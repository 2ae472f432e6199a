"""The outbox stored like the records and pruned past its retention (issue 53/3, docs/events.md
"Retention"), on both ledgers: events newer than the retention and events an active subscription
has not settled are always kept; what was pruned is refused with 410 EVENTS_PRUNED by every read
(`GET /api/events`, a replay by seq or range, enabling a subscription that missed it), never
answered with the events silently missing; pruning runs in bounded transactions and holds what
the stream has not published; event rows written before migration 0019 read as they were.
Delivery attempts past the retention are pruned too, each subscription's newest kept and the
pruned ones still counted, so what `GET …/deliveries` shows does not change (migration 0020)."""

from __future__ import annotations

import json
import threading
from datetime import timedelta

import pytest
from sqlalchemy import select, text

from gate.clock import iso_ms
from gate.ledger import codec
from gate.ledger.outbox import Outbox
from gate.ledger.outbox_retention import OutboxRetention
from gate.ledger.store import MIGRATIONS_DIR
from gate.ledger.tables import event_outbox, webhook_attempts
from gate.protocol.canonical import canonical_text
from gate.services import event_retention as retention_module
from tests.events.receiver import Receiver
from tests.events.test_webhooks import LOOPBACK, dispatch, release_burst, subscribe
from tests.releases.support import ALL, Api, version

DEAD = "http://127.0.0.1:9/hook"  # nothing listens: every delivery fails
SCOPE = "tenant_a"


@pytest.fixture
def gate(make_app, clock):
    """Every service of the app on the test's clock (the receiver checks timestamps against real
    time, so deliveries happen with the clock at real time, pruning with it moved ahead)."""
    return make_app(env=LOOPBACK, clock=clock)


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def _read(admin, after: int):
    return admin.client.get(f"/api/events?after={after}", headers=admin.headers())


def _prune(gate, clock, days: float, held: tuple[str, ...] = ()) -> int:
    clock.offset = timedelta(days=days)
    try:
        return int(gate.extensions["gate"].events.retention.prune(held))
    finally:
        clock.offset = timedelta()


def _set_status(admin, subscription_id: str, **body):
    return admin.client.patch(f"/api/events/subscriptions/{subscription_id}", json=body, headers=admin.headers())


def _replay(admin, subscription_id: str, body: dict):
    return admin.client.post(f"/api/events/subscriptions/{subscription_id}/replay", json=body,
                             headers=admin.headers())


def _pruned(response, through: int) -> None:
    assert response.status_code == 410, response.get_json()
    body = response.get_json()
    assert body["error"] == "EVENTS_PRUNED" and body["c"] == "unclear"
    assert body["pruned_through"] == through and body["oldest_kept"] == through + 1


def test_events_are_kept_until_old_and_settled_then_every_read_of_them_is_refused(backend, gate, admin, receiver,
                                                                                   clock):
    delivered = subscribe(admin, receiver, **{"from": "beginning"})
    failing = admin.client.post("/api/events/subscriptions", json={"url": DEAD, "from": "beginning"},
                                headers=admin.headers()).get_json()["subscription"]
    release_burst(admin)
    dispatch(gate)
    assert receiver.sequences() == list(range(1, 10))
    assert _prune(gate, clock, 31) == 0  # the failing subscription, still active, has settled none of them
    assert [int(e["sequence"]) for e in _read(admin, 0).get_json()["events"]] == list(range(1, 10))
    assert _prune(gate, clock, 29) == 0  # disabled or not, nothing newer than the retention goes
    assert _set_status(admin, failing["subscription_id"], status="disabled").status_code == 200
    assert _prune(gate, clock, 29) == 0
    assert _prune(gate, clock, 31) == 9

    _pruned(_read(admin, 0), 9)
    _pruned(_read(admin, 8), 9)
    assert _read(admin, 9).get_json()["events"] == []
    assert admin.publish(version("2026-09")).status_code == 201  # event 10, delivered at once
    dispatch(gate)
    assert receiver.sequences() == list(range(1, 11))
    assert _prune(gate, clock, 0) == 0  # delivered, but newer than the retention
    assert [int(e["sequence"]) for e in _read(admin, 9).get_json()["events"]] == [10]

    _pruned(_replay(admin, delivered["subscription_id"], {"seq": 3}), 9)
    _pruned(_replay(admin, delivered["subscription_id"], {"since": "2000-01-01T00:00:00Z",
                                                          "until": "2100-01-01T00:00:00Z"}), 9)
    assert _replay(admin, delivered["subscription_id"], {"seq": 11}).get_json()["error"] == "EVENT_NOT_FOUND"
    assert _replay(admin, delivered["subscription_id"], {"seq": 10}).status_code == 202

    # the disabled subscription missed events 1-9: enabling it says so and changes nothing ...
    _pruned(_set_status(admin, failing["subscription_id"], status="active"), 9)
    shown = admin.client.get(f"/api/events/subscriptions/{failing['subscription_id']}", headers=admin.headers())
    assert shown.get_json()["subscription"]["status"] == "disabled" and shown.get_json()["subscription"]["cursor"] == 0
    refused = _set_status(admin, failing["subscription_id"], status="active", skip_pruned="yes")
    assert refused.status_code == 400 and refused.get_json()["error"] == "EVENT_SUBSCRIPTION_INVALID"
    # ... until the caller accepts resuming from the oldest kept event
    resumed = _set_status(admin, failing["subscription_id"], status="active", skip_pruned=True)
    assert resumed.status_code == 200
    assert resumed.get_json()["subscription"]["status"] == "active" and resumed.get_json()["subscription"]["cursor"] == 9
    # a subscription from the beginning starts after what was pruned
    late = admin.client.post("/api/events/subscriptions", json={"url": DEAD, "from": "beginning"},
                             headers=admin.headers()).get_json()["subscription"]
    assert late["cursor"] == 9


def _statements(gate):
    """The SQL statements the ledger's engine runs while the context is open (a list, filled)."""
    from sqlalchemy import event

    engine, seen = gate.extensions["gate"].ledger.engine, []

    def record(_conn, _cursor, statement, *_):
        seen.append(" ".join(statement.split()))

    class Recording:
        def __enter__(self):
            event.listen(engine, "before_cursor_execute", record)
            return seen

        def __exit__(self, *_):
            event.remove(engine, "before_cursor_execute", record)

    return Recording()


def test_pruning_deletes_by_sequence_ranges_in_one_statement_and_holds_what_the_stream_has_not_published(
        backend, gate, admin, receiver, clock, issue_key):
    """Issue 68/3: one pass deletes every prunable range of every scope in one DELETE, however
    many events (no batch limit), up to what the held stream has published."""
    subscribe(admin, receiver, **{"from": "beginning"})
    release_burst(admin)
    other = Api(gate.test_client(), issue_key(scope="tenant_b", permissions=ALL + ",admin")["api_key"])
    release_burst(other)
    dispatch(gate)
    outbox = Outbox(gate.extensions["gate"].ledger)
    outbox.set_stream_cursor("jetstream", SCOPE, 5)
    outbox.set_stream_cursor("jetstream", "tenant_b", 9)
    with _statements(gate) as seen:
        assert _prune(gate, clock, 31, ("jetstream",)) == 5 + 9
    deletes = [s for s in seen if s.startswith("DELETE FROM event_outbox")]
    assert len(deletes) == 1, deletes  # both scopes' ranges, one statement
    kept = OutboxRetention(gate.extensions["gate"].ledger)
    assert kept.pruned(SCOPE)[0] == 5 and kept.pruned("tenant_b")[0] == 9
    assert _prune(gate, clock, 31, ("other-stream",)) == 0  # a held stream without a cursor has published nothing
    assert _prune(gate, clock, 31) == 4
    _pruned(_read(admin, 0), 9)
    with gate.extensions["gate"].ledger.read() as connection:
        assert connection.execute(select(event_outbox.c.seq).where(event_outbox.c.scope == SCOPE)).all() == []


def test_a_subscription_behind_a_pruned_range_is_disabled_never_skipped_silently(gate, admin, receiver):
    """The safety net behind the locks: a scope's seqs have no gaps, so a gap after an active
    subscription's cursor can only be pruned events; it is disabled and says which. On SQLite
    alone: the gap is found in Python over `events_after`'s answer (gate.services.event_delivery), the
    same read on both ledgers, which the tests above run on PostgreSQL too."""
    release_burst(admin)
    sub = subscribe(admin, receiver, **{"from": "beginning"})
    with gate.extensions["gate"].ledger.write() as connection:
        connection.execute(event_outbox.delete().where(event_outbox.c.scope == SCOPE, event_outbox.c.seq <= 4))
    dispatch(gate)
    assert receiver.accepted == []
    shown = admin.client.get(f"/api/events/subscriptions/{sub['subscription_id']}", headers=admin.headers())
    assert shown.get_json()["subscription"]["status"] == "disabled"
    assert shown.get_json()["subscription"]["disabled_reason"] == "events 1 to 4 were pruned before their delivery"


def test_a_decision_created_event_is_stored_compressed_and_reads_back_exactly(backend, gate, admin, receiver,
                                                                              sample_request):
    gate.extensions["gate"].service.pipeline.mirror.ttl = 0  # the opt-in is read at the next decide
    assert admin.client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                            headers=admin.headers()).status_code == 200
    subscribe(admin, receiver, **{"from": "beginning"})
    answer = admin.client.post("/api/decide", json=sample_request, headers=admin.headers())
    assert answer.status_code == 200, answer.get_json()
    dispatch(gate)
    assert receiver.rejected == 0
    created = [e for e in receiver.accepted if e["type"] == "dev.decision-gate.decision.created"]
    assert [e["data"]["record"] for e in created] == [answer.get_json()]
    with gate.extensions["gate"].ledger.read() as connection:
        raw = connection.execute(text("SELECT event_json FROM event_outbox WHERE event_type = "
                                      "'dev.decision-gate.decision.created'")).scalar_one()
    stored = bytes(raw)
    assert stored[0] == 0xFF and len(stored) * 2 < len(canonical_text(created[0]).encode())
    assert _read(admin, 0).get_json()["events"][-1] == created[0]


def _alembic(ledger, command_name: str, target: str) -> None:
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", ledger.url.replace("%", "%%"))
    with ledger.engine.begin() as connection:
        config.attributes["connection"] = connection
        getattr(command, command_name)(config, target)
    ledger.engine.dispose()


def test_event_rows_written_before_migration_0019_read_and_deliver_as_they_were(backend, gate, admin, receiver,
                                                                               monkeypatch):
    ledger = gate.extensions["gate"].ledger
    with monkeypatch.context() as plain:  # event 1 stored as the code before the change stored it: its text
        plain.setattr(codec, "MODE", codec.PLAIN)
        assert admin.publish(version("2026-08")).status_code == 201
    _alembic(ledger, "downgrade", "0018_closing_votes")
    with ledger.engine.begin() as connection:
        old = connection.execute(text("SELECT event_json FROM event_outbox")).scalar_one()
    assert isinstance(old, str)  # a text column again on PostgreSQL too
    _alembic(ledger, "upgrade", "head")
    assert _read(admin, 0).get_json()["events"] == [json.loads(old)]
    subscribe(admin, receiver, **{"from": "beginning"})
    assert admin.publish(version("2026-09")).status_code == 201  # event 2, in the new encoding
    dispatch(gate)
    assert receiver.rejected == 0 and receiver.sequences() == [1, 2]
    assert receiver.accepted[0] == json.loads(old)
    with ledger.engine.begin() as connection:
        stored = [bytes(v) if not isinstance(v, str) else v.encode() for v in connection.execute(
            text("SELECT event_json FROM event_outbox ORDER BY seq")).scalars()]
    assert stored[0] == old.encode() and stored[1][0] == 0xFF


def _deliveries(admin, subscription_id: str) -> dict:
    response = admin.client.get(f"/api/events/subscriptions/{subscription_id}/deliveries", headers=admin.headers())
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def _attempt_ids(gate, subscription_id: str) -> list[int]:
    with gate.extensions["gate"].ledger.read() as connection:
        return [int(r[0]) for r in connection.execute(select(webhook_attempts.c.attempt_id).where(
            webhook_attempts.c.subscription_id == subscription_id).order_by(webhook_attempts.c.attempt_id)).all()]


def _twelve_attempts(gate, admin, receiver) -> str:
    """A subscription with 12 attempts, 10 of them successes: the burst's 9, then a replay that
    fails twice and succeeds. Returns its id."""
    sub = subscribe(admin, receiver, **{"from": "beginning"})["subscription_id"]
    release_burst(admin)
    dispatch(gate)
    receiver.failing = True
    assert _replay(admin, sub, {"seq": 2}).status_code == 202
    dispatch(gate, passes=2)
    receiver.failing = False
    dispatch(gate, passes=1)
    return sub


def test_delivery_attempts_past_the_retention_are_pruned_in_bounded_passes_and_still_counted(
        backend, gate, admin, receiver, clock, monkeypatch):
    monkeypatch.setattr(retention_module, "ATTEMPTS_KEPT", 3)
    monkeypatch.setattr(retention_module, "PRUNE_BATCH", 2)
    monkeypatch.setattr(retention_module, "PRUNE_BATCHES_PER_PASS", 2)
    sub = _twelve_attempts(gate, admin, receiver)
    before = _deliveries(admin, sub)
    assert (before["attempts"], before["succeeded"], before["latency_window"]) == (12, 10, 1)
    assert [(f["seq"], f["status_code"], f["replay"]) for f in before["last_failures"]] == [(2, 500, True)] * 2
    ids = _attempt_ids(gate, sub)
    assert len(ids) == 12
    assert _set_status(admin, sub, status="disabled").status_code == 200  # its attempts are pruned all the same
    before = _deliveries(admin, sub)

    _prune(gate, clock, 29)  # nothing newer than the retention goes
    assert _attempt_ids(gate, sub) == ids
    _prune(gate, clock, 31)  # two transactions of two, then the pass ends
    assert _attempt_ids(gate, sub) == ids[4:]
    assert _deliveries(admin, sub) == before
    _prune(gate, clock, 31)
    assert _attempt_ids(gate, sub) == ids[8:]
    _prune(gate, clock, 31)  # the newest three are kept however old
    assert _attempt_ids(gate, sub) == ids[9:]
    _prune(gate, clock, 365)
    assert _attempt_ids(gate, sub) == ids[9:]
    assert _deliveries(admin, sub) == before  # the totals, the latency window and the failures shown


def test_a_retention_of_0_keeps_every_event_and_every_attempt(backend, make_app, issue_key, receiver, clock,
                                                              monkeypatch):
    gate = make_app(env={**LOOPBACK, "GATE_EVENTS_RETENTION_DAYS": "0"}, clock=clock)
    admin = Api(gate.test_client(), issue_key(permissions=ALL + ",admin")["api_key"])
    monkeypatch.setattr(retention_module, "ATTEMPTS_KEPT", 0)
    sub = _twelve_attempts(gate, admin, receiver)
    assert _prune(gate, clock, 10_000) == 0
    assert len(_attempt_ids(gate, sub)) == 12
    assert len(_read(admin, 0).get_json()["events"]) == 9


def test_migration_0020_counts_no_attempt_as_pruned_and_upgrades_again_without_error(backend, gate, admin,
                                                                                     receiver, clock, monkeypatch):
    sub = _twelve_attempts(gate, admin, receiver)
    ledger = gate.extensions["gate"].ledger
    _alembic(ledger, "downgrade", "0019_outbox_at_rest_retention")
    _alembic(ledger, "upgrade", "head")
    shown = _deliveries(admin, sub)
    assert (shown["attempts"], shown["succeeded"]) == (12, 10)
    _alembic(ledger, "stamp", "0019_outbox_at_rest_retention")  # the recorded revision set back: upgrade again
    _alembic(ledger, "upgrade", "head")
    monkeypatch.setattr(retention_module, "ATTEMPTS_KEPT", 1)
    _prune(gate, clock, 31)
    assert len(_attempt_ids(gate, sub)) == 1 and _deliveries(admin, sub)["attempts"] == 12


def _outbox_rows(ledger) -> list[tuple]:
    with ledger.engine.begin() as connection:
        return [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in connection.execute(
            text("SELECT scope, seq, event_id, event_type, created_at, event_json FROM event_outbox ORDER BY seq"))]


def _unique_on_event_id(ledger) -> bool:
    from sqlalchemy import inspect

    with ledger.engine.connect() as connection:
        return any("event_id" in constraint["column_names"]
                   for constraint in inspect(connection).get_unique_constraints("event_outbox"))


def test_migration_0026_drops_the_event_id_index_keeping_every_row_and_the_next_numbers(backend, gate, admin,
                                                                                       receiver):
    """The outbox's event id needs no index of its own (a function of the key): the upgrade drops
    it and keeps every row byte for byte; the downgrade puts it back; delivery goes on after both."""
    ledger = gate.extensions["gate"].ledger
    assert admin.publish(version("2026-08")).status_code == 201
    assert admin.publish(version("2026-09")).status_code == 201
    assert not _unique_on_event_id(ledger)
    before = _outbox_rows(ledger)
    _alembic(ledger, "downgrade", "0025_slack_messages_stale")
    assert _unique_on_event_id(ledger) and _outbox_rows(ledger) == before
    _alembic(ledger, "upgrade", "head")
    assert not _unique_on_event_id(ledger) and _outbox_rows(ledger) == before
    subscribe(admin, receiver, **{"from": "beginning"})
    assert admin.publish(version("2026-10")).status_code == 201
    dispatch(gate)
    assert receiver.rejected == 0 and receiver.sequences() == [1, 2, 3]
    assert [e["id"] for e in receiver.accepted] == [row[2] for row in _outbox_rows(ledger)]


@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_two_pruners_at_once_never_count_an_attempt_twice(backend, gate, admin, receiver, clock, monkeypatch):
    """Two dispatchers' retention passes on one PostgreSQL ledger (SQLite has one writer: they
    cannot overlap there). While a third transaction holds the four oldest attempts, both batches
    start; the subscription's row lock makes the second wait for the first and take the next four,
    rather than count the same four again once they are deleted."""
    monkeypatch.setattr(retention_module, "ATTEMPTS_KEPT", 3)
    sub = _twelve_attempts(gate, admin, receiver)
    before = _deliveries(admin, sub)
    ledger, ids = gate.extensions["gate"].ledger, _attempt_ids(gate, sub)
    outbox, cutoff, pruned = OutboxRetention(ledger), iso_ms(clock.now() + timedelta(days=1)), []

    def batch() -> None:
        pruned.append(outbox.prune_attempts_batch(sub, cutoff, retention_module.ATTEMPTS_KEPT, 4))

    pruners = [threading.Thread(target=batch) for _ in range(2)]
    with ledger.engine.connect() as connection, connection.begin():
        connection.execute(select(webhook_attempts.c.attempt_id).where(
            webhook_attempts.c.attempt_id.in_(ids[:4])).with_for_update()).all()
        for pruner in pruners:
            pruner.start()
        for pruner in pruners:
            pruner.join(1.0)
        assert all(pruner.is_alive() for pruner in pruners)
    for pruner in pruners:
        pruner.join(30)
    assert pruned == [4, 4]
    assert _attempt_ids(gate, sub) == ids[8:]
    assert _deliveries(admin, sub) == before
