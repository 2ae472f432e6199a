"""The outbox bounded at any sustained rate (issue 68, item 3; docs/events.md "Retention"), on
both ledgers: a pass prunes by sequence ranges (tests/events/test_retention.py shows the one
DELETE), never an event an active subscription has not had while it is within the size bound,
bounds the stored bytes by GATE_EVENTS_RETENTION_BYTES (settled events first, undelivered ones
counted and their subscription disabled, saying which), drops PostgreSQL's day partitions whole,
returns SQLite's pages, and `/metrics` shows the outbox's rows, bytes and delivery lag."""

from __future__ import annotations

import re
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from gate.ledger import Ledger
from gate.ledger.outbox_partitions import day_partitions, ensure_partitions
from gate.ledger.outbox_retention import ROW_BYTES
from gate.ledger.outbox_write import append_event
from gate.ledger.tables import event_outbox
from gate.services.events import EventService
from gate.services.governance import SafeguardSettings
from gate.services.root import compose_events
from tests.events.test_webhooks import MovableClock

SCOPE, OTHER = "acme", "globex"
DAY0 = datetime(2026, 9, 1, 12, 0, tzinfo=UTC)  # the first simulated day's noon
DEAD = "http://127.0.0.1:9/hook"


def _at(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond // 1000:03d}Z"


def _write(ledger: Ledger, scope: str, times: list[datetime]) -> None:
    """Events of `scope` written at `times` (each in its own transaction), 1 KB of body each."""
    for n, when in enumerate(times):
        with ledger.write() as connection:
            append_event(connection, scope, "rulebook.published", f"rb-{n}", _at(when), {
                "rulebook_id": f"rb-{n}-" + "x" * 1000, "version": "v1", "rulebook_hash": "sha256:" + "0" * 64})


def _service(ledger: Ledger, clock, days: int = 30, max_bytes: int = 0) -> EventService:
    return compose_events(ledger, clock, allow_hosts=("127.0.0.1",), retention_days=days, retention_bytes=max_bytes,
                          safeguards=SafeguardSettings(ledger))


def _subscribe(service: EventService, scope: str, cursor: int) -> str:
    view, _ = service.subscribe(scope, "operator:test", {"url": DEAD, "from": "beginning"})
    service.outbox.update_subscription(view["subscription_id"], {"cursor": cursor})
    return view["subscription_id"]


def _seqs(ledger: Ledger, scope: str) -> list[int]:
    with ledger.read() as connection:
        return [int(r[0]) for r in connection.execute(select(event_outbox.c.seq).where(
            event_outbox.c.scope == scope).order_by(event_outbox.c.seq)).all()]


def _bytes(ledger: Ledger) -> int:
    with ledger.read() as connection:
        return int(connection.execute(select(func.coalesce(func.sum(ROW_BYTES), 0))).scalar())


@pytest.fixture
def ledger(database_url):
    made = Ledger(database_url, pool_size=2)
    yield made
    made.dispose()


def _clock(at: datetime) -> MovableClock:
    clock = MovableClock()
    clock.offset = at - datetime.now(UTC)
    return clock


@pytest.mark.usefixtures("backend")
def test_pruning_never_removes_an_undelivered_event_nor_one_within_retention(ledger):
    # 10 old events, an 11th written late (within retention) and 4 more old after it (clocks disagree)
    times = [DAY0 + timedelta(minutes=n) for n in range(10)] + [DAY0 + timedelta(days=40)]
    times += [DAY0 + timedelta(minutes=20 + n) for n in range(4)]
    _write(ledger, SCOPE, times)
    service = _service(ledger, _clock(DAY0 + timedelta(days=45)))
    behind = _subscribe(service, SCOPE, 6)
    assert service.retention.prune() == 6  # not 7 to 15: an active subscription has not had them
    assert _seqs(ledger, SCOPE) == list(range(7, 16))
    service.outbox.update_subscription(behind, {"cursor": 15})
    assert service.retention.prune() == 4  # 7-10; 11 is within the retention, so 12-15 wait behind it
    assert _seqs(ledger, SCOPE) == list(range(11, 16))
    assert service.retention.store.figures()["dropped_undelivered"] == 0
    # the bytes counted are those of the rows kept
    assert service.retention.store.figures()["bytes"] == _bytes(ledger) and service.retention.store.figures()["rows"] == 5


@pytest.mark.usefixtures("backend")
def test_the_byte_bound_drops_settled_events_first_then_counts_each_undelivered_one(ledger, caplog):
    _write(ledger, SCOPE, [DAY0 + timedelta(minutes=n) for n in range(20)])
    _write(ledger, OTHER, [DAY0 + timedelta(minutes=30 + n) for n in range(20)])
    row = _bytes(ledger) // 40  # the events differ by a byte or two: bounds fall half a row past a count
    clock = _clock(DAY0 + timedelta(days=1))  # nothing is past the 30 days
    free = _service(ledger, clock)
    stuck = _subscribe(free, SCOPE, 5)  # acme's 6-20 undelivered; globex has nobody waiting
    assert free.retention.prune() == 0  # no size bound: nothing goes
    bounded = _service(ledger, clock, max_bytes=30 * row + row // 2)
    assert bounded.retention.prune() == 10  # the oldest settled: acme 1-5, then globex's oldest 5
    assert _seqs(ledger, SCOPE) == list(range(6, 21)) and _seqs(ledger, OTHER) == list(range(6, 21))
    assert _bytes(ledger) <= 30 * row + row // 2 and bounded.retention.store.figures()["dropped_undelivered"] == 0
    tight = _service(ledger, clock, max_bytes=12 * row + row // 2)
    assert tight.retention.prune() == 18  # globex's settled 6-20 first, then acme's oldest undelivered 6-8
    assert _seqs(ledger, OTHER) == [] and _seqs(ledger, SCOPE) == list(range(9, 21))
    figures = tight.retention.store.figures()
    assert figures["dropped_undelivered"] == 3 and figures["bytes"] == _bytes(ledger) <= 12 * row + row // 2
    assert "events 6 to 8 of scope acme were dropped before every active subscription had them" in caplog.text
    tight.delivery.dispatch_once("test")  # the subscription finds the gap: disabled, saying which events it lost
    shown = tight.outbox.subscription(SCOPE, stuck)
    assert shown["status"] == "disabled"
    assert shown["disabled_reason"] == "events 6 to 8 were pruned before their delivery"


@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_postgresql_drops_a_day_partition_whole_and_prunes_the_rest_by_range(backend, ledger):
    with ledger.write() as connection:
        made = ensure_partitions(connection, DAY0.date(), days_ahead=3)
    assert made == 4
    _write(ledger, SCOPE, [DAY0 + timedelta(days=d, hours=h) for d in range(4) for h in (0, 6)])
    with ledger.read() as connection:
        assert connection.execute(text("SELECT count(*) FROM event_outbox_p20260901")).scalar() == 2
    # a cutoff on day 3 at 15:00: days 1 and 2 go whole, day 3 its 12:00 event by range
    service = _service(ledger, _clock(DAY0 + timedelta(days=32, hours=3)))
    done = service.retention.store.prune_pass("2026-09-03T15:00:00.000Z", (), 0)
    assert (done.events, done.partitions) == (5, 2)
    with ledger.read() as connection:
        days = [day for day, _ in day_partitions(connection)]
    assert date(2026, 9, 1) not in days and date(2026, 9, 2) not in days and date(2026, 9, 3) in days
    assert _seqs(ledger, SCOPE) == [6, 7, 8]
    assert service.retention.store.figures()["bytes"] == _bytes(ledger)


@pytest.mark.parametrize("backend", [pytest.param("postgresql", marks=pytest.mark.postgres)], indirect=True)
def test_postgresql_keeps_a_partition_that_holds_an_undelivered_event(backend, ledger):
    with ledger.write() as connection:
        ensure_partitions(connection, DAY0.date(), days_ahead=1)
    _write(ledger, SCOPE, [DAY0, DAY0 + timedelta(hours=1), DAY0 + timedelta(days=1)])
    service = _service(ledger, _clock(DAY0 + timedelta(days=40)))
    _subscribe(service, SCOPE, 1)
    done = service.retention.store.prune_pass(_at(DAY0 + timedelta(days=10)), (), 0)
    assert (done.events, done.partitions) == (1, 0)  # event 2 keeps its day
    assert _seqs(ledger, SCOPE) == [2, 3]


def test_sqlite_returns_the_pages_pruning_freed(tmp_path):
    ledger = Ledger(f"sqlite:///{tmp_path / 'new.db'}")
    try:
        ledger.upgrade()
        with ledger.read() as connection:
            assert connection.exec_driver_sql("PRAGMA auto_vacuum").scalar() == 2  # INCREMENTAL, a new ledger
        _write(ledger, SCOPE, [DAY0 + timedelta(seconds=n) for n in range(600)])
        size = Path(tmp_path / "new.db").stat().st_size + Path(str(tmp_path / "new.db") + "-wal").stat().st_size
        service = _service(ledger, _clock(DAY0 + timedelta(days=31)))
        assert service.retention.prune() == 600
    finally:
        ledger.dispose()  # the last connection closed checkpoints the WAL into the file
    with sqlite3.connect(tmp_path / "new.db") as connection:
        assert connection.execute("PRAGMA freelist_count").fetchone()[0] == 0
    assert Path(tmp_path / "new.db").stat().st_size < size - 600 * 1000


def _metric(body: str, name: str) -> float:
    found = re.search(rf"^{name} (\S+)$", body, re.MULTILINE)
    assert found, name
    return float(found.group(1))


@pytest.mark.usefixtures("backend")
def test_metrics_show_the_outbox_rows_bytes_and_delivery_lag(make_app, ledger):
    clock = _clock(DAY0 + timedelta(days=31))
    app = make_app(clock=clock, env={"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"})
    service = app.extensions["gate"].events
    _write(ledger, SCOPE, [DAY0 + timedelta(hours=n) for n in range(6)])
    _subscribe(service, SCOPE, 2)  # behind by 4: the oldest it waits for is event 3, written DAY0 + 2 h
    service.retention.prune()  # events 1 and 2 go; the bytes of 3-6 are counted
    body = app.test_client().get("/metrics").get_data(as_text=True)
    assert _metric(body, "gate_events_outbox_rows") == 4
    assert _metric(body, "gate_events_outbox_bytes") == _bytes(ledger)
    assert _metric(body, "gate_webhook_lag_max_events") == 4
    expected = (clock.now() - (DAY0 + timedelta(hours=2))).total_seconds()
    assert abs(_metric(body, "gate_webhook_lag_seconds") - expected) < 5
    assert _metric(body, "gate_events_dropped_undelivered") == 0
