"""The caller's wait for a held action, served (issue 43 item 4, docs/holds.md): `gate serve` with two
workers of two threads each. Twelve callers long-poll one hold at once (three times the threads);
the gate keeps answering other requests meanwhile, so no waiting caller holds a thread; a reviewer's
resolution, made in whichever worker, wakes every waiter within a second with the signed
resolution; a wait that runs out answers `open`, never approval; a hold past its deadline expires
once however many workers sweep."""

from __future__ import annotations

import threading
import time

import pytest

from gate.holds.events import verify_resolution
from gate.keys.signing import load_keyring
from gate.verify.anchors import TrustAnchors
from tests.holds.support import held_request, policy, queue
from tests.server.support import call, server_factory  # noqa: F401 (the fixture)

pytestmark = [pytest.mark.slow]

WAITERS = 12


def _long_poll(base, key, decision_id, wait, out):
    started = time.monotonic()
    status, _, body = call("GET", f"{base}/api/decision/{decision_id}/resolution?wait={wait}", None,
                           {"x-api-key": key}, timeout=wait + 10)
    out.append((status, body, time.monotonic() - started, time.monotonic()))


def _mcp_wait(base, key, decision_id, wait, out):
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "hold_resolution", "arguments": {"decision_id": decision_id, "wait_seconds": wait}}}
    started = time.monotonic()
    status, _, body = call("POST", base + "/api/mcp", message, {"x-api-key": key}, timeout=wait + 10)
    out.append((status, body, time.monotonic() - started, time.monotonic()))


def test_waiters_hold_no_thread_and_wake_within_a_second_of_a_resolution(server_factory, issue_key, gate_env):
    server = server_factory(workers=2, threads=2, env={"GATE_HOLD_SWEEP_MS": "200"})
    caller, reviewer = issue_key(permissions="decide")["api_key"], issue_key(permissions="resolve")["api_key"]
    status, _, record = call("POST", server.base + "/api/decide", held_request(), {"x-api-key": caller})
    assert status == 200 and record["verdict"] == "review"
    answers: list = []
    threads = [threading.Thread(target=_long_poll, args=(server.base, caller, record["decision_id"], 20, answers))
               for _ in range(WAITERS)]
    mcp: list = []  # an agent waiting through the MCP tool is parked the same way
    threads += [threading.Thread(target=_mcp_wait, args=(server.base, caller, record["decision_id"], 20, mcp))
                for _ in range(2)]
    for t in threads:
        t.start()
    time.sleep(1.5)  # every waiter is parked by now
    assert answers == []
    # Every thread of both workers is free: other callers are served at once.
    for _ in range(6):
        started = time.monotonic()
        status, _, other = call("POST", server.base + "/api/decide", held_request(margin=15), {"x-api-key": caller},
                                timeout=5)
        assert status == 200 and time.monotonic() - started < 2.0
    status, _, resolved = call("POST", f"{server.base}/api/holds/{record['decision_id']}/resolve",
                               {"decision": "approve", "reason_code": "MARGIN_OK"}, {"x-api-key": reviewer})
    resolved_at = time.monotonic()
    assert status == 201, resolved
    for t in threads:
        t.join(timeout=15)
    assert len(answers) == WAITERS
    anchors = TrustAnchors.from_keyring(load_keyring(gate_env["GATE_SIGNING_KEY_FILE"]))
    for status, body, _, done in answers:
        assert status == 200 and body["state"] == "approved" and body["resolution"] == resolved["event"]
        assert done - resolved_at < 1.0, done - resolved_at
        assert verify_resolution(record, body["resolution"], anchors).approved
    assert len(mcp) == 2
    for status, body, _, done in mcp:
        result = body["result"]
        assert status == 200 and result["isError"] is False and done - resolved_at < 1.0
        assert result["structuredContent"]["state"] == "approved"
        assert result["structuredContent"]["resolution"] == resolved["event"]
    # A wait that runs out answers the state as it is: open, never approval.
    short: list = []
    _long_poll(server.base, caller, other["decision_id"], 1, short)
    status, body, took, _ = short[0]
    assert status == 200 and body["state"] == "open" and body["approved"] is False and 0.9 < took < 3


def test_two_workers_expire_a_hold_once(server_factory, issue_key):
    server = server_factory(workers=2, threads=2, env={"GATE_HOLD_SWEEP_MS": "100"})
    admin, caller = issue_key(permissions="admin")["api_key"], issue_key(permissions="decide")["api_key"]
    status, _, _ = call("PUT", server.base + "/api/holds/policy", policy({"default": queue(deadline=5)}),
                        {"x-api-key": admin})
    assert status == 200
    _, _, record = call("POST", server.base + "/api/decide", held_request(), {"x-api-key": caller})
    status, _, body = call("GET", f"{server.base}/api/decision/{record['decision_id']}/resolution?wait=15", None,
                           {"x-api-key": caller}, timeout=25)
    assert status == 200 and body["state"] == "expired" and body["approved"] is False
    _, _, shown = call("GET", f"{server.base}/api/holds/{record['decision_id']}", None, {"x-api-key": caller})
    assert [e["action"] for e in shown["hold"]["events"]] == ["expire"]
