"""A disabled API key is refused by every worker of a live `gate serve --workers 2` within
GATE_API_KEY_CACHE_MS (default 1000 ms) of `gate keys disable`, run as another process."""

from __future__ import annotations

import os
import subprocess
import time

import pytest

from tests.server.support import GATE, call

pytestmark = pytest.mark.slow

BOUND_S = 1.0  # the default GATE_API_KEY_CACHE_MS


def test_a_disabled_key_is_refused_by_every_worker_after_the_bound(server_factory, issue_key, sample_request,
                                                                    gate_env):
    server = server_factory(workers=2)
    issued = issue_key()
    headers = {"x-api-key": issued["api_key"]}
    for _ in range(16):  # both workers read the key and cache it
        assert call("POST", server.base + "/api/decide", sample_request, headers)[0] == 200
    done = subprocess.run([GATE, "keys", "disable", issued["key_id"]], env={**os.environ, **gate_env},
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    time.sleep(BOUND_S + 0.05)
    answers = [call("POST", server.base + "/api/decide", sample_request, headers) for _ in range(24)]
    assert {status for status, _, _ in answers} == {403}
    assert {body["error"] for _, _, body in answers} == {"SVC_API_UNAUTHORIZED"}
    assert issued["api_key"] not in (server.log_path.read_text())  # never logged
