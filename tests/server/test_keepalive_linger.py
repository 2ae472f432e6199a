"""The thread that answered on a keep-alive connection serves its next request when it follows
within `KEEPALIVE_LINGER_S`, on a real `gate serve` (api/serving.py, issue 23).

- Requests back to back, and two sent in one write (read ahead), are each answered once, in order.
- An idle keep-alive connection holds the only thread for no longer than the linger: another
  client is answered at once, not after the keep-alive time.
- A next request that arrives within the linger and then trickles is answered 408 at the read
  deadline, as a first request is; the thread is free again for others meanwhile only after that,
  so the test gives the worker a second thread and checks the other client is answered at once.
"""

from __future__ import annotations

import socket
import time

import pytest

from api.serving import KEEPALIVE_LINGER_S, SERVE_KEEPALIVE_S
from tests.server.support import call

pytestmark = pytest.mark.slow

GET = b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n"


def _read_answers(sock: socket.socket, count: int) -> list[bytes]:
    """Read `count` complete HTTP answers (Content-Length bodies) from `sock`."""
    data, answers = b"", []
    while len(answers) < count:
        head, sep, rest = data.partition(b"\r\n\r\n")
        if sep:
            length = next(int(line.split(b":")[1]) for line in head.lower().split(b"\r\n")
                          if line.startswith(b"content-length:"))
            if len(rest) >= length:
                answers.append(head + sep + rest[:length])
                data = rest[length:]
                continue
        chunk = sock.recv(65536)
        assert chunk, f"the server closed after {len(answers)} answers"
        data += chunk
    return answers


def test_back_to_back_and_read_ahead_requests_are_each_answered_in_order(server_factory):
    server = server_factory(workers=1, threads=2)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        for _ in range(30):  # each within the linger of the answer before
            sock.sendall(GET)
            [answer] = _read_answers(sock, 1)
            assert answer.startswith(b"HTTP/1.1 200")
        statuses = b"GET /api/decision/status HTTP/1.1\r\nHost: t\r\n\r\n"
        sock.sendall(GET + statuses + GET)  # one write: the second and third are read ahead
        answers = _read_answers(sock, 3)
        assert [a.split(b"\r\n", 1)[0] for a in answers] == [b"HTTP/1.1 200 OK"] * 3
        assert b'"alive"' in answers[0] and b'"alive"' not in answers[1] and b'"alive"' in answers[2]


def test_an_idle_keep_alive_connection_holds_the_only_thread_no_longer_than_the_linger(server_factory):
    server = server_factory(workers=1, threads=1)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as idle:
        idle.sendall(GET)
        assert _read_answers(idle, 1)[0].startswith(b"HTTP/1.1 200")
        # The connection stays open and silent (its keep-alive time is 5 s); another client is
        # answered by the worker's only thread as soon as the linger has ended.
        started = time.monotonic()
        status, _, _ = call("GET", server.base + "/healthz", timeout=10)
        took = time.monotonic() - started
        assert status == 200
        assert took < SERVE_KEEPALIVE_S / 2, took  # not the keep-alive time: the linger (5 ms) and a request
        idle.sendall(GET)  # the idle connection, back in the event loop, is still served
        assert _read_answers(idle, 1)[0].startswith(b"HTTP/1.1 200")
    assert KEEPALIVE_LINGER_S <= 0.01


def test_a_next_request_that_trickles_after_the_linger_began_is_a_408_at_the_read_deadline(server_factory):
    read_timeout = 2.0  # room for the other client's answer on a busy host
    server = server_factory(workers=1, threads=2, env={"GATE_REQUEST_READ_TIMEOUT": str(read_timeout)})
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as slow:
        slow.sendall(GET)
        assert _read_answers(slow, 1)[0].startswith(b"HTTP/1.1 200")
        slow.sendall(b"GET /healthz HT")  # within the linger: the same thread reads it, and waits
        started = time.monotonic()
        status, _, _ = call("GET", server.base + "/healthz", timeout=10)  # the other thread answers
        assert status == 200 and time.monotonic() - started < read_timeout
        slow.settimeout(read_timeout + 5)
        answer = slow.recv(65536)
        waited = time.monotonic() - started
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert b"REQUEST_TIMEOUT" in answer
        assert read_timeout * 0.8 <= waited <= read_timeout + 3, waited


def test_the_thread_lingers_only_while_no_request_waits_and_only_with_a_pool_it_can_read():
    import queue
    from concurrent.futures import ThreadPoolExecutor

    from api.serving import GateWorker

    worker = object.__new__(GateWorker)  # only the pool is read
    worker.tpool = ThreadPoolExecutor(1)
    try:
        assert worker._requests_waiting() is False
        worker.tpool._work_queue.put(object())  # a submitted request no thread took yet
        assert worker._requests_waiting() is True
    finally:
        worker.tpool._work_queue = queue.SimpleQueue()
        worker.tpool.shutdown()
    worker.tpool = object()  # a pool whose queue cannot be read: never linger
    assert worker._requests_waiting() is True


def test_a_worker_holding_more_connections_than_threads_never_lingers():
    """One whose next request is ready in the event loop (not yet queued) would wait on a thread
    that waits on a silent connection: past a connection per thread, no thread lingers."""
    from concurrent.futures import ThreadPoolExecutor
    from types import SimpleNamespace

    from api.serving import GateWorker

    worker = object.__new__(GateWorker)
    worker.alive, worker.cfg, worker.tpool = True, SimpleNamespace(threads=2), ThreadPoolExecutor(2)
    ours, theirs = socket.socketpair()
    try:
        conn = SimpleNamespace(sock=ours, parser=None)
        theirs.sendall(b"G")  # the connection's next request has begun
        worker.nr_conns = 2  # a thread for each connection: it serves its next request itself
        assert worker._next_request_follows(conn) is True
        worker.nr_conns = 3
        assert worker._next_request_follows(conn) is False
        ours.recv(1)
        worker.nr_conns = 1  # nothing arrives within the linger: back to the event loop
        started = time.monotonic()
        assert worker._next_request_follows(conn) is False
        assert time.monotonic() - started < 0.5
    finally:
        worker.tpool.shutdown()
        ours.close()
        theirs.close()
