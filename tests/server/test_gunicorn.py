"""A real `gate serve` (gunicorn, several worker processes) on loopback.

Idempotency and rate limits must hold across processes: the first through unique constraints in
the ledger, the second through Redis. Runs on SQLite and, where it answers, PostgreSQL.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.server.support import call

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]

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
