"""`/metrics` under a real `gate serve --workers 2`: every scrape aggregates both workers."""

from __future__ import annotations

import os
import re
import signal
import urllib.request

from tests.server.support import call, server_factory  # noqa: F401 (fixture)


def _count(text: str) -> float:
    match = re.search(r'gate_http_requests_total\{method="GET",route="/api/runtime-config",status="200"\} (\S+)',
                      text)
    return float(match.group(1)) if match else 0.0


def test_metrics_aggregate_every_worker(server_factory, gate_env):  # noqa: F811
    from concurrent.futures import ThreadPoolExecutor
    from pathlib import Path

    server = server_factory(workers=2)
    directory = Path(gate_env["GATE_HOME"]) / "prometheus-multiproc"

    def workers_with_counters() -> int:
        return len({f.stem.rsplit("_", 1)[-1] for f in directory.glob("counter_*.db")})

    def get(_):
        return call("GET", server.base + "/api/runtime-config")[0]

    # Which worker accepts a connection is the kernel's choice: send parallel rounds until both
    # workers have served (and so written counters), at most 10 rounds of 40.
    sent = 0
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(10):
            assert set(pool.map(get, range(40))) == {200}
            sent += 40
            if workers_with_counters() == 2:
                break
        if workers_with_counters() == 1:
            # An idle machine may let one worker accept every connection: pause that worker (its
            # pid names its counter file) so the other one accepts the next requests.
            (busy,) = {int(f.stem.rsplit("_", 1)[-1]) for f in directory.glob("counter_*.db")}
            os.kill(busy, signal.SIGSTOP)
            try:
                assert set(pool.map(get, range(8))) == {200}
                sent += 8
            finally:
                os.kill(busy, signal.SIGCONT)
    assert workers_with_counters() == 2  # both workers served and wrote their counters
    scrapes = []
    for _ in range(6):  # new connections: the scrapes land on either worker
        with urllib.request.urlopen(server.base + "/metrics", timeout=30) as response:
            assert response.status == 200
            scrapes.append(response.read().decode())
    # Every scrape, whichever worker answers it, counts every request of both workers.
    assert all(_count(text) == sent for text in scrapes), (sent, [_count(text) for text in scrapes])
    assert all("gate_ledger_ready 1.0" in text for text in scrapes)
