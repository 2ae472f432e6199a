"""Faults under a real multi-worker `gate serve` (issue 6, the standing fault harness).

- PostgreSQL "restarted" mid-load (every backend of the test database terminated) and
  PostgreSQL unreachable mid-load (its loopback path cut, then restored);
- Redis down mid-load (its loopback path cut, then restored);
- the signing keyring file removed under a live server;
- SQLite on a full disk (a 4 MiB tmpfs, mounted for the test).

In every case: the service fails closed (503 with `c: unclear`, never a 500, never a verdict),
nothing is half-written (each decision has its chain link, every acknowledged write is stored,
the chain verifies), and it recovers by itself once the fault is gone, without a restart.
The shared PostgreSQL and Redis servers are never stopped: only this test's database
connections, or a forwarder the test owns, are cut.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from gate.ledger import Ledger
from tests.server.proxy import Forwarder
from tests.server.support import REDIS_URL, START_TIMEOUT_S, call, worker_pids

pytestmark = pytest.mark.slow

UNAVAILABLE = {"LEDGER_UNAVAILABLE", "SVC_OUTCOME_UNAVAILABLE", "RATE_LIMITER_UNAVAILABLE",
               "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"}


class Load:
    """Decides and outcome receipts from 6 threads; remembers every answer and every acknowledgement."""

    def __init__(self, base: str, key: str, sample: dict) -> None:
        self.base, self.key, self.sample = base, key, sample
        self.decisions: list[str] = []
        self.outcomes: list[tuple[str, str]] = []
        self.answers: list[tuple[int, dict]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,)) for i in range(6)]

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        headers = {"x-api-key": self.key}
        while not self._stop.is_set():
            try:
                if self.decisions and rng.random() < 0.3:
                    with self._lock:
                        decision_id = rng.choice(self.decisions)
                    status, _, body = call("POST", f"{self.base}/api/decision/{decision_id}/outcome",
                                           {"outcome_status": "succeeded"}, headers, timeout=15)
                    if status == 201:
                        with self._lock:
                            self.outcomes.append((decision_id, body["outcome"]["outcome_id"]))
                else:
                    status, _, body = call("POST", self.base + "/api/decide", self.sample, headers, timeout=15)
                    if status == 200:
                        with self._lock:
                            self.decisions.append(body["decision_id"])
            except OSError as exc:  # the service itself must stay up through every fault here
                status, body = -1, {"error": repr(exc)}
            with self._lock:
                self.answers.append((status, body))
            if status not in (200, 201):
                time.sleep(0.02)

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def wait_for(self, count: int, timeout: float = 30) -> None:
        deadline = time.time() + timeout
        while len(self.decisions) < count and time.time() < deadline:
            time.sleep(0.05)
        assert len(self.decisions) >= count, self.answers[-5:]

    def refusals(self) -> list[dict]:
        """The bodies of every answer that was not a success; each must be a fail-closed 503."""
        refused = [(status, body) for status, body in self.answers if status not in (200, 201)]
        for status, body in refused:
            assert status == 503, (status, body)
            assert body["c"] == "unclear" and body["error"] in UNAVAILABLE, body
            assert "verdict" not in body and "record_hash" not in body
        return [body for _, body in refused]


def _recovered(base: str, key: str, sample: dict, within: float = 20) -> None:
    """The service answers decides again by itself, then five in a row."""
    deadline = time.time() + within
    while call("POST", base + "/api/decide", sample, {"x-api-key": key}, timeout=15)[0] != 200:
        assert time.time() < deadline, "the service did not recover by itself"
        time.sleep(0.25)
    for _ in range(5):
        status, _, body = call("POST", base + "/api/decide", sample, {"x-api-key": key}, timeout=15)
        assert status == 200, body


def _nothing_half_written(database_url: str, base: str, key: str, load: Load) -> None:
    ledger = Ledger(database_url)
    try:
        with ledger.engine.connect() as connection:
            decisions = connection.execute(text("SELECT count(*) FROM decisions")).scalar()
            links = connection.execute(text("SELECT count(*) FROM chain_links")).scalar()
            stored = {row[0] for row in connection.execute(text("SELECT decision_id FROM decisions"))}
            outcomes = {row[0] for row in connection.execute(text(
                "SELECT receipt_id FROM lifecycle_receipts WHERE kind = 'outcome'"))}
    finally:
        ledger.dispose()
    assert decisions == links  # no decision without its chain link, or the reverse
    assert set(load.decisions) <= stored  # every acknowledged decision is stored
    assert {outcome_id for _, outcome_id in load.outcomes} <= outcomes
    record = call("GET", f"{base}/api/decision/{load.decisions[0]}", headers={"x-api-key": key})[2]
    chain_id = record["audit_chain"]["chain_id"]
    view = call("GET", f"{base}/api/decision/chains/{chain_id}?limit=1000", headers={"x-api-key": key})[2]
    assert view["chain_size"] == decisions
    assert view["verification"]["valid"] is True, view["verification"]


def _terminate_backends(database_url: str) -> int:
    import psycopg

    from tests.conftest import PG_ADMIN_URL

    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        rows = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                             "WHERE datname = %s AND pid <> pg_backend_pid()", (name,)).fetchall()
    return len(rows)


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_restarted_mid_load(server_factory, issue_key, sample_request, gate_env, backend):
    server = server_factory(workers=2)
    key = issue_key()["api_key"]
    with Load(server.base, key, sample_request) as load:
        load.wait_for(10)
        assert _terminate_backends(gate_env["GATE_DATABASE_URL"]) >= 1  # as a restart does to every session
        time.sleep(0.5)
        _terminate_backends(gate_env["GATE_DATABASE_URL"])
        settled = len(load.decisions)
        load.wait_for(settled + 10)  # the same server carries on
    assert load.refusals(), "terminating every session must have failed some request"
    _recovered(server.base, key, sample_request)
    _nothing_half_written(gate_env["GATE_DATABASE_URL"], server.base, key, load)


def _behind_a_forwarder(server_factory, gate_env):
    """A 2-worker server whose path to PostgreSQL runs through a forwarder the test can cut."""
    url = urlsplit(gate_env["GATE_DATABASE_URL"])
    forwarder = Forwarder(url.port or 5432).up()
    proxied = url._replace(netloc=f"{url.username}@127.0.0.1:{forwarder.port}").geturl()
    return server_factory(workers=2, env={"GATE_DATABASE_URL": proxied}), forwarder


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"])
def test_postgresql_unreachable_mid_load(server_factory, issue_key, sample_request, gate_env, backend):
    server, forwarder = _behind_a_forwarder(server_factory, gate_env)
    key = issue_key()["api_key"]
    try:
        with Load(server.base, key, sample_request) as load:
            load.wait_for(10)
            forwarder.down()
            time.sleep(1.5)
            during = len(load.decisions)
            time.sleep(0.5)
            assert len(load.decisions) == during  # nothing is acknowledged while the ledger is away
            status, _, body = call("GET", server.base + "/api/decision/status")
            assert status == 503 and body["ledger"]["ready"] is False
            forwarder.up()
            load.wait_for(during + 10)
        assert load.refusals()
        _recovered(server.base, key, sample_request)
        assert call("GET", server.base + "/api/decision/status")[0] == 200
        _nothing_half_written(gate_env["GATE_DATABASE_URL"], server.base, key, load)
    finally:
        server.stop()
        forwarder.down()


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_worker_restarted_while_postgresql_is_unreachable_boots_and_the_server_stays_up(
        server_factory, issue_key, sample_request, gate_env, backend):
    """Found when a worker still booting met the outage of the test above: each worker ran the
    migrations again when it built its app, a worker that could not reach the ledger failed to
    boot, and gunicorn then shut the whole server down (connection refused from then on). The
    master migrates once; a worker (re)started during an outage boots and answers 503 until the
    ledger is back."""
    server, forwarder = _behind_a_forwarder(server_factory, gate_env)
    key = issue_key()["api_key"]
    try:
        forwarder.down()
        victim = worker_pids(server.process.pid)[0]
        os.kill(victim, signal.SIGKILL)
        deadline = time.time() + 30
        while victim in worker_pids(server.process.pid) or len(worker_pids(server.process.pid)) < 2:
            assert server.process.poll() is None, "the server shut down"
            assert time.time() < deadline, "no worker replaced the killed one"
            time.sleep(0.1)
        time.sleep(3)  # the new worker builds its app while the ledger is away
        assert server.process.poll() is None, "the server shut down"
        for _ in range(6):  # both workers answer, closed
            status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key})
            assert status == 503 and body["c"] == "unclear", body
        forwarder.up()
        _recovered(server.base, key, sample_request)
    finally:
        server.stop()
        forwarder.down()


def test_redis_down_mid_load(server_factory, issue_key, sample_request, gate_env):
    redis_url = urlsplit(REDIS_URL)
    forwarder = Forwarder(redis_url.port or 6379).up()
    server = server_factory(workers=2, env={
        "GATE_REDIS_URL": redis_url._replace(netloc=f"127.0.0.1:{forwarder.port}").geturl()})
    key = issue_key()["api_key"]
    try:
        with Load(server.base, key, sample_request) as load:
            load.wait_for(10)
            forwarder.down()
            time.sleep(1.0)
            before = _decision_count(gate_env["GATE_DATABASE_URL"])
            time.sleep(1.0)
            assert _decision_count(gate_env["GATE_DATABASE_URL"]) == before  # no decide passes unlimited
            forwarder.up()
            load.wait_for(len(load.decisions) + 10)
        refused = load.refusals()
        assert any(body["error"] == "RATE_LIMITER_UNAVAILABLE" for body in refused)
        _recovered(server.base, key, sample_request)
        _nothing_half_written(gate_env["GATE_DATABASE_URL"], server.base, key, load)
    finally:
        server.stop()
        forwarder.down()


def _decision_count(database_url: str) -> int:
    ledger = Ledger(database_url)
    try:
        with ledger.engine.connect() as connection:
            return connection.execute(text("SELECT count(*) FROM decisions")).scalar()
    finally:
        ledger.dispose()


def _respawn_worker(server) -> None:
    """SIGKILL the only worker; gunicorn forks a new one, which builds the app afresh."""
    (old,) = worker_pids(server.process.pid)
    os.kill(old, signal.SIGKILL)
    deadline = time.time() + START_TIMEOUT_S  # the new worker builds its app (slow on a loaded host)
    while time.time() < deadline:
        pids = worker_pids(server.process.pid)
        if pids and pids != [old]:
            try:
                if call("GET", server.base + "/api/decision/receipt-keys", timeout=5)[0] == 200:
                    return
            except OSError:
                pass
        time.sleep(0.2)
    raise AssertionError("no new worker")


def test_signing_keyring_removed_under_a_live_server(server_factory, issue_key, sample_request, gate_env):
    """A running worker keeps the key it loaded; a worker started without the file refuses (503,
    nothing stored) until the file is back. Records from both sides verify against the registry."""
    server = server_factory(workers=1)
    key = issue_key()["api_key"]
    keyring = Path(gate_env["GATE_SIGNING_KEY_FILE"])
    saved = keyring.read_bytes()
    first = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key})[2]
    keyring.unlink()
    status, _, still = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key})
    assert status == 200 and still["receipt_key_id"] == first["receipt_key_id"]

    _respawn_worker(server)  # a worker (re)started while the keyring is missing
    stored = _decision_count(gate_env["GATE_DATABASE_URL"])
    status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key})
    assert status == 503 and body["error"] == "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED" and body["c"] == "unclear"
    assert call("GET", server.base + "/api/decision/status")[0] == 503
    assert _decision_count(gate_env["GATE_DATABASE_URL"]) == stored

    keyring.write_bytes(saved)
    os.chmod(keyring, 0o600)
    _respawn_worker(server)
    _recovered(server.base, key, sample_request)
    for record in (first, still):
        verdict = call("POST", server.base + "/api/decision/verify", {"record": record, "input": sample_request})[2]
        assert verdict["verified"] is True, verdict


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB tmpfs (root only; room for the ledger the test copies in, then filled up);
    skipped where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip("cannot mount a size-limited tmpfs here: " + done.stderr.strip())
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=False)


def test_sqlite_on_a_full_disk(server_factory, sample_request, gate_env, small_disk):
    database = small_disk / "gate.db"
    shutil.copyfile(urlsplit(gate_env["GATE_DATABASE_URL"]).path, database)
    url = f"sqlite:///{database}"
    server = server_factory(workers=1, env={"GATE_DATABASE_URL": url})
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key

    key = create_key(Settings.from_env({**gate_env, "GATE_DATABASE_URL": url}), "tenant_a", "starter", 10_000, None)["api_key"]
    filler = small_disk / "filler"
    try:
        with open(filler, "wb") as handle:
            while True:
                handle.write(b"\0" * 65536)
                handle.flush()
    except OSError:
        pass  # ENOSPC: the disk is full (at the latest when the file is closed)
    refused = acknowledged = 0
    load = Load(server.base, key, sample_request)
    for _ in range(60):
        status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key}, timeout=15)
        if status == 200:
            acknowledged += 1
            load.decisions.append(body["decision_id"])
        else:
            assert status == 503 and body["error"] in UNAVAILABLE and body["c"] == "unclear", body
            refused += 1
            if refused >= 5:
                break
    assert refused >= 5, "the disk never filled up"
    filler.unlink()
    _recovered(server.base, key, sample_request)
    ledger = Ledger(url)
    try:
        with ledger.engine.connect() as connection:
            assert connection.execute(text("PRAGMA integrity_check")).scalar() == "ok"
    finally:
        ledger.dispose()
    server.stop()  # before the tmpfs goes away
    if load.decisions:
        restarted = server_factory(workers=1, env={"GATE_DATABASE_URL": url})
        _nothing_half_written(url, restarted.base, key, load)
        restarted.stop()
