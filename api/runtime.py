"""The per-app wiring (ledger, service, signing, limits, auth) and request helpers shared by routes."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import wraps
from typing import Any

from flask import current_app, request

from api.auth import REALM, Authenticator, AuthFailure
from api.errors import error_response
from gate import vocabulary as C
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.services.decide import Caller, DecisionService
from gate.settings import Settings


@dataclass
class GateRuntime:
    settings: Settings
    ledger: Ledger
    signing: SigningSetup | LiveSigning
    service: DecisionService
    limiter: Any
    auth: Authenticator
    lifecycle: Any = None
    audit: Any = None
    replays: Any = None  # gate.services.replay.ReplayService
    pilots: Any = None  # gate.services.operations.PilotService
    proof_metrics: Any = None  # gate.services.operations.ProofMetricsService
    policy_alerts: Any = None  # gate.services.operations.PolicyAlertService
    releases: Any = None  # gate.services.releases.ReleaseService
    events: Any = None  # gate.services.events.EventService
    dispatcher: Any = None  # gate.services.events.Dispatcher, started by `gate serve` in each worker
    holds: Any = None  # gate.services.holds.HoldService
    scope_events: Any = None  # gate.services.scope_events.ScopeEventService
    hold_sweeper: Any = None  # gate.services.holds.HoldSweeper, started by `gate serve` in each worker
    reports: Any = None  # workbench.services.reports.ReportService (every report kind of the registry)

    def wake_dispatcher(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def now_ms(self) -> int:
        return int(self.service.clock.now().timestamp() * 1000)


def runtime() -> GateRuntime:
    return current_app.extensions["gate"]


def keyed(unauthorized_code: str = "SVC_API_UNAUTHORIZED") -> Callable:
    """Require an active API key; the route receives the resolved `Caller` first."""

    def decorate(view: Callable) -> Callable:
        @wraps(view)
        def wrapper(*args, **kwargs):
            try:
                caller = runtime().auth.authenticate(request)
            except AuthFailure as failure:
                headers = {"WWW-Authenticate": REALM} if failure.status == 401 else None
                return error_response(
                    unauthorized_code, failure.message, status=failure.status, headers=headers
                )
            return view(caller, *args, **kwargs)

        return wrapper

    return decorate


_TOKEN = re.compile(r"^[\x21-\x7e]{1,300}$")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,160}$")


def idempotency_key_header() -> str | None:
    """`x-idempotency-key`: 1–300 visible ASCII characters, or absent."""
    value = request.headers.get("x-idempotency-key")
    if value is None:
        return None
    value = value.strip()
    if not _TOKEN.fullmatch(value):
        raise GateError(
            "REQUEST_INVALID",
            "x-idempotency-key must be 1 to 300 visible ASCII characters",
            errors=[{"field": "x-idempotency-key", "code": "invalid_value",
                     "message": "1 to 300 visible ASCII characters"}],
        )
    return value


def caller_request_id() -> str | None:
    """The caller's `x-request-id` when it is a short safe token; otherwise the gate makes one."""
    value = (request.headers.get("x-request-id") or "").strip()
    return value if _REQUEST_ID.fullmatch(value) else None


def requested_view(body_view: str | None) -> tuple[str, bool]:
    """The response view: body `response_view`, else `x-decision-response-view`, else
    `Prefer: return=<view>`, else full. Returns (view, prefer_applied).

    An unknown `x-decision-response-view` is a 400, also when the body names the view (a header
    the document calls invalid is refused, whatever else the request says); an unknown `Prefer`
    value is ignored, as RFC 7240 asks of preferences a server does not understand.
    """
    header = request.headers.get("x-decision-response-view")
    if header is not None:
        header = header.strip().lower()
        if header not in C.VIEWS:
            raise GateError(
                "REQUEST_INVALID",
                f"x-decision-response-view must be one of {', '.join(C.VIEWS)}",
                errors=[{"field": "x-decision-response-view", "code": "invalid_value",
                         "message": f"one of {', '.join(C.VIEWS)}"}],
            )
    if body_view:
        return body_view, False
    if header is not None:
        return header, False
    for preference in request.headers.get("Prefer", "").split(","):
        name, _, value = preference.strip().partition("=")
        if name.strip().lower() == "return" and value.strip().strip('"').lower() in C.VIEWS:
            return value.strip().strip('"').lower(), True
    return C.DEFAULT_VIEW, False


__all__ = [
    "Caller",
    "GateRuntime",
    "caller_request_id",
    "idempotency_key_header",
    "keyed",
    "requested_view",
    "runtime",
]
