"""The served configuration: gunicorn with a threaded worker that slow clients cannot hold.

`gate serve` runs gunicorn's `gthread` worker class, extended here in three ways:

- A new connection waits for its first bytes in the worker's event loop, not in a thread; one
  that sends nothing is closed after the keep-alive time (`SERVE_KEEPALIVE_S`).
- Reading one request (request line, headers and body) has one deadline, `read_timeout`
  seconds from its first byte (`GATE_REQUEST_READ_TIMEOUT`). A client that trickles its head or
  body is answered 408 `REQUEST_TIMEOUT` and disconnected; it held one of the worker's threads
  for at most that long, never the whole worker (the sync worker was held until gunicorn's
  30 s kill).
- With several workers, a worker that already holds a full share of connections (as many as it
  has threads) steps back from a new one for `ACCEPT_STEP_BACK_S` before taking it, so a worker
  holding less than a share takes it first. Without this the workers raced for every new
  connection and a pool of keep-alive clients often landed on one of them (16 of 16 `wrk`
  connections on one of two workers: one core idle, a third less throughput; docs/operating.md).
  When no other worker took the connections it stepped back from, `ACCEPT_ALONE_AFTER` times
  in a row (all are full), it accepts at once for `ACCEPT_ALONE_S`: clients that open a
  connection per request are not slowed.
- After answering on a keep-alive connection, the thread that answered waits up to
  `KEEPALIVE_LINGER_S` (5 ms) for that connection's next request and serves it itself, when the
  worker holds no more connections than threads and no other request is waiting for a thread
  (with more connections, one whose request is ready in the event loop would wait on a thread
  that waits on a silent one: at 64 connections that cost decide a quarter of its rate in one
  harness run). gthread handed each answered connection back to its event loop (a pipe write to
  wake it, the poller's register and unregister, a future and a thread hand-off for the next
  request): on a busy two-core host those hand-offs cost a decide about a tenth of its CPU, and
  `GET /healthz` a third of its throughput (docs/operating.md). A connection that sends nothing
  within the linger goes back to the event loop as before, so an idle connection holds a thread
  for at most those 5 ms, and the next request's read has its own deadline like any other.
- A connection that closes after its answer is closed in the event loop (`api.lingering`):
  gthread half-closed it and then waited up to 2 s for the client's close on the worker's main
  loop, so clients that never read their answer nor closed held the loop that accepts and tells
  the arbiter the worker lives, until the arbiter killed the worker (issue 53). The socket now
  waits for the client's close in the selector with the kept-alive connections.
- Once the application is built, the worker freezes the collector's view of everything alive
  (`gc.freeze()`): the app and its imports (about 320,000 objects) live as long as the worker,
  and a full collection that walked them stopped every thread of the worker for 80-110 ms,
  the decide tail's 99th percentile on a quiet host (docs/operating.md).
- Every error gunicorn answers itself, before the application sees the request (414 request
  line too long, 431 headers too large, 400 malformed HTTP, 501 transfer coding, 417 expectation),
  has the JSON error shape `{c: "unclear", v, error, message}` of `api.errors`, not HTML.

For traffic from the public internet the README's production topology puts a buffering proxy
in front as well; this worker is what keeps the service sound when that proxy is absent or
misconfigured.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import gc
import logging
import os
import select
import selectors
import socket
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication
from gunicorn.http import errors as http_errors
from gunicorn.util import write_nonblock
from gunicorn.workers.gthread import TConn, ThreadWorker

from api.bodies import ClientTooSlow
from api.errors import error_body
from api.jsonio import dumps
from api.lingering import LingeringCloses
from api.parking import PARKED, Parked, ParkingLot
from gate.settings import Settings

if TYPE_CHECKING:
    from flask import Flask
    from gunicorn.arbiter import Arbiter
    from gunicorn.http.message import Request
    from gunicorn.workers.base import Worker

log = logging.getLogger("gate.serve")

SERVE_KEEPALIVE_S = 5
# One request header line (name, value, CRLF) gunicorn reads, above its default 8,190 bytes: a CI
# token of up to gate.oidc.MAX_TOKEN_CHARS (16,384) as `Authorization: Bearer …` reaches the gate's
# own size check (401 SVC_API_UNAUTHORIZED), never gunicorn's 431 (docs/ci-principal.md).
MAX_HEADER_LINE_BYTES = 16_384 + 1_024
DEFAULT_THREADS = 8
# Ledger connections a worker keeps open beyond one per request thread: its writer's and a spare.
# With fewer, a busy worker closed a connection on nearly every return to the pool and opened a
# new one (on PostgreSQL a new server process) for the next request.
LEDGER_POOL_BEYOND_THREADS = 2
SWITCH_INTERVAL_S = 0.0005
# How long the thread that answered on a keep-alive connection waits for its next request
# before handing the connection back to the event loop (only while its worker holds no more
# connections than threads and no request waits for a thread).
KEEPALIVE_LINGER_S = 0.005
# How long a worker holding a full share of connections (its threads' worth) waits before it
# accepts a new one itself: time for a worker holding less, woken by the same connection, to
# take it. When the pause ends with the connection still there ACCEPT_ALONE_AFTER times in a
# row (every worker is full, or the others are too busy to wake), the worker accepts without
# stepping back for ACCEPT_ALONE_S: under load from clients that open a connection per request,
# a few connections in that time pay the step, not every one.
ACCEPT_STEP_BACK_S = 0.003
ACCEPT_ALONE_AFTER = 3
ACCEPT_ALONE_S = 0.1

# gunicorn's pre-application refusals → (error code, message). Anything else it raises is a 500.
_PARSE_ERRORS: tuple[tuple[type[BaseException], str, str], ...] = (
    (ClientTooSlow, "REQUEST_TIMEOUT", "the request did not arrive within the read timeout"),
    (http_errors.LimitRequestLine, "REQUEST_URI_TOO_LONG", "the request line is too long"),
    (http_errors.LimitRequestHeaders, "REQUEST_HEADERS_TOO_LARGE", "the request headers are too large or too many"),
    (http_errors.UnsupportedTransferCoding, "TRANSFER_CODING_UNSUPPORTED", "only the chunked transfer coding is supported"),
    (http_errors.ExpectationFailed, "EXPECTATION_FAILED", "only `Expect: 100-continue` is supported"),
    (http_errors.ConfigurationProblem, "INTERNAL_ERROR", "internal error; nothing was approved"),
    (http_errors.ParseException, "REQUEST_INVALID", "malformed HTTP request"),
)
_REASONS = {400: "Bad Request", 408: "Request Timeout", 414: "URI Too Long", 417: "Expectation Failed",
            431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented"}


def error_bytes(code: str, message: str) -> bytes:
    """A complete HTTP/1.1 error response in the API's JSON error shape; the connection closes."""
    status, body = error_body(code, message)
    payload = dumps(body).encode("utf-8")
    head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nConnection: close\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n")
    return head.encode("latin-1") + payload


