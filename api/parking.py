"""Long-polls that hold no thread: `GET /api/decision/{id}/resolution?wait=N` under `gate serve`.

A served worker has a few threads (`--threads`) and many connections. A caller waiting for a
reviewer may wait 30 seconds; if each wait held a thread, a handful of waiting agents would stop
every decide of the worker. So the route, when the hold is still open and the request may wait,
asks to be **parked** (`environ["gate.park"]`): the WSGI wrapper here then raises `Parked`
instead of answering, the worker (api.serving.GateWorker) keeps the connection aside, outside
its event loop and its thread pool, and the thread goes back to serve others.

One daemon thread per worker watches the parked requests. It wakes at once when this process
closes a hold (`HoldService.on_closed`), and otherwise every `poll` seconds (0.25) reads which of
the parked decisions another process or host closed (one indexed query for all of them), so a
close anywhere answers its waiters within a second. A waiter whose hold closed, whose wait ran
out, or whose worker is stopping is **resumed**: its request runs through the application again
on a pool thread, with parking refused, and answers the state as it is then (still `open` after
a full wait: never approval). At most `limit` requests are parked per worker; beyond it a wait
is answered in its thread (bounded by the route's 30 seconds), never refused.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

PARK = "gate.park"
PARKED = object()  # what a worker's handler returns for a parked request (never True, never False)
POLL_SECONDS = 0.25
LIMIT = 10_000
_CHUNK = 500

log = logging.getLogger("gate.parking")


class Parked(BaseException):
    """Raised out of the WSGI call for a request that asked to be parked."""

    def __init__(self, decision_id: str, seconds: float, body: bytes | None = None) -> None:
        super().__init__(decision_id)
        self.decision_id, self.seconds, self.body = decision_id, seconds, body


@dataclass(slots=True)
class Ticket:
    decision_id: str
    deadline: float  # time.monotonic()
    conn: Any
    req: Any
    body: bytes | None  # the request body the resumed run reads again (a POST's was consumed)


class ParkingLot:
    """The parked requests of one worker and the thread that resumes them."""

    def __init__(self, closed_among: Callable[[list[str]], set[str]], resume: Callable[[Any, Any, bytes | None], None],
                 alive: Callable[[], bool], *, poll: float = POLL_SECONDS, limit: int = LIMIT) -> None:
        self.closed_among, self.resume, self.alive = closed_among, resume, alive
        self.poll, self.limit = poll, limit
        self._tickets: dict[int, Ticket] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._local = threading.local()
        self._thread: threading.Thread | None = None

    # -- the application's side ----------------------------------------------------------------
    def wrap(self, app: Callable[..., Any]) -> Callable[..., Any]:
        """The WSGI application with parking offered to its routes."""
        def parked_app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
            self._local.ask = None
            resumed = getattr(self._local, "resumed", False)
            environ[PARK] = None if resumed else self._ask
            body = getattr(self._local, "body", None)
            if resumed and body is not None:
                environ["wsgi.input"], environ["CONTENT_LENGTH"] = io.BytesIO(body), str(len(body))
            result = app(environ, start_response)
            ask = self._local.ask
            if ask is not None:
                self._local.ask = None
                close = getattr(result, "close", None)
                if close is not None:
                    close()
                raise Parked(*ask)
            return result
        return parked_app

    def _ask(self, decision_id: str, seconds: float, body: bytes | None = None) -> bool:
        """The route's request to park (True: it will be; False: the lot is full, wait in the thread).
        A route that read a body passes it (`body`): the resumed run reads it again."""
        if len(self._tickets) >= self.limit:
            return False
        self._local.ask = (decision_id, seconds, body)
        return True

    def resumed(self, body: bytes | None) -> ResumedContext:
        """Context for a resumed request's run: parking is refused to it; it reads `body` again."""
        return ResumedContext(self._local, body)

    # -- the worker's side ---------------------------------------------------------------------
    def hold(self, conn: Any, req: Any, parked: Parked) -> None:
        with self._lock:
            self._tickets[id(conn)] = Ticket(parked.decision_id, time.monotonic() + parked.seconds, conn, req,
                                             parked.body)
        self.start()

    def wake(self, _decision_id: str | None = None) -> None:
        self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gate-parking", daemon=True)
            self._thread.start()

    def waiting(self) -> int:
        return len(self._tickets)

    def _run(self) -> None:
        while True:
            self._wake.wait(self.poll)
            self._wake.clear()
            try:
                self._pass()
            except Exception:  # the ledger may be away: the waits still end at their deadlines
                log.warning("the parking pass failed; retrying", exc_info=True)

    def _pass(self) -> None:
        with self._lock:
            tickets = list(self._tickets.values())
        if not tickets:
            return
        now, stopping = time.monotonic(), not self.alive()
        due = [t for t in tickets if stopping or t.deadline <= now]
        waiting = [t for t in tickets if t not in due]
        closed = self._closed({t.decision_id for t in waiting}) if waiting else set()
        self._release(due + [t for t in waiting if t.decision_id in closed])

    def _closed(self, decision_ids: Iterable[str]) -> set[str]:
        ids, closed = sorted(decision_ids), set()
        for start in range(0, len(ids), _CHUNK):
            closed |= self.closed_among(ids[start:start + _CHUNK])
        return closed

    def _release(self, tickets: list[Ticket]) -> None:
        for ticket in tickets:
            with self._lock:
                if self._tickets.pop(id(ticket.conn), None) is None:
                    continue
            self.resume(ticket.conn, ticket.req, ticket.body)


class ResumedContext:
    def __init__(self, local: threading.local, body: bytes | None) -> None:
        self.local, self.body = local, body

    def __enter__(self) -> None:
        self.local.resumed, self.local.body = True, self.body

    def __exit__(self, *exc: object) -> None:
        self.local.resumed, self.local.body = False, None
