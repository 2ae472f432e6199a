"""How long ledger writers wait (gate/ledger/waits.py), as `GET /metrics` reports it.

Every decide counts its waits: SQLite's write queue on SQLite, the chain head's row lock on
PostgreSQL, and on both the decide's wait for its writer thread. A lock held from outside the app
for 0.3 s shows as one wait above the 0.25 s bucket in both. How long they are under load is
measured by `benchmarks/bench_http.py`, not here.
"""

from __future__ import annotations

import threading
import time

import pytest
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import create_engine, text

from gate.ledger import waits
from gate.ledger.writelock import WriteQueue

pytestmark = pytest.mark.usefixtures("backend")
HELD_S = 1.0  # far beyond the 0.25 s bucket: the decide may be slow to reach its writer on a busy host


@pytest.fixture
def app(make_app):
    app = make_app({"GATE_LEDGER_GROUP_COMMIT": "true"})
    assert app.extensions["gate"].ledger.group is not None
    return app


def _waits(app) -> dict[str, dict[str, float]]:
    """Per wait: its count and the cumulative count of each bucket (`le`), from `GET /metrics`."""
    answer = app.test_client().get("/metrics")
    assert answer.status_code == 200
    found: dict[str, dict[str, float]] = {}
    for family in text_string_to_metric_families(answer.get_data(as_text=True)):
        if family.name != "gate_ledger_wait_seconds":
            continue
        for sample in family.samples:
            series = found.setdefault(sample.labels["wait"], {})
            if sample.name.endswith("_count"):
                series["count"] = sample.value
            elif sample.name.endswith("_bucket"):
                series[sample.labels["le"]] = sample.value
    return found


def _added(before: dict, after: dict, wait: str, key: str) -> float:
    return after.get(wait, {}).get(key, 0.0) - before.get(wait, {}).get(key, 0.0)


def _decide_while(app, key: str, body: dict, hold) -> float:
    """One decide sent while `hold()` keeps a lock for HELD_S; returns the decide's duration."""
    held, done = threading.Event(), {}

    def decide() -> None:
        held.wait(10)
        started = time.perf_counter()
        answer = app.test_client().post("/api/decide", json=body, headers={"x-api-key": key})
        done["status"], done["seconds"] = answer.status_code, time.perf_counter() - started

    caller = threading.Thread(target=decide)
    caller.start()
    hold(held)
    caller.join(30)
    assert done["status"] == 200
    return done["seconds"]


def test_every_decide_counts_its_waits(app, api_key, sample_request, backend):
    app.test_client().post("/api/decide", json=sample_request, headers={"x-api-key": api_key})  # warm
    before = _waits(app)
    for _ in range(5):
        assert app.test_client().post("/api/decide", json=sample_request,
                                      headers={"x-api-key": api_key}).status_code == 200
    after = _waits(app)
    lock = waits.WRITE_QUEUE if backend == "sqlite" else waits.CHAIN_HEAD
    assert _added(before, after, lock, "count") == 5  # one batch each: they came one after another
    assert _added(before, after, waits.WRITER, "count") == 5


def test_a_held_lock_shows_as_a_long_wait(app, api_key, sample_request, backend, database_url):
    assert app.test_client().post("/api/decide", json=sample_request,
                                  headers={"x-api-key": api_key}).status_code == 200  # the chain exists
    ledger = app.extensions["gate"].ledger

    def hold_sqlite(held: threading.Event) -> None:
        with WriteQueue(ledger.engine.url.database).held():
            held.set()
            time.sleep(HELD_S)

    def hold_head(held: threading.Event) -> None:
        engine = create_engine(database_url)
        try:
            with engine.begin() as connection:
                connection.execute(text("SELECT chain_id FROM chain_heads FOR UPDATE"))
                held.set()
                time.sleep(HELD_S)
        finally:
            engine.dispose()

    before = _waits(app)
    seconds = _decide_while(app, api_key, sample_request, hold_sqlite if backend == "sqlite" else hold_head)
    after = _waits(app)
    assert seconds >= HELD_S - 0.1
    lock = waits.WRITE_QUEUE if backend == "sqlite" else waits.CHAIN_HEAD
    for wait in (lock, waits.WRITER):  # one wait beyond the 0.25 s bucket, where the lock held it
        assert _added(before, after, wait, "count") - _added(before, after, wait, "0.25") == 1, wait
    assert _added(before, after, waits.WRITER, "count") == 1


def test_observers_are_kept_once_and_see_every_wait(monkeypatch):
    monkeypatch.setattr(waits, "_observers", [])
    seen: list[tuple[str, float]] = []
    waits.watch(lambda wait, seconds: seen.append((wait, seconds)))
    observer = waits._observers[0]
    waits.watch(observer)
    waits.waited(waits.WRITER, 0.5)
    assert seen == [(waits.WRITER, 0.5)]