class DeadlineSocket(socket.socket):
    """A client socket whose reads share one deadline per request, counted from its first read."""

    budget: float | None = None
    deadline: float | None = None
    expired = False
    # Set by the application (through environ["gunicorn.socket"]) on a refusal whose body it did
    # not read: close after the response instead of reading the rest of the body (api/public_limits.py).
    close_after_response = False

    @classmethod
    def adopt(cls, sock: socket.socket) -> DeadlineSocket:
        return cls(sock.family, sock.type, sock.proto, fileno=sock.detach())

    def arm(self, budget: float) -> None:
        self.budget, self.deadline, self.expired = budget, None, False

    def disarm(self) -> None:
        self.budget = self.deadline = None

    def recv(self, size: int, flags: int = 0) -> bytes:
        if self.budget is None:
            return super().recv(size, flags)
        now = time.monotonic()
        if self.deadline is None:
            self.deadline = now + self.budget
        remaining = self.deadline - now
        if remaining <= 0:
            self.expired = True
            raise ClientTooSlow()
        prior = self.gettimeout()
        self.settimeout(remaining if prior is None else min(prior, remaining))
        try:
            return super().recv(size, flags)
        except TimeoutError:
            if time.monotonic() >= self.deadline:
                self.expired = True
                raise ClientTooSlow() from None
            raise
        finally:
            self.settimeout(prior)


class GateConn(TConn):  # type: ignore[misc]  # gunicorn ships no type information
    """gthread's connection, whose graceful close (after the last answer; gthread makes it on the
    worker's main loop) lingers in the worker's event loop instead of blocking it."""

    closes: LingeringCloses | None = None

    def close(self, graceful: bool = False) -> None:
        if graceful and self.closes is not None:
            self.closes.close(self.sock)
        else:
            super().close(graceful)


