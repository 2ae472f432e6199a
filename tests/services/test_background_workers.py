"""Background work on one helper (issue 53/7, `gate.services.periodic`): the dispatcher's loops, the
hold sweeper and the release guard are `PeriodicWorker`s; a failing one logs its traceback, counts
its failures, shows unhealthy in `/api/decision/status` and `/metrics` while the others go on, and
recovers by itself. The fault is real: `gate serve` on SQLite loses the webhook subscriptions'
table under it (renamed by another connection), then gets it back."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable

import pytest

from tests.server.support import call, server_factory  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.slow]

ENV = {"GATE_EVENTS_INTERVAL_MS": "100", "GATE_HOLD_SWEEP_MS": "100"}
EXPECTED = ["webhooks", "scheduled-reports", "event-retention", "facts-retention", "hold-sweeper", "release-guard"]


def _status(base: str) -> tuple[int, dict]:
    status, _, body = call("GET", base + "/api/decision/status")
    return status, body


def _workers(body: dict) -> dict[str, dict]:
    return {w["name"]: w for w in body["workers"]["workers"]}


def _until(base: str, check: Callable[[dict[str, dict]], bool], timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _, body = _status(base)
        if check(_workers(body)) or time.monotonic() > deadline:
            return body
        time.sleep(0.1)


def _rename(database_url: str, old: str, new: str) -> None:
    connection = sqlite3.connect(database_url.removeprefix("sqlite:///"), timeout=30)
    try:
        connection.execute(f"ALTER TABLE {old} RENAME TO {new}")
        connection.commit()
    finally:
        connection.close()


def test_a_failing_worker_is_logged_counted_shown_and_recovers_while_the_others_go_on(server_factory, gate_env):  # noqa: F811 (the fixture imported above)
    server = server_factory(workers=1, env=ENV)
    body = _until(server.base, lambda w: w.get("webhooks", {}).get("last_success_at") is not None)
    workers = _workers(body)
    assert list(workers) == EXPECTED
    assert body["workers"]["healthy"] is True and all(w["healthy"] for w in workers.values())
    assert workers["webhooks"]["running"] and workers["hold-sweeper"]["running"]
    assert not workers["release-guard"]["running"]  # started at the first guardrail check owed
    assert workers["webhooks"]["interval_seconds"] == 0.1 and workers["webhooks"]["failures"] == 0

    _rename(gate_env["GATE_DATABASE_URL"], "webhook_subscriptions", "webhook_subscriptions_away")
    try:
        body = _until(server.base, lambda w: w["webhooks"]["failures_in_a_row"] >= 3)
        status, _ = _status(server.base)
        workers = _workers(body)
        assert workers["webhooks"]["healthy"] is False and body["workers"]["healthy"] is False
        assert workers["webhooks"]["last_error"] == "LedgerUnavailable: ledger read failed: OperationalError"
        assert workers["hold-sweeper"]["healthy"] and workers["hold-sweeper"]["failures"] == 0  # the others go on
        assert status == 200 and body["ok"] is True  # decides still answer: not degraded, shown
    finally:
        _rename(gate_env["GATE_DATABASE_URL"], "webhook_subscriptions_away", "webhook_subscriptions")
    failed_at = workers["webhooks"]["last_failure_at"]
    body = _until(server.base, lambda w: w["webhooks"]["failures_in_a_row"] == 0)
    workers = _workers(body)
    assert workers["webhooks"]["healthy"] and body["workers"]["healthy"]
    assert workers["webhooks"]["failures"] >= 3 and workers["webhooks"]["last_success_at"] > failed_at
    metrics = urlopen_text(server.base + "/metrics")  # (a scrape reads that table too: after it is back)
    failures = [line for line in metrics.splitlines() if line.startswith('gate_worker_failures{worker="webhooks"}')]
    assert len(failures) == 1 and float(failures[0].split()[-1]) >= 3
    assert 'gate_worker_healthy{worker="webhooks"} 1.0' in metrics
    assert 'gate_worker_failures{worker="hold-sweeper"} 0.0' in metrics
    assert 'gate_worker_last_success_timestamp_seconds{worker="release-guard"} 0.0' in metrics
    log = server.log_path.read_text()
    assert "background worker webhooks failed (1 in a row)" in log
    assert "Traceback (most recent call last)" in log and "no such table: webhook_subscriptions" in log
    assert log.count("background worker webhooks failed (1 in a row)") == 1  # once per run of failures
    assert "background worker webhooks failed again (2 in a row)" in log


def urlopen_text(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:
        return response.read().decode()
