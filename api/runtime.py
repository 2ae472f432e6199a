"""The per-app wiring (ledger, service, signing, limits, auth) and request helpers shared by routes."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from functools import wraps
from typing import Concatenate, ParamSpec, TypeVar

from flask import Response, current_app, request

from api.auth import REALM, Authenticator, AuthFailure
from api.errors import error_response
from api.limits import RateLimiter
from api.mcp import McpEndpoint
from gate import vocabulary as C
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.services.analytics import Analytics
from gate.services.chains import AuditChainService
from gate.services.decide import Caller, DecisionService
from gate.services.erasure import ErasureService
from gate.services.events import Dispatcher, EventService
from gate.services.holds import HoldService
from gate.services.keys import KeyService
from gate.services.lifecycle import LifecycleService
from gate.services.operations import PilotService, PolicyAlertService, ProofMetricsService
from gate.services.periodic import PeriodicWorker
from gate.services.policychecks import PolicyCheckService
from gate.services.privacy import PrivacyService
from gate.services.releases import ReleaseService
from gate.services.replay import ReplayService
from gate.services.scope_events import ScopeEventService
from gate.services.subjects import SubjectService
from gate.services.workflows import WorkflowService
from gate.settings import Settings

P = ParamSpec("P")
R = TypeVar("R")
# Read per request through the app by the cross-cutting decorators alone (`keyed`, api.costs,
# api.client_limits), never handed to a route: a test or an operator may swap the limiter while
# the app runs. The workers are the dispatcher's business; a route wakes it (`wake_dispatcher`).
_NOT_FOR_ROUTES = frozenset({"auth", "limiter", "dispatcher", "hold_sweeper"})


@dataclass
class GateRuntime:
    settings: Settings
    ledger: Ledger
    signing: SigningSetup | LiveSigning
    service: DecisionService
    limiter: RateLimiter
    auth: Authenticator
    lifecycle: LifecycleService
    audit: AuditChainService
    replays: ReplayService
    pilots: PilotService
    proof_metrics: ProofMetricsService
    policy_alerts: PolicyAlertService
    releases: ReleaseService
    events: EventService
    holds: HoldService
    scope_events: ScopeEventService
    keys: KeyService  # the keys that act on production: their grant requests and approvals (issue 52)
    privacy: PrivacyService  # the data map and the masking rules (issue 67; docs/privacy.md)
    subjects: SubjectService  # a data subject's decisions, holds and events (issue 67, item 5)
    # The report engines (gate.services.analytics): handed in by the composition root above the API
    # and the workbench (gate_cli.served_app); without them, every report answers 503 REPORTS_UNAVAILABLE.
    analytics: Analytics
    erasures: ErasureService  # a data subject erased, governed by two holders (issue 67, item 4)
    policychecks: PolicyCheckService  # the four advisory checks and the helpdesks' workflows over them
    workflows: WorkflowService
    mcp_servers: Mapping[str, McpEndpoint]  # by key: "all" or a service (api.mcp_servers)
    dispatcher: Dispatcher | None = None  # started by `gate serve` in each worker; None: dispatch is off
    hold_sweeper: PeriodicWorker | None = None  # started by `gate serve` in each worker; None: dispatch is off

    def workers(self) -> list[PeriodicWorker]:
        """This process's background workers (`/api/decision/status` `workers`, `/metrics`)."""
        found = list(self.dispatcher.workers) if self.dispatcher is not None else []
        if self.hold_sweeper is not None:
            found.append(self.hold_sweeper)
        return [*found, self.releases.guardrails.guard]

    def wake_dispatcher(self) -> None:
        if self.dispatcher is not None:
            self.dispatcher.wake()

    def current_limiter(self) -> RateLimiter:
        """The limiter as the app holds it now: read per request, since a test or an operator may
        swap it while the app runs (the reason it is not handed to a route itself)."""
        return self.limiter

    def now_ms(self) -> int:
        return int(self.service.clock.now().timestamp() * 1000)

    def route_services(self) -> dict[str, object]:
        """What a route may take, by the name its view's keyword-only parameter gives
        (`api.routing.given`): the composed services and settings, and four capabilities:
        `wake_dispatcher`, `now_ms`, `workers` and `current_limiter`. Handed over once, when the app mounts its routes."""
        given: dict[str, object] = {field.name: getattr(self, field.name) for field in fields(self)
                                    if field.name not in _NOT_FOR_ROUTES}
        return {**given, "wake_dispatcher": self.wake_dispatcher, "now_ms": self.now_ms, "workers": self.workers,
                "current_limiter": self.current_limiter}


def runtime() -> GateRuntime:
    """The app's runtime, for the cross-cutting decorators and helpers of `api/` (auth, cost and
    client limits, metrics). A route takes its services as parameters instead (`api.routing.given`;
    tests/test_architecture.py holds `api/routes/` free of it)."""
    rt: GateRuntime = current_app.extensions["gate"]  # set by api.app.create_app
    return rt


def keyed(
    unauthorized_code: str = "SVC_API_UNAUTHORIZED", *, ci: bool = False,
) -> Callable[[Callable[Concatenate[Caller, P], R]], Callable[P, R | Response]]:
    """Require an active API key; the route receives the resolved `Caller` first. With `ci` the
    route also takes a CI principal's workload-identity token (api.ci, docs/ci-principal.md)."""

    def decorate(view: Callable[Concatenate[Caller, P], R]) -> Callable[P, R | Response]:
        @wraps(view)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> R | Response:
            try:
                caller = runtime().auth.authenticate(request, ci=ci)
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