class GateWorker(ThreadWorker):  # type: ignore[misc]  # gunicorn ships no type information
    """gthread with event-loop waits for first bytes, a per-request read deadline and JSON errors."""

    wsgi: Callable[..., Any]  # the WSGI app gunicorn loads (wrapped by the parking lot below)

    # The monotonic time until which this worker leaves new connections to the others, and when
    # it last took accepting up again (the connection it stepped back from is then its to take).
    _accept_paused_until: float | None = None
    _accept_resumed_at: float = float("-inf")
    _accept_alone_until: float = float("-inf")  # every worker was full: accept at once until then
    _accept_untaken = 0  # step-backs in a row whose connection no other worker took

    closes: LingeringCloses | None = None

    def run(self) -> None:
        self.closes = LingeringCloses(self.poller)
        try:
            super().run()
        finally:
            self.closes.close_all()

    def murder_pending(self) -> None:
        super().murder_pending()  # each turn of the loop, and while stopping
        if self.closes is not None:
            self.closes.reap()

    def init_process(self) -> None:
        # SECURITY (issue 18): a thread that waits on I/O (a keyed decide's ledger round trips)
        # reacquires the GIL only at the next switch interval of a CPU-bound thread (a public
        # verification); at CPython's 5 ms that convoy added ~70 ms to every decide. 0.5 ms
        # keeps a decide's latency near its quiet figure (tests/server/test_public_flood.py).
        sys.setswitchinterval(SWITCH_INTERVAL_S)
        super().init_process()

    def load_wsgi(self) -> None:
        super().load_wsgi()
        # Events out (docs/events.md): each worker runs a dispatcher thread; leases in the ledger
        # let one of them (on any host) deliver a subscription at a time.
        gate_runtime = getattr(self.wsgi, "extensions", {}).get("gate")
        if gate_runtime is not None and gate_runtime.dispatcher is not None:
            gate_runtime.dispatcher.start()
        if gate_runtime is not None and gate_runtime.hold_sweeper is not None:
            gate_runtime.hold_sweeper.start()  # held actions expire and escalate on time (docs/holds.md)
        if gate_runtime is not None and gate_runtime.holds is not None:
            # Long-polls for a hold's resolution wait here, not in a thread (api.parking).
            self.parking = ParkingLot(gate_runtime.holds.holds.closed_among, self.resume_parked, lambda: self.alive)
            gate_runtime.holds.on_closed(self.parking.wake)
            self.wsgi = self.parking.wrap(self.wsgi)
        # What exists now (the app, its imports, its caches as built) lives as long as the
        # worker: the collector's full passes need not walk it again on every request's time.
        gc.freeze()

    @property
    def read_timeout(self) -> float:
        return float(getattr(self.app, "read_timeout", 10.0))

    def accept_step_back(self) -> float:
        """Seconds this worker leaves a new connection to the others first: `ACCEPT_STEP_BACK_S`
        once it holds a full share of connections (its threads' worth); 0 when it holds less, is
        the only worker, or found every other worker full a moment ago (`ACCEPT_ALONE_S`)."""
        if (self.cfg.workers <= 1 or self.nr_conns < self.cfg.threads
                or time.monotonic() < self._accept_alone_until):
            return 0.0
        return ACCEPT_STEP_BACK_S

    def set_accept_enabled(self, enabled: bool) -> None:
        if enabled and self._accept_paused_until is not None:
            enabled = False  # stepping back: wait_for_and_dispatch_events takes accepting up again
        super().set_accept_enabled(enabled)

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        if self._accept_paused_until is not None:
            remaining = self._accept_paused_until - time.monotonic()
            if remaining <= 0:
                self._accept_paused_until = None
                self._accept_resumed_at = time.monotonic()
                # Not while stopping: the graceful shutdown has stopped accepting for good.
                self.set_accept_enabled(self.alive and self.nr_conns < self.worker_connections)
            else:
                timeout = min(timeout, remaining)
        super().wait_for_and_dispatch_events(timeout)

    def accept(self, listener: socket.socket) -> None:
        step_back, now = self.accept_step_back(), time.monotonic()
        resumed = now - self._accept_resumed_at <= step_back
        if step_back and not resumed:
            # A less loaded worker, woken by the same connection, takes it meanwhile; if none
            # has when the pause ends, this worker takes one.
            self._accept_paused_until = now + step_back
            self.set_accept_enabled(False)
            return
        self._accept_resumed_at = float("-inf")
        try:
            client, address = listener.accept()
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.ECONNABORTED):
                return  # another worker took it, or the client gave up
            raise
        if step_back:  # no other worker took it while this one stepped back
            self._accept_untaken += 1
            if self._accept_untaken >= ACCEPT_ALONE_AFTER:  # they are full too
                self._accept_alone_until, self._accept_untaken = now + ACCEPT_ALONE_S, 0
        else:
            self._accept_untaken = 0
        self.nr_conns += 1
        conn = GateConn(self.cfg, DeadlineSocket.adopt(client), address, listener.getsockname())
        conn.closes = self.closes  # SECURITY: a close never waits on the client in the main loop
        # SECURITY: wait for the first bytes in the event loop; an idle connection holds no thread.
        conn.timeout = time.monotonic() + self.cfg.keepalive
        self.pending_conns.append(conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self.on_pending_socket_readable, conn))

    def handle(self, conn: TConn) -> object:
        """Serve the connection's request, then its next ones while they follow within the linger."""
        while True:
            keep_alive = self._handle_one(conn)
            if keep_alive is not True or not self._next_request_follows(conn):
                return keep_alive  # False (close), True (back to the event loop) or gthread's defer

    def _next_request_follows(self, conn: TConn) -> bool:
        """Whether this thread serves the connection's next request itself: it is already read
        ahead, or arrives within `KEEPALIVE_LINGER_S` while the worker holds no more connections
        than threads and no other request waits for a thread (otherwise the connection goes back
        to the event loop, which serves whichever is ready first)."""
        if not self.alive:  # stopping: gthread answers what arrives with Connection: close
            return False
        if conn.parser is not None and conn.parser.unreader.buf.getvalue():
            return True
        if self.nr_conns > self.cfg.threads or self._requests_waiting():
            # More connections than threads: another may have its next request ready in the
            # event loop, not yet queued, while this thread waits on a silent one.
            return False
        poll = select.poll()
        try:
            poll.register(conn.sock, select.POLLIN)
            return bool(poll.poll(KEEPALIVE_LINGER_S * 1000))
        except (OSError, ValueError):  # the socket is gone: gthread's own path closes it
            return False

    def _requests_waiting(self) -> bool:
        """Whether a request waits for a thread: gthread's pool is a ThreadPoolExecutor, whose
        queue of submitted work is not public; without it, the thread never lingers."""
        waiting = getattr(getattr(self.tpool, "_work_queue", None), "qsize", None)
        return waiting is None or waiting() > 0

    def _keepalive_after(self, conn: TConn, keepalive: object) -> object:
        return PARKED if keepalive is PARKED else super()._keepalive_after(conn, keepalive)

    def finish_request(self, conn: TConn, fs: Future[object]) -> None:
        if not fs.cancelled() and fs.exception() is None and fs.result() is PARKED:
            return  # the parking lot holds the connection (still counted in nr_conns)
        super().finish_request(conn, fs)

    def resume_parked(self, conn: TConn, req: Request, body: bytes | None) -> None:
        """From the parking thread: answer a parked request on a pool thread, then carry on
        with the connection as after any answer (keep-alive or close)."""
        future = self.tpool.submit(self._serve_parked, conn, req, body)
        future.add_done_callback(lambda done: self.method_queue.defer(self.finish_request, conn, done))

    def _serve_parked(self, conn: TConn, req: Request, body: bytes | None) -> object:
        try:
            with self.parking.resumed(body) if self.parking is not None else contextlib.nullcontext():
                return self._keepalive_after(conn, self.handle_request(req, conn))
        except OSError:  # the waiting client left: nothing to answer
            return False
        except Exception as exc:  # noqa: BLE001 - answered as gunicorn answers any handler error
            self.handle_error(req, conn.sock, conn.client, exc)
            return False

    def _handle_one(self, conn: TConn) -> object:
        if isinstance(conn.sock, DeadlineSocket):
            conn.sock.arm(self.read_timeout)  # SECURITY: one request, one bounded read
        try:
            return super().handle(conn)
        finally:
            if isinstance(conn.sock, DeadlineSocket):
                conn.sock.disarm()

    parking: ParkingLot | None = None

    def handle_request(self, req: Request, conn: TConn) -> object:
        try:
            keep_alive = super().handle_request(req, conn)
        except Parked as parked:
            if self.parking is None:  # pragma: no cover - only a lot's wrapper raises it
                raise
            self.parking.hold(conn, req, parked)  # answered later by resume_parked; no thread waits
            return PARKED
        sock = conn.sock
        expired = isinstance(sock, DeadlineSocket) and sock.expired
        close = isinstance(sock, DeadlineSocket) and sock.close_after_response
        if isinstance(sock, DeadlineSocket):
            sock.disarm()  # the response is out; gunicorn's own bounded drain follows
            sock.close_after_response = False
        return keep_alive and not expired and not close

    def handle_error(self, req: Request | None, client: socket.socket, addr: tuple[Any, ...] | str | None,
                     exc: BaseException) -> None:
        code, message = "INTERNAL_ERROR", "internal error; nothing was approved"
        for kind, known_code, known_message in _PARSE_ERRORS:
            if isinstance(exc, kind) and not isinstance(exc, (http_errors.InvalidResponseHeader,
                                                              http_errors.InvalidResponseHeaderName)):
                code, message = known_code, known_message
                break
        if code == "INTERNAL_ERROR":
            log.exception("unhandled error before or around the application")
        else:
            # The exception text can quote request bytes (headers, keys): name its class only.
            log.warning("refused a request from %s: %s (%s)", (addr or ("",))[0], code, type(exc).__name__)
        try:
            write_nonblock(client, error_bytes(code, message))
        except Exception:  # noqa: BLE001 - best effort: the client may be gone; the refusal is logged above
            log.debug("could not send the error response")


