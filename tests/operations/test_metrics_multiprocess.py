"""`/metrics` under a real `gate serve --workers 2`: every scrape aggregates both workers."""

from __future__ import annotations

import re
import urllib.request

from tests.server.support import call, server_factory  # noqa: F401 (fixture)


def _count(text: str) -> float:
    match = re.search(r'gate_http_requests_total\{method="GET",route="/api/runtime-config",status="200"\} (\S+)',
                      text)
    return float(match.group(1)) if match else 0.0


def test_metrics_aggregate_every_worker(server_factory, gate_env):  # noqa: F811
    from pathlib import Path

    server = server_factory(workers=2)
    for _ in range(40):
        assert call("GET", server.base + "/api/runtime-config")[0] == 200
    scrapes = []
    for _ in range(6):  # new connections: the scrapes land on both workers
        with urllib.request.urlopen(server.base + "/metrics", timeout=30) as response:
            assert response.status == 200
            scrapes.append(response.read().decode())
    assert all(_count(text) == 40 for text in scrapes), [_count(text) for text in scrapes]
    assert all("gate_ledger_ready 1.0" in text for text in scrapes)
    files = list((Path(gate_env["GATE_HOME"]) / "prometheus-multiproc").glob("counter_*.db"))
    assert len({f.stem.rsplit("_", 1)[-1] for f in files}) == 2  # both workers wrote their counters
