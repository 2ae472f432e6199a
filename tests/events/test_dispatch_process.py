"""`gate dispatch`, the dispatcher in a process of its own (issue 68, item 1; docs/operating.md,
"Deployment"), against real processes on both ledgers. Events are committed by this process into
the ledger while `gate dispatch` processes deliver them to a receiver that verifies each delivery
with `standardwebhooks`:

* two `gate dispatch` on one ledger: every event delivered, none twice (the subscription's lease);
* one killed with SIGKILL mid-delivery and started again: every committed event delivered, none
  invented, the scope's events first seen in order (at least once: some may arrive twice);
* SIGTERM stops it gracefully (exit 0, its lease released);
* `gate serve --no-dispatch` delivers nothing (and shows no dispatcher worker); `gate dispatch`
  beside it delivers."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gate.clock import iso_ms
from gate.ledger import Ledger
from gate.ledger.outbox import Outbox
from gate.ledger.outbox_write import append_event
from gate.services.root import event_service, signing_setup
from gate.settings import Settings
from tests.events.receiver import Receiver
from tests.server.support import Server, call, redis_available

pytestmark = [pytest.mark.slow]

GATE = str(Path(sys.executable).parent / "gate")
SCOPE = "acme"
# A 3-second lease: the restarted dispatcher takes the killed one's subscription after it expires.
ENV = {"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1", "GATE_EVENTS_INTERVAL_MS": "100", "GATE_EVENTS_LEASE_SECONDS": "3"}


class Dispatch:
    """One `gate dispatch` process on the test's ledger."""

    def __init__(self, env: dict, log: Path) -> None:
        self.log = log
        with open(log, "a") as out:
            self.process = subprocess.Popen([GATE, "dispatch"], env={**os.environ, **env, **ENV}, stdout=out,
                                            stderr=subprocess.STDOUT)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(15)

    def stop(self) -> int:
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(30)


@pytest.fixture
def setting(gate_env, tmp_path, backend):
    """(the gate's environment, a ledger on it, a receiver subscribed from the beginning)."""
    receiver = Receiver()
    ledger = Ledger(gate_env["GATE_DATABASE_URL"], pool_size=2)
    settings = Settings.from_env({**gate_env, **ENV})
    view, secret = event_service(ledger, signing_setup(settings), settings=settings).subscribe(
        SCOPE, "operator:test", {"url": receiver.url, "from": "beginning"})
    receiver.secrets.append(secret)
    processes: list[Dispatch] = []

    def start() -> Dispatch:
        processes.append(Dispatch(gate_env, tmp_path / "dispatch.log"))
        return processes[-1]

    yield gate_env, ledger, receiver, start, view["subscription_id"]
    for process in processes:
        if process.process.poll() is None:
            process.kill()
    receiver.close()
    ledger.dispose()


def _write(ledger: Ledger, count: int, pause: float = 0.0) -> list[str]:
    """Commit `count` events, one transaction each; returns the ids of those committed."""
    committed = []
    for n in range(count):
        with ledger.write() as connection:
            event = append_event(connection, SCOPE, "rulebook.published", f"rb-{n}", iso_ms(_now()), {
                "rulebook_id": f"rb-{n}", "version": "v1", "rulebook_hash": "sha256:" + "0" * 64})
        committed.append(event["id"])
        time.sleep(pause)
    return committed


def _now():
    from datetime import UTC, datetime

    return datetime.now(UTC)


def _wait(receiver: Receiver, ids: set[str], seconds: float = 90) -> set[str]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not ids <= {e["id"] for e in receiver.accepted}:
        time.sleep(0.2)
    return {e["id"] for e in receiver.accepted}


def _in_order(receiver: Receiver) -> list[int]:
    first_seen: list[int] = []
    for event in receiver.accepted:
        if int(event["sequence"]) not in first_seen:
            first_seen.append(int(event["sequence"]))
    return first_seen


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
                         indirect=True)
def test_two_dispatch_processes_deliver_every_event_once(setting):
    _env, ledger, receiver, start, _sid = setting
    first, second = start(), start()
    ids = set(_write(ledger, 150, pause=0.01))
    received = _wait(receiver, ids)
    assert ids == received, f"{len(ids - received)} events never arrived"
    sent = [h["webhook-id"] for h in receiver.headers]
    assert len(sent) == len(set(sent)) == 150, "an event was delivered twice"
    assert _in_order(receiver) == list(range(1, 151))
    assert receiver.rejected == 0
    assert first.stop() == 0 and second.stop() == 0  # SIGTERM: graceful
    assert "gate dispatch: stopped" in first.log.read_text()


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)],
                         indirect=True)
def test_a_dispatcher_killed_mid_delivery_and_restarted_loses_no_committed_event(setting):
    _env, ledger, receiver, start, sid = setting
    victim = start()
    committed: list[str] = []
    writer = threading.Thread(target=lambda: committed.extend(_write(ledger, 300, pause=0.01)))
    writer.start()
    deadline = time.monotonic() + 60
    while len(receiver.accepted) < 40 and time.monotonic() < deadline:
        time.sleep(0.02)
    delivered_before = len(receiver.accepted)
    victim.kill()  # SIGKILL mid-delivery: its lease and unwritten cursor stay behind
    assert 0 < delivered_before < 300
    writer.join(60)
    start()
    ids = set(committed)
    received = _wait(receiver, ids)
    assert len(ids) == 300 and ids <= received, f"{len(ids - received)} committed events never arrived"
    assert received <= ids, "an event arrived that the ledger does not hold"
    assert _in_order(receiver) == list(range(1, 301))
    assert receiver.rejected == 0
    assert Outbox(ledger).subscription(SCOPE, sid)["cursor"] == 300


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_serve_without_dispatch_delivers_nothing_and_dispatch_beside_it_does(setting, tmp_path):
    env, ledger, receiver, start, _sid = setting
    if not redis_available():
        pytest.skip("Redis does not answer")
    server = Server({**os.environ, **env, **ENV}, tmp_path / "server.log", workers=1, extra=("--no-dispatch",)).start()
    try:
        status, _, body = call("GET", server.base + "/api/decision/status")
        assert status == 200
        workers = [w["name"] for w in body["workers"]["workers"]]
        assert "webhooks" not in workers and "hold-sweeper" not in workers, workers
        ids = set(_write(ledger, 5))
        time.sleep(1.5)  # ten of the serving process's would-be passes
        assert receiver.accepted == []
        start()
        assert _wait(receiver, ids, 60) == ids
    finally:
        server.stop()
