"""A served worker keeps its ledger connections (`api/serving.py`, LEDGER_POOL_BEYOND_THREADS).

The pool used to keep five connections whatever the thread count. A busy worker of eight
threads and a writer needs nine or ten at once, so nearly every return to the pool closed a
connection and the next request opened one. On PostgreSQL that is a new server process each
time: `benchmarks/load` saw more than 200 of them in six seconds of record reads at 64
connections, and reads at 0.7x the rate with a p99 of over 100 ms. PostgreSQL counts the
sessions each database has had (`pg_stat_database.sessions`), so the test can see the churn.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import psycopg
import pytest

from api.serving import DEFAULT_THREADS, LEDGER_POOL_BEYOND_THREADS
from tests.conftest import PG_ADMIN_URL
from tests.server.support import call

pytestmark = pytest.mark.slow


def _sessions(database_url: str) -> int:
    name = urlsplit(database_url).path.lstrip("/")
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        return admin.execute("SELECT sessions FROM pg_stat_database WHERE datname = %s", (name,)).fetchone()[0]


@pytest.mark.postgres
@pytest.mark.parametrize("backend", ["postgresql"])
def test_a_busy_worker_opens_no_ledger_connection_beyond_its_threads_and_writer(
        server_factory, issue_key, sample_request, gate_env, backend):
    server = server_factory(workers=1)
    key = issue_key()["api_key"]
    headers = {"x-api-key": key}
    decisions = [call("POST", server.base + "/api/decide", sample_request, headers)[2]["decision_id"]
                 for _ in range(8)]
    before = _sessions(gate_env["GATE_DATABASE_URL"])
    answers: list[int] = []

    def read_and_decide(offset: int) -> None:
        for index in range(40):
            if index % 8 == 0:
                answers.append(call("POST", server.base + "/api/decide", sample_request, headers)[0])
            else:
                decision = decisions[(offset + index) % len(decisions)]
                answers.append(call("GET", f"{server.base}/api/decision/{decision}", headers=headers)[0])

    clients = [threading.Thread(target=read_and_decide, args=(offset,)) for offset in range(16)]
    for client in clients:
        client.start()
    for client in clients:
        client.join()
    opened = _sessions(gate_env["GATE_DATABASE_URL"]) - before
    assert answers.count(200) == len(answers) == 16 * 40
    # Every request thread and the writer may hold one at once; the pool keeps that many.
    assert opened <= DEFAULT_THREADS + LEDGER_POOL_BEYOND_THREADS, f"{opened} sessions opened under load"
