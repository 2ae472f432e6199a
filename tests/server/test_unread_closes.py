"""Clients that never read their answer nor close their socket stall no worker (issue 53, defect 1).

A real `gate serve` (one worker, its default 8 threads). Each hostile client sends a request with
`Connection: close` and then neither reads the answer nor closes: gunicorn's gthread worker closed
such a connection gracefully on its main loop (`util.close_graceful`: half-close, then wait up to
2 s for the peer's FIN), one connection after another, so the loop accepted nothing and never
told the arbiter it was alive; past gunicorn's 30 s timeout the arbiter killed the worker with
every request in flight. Before the fix a decide made behind 25 such clients waited 34 s and the
worker was killed; behind 100 unread long-polls the worker was killed.

Here the hostile clients keep coming for longer than the worker timeout (10 s here) while a keyed decide is made
every half second: every decide is answered within its client's timeout, the worker is the one
that started (no `WORKER TIMEOUT`), and the hostile clients did get their answers (their sockets
hold them, unread). The latency figures are the benchmark's (benchmarks/bench_unread_closes.py).
"""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from api.lingering import LINGER_MAX, LINGER_S
from tests.holds.support import held_request
from tests.server.support import call, worker_pids

pytestmark = pytest.mark.slow

# The servers here run with a 10 s worker timeout (`GATE_WORKER_TIMEOUT`; 30 s by default), and the
# hostile clients keep coming for longer than that: a worker whose loop stalls is killed within it.
# (Before the fix, 25 unread closes held the loop 50 s, 100 unread long-polls 200 s.)
WORKER_TIMEOUT_S = 10
OBSERVE_S = WORKER_TIMEOUT_S + 3.0
SERVE_ENV = {"GATE_WORKER_TIMEOUT": str(WORKER_TIMEOUT_S)}
DECIDE_EVERY_S = 0.5
DECIDE_TIMEOUT_S = 10.0


def unread(port: int, count: int, request: bytes) -> list[socket.socket]:
    """`count` connections that each send `request` and then neither read nor close."""
    socks = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(request)
        socks.append(sock)
    return socks


def answered(sock: socket.socket) -> bytes:
    """The status line the server sent on a hostile connection (read only now, at the end)."""
    sock.settimeout(5)
    data = b""
    while b"\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\r\n", 1)[0]


def decide_while(server, key: str, sample_request: dict, attack) -> list[float]:
    """Keyed decides every `DECIDE_EVERY_S` for `OBSERVE_S`, calling `attack(elapsed)` between
    them; each must be answered 200 within `DECIDE_TIMEOUT_S`."""
    latencies, started = [], time.monotonic()
    while (elapsed := time.monotonic() - started) < OBSERVE_S:
        attack(elapsed)
        begun = time.monotonic()
        status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key},
                               timeout=DECIDE_TIMEOUT_S)
        latencies.append(time.monotonic() - begun)
        assert status == 200, body
        time.sleep(max(0.0, DECIDE_EVERY_S - latencies[-1]))
    return latencies


def assert_worker_lived(server, workers_before: list[int], log: Path) -> None:
    assert worker_pids(server.process.pid) == workers_before
    assert "WORKER TIMEOUT" not in log.read_text()


def test_clients_that_never_read_a_closing_answer_stall_no_worker(server_factory, issue_key, sample_request,
                                                                  tmp_path):
    server = server_factory(workers=1, env=SERVE_ENV)
    key = issue_key()["api_key"]
    workers = worker_pids(server.process.pid)
    hostile: list[socket.socket] = []
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"

    def attack(elapsed: float) -> None:  # 25 at once, and again every 5 s (within the public rate limit)
        if len(hostile) < 25 * (1 + int(elapsed // 5)):
            hostile.extend(unread(server.port, 25, request))

    try:
        latencies = decide_while(server, key, sample_request, attack)
        assert_worker_lived(server, workers, tmp_path / "server.log")
        assert {answered(sock) for sock in hostile} == {b"HTTP/1.1 200 OK"}
    finally:
        for sock in hostile:
            sock.close()
    print("decide behind unread closes:", json.dumps({"decides": len(latencies), "max_s": max(latencies),
                                                      "hostile": len(hostile)}))


def test_unread_long_polls_stall_no_worker(server_factory, issue_key, sample_request, tmp_path):
    server = server_factory(workers=1, env=SERVE_ENV)
    key = issue_key(permissions="decide")["api_key"]
    status, _, record = call("POST", server.base + "/api/decide", held_request(), {"x-api-key": key})
    assert status == 200 and record["verdict"] == "review", record
    workers = worker_pids(server.process.pid)
    poll = (f"GET /api/decision/{record['decision_id']}/resolution?wait=2 HTTP/1.1\r\nHost: x\r\n"
            f"x-api-key: {key}\r\nConnection: close\r\n\r\n").encode()
    hostile = unread(server.port, 100, poll)  # parked; answered `open` together after 2 s, never read
    try:
        latencies = decide_while(server, key, sample_request, lambda _elapsed: None)
        assert_worker_lived(server, workers, tmp_path / "server.log")
        assert {answered(sock) for sock in hostile} == {b"HTTP/1.1 200 OK"}
    finally:
        for sock in hostile:
            sock.close()
    print("decide behind unread long-polls:", json.dumps({"decides": len(latencies), "max_s": max(latencies)}))




def test_more_unread_closes_than_a_worker_lingers_on_lose_no_answer(server_factory, issue_key, sample_request,
                                                                     tmp_path):
    """Past `LINGER_MAX` lingering sockets the oldest is closed at once: its answer and FIN are
    already queued and it sent nothing more, so its client still gets the whole answer."""
    server = server_factory(workers=1)
    key = issue_key()["api_key"]
    workers = worker_pids(server.process.pid)
    request = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    hostile = unread(server.port, LINGER_MAX + 60, request)
    try:
        for _ in range(5):
            status, _, body = call("POST", server.base + "/api/decide", sample_request, {"x-api-key": key},
                                   timeout=DECIDE_TIMEOUT_S)
            assert status == 200, body
        time.sleep(2 * LINGER_S)
        assert {answered(sock) for sock in hostile} == {b"HTTP/1.1 200 OK"}
        assert_worker_lived(server, workers, tmp_path / "server.log")
    finally:
        for sock in hostile:
            sock.close()

def _read_all(sock: socket.socket) -> bytes:
    data = b""
    try:
        while chunk := sock.recv(65536):
            data += chunk
    except ConnectionResetError:
        pass  # the server reset the connection: what was still in its send queue is lost
    return data


def test_a_closing_answer_still_reaches_a_client_that_sends_more_and_reads_late(server_factory):
    """The close still lingers as RFC 9112 section 9.6 asks. A client asks for a large answer
    with `Connection: close`, sends more bytes, and reads only later through a small receive
    window, so most of the answer still waits in the worker's send queue when the worker closes.
    A plain close with those bytes unread (or arriving after it) makes the kernel reset the
    connection and drop the rest of the answer; the lingering close reads them away and waits
    for the client, so the whole answer arrives."""
    server = server_factory(workers=1)
    for _ in range(3):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.settimeout(10)
        with sock:
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(b"GET /openapi.json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            time.sleep(0.5)  # answered and closing by now
            sock.sendall(b"x" * 16384)  # more than the server reads: left in its socket at the close
            time.sleep(0.5)
            head, _, body = _read_all(sock).partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                      if line.startswith(b"content-length:"))
        assert head.startswith(b"HTTP/1.1 200") and length > 100_000 and len(body) == length, (len(body), length)
