"""A real `gate serve` (gunicorn, several worker processes) on loopback.

Idempotency and rate limits must hold across processes: the first through unique constraints in
the ledger, the second through Redis. Runs on SQLite and, where it answers, PostgreSQL.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]

REDIS_URL = os.environ.get("GATE_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")


def _redis_available() -> bool:
    try:
        import redis

        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except Exception:
        return False


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call(method: str, url: str, body=None, headers=None, timeout: float = 30):
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"content-type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), json.loads(error.read())


@pytest.fixture
def server(gate_env, tmp_path):
    if not _redis_available():
        pytest.skip("Redis does not answer at " + REDIS_URL)
    port = _free_port()
    env = {**os.environ, **gate_env, "GATE_REDIS_URL": REDIS_URL}
    log = open(tmp_path / "server.log", "w")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "gate"), "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "3"],
        env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if call("GET", base + "/api/decision/status", timeout=2)[0] == 200:
                break
        except OSError:
            time.sleep(0.2)
    else:
        process.kill()
        pytest.fail("server did not start:\n" + (tmp_path / "server.log").read_text())
    yield base
    process.terminate()
    process.wait(timeout=15)
    log.close()


def test_32_parallel_requests_with_one_key_create_exactly_one_record(server, issue_key, sample_request, gate_env):
    key = issue_key()["api_key"]
    headers = {"x-api-key": key, "x-idempotency-key": "parallel-1"}
    with ThreadPoolExecutor(max_workers=32) as pool:
        results = list(pool.map(lambda _: call("POST", server + "/api/decide", sample_request, headers), range(32)))
    assert [status for status, _, _ in results] == [200] * 32
    assert len({body["decision_id"] for _, _, body in results}) == 1
    assert len({body["record_hash"] for _, _, body in results}) == 1
    statuses = sorted(h["x-idempotency-status"] for _, h, _ in results)
    assert statuses == ["created"] + ["replayed"] * 31

    from gate.ledger import Ledger

    ledger = Ledger(gate_env["GATE_DATABASE_URL"])
    with ledger.engine.connect() as connection:
        from sqlalchemy import text

        assert connection.execute(text("SELECT count(*) FROM decisions")).scalar() == 1
    ledger.dispose()
    record = results[0][2]
    status, _, verdict = call("POST", server + "/api/decision/verify", {"record": record, "input": sample_request})
    assert status == 200 and verdict["verified"] is True


def test_rate_limit_is_shared_by_all_workers(server, issue_key, sample_request):
    key = issue_key(rate_limit=10)["api_key"]
    if time.time() % 60 > 50:  # keep the burst inside one fixed window
        time.sleep(61 - time.time() % 60)
    with ThreadPoolExecutor(max_workers=10) as pool:
        results = list(pool.map(lambda _: call("POST", server + "/api/decide", sample_request, {"x-api-key": key}), range(30)))
    statuses = sorted(status for status, _, _ in results)
    assert statuses.count(200) == 10
    assert statuses.count(429) == 20
    refused = next(body for status, _, body in results if status == 429)
    assert refused["error"] == "SVC_API_RATE_LIMITED" and refused["retry_after"] >= 1


def test_signed_records_from_different_workers_verify_offline(server, issue_key, sample_request, tmp_path):
    key = issue_key()["api_key"]
    records = [call("POST", server + "/api/decide", sample_request, {"x-api-key": key})[2] for _ in range(6)]
    registry = call("GET", server + "/api/decision/receipt-keys")[2]
    (tmp_path / "registry.json").write_text(json.dumps(registry))
    for index, record in enumerate(records):
        path = tmp_path / f"record-{index}.json"
        path.write_text(json.dumps(record))
        done = subprocess.run(
            [str(Path(sys.executable).parent / "gate"), "verify", str(path), "--key-registry", str(tmp_path / "registry.json")],
            capture_output=True, text=True, timeout=60,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "VERIFIED" in done.stdout
