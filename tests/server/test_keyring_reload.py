"""Signing keys change under a live multi-worker `gate serve` (gunicorn, Redis): no restart.

`gate keys signing-rotate` while three workers serve: after GATE_SIGNING_KEY_CHECK_MS every
worker signs with the new key, records signed before still verify, and the registry lists the
old key as retired. `gate keys signing-init` under a server that started without a keyring
turns its 503s into signed records.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from tests.server.support import GATE, REDIS_URL, START_TIMEOUT_S, Server, call, redis_available

pytestmark = pytest.mark.slow

CHECK_MS = 200


def _cli(args: list[str], env: dict) -> dict:
    done = subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _decide(base: str, key: str, body: dict) -> dict:
    status, _, record = call("POST", base + "/api/decide", body, {"x-api-key": key})
    assert status == 200, record
    return record


def _verified(base: str, key: str, record: dict, request: dict) -> bool:
    public = call("POST", base + "/api/decision/verify", {"record": record, "input": request})[2]
    stored = call("GET", f"{base}/api/decision/{record['decision_id']}/verify", None, {"x-api-key": key})[2]
    return public["verified"] is True and stored["verified"] is True


def test_rotation_under_three_workers_needs_no_restart(server_factory, issue_key, sample_request, gate_env):
    server = server_factory(workers=3, env={"GATE_SIGNING_KEY_CHECK_MS": str(CHECK_MS)})
    key = issue_key()["api_key"]
    before = [_decide(server.base, key, sample_request) for _ in range(12)]
    old_key = before[0]["receipt_key_id"]
    assert {r["receipt_key_id"] for r in before} == {old_key}

    rotated = _cli(["keys", "signing-rotate"], gate_env)
    assert rotated["retired_key_ids"] == [old_key]
    new_key = rotated["active_key_id"]
    time.sleep(2 * CHECK_MS / 1000 + 0.2)  # every worker's next request is past its check interval

    after = [_decide(server.base, key, sample_request) for _ in range(30)]
    assert {r["receipt_key_id"] for r in after} == {new_key}, "a worker kept signing with the old key"
    assert {r["rulebook_attestation"]["signature"]["key_id"] for r in after} == {new_key}
    for record in (*before[:3], *after[:3]):
        assert _verified(server.base, key, record, sample_request), record["decision_id"]
    for _ in range(6):  # the registry every worker publishes
        registry = call("GET", server.base + "/api/decision/receipt-keys")[2]
        statuses = {entry["key_id"]: entry["status"] for entry in registry["keys"]}
        assert statuses == {new_key: "active", old_key: "retired"} and registry["active_receipt_key_id"] == new_key


def test_signing_init_under_a_server_started_without_keys(issue_key, sample_request, gate_env):
    if not redis_available():
        pytest.skip("Redis does not answer at " + REDIS_URL)
    keyring = Path(gate_env["GATE_SIGNING_KEY_FILE"])
    keyring.unlink()
    env = {**os.environ, **gate_env, "GATE_REDIS_URL": REDIS_URL, "GATE_SIGNING_KEY_CHECK_MS": str(CHECK_MS),
           "GATE_PUBLIC_RATE_LIMIT": "1000000", "GATE_PUBLIC_VERIFY_RATE_LIMIT": "1000000"}  # shared Redis windows
    log = keyring.parent / "serve.log"
    unready = Server(env, log, workers=2)
    try:
        _start_unready(unready)
        assert "does not exist" in log.read_text() and "gate keys signing-init" in log.read_text()
        key = issue_key()["api_key"]
        status, _, body = call("POST", unready.base + "/api/decide", sample_request, {"x-api-key": key})
        assert status == 503 and body["c"] == "unclear"
        degraded = call("GET", unready.base + "/api/decision/status")
        assert degraded[0] == 503 and "gate keys signing-init" in degraded[2]["signing"]["fix"]

        created = _cli(["keys", "signing-init"], gate_env)
        time.sleep(2 * CHECK_MS / 1000 + 0.2)
        records = [_decide(unready.base, key, sample_request) for _ in range(10)]
        assert {r["receipt_key_id"] for r in records} == {created["active_key_id"]}
        for _ in range(4):
            assert call("GET", unready.base + "/api/decision/status")[0] == 200
        assert _verified(unready.base, key, records[0], sample_request)
    finally:
        unready.stop()


def _start_unready(server) -> None:
    """Start `gate serve` and wait for /healthz (its readiness is 503 until a key exists)."""
    with open(server.log_path, "a") as log:  # the server writes to its own copy of the file
        server.process = subprocess.Popen(
            [GATE, "serve", "--host", "127.0.0.1", "--port", str(server.port), "--workers", str(server.workers)],
            env=server.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.time() + START_TIMEOUT_S
    while time.time() < deadline:
        try:
            if call("GET", server.base + "/healthz", timeout=2)[0] == 200:
                return
        except OSError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("server did not start:\n" + Path(server.log_path).read_text())
