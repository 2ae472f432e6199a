"""The cadence checkpoint is appended by its own thread once the decide's answer is sent
(api/routes/decide.py, gate/services/cadence.py), on a real `gate serve`: the gate's checkpoint log
gains the chain's signed checkpoint every `GATE_CHECKPOINT_EVERY` decisions without the caller
waiting for it, the log stays consistent with the chain (issue 23: the 1% of decides that carried
it set the decide's 99th percentile), and a worker stopping gracefully appends what is due first.
"""

from __future__ import annotations

import fcntl
import json
import threading
import time
from pathlib import Path

import pytest

from tests.server.support import call

pytestmark = pytest.mark.slow


def _logged_sizes(log: Path) -> list[int]:
    return [json.loads(line)["tree_size"] for line in log.read_text().splitlines()] if log.exists() else []


def test_a_running_gate_appends_every_cadence_checkpoint_after_the_answer(server_factory, api_key, sample_request,
                                                                         gate_env):
    server = server_factory(workers=1, threads=2, env={"GATE_CHECKPOINT_EVERY": "2"})
    for _ in range(5):
        status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": api_key})
        assert status == 200, body
    chain_id = body["audit_chain"]["chain_id"]
    log = Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"
    deadline = time.monotonic() + 20
    while not _logged_sizes(log)[-1:] >= [4] and time.monotonic() < deadline:
        time.sleep(0.05)
    sizes = _logged_sizes(log)  # of the head when the thread got to it: [2, 4] unless it lagged a decide
    assert sizes == sorted(set(sizes)) and 2 <= sizes[0] and 4 <= sizes[-1] <= 5, sizes
    status, _, view = call("GET", server.base + f"/api/decision/chains/{chain_id}", headers={"x-api-key": api_key})
    assert status == 200 and view["verification"]["valid"] is True
    assert view["checkpoint_log"]["tree_size"] == sizes[-1]


def test_a_graceful_stop_appends_the_checkpoint_still_due(server_factory, api_key, sample_request, gate_env):
    """The test holds the log's lock, so the checkpoint that decide 4 made due waits in the
    cadence thread when the server is told to stop; the worker's exit waits for it (up to
    `CADENCE_SETTLE_S`) instead of dropping it with its threads."""
    server = server_factory(workers=1, threads=2, env={"GATE_CHECKPOINT_EVERY": "2"})
    log = Path(gate_env["GATE_HOME"]) / "checkpoints.jsonl"

    def decides(n):
        for _ in range(n):
            status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": api_key})
            assert status == 200, body

    decides(2)
    deadline = time.monotonic() + 20
    while _logged_sizes(log) != [2] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _logged_sizes(log) == [2]
    with open(log, "rb") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # what append_checkpoint takes before it writes
        decides(2)
        time.sleep(0.3)  # the close after decide 4's answer has made the chain due
        stopping = threading.Thread(target=server.stop)
        stopping.start()
        time.sleep(1.0)  # the worker is stopping, its checkpoint waiting for the lock
        assert _logged_sizes(log) == [2]
        fcntl.flock(held, fcntl.LOCK_UN)
    stopping.join(20)
    assert server.process.poll() is not None
    assert _logged_sizes(log) == [2, 4]
