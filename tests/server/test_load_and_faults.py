"""Load and faults against a real multi-worker `gate serve` (SQLite and, where it answers, PostgreSQL).

- 64 concurrent decides in one scope: one chain, contiguous positions, every inclusion proof valid.
- Parallel execution receipts with one idempotency key across workers: exactly one receipt.
- kill -9 of the server (master and workers) in the middle of a burst of decides and receipts:
  after a restart the chain verifies, nothing is half-written, every 2xx is present; with
  `decision.created` on (one decide in four held), every stored decision announced exactly once,
  every stored hold's opening once, the scope's event numbers gap-free and in chain order.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import text

from gate.chain.merkle import verify_checkpoint, verify_inclusion
from gate.events.cloudevent import event_id
from gate.ledger import Ledger
from gate.ledger.outbox import Outbox
from tests.holds.support import approved_request, held_request
from tests.server.support import call

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("backend")]


def _ledger_counts(database_url: str) -> dict[str, int]:
    ledger = Ledger(database_url)
    try:
        with ledger.engine.connect() as connection:
            return {name: connection.execute(text(f"SELECT count(*) FROM {name}")).scalar()
                    for name in ("decisions", "chain_links", "lifecycle_receipts")}
    finally:
        ledger.dispose()


# Two workers (not three) where workers race: two processes already contend for the chain head
# and the idempotency key, and each worker more costs the start-up of one more app on the host.


def test_64_concurrent_decides_make_one_contiguous_verifiable_chain(server_factory, issue_key, sample_request, app):
    server = server_factory(workers=2)
    key = issue_key()["api_key"]
    with ThreadPoolExecutor(max_workers=64) as pool:
        results = list(pool.map(lambda _: call("POST", server.base + "/api/decide", sample_request,
                                               {"x-api-key": key}), range(64)))
    assert [status for status, _, _ in results] == [200] * 64
    chains = {body["audit_chain"]["chain_id"] for _, _, body in results}
    assert len(chains) == 1
    positions = sorted(body["audit_chain"]["chain_position"] for _, _, body in results)
    assert positions == list(range(1, 65))
    chain_id = chains.pop()
    status, _, view = call("GET", server.base + f"/api/decision/chains/{chain_id}?limit=1000", headers={"x-api-key": key})
    assert status == 200 and view["chain_size"] == 64 and view["verification"]["valid"] is True, view["verification"]
    registry = call("GET", server.base + "/api/decision/receipt-keys")[2]
    assert verify_checkpoint(view["checkpoint"], registry["keys"][0]["public_key"])
    audit = app.extensions["gate"].audit
    for _, _, record in results:
        proof = audit.record_proof(record["decision_id"], chain_limit=1)
        assert verify_inclusion(record["audit_chain"]["chain_position"] - 1, proof.checkpoint["tree_size"],
                                record["audit_chain"]["leaf_hash"], proof.proof, proof.checkpoint["root_hash"])
        assert proof.checkpoint["root_hash"] == view["tree"]["root_hash"]


def test_parallel_receipts_with_one_key_make_one_receipt(server_factory, issue_key, sample_request, gate_env):
    server = server_factory(workers=2)
    key = issue_key()["api_key"]
    record = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key})[2]
    body = {"execution_status": "executed", "decision_record_hash": record["record_hash"],
            "decision_receipt_hash": record["receipt_hash"]}
    url = server.base + f"/api/decision/{record['decision_id']}/execution"
    headers = {"x-api-key": key, "x-idempotency-key": "exe-parallel"}
    with ThreadPoolExecutor(max_workers=24) as pool:
        results = list(pool.map(lambda _: call("POST", url, body, headers), range(24)))
    statuses = [status for status, _, _ in results]
    assert statuses.count(201) == 1
    assert set(statuses) <= {201, 200, 409}
    for status, _, answer in results:
        if status == 409:
            assert answer["error"] == "SVC_EXECUTION_IDEMPOTENCY_IN_PROGRESS"
    receipt_ids = {answer["execution"]["execution_receipt_id"] for status, _, answer in results if status in (200, 201)}
    assert len(receipt_ids) == 1
    assert _ledger_counts(gate_env["GATE_DATABASE_URL"])["lifecycle_receipts"] == 1
    # After the burst, the key replays.
    status, headers_out, _ = call("POST", url, body, headers)
    assert status == 200 and headers_out["x-idempotency-status"] == "replayed"


def test_kill_9_mid_burst_loses_nothing_acknowledged(server_factory, issue_key, sample_request, gate_env):
    server = server_factory(workers=2)
    key = issue_key()["api_key"]
    acknowledged_decisions: list[str] = []
    acknowledged_receipts: list[tuple[str, str]] = []
    stop = threading.Event()
    lock = threading.Lock()

    def burst(worker: int) -> None:
        rng = random.Random(worker)
        while not stop.is_set():
            try:
                if acknowledged_decisions and rng.random() < 0.4:
                    with lock:
                        decision_id = rng.choice(acknowledged_decisions)
                    status, _, body = call("POST", server.base + f"/api/decision/{decision_id}/outcome",
                                           {"outcome_status": "succeeded"}, {"x-api-key": key}, timeout=5)
                    if status == 201:
                        with lock:
                            acknowledged_receipts.append((decision_id, body["outcome"]["outcome_id"]))
                else:
                    status, _, body = call("POST", server.base + "/api/decide", sample_request,
                                           {"x-api-key": key}, timeout=5)
                    if status == 200:
                        with lock:
                            acknowledged_decisions.append(body["decision_id"])
            except (OSError, http.client.HTTPException):
                time.sleep(0.01)  # the server is gone (maybe mid-answer): keep trying until told to stop

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.time() + 30
    while len(acknowledged_decisions) < 40 and time.time() < deadline:
        time.sleep(0.05)
    server.kill()  # SIGKILL master and workers while requests are in flight
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(acknowledged_decisions) >= 40

    restarted = server_factory(workers=2)
    counts = _ledger_counts(gate_env["GATE_DATABASE_URL"])
    assert counts["decisions"] == counts["chain_links"]  # no decision without its link, or the reverse
    for decision_id in acknowledged_decisions:
        status, _, record = call("GET", restarted.base + f"/api/decision/{decision_id}", headers={"x-api-key": key})
        assert status == 200
    chain_id = record["audit_chain"]["chain_id"]
    status, _, view = call("GET", restarted.base + f"/api/decision/chains/{chain_id}?limit=1000",
                           headers={"x-api-key": key})
    assert view["chain_size"] == counts["decisions"]
    assert view["verification"]["valid"] is True, view["verification"]["failures"]
    for decision_id, outcome_id in acknowledged_receipts:
        listing = call("GET", restarted.base + f"/api/decision/{decision_id}/outcome?limit=100",
                       headers={"x-api-key": key})[2]
        assert outcome_id in {o["outcome_id"] for o in listing["outcome_records"]}
    # The service keeps working on the same chain after the crash.
    status, _, after = call("POST", restarted.base + "/api/decide", sample_request, {"x-api-key": key})
    assert status == 200 and after["audit_chain"]["chain_position"] == counts["decisions"] + 1


def test_kill_9_mid_burst_with_decisions_announced_keeps_one_event_per_stored_decision(
        server_factory, issue_key, gate_env, make_app):
    # `decision.created` on, one decide in four held: the writer's batches announce them (one
    # sequence move and one INSERT per batch, gate.ledger.outbox_write). After a kill -9 and a
    # restart every stored decision has exactly one `decision.created` (every acknowledged one
    # is stored), every stored hold one `hold.opened`, the scope's numbers gap-free, in chain order.
    key = issue_key(permissions="decide,admin")["api_key"]
    # The opt-in is stored before the server starts (through the same route, in process), so its
    # workers read it at their first decide: no wait for the decide path's 2 s re-read.
    stored = make_app().test_client().put("/api/events/settings", json={"decision_created": True,
                                                                         "anomaly_every_seconds": None},
                                          headers={"x-api-key": key})
    assert stored.status_code == 200, stored.get_json()
    server = server_factory(workers=2)
    acknowledged: list[str] = []
    stop = threading.Event()

    def burst(worker: int) -> None:
        count = 0
        while not stop.is_set():
            count += 1
            request = held_request() if (worker + count) % 4 == 0 else approved_request()
            try:
                status, _, body = call("POST", server.base + "/api/decide", request, {"x-api-key": key}, timeout=5)
            except (OSError, http.client.HTTPException):
                time.sleep(0.01)
                continue
            if status == 200:
                acknowledged.append(body["decision_id"])

    threads = [threading.Thread(target=burst, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    deadline = time.time() + 30
    while len(acknowledged) < 60 and time.time() < deadline:  # 60: some fifteen held, batches of eight writers
        time.sleep(0.05)
    server.kill()
    stop.set()
    for thread in threads:
        thread.join(timeout=30)
    assert len(acknowledged) >= 60
    server_factory(workers=1)
    ledger = Ledger(gate_env["GATE_DATABASE_URL"])
    try:
        with ledger.engine.connect() as connection:
            stored = dict(connection.execute(text("SELECT d.decision_id, l.chain_position FROM decisions d JOIN "
                                                  "chain_links l ON l.decision_id = d.decision_id")).all())
            held = set(connection.execute(text("SELECT decision_id FROM holds")).scalars())
        events = [json.loads(row["event_json"]) for row in Outbox(ledger).events_after("tenant_a", 0, 100_000)]
    finally:
        ledger.dispose()
    assert set(acknowledged) <= set(stored)
    assert [int(e["sequence"]) for e in events] == list(range(1, len(events) + 1))
    assert all(e["id"] == event_id("tenant_a", int(e["sequence"])) for e in events)
    created = [e["subject"] for e in events if e["type"].endswith(".decision.created")]
    opened = [e["subject"] for e in events if e["type"].endswith(".hold.opened")]
    assert sorted(created) == sorted(stored) and sorted(opened) == sorted(held) and held
    assert [stored[d] for d in created] == sorted(stored.values())  # announced in chain order