def prepare_metrics_multiprocess(home: Path, workers: int) -> None:
    """Before gunicorn forks N>1 workers: give prometheus_client a shared, emptied directory
    (`api.metrics`). Runs in the master before anything imports prometheus_client, which reads
    `PROMETHEUS_MULTIPROC_DIR` when it is first imported (in each worker, after the fork)."""
    if workers <= 1 or os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        return
    directory = Path(home) / "prometheus-multiproc"
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)


def metrics_child_exit(server: Arbiter, worker: Worker) -> None:
    """gunicorn hook: a dead worker's live gauges leave the aggregate."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # Lazy: prometheus_client reads PROMETHEUS_MULTIPROC_DIR when first imported (in each worker).
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)


class GateServer(BaseApplication):  # type: ignore[misc]  # gunicorn ships no type information
    """`gate serve`: the app from `app_factory` (the composition root's, `gate_cli.served_app.create_app`;
    None: the API alone, `api.app.create_app`), served by `GateWorker` processes."""

    def __init__(self, settings: Settings, host: str, port: int, workers: int, threads: int = DEFAULT_THREADS,
                 on_ready: Callable[[], None] | None = None,
                 app_factory: Callable[[Settings], Flask] | None = None) -> None:
        settings = dataclasses.replace(settings, ledger_pool_size=threads + LEDGER_POOL_BEYOND_THREADS)
        self.settings, self.bind, self.workers, self.threads = settings, f"{host}:{port}", workers, threads
        self.on_ready = on_ready  # called once the listening socket is bound (`gate demo` prints its banner)
        self.app_factory = app_factory  # called in each worker, after the fork
        self.read_timeout = settings.request_read_timeout
        prepare_metrics_multiprocess(settings.home, workers)
        super().__init__()

    def load_config(self) -> None:
        self.cfg.set("bind", self.bind)
        self.cfg.set("workers", self.workers)
        self.cfg.set("worker_class", "api.serving.GateWorker")
        self.cfg.set("threads", self.threads)
        self.cfg.set("keepalive", SERVE_KEEPALIVE_S)
        self.cfg.set("limit_request_field_size", MAX_HEADER_LINE_BYTES)
        self.cfg.set("accesslog", None)
        self.cfg.set("graceful_timeout", 10)
        self.cfg.set("timeout", self.settings.worker_timeout)  # the arbiter restarts a worker silent this long
        # No shared control socket in $HOME: several gates (and tests) run side by side.
        self.cfg.set("control_socket_disable", True)
        self.cfg.set("child_exit", metrics_child_exit)
        if self.on_ready is not None:
            ready = self.on_ready
            self.cfg.set("when_ready", lambda _arbiter: ready())

    def load(self) -> Flask:
        # Lazy: the app (and prometheus_client with it) loads in each worker, after the fork.
        if self.app_factory is not None:
            return self.app_factory(self.settings)
        from api.app import create_app

        return create_app(self.settings)
