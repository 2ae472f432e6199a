"""The served configuration against hostile clients, on a real `gate serve` (issue 6, defects 3 and 9).

- A 400 MB chunked POST answers 413 while the worker's peak memory stays near its baseline.
- Clients that trickle a body or a head, or connect and send nothing, do not stop the worker
  from answering others; each slow one is answered 408 in the JSON shape after the read timeout.

Everything is on loopback, bounded in connection count (under 50) and time (a few seconds).
"""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.server.support import call, peak_rss_kib, worker_pids

pytestmark = pytest.mark.slow

MIB = 1 << 20


def _chunked_flood(port: int, path: str, total: int) -> bytes:
    """Send a chunked body of `total` bytes while a reader collects the answer; returns the answer."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=20)
    answer: list[bytes] = []

    def read() -> None:
        try:
            while chunk := sock.recv(65536):
                answer.append(chunk)
        except OSError:
            pass

    reader = threading.Thread(target=read)
    reader.start()
    try:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
                     "Transfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"%x\r\n" % MIB + b" " * MIB + b"\r\n"
        for _ in range(total // MIB):
            sock.sendall(chunk)
        sock.sendall(b"0\r\n\r\n")
    except OSError:
        pass  # the server refused and closed: expected
    reader.join(timeout=20)
    sock.close()
    return b"".join(answer)


@pytest.mark.parametrize("path, limit_mib", [("/api/decision/verify", 1), ("/api/decision/packet/verify", 16)])
def test_a_400_mb_chunked_post_is_refused_without_growing_the_worker(server_factory, path, limit_mib):
    # A generous read timeout: the size limit must be what strikes (413), never the 10 s deadline
    # for the whole body (408) while a loaded host reads the first 16 MiB (issue 53, defect 6).
    server = server_factory(workers=1, env={"GATE_REQUEST_READ_TIMEOUT": "300"})
    call("POST", server.base + path, {"record": {}})  # warm the worker up before the baseline
    (worker,) = worker_pids(server.process.pid)
    before = peak_rss_kib(worker)
    answer = _chunked_flood(server.port, path, 400 * MIB)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"error":"REQUEST_TOO_LARGE"' in answer
    grown_mib = (peak_rss_kib(worker) - before) / 1024
    # SECURITY: at most about twice the limit (the parts and their join) plus slack, never 400 MB.
    assert grown_mib < 2 * limit_mib + 24, f"worker peak grew by {grown_mib:.0f} MiB"
    assert call("GET", server.base + "/api/decision/status")[0] == 200


def _slow_client(port: int, head: bytes, trickle: bytes, results: list, lock: threading.Lock) -> None:
    """Send `head` at once, then `trickle` one byte every 50 ms; record when the answer came, and what."""
    started = time.monotonic()
    answer: list[bytes] = []
    answered_at: list[float] = []
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:

        def read() -> None:
            try:
                while chunk := sock.recv(4096):
                    answered_at.append(time.monotonic())
                    answer.append(chunk)
            except OSError:
                pass

        reader = threading.Thread(target=read)
        reader.start()
        try:
            sock.sendall(head)
            for byte in trickle:
                if answer:
                    break
                sock.send(bytes([byte]))
                time.sleep(0.05)
        except OSError:
            pass  # the server gave up on us
        reader.join(timeout=15)
    with lock:
        results.append(((answered_at or [time.monotonic()])[0] - started, b"".join(answer)))


SLOW_BODY = ((b"POST /api/decision/verify HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
              b"Content-Length: 5000\r\n\r\n"), b'{"record": ' + b" " * 300)
SLOW_HEAD = (b"G", b"ET /api/decision/status HTTP/1.1\r\nHost: t\r\nX-Trickle: " + b"a" * 300)


def test_slow_clients_hold_neither_the_worker_nor_a_thread_for_long(server_factory):
    read_timeout = 2.0
    server = server_factory(workers=1, threads=8, env={"GATE_REQUEST_READ_TIMEOUT": str(read_timeout)})
    results: list = []
    lock = threading.Lock()
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(30)]  # connect, send nothing
    slow = [threading.Thread(target=_slow_client, args=(server.port, *kind, results, lock))
            for kind in [SLOW_BODY] * 4 + [SLOW_HEAD] * 2]
    for thread in slow:
        thread.start()
    time.sleep(0.3)  # the slow ones are now inside the worker
    try:
        for _ in range(5):  # others are served meanwhile, promptly
            started = time.monotonic()
            status, _, _ = call("GET", server.base + "/api/decision/status", timeout=5)
            assert status == 200 and time.monotonic() - started < 4  # a held sync worker: 30 s
        for thread in slow:
            thread.join(timeout=15)
    finally:
        for sock in idle:
            sock.close()
    assert len(results) == 6
    for elapsed, answer in results:
        # Each slow client got the JSON 408 once the read timeout had passed, and no later than shortly after.
        assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
        assert b'"error":"REQUEST_TIMEOUT"' in answer and b'"c":"unclear"' in answer
        assert read_timeout - 0.5 < elapsed < read_timeout + 5, elapsed
    assert call("GET", server.base + "/api/decision/status")[0] == 200
