"""Trusted adapters on a real `gate serve` (gunicorn, several worker processes with threads):
parallel adapter decides, each verified; a misbehaving request never takes the server down."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.adapters.support import sample
from tests.server.support import call, server_factory  # noqa: F401  (fixture)

pytestmark = pytest.mark.slow


def test_parallel_adapter_decides_on_a_multi_worker_threaded_server(server_factory, issue_key):  # noqa: F811
    server = server_factory(workers=2, threads=4).base
    key = issue_key()["api_key"]
    names = ["refund-window", "pricing-margin", "agent-action-risk"] * 4

    def one(index):
        body = sample(names[index])
        return body, call("POST", server + "/api/decide", body,
                          {"x-api-key": key, "x-idempotency-key": f"live-{index}"})

    with ThreadPoolExecutor(max_workers=12) as pool:
        results = list(pool.map(one, range(len(names))))
    assert [status for _, (status, _, _) in results] == [200] * len(names)
    facts_by_name = {}
    for body, (_, _, record) in results:
        assert record["trusted_adapter"]["manifest_hash"] == body["adapter"]["manifest_hash"]
        facts_by_name.setdefault(body["adapter"]["adapter_id"], set()).add(record["trusted_adapter"]["output_hash"])
    assert all(len(hashes) == 1 for hashes in facts_by_name.values())  # deterministic across processes
    body, (_, _, record) = results[0]
    status, _, verdict = call("POST", server + "/api/decision/verify", {"record": record, "input": body})
    assert status == 200 and verdict["verified"] is True

    bad = sample("refund-window")
    bad["adapter"]["input"]["window_days"] = "thirty"
    status, _, error = call("POST", server + "/api/decide", bad, {"x-api-key": key})
    assert status == 422 and error["error"] == "TRUSTED_ADAPTER_INPUT_INVALID"
    status, _, registry = call("GET", server + "/api/decision/adapters")
    assert status == 200 and registry["count"] >= 3
