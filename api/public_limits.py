"""Budgets of the public routes: a per-client rate and a per-process bound on heavy work (issue 18).

The routes that need no API key and had no limit of their own (exported record and packet
verification, the registries, schemas, OpenAPI and docs, readiness, metrics) count against the
calling client's address (`api.client_limits.client_address`) in fixed one-minute windows of the
same limiter (memory or Redis) as keyed requests:

- `verify` (POST /api/decision/verify, POST /api/decision/packet/verify): the bodies are large
  (1 MiB, 16 MiB) and verifying costs CPU, so `GATE_PUBLIC_VERIFY_RATE_LIMIT` (60) per minute;
- `public` (every other route declared with `budget="public"`, and Flask's static files):
  `GATE_PUBLIC_RATE_LIMIT` (600) per minute.

Each public route names its budget in its declaration (`api.routing.Endpoint.budget`); the
OpenAPI document states the same budget's 429 and 503 answers from it.

Beyond its budget a client gets 429 `SVC_API_RATE_LIMITED` with `Retry-After` and the
`X-RateLimit-*` headers, before its body is read; allowed responses carry the headers too.

A rate per client does not stop many clients at once, so verification also takes one of
`GATE_PUBLIC_VERIFY_CONCURRENCY` (1) slots per server process, without waiting: when every slot
is busy the request is answered 503 `PUBLIC_VERIFY_BUSY` with `Retry-After: 1` at once. The slot
is taken once the body has arrived and held while it is parsed and verified, so the CPU-heavy
public work holds at most that many of a worker's threads (8 by default) and keyed requests
such as `/api/decide` find a free thread (tests/server/test_public_flood.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, Response, current_app, request

from api.client_limits import client_limit
from api.errors import error_response
from api.jsonio import parse_json_bytes, read_json_bytes
from api.routing import mounted
from gate.errors import CodedError, GateError
from gate.protocol.canonical import MAX_DOCUMENT_DEPTH
from gate.settings import Settings

# Flask's own route (the app declares none of its own there), budgeted like the public routes.
UNDECLARED_BUDGETS = {"static": "public"}
HEAVY_KINDS = frozenset({"verify"})  # their views hold a `verification_slot` while they work
_HEADERS = "gate.public_rate_headers"
_SLOTS = "gate.public_verification_slots"


class VerificationBusy(CodedError):
    """Every public verification slot of this process is taken."""

    CODE = "PUBLIC_VERIFY_BUSY"

    def __init__(self) -> None:
        super().__init__("every public verification slot of this server process is busy; retry shortly")


def public_budgets(app: Flask) -> dict[str, str]:
    """Flask endpoint → budget kind, of every route the app mounted with a budget (and static files)."""
    return {**{declared.name: declared.budget for declared in mounted(app) if declared.budget},
            **UNDECLARED_BUDGETS}


def init_public_limits(app: Flask, settings: Settings) -> None:
    """Charge every public request to its client's window; answer a busy process's refusals."""
    app.extensions[_SLOTS] = threading.BoundedSemaphore(settings.public_verify_concurrency)
    limits = {"verify": settings.public_verify_rate_limit, "public": settings.public_rate_limit}
    budgets = public_budgets(app)

    @app.before_request
    def _charge_public_request() -> Response | None:
        kind = budgets.get(request.endpoint or "")
        if kind is None:
            return None
        try:
            limited = client_limit(kind, limits[kind])
        except GateError:  # the translator answers it; the unread rest of the body is not read
            _close_unread()
            raise
        request.environ[_HEADERS] = limited
        if kind in HEAVY_KINDS and not _slot_free():
            raise VerificationBusy()  # before the body is read: a flood costs no reading
        return None

    @app.after_request
    def _rate_headers(response: Response) -> Response:
        for name, value in request.environ.get(_HEADERS, {}).items():
            response.headers.setdefault(name, value)
        return response

    @app.errorhandler(VerificationBusy)
    def _busy(error: VerificationBusy) -> Response:  # the refusal's body, with when to retry
        _close_unread()
        return error_response(error.code, error.message, headers={"Retry-After": "1"})


def _close_unread() -> None:
    """Under `gate serve`: close the connection after this refusal rather than read the rest of a
    body nobody will use (a flood of large refused bodies would otherwise cost their reading)."""
    sock = request.environ.get("gunicorn.socket")
    if sock is not None and hasattr(sock, "close_after_response"):
        sock.close_after_response = True


def _slot_free() -> bool:
    slots = current_app.extensions[_SLOTS]
    if not slots.acquire(blocking=False):
        return False
    slots.release()
    return True


@contextmanager
def verification_slot() -> Iterator[None]:
    """Hold one of the process's public verification slots, or raise `VerificationBusy` at once.

    Taken after the body has arrived (a slow client holds a thread until the read timeout, never
    a slot) and held while the body is parsed and verified: the work whose cost the body picks.
    """
    slots = current_app.extensions[_SLOTS]
    if not slots.acquire(blocking=False):
        raise VerificationBusy()
    try:
        yield
    finally:
        slots.release()


@contextmanager
def verification_body(max_bytes: int) -> Iterator[Any]:
    """The one preamble of the public verify routes (exported record, exported packet): the
    request's body read within `max_bytes` (413), then, holding a verification slot (503
    `PUBLIC_VERIFY_BUSY` at once when none is free), parsed as strict JSON as deep as a verified
    document may be (`MAX_DOCUMENT_DEPTH`: it embeds client bodies). The route checks and verifies
    the parsed body inside the `with`, still holding the slot."""
    data = read_json_bytes(request, max_bytes)
    with verification_slot():
        yield parse_json_bytes(data, max_depth=MAX_DOCUMENT_DEPTH)


__all__ = ["HEAVY_KINDS", "UNDECLARED_BUDGETS", "VerificationBusy", "init_public_limits", "public_budgets",
           "verification_body", "verification_slot"]
