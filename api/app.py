"""Flask application factory: `create_app(settings)` wires the core into the HTTP shell."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

from flask import Flask, Response, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

from api.auth import Authenticator
from api.ci import CIPrincipals
from api.errors import ERROR_TABLE, error_response, refusal
from api.limits import RateLimiter, make_rate_limiter
from api.metrics import init_metrics, record_guardrail_trip, record_webhook_attempt
from api.openapi import docs_document, openapi_document
from api.public_limits import init_public_limits
from api.query import undecodable_url_part
from api.routes import route_tables
from api.routing import DOCUMENTS
from api.runtime import GateRuntime
from gate.adapters import AdapterRegistry
from gate.clock import Clock, IdSource
from gate.errors import GateError
from gate.events.stream import JetStreamPublisher
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.services.chains import AuditChainService
from gate.services.events import Dispatcher, EventService
from gate.services.holds import HoldService, hold_sweeper
from gate.services.keys import KeyService
from gate.services.lifecycle import LifecycleService
from gate.services.notify import notifier_from_settings
from gate.services.operations import PilotService, PolicyAlertService, ProofMetricsService
from gate.services.replay import ReplayService
from gate.services.scope_events import ScopeEventService
from gate.settings import Settings
from workbench.reports import live as live_reports
from workbench.services.root import compose, live_signing

log = logging.getLogger("gate.api")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc


def _refuse_undecodable_url() -> Response | None:
    # SECURITY: WSGI hands the path and query over as latin-1 bytes, and Werkzeug decodes them
    # with errors="replace": `/policies/%FF/…` was looked up (and answered) as policy U+FFFD.
    # A URL that is not UTF-8 names nothing here; it is a 400 before any route sees it.
    field = undecodable_url_part(request.environ)
    if field is not None:
        return error_response("REQUEST_INVALID", f"the request {field} is not valid UTF-8",
                              errors=[{"field": field, "code": "invalid_encoding",
                                       "message": "percent-encoded bytes must form UTF-8"}])
    return None


def create_app(
    settings: Settings | None = None,
    *,
    ledger: Ledger | None = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    limiter: RateLimiter | None = None,
    signing: SigningSetup | LiveSigning | None = None,
    adapters: AdapterRegistry | None = None,
) -> Flask:
    """The API: the core's services over the ledger of `settings`, its routes, request checks and
    error bodies. The keyword arguments replace a part (tests, benchmarks); None builds it from `settings`."""
    settings = settings or Settings.from_env()
    ledger = ledger or Ledger(settings.database_url, pool_size=settings.ledger_pool_size,
                              group_commit=settings.ledger_group_commit)
    if settings.auto_migrate:
        ledger.upgrade()
    # The keyring file is followed while the app runs: signing-init / signing-rotate need no restart.
    signing = signing or live_signing(settings)
    app = Flask("decision_gate")
    app.config["MAX_CONTENT_LENGTH"] = None  # enforced by api.jsonio with the spec's error body
    if isinstance(app.json, DefaultJSONProvider):  # Flask's own provider, the one it always installs
        app.json.sort_keys = False
    app.extensions["gate"] = _runtime(settings, ledger, signing, clock=clock, ids=ids, limiter=limiter,
                                      adapters=adapters)
    _mount_routes(app)
    _install_request_checks(app, settings, signing)
    _install_error_bodies(app)
    return app


def _runtime(settings: Settings, ledger: Ledger, signing: SigningSetup | LiveSigning, *, clock: Clock | None,
             ids: IdSource | None, limiter: RateLimiter | None, adapters: AdapterRegistry | None) -> GateRuntime:
    """The core's services the routes share (`api.runtime.runtime()`), built by the composition
    root (`workbench.services.root`) with the serving settings and the guardrail hook."""
    services = compose(signing, ledger, settings=settings, clock=clock, ids=ids, adapters=adapters,
                       on_trip=record_guardrail_trip)
    service, release_service = services.live()
    events = EventService(ledger, service.clock, allow_hosts=settings.webhook_allow_hosts, signing=signing,
                          lease_seconds=settings.events_lease_seconds, on_attempt=record_webhook_attempt,
                          retention_days=settings.events_retention_days)
    holds = HoldService(ledger, signing, service.clock, checkpoint_log=settings.checkpoint_log,
                        inbox_base=settings.workbench_url)
    policy_alerts = PolicyAlertService(ledger, service.clock, live_reports.anomaly_report,
                                       max_age_days=settings.policy_source_max_age_days,
                                       release_alerts=release_service.guardrail_alerts)
    scope_events = ScopeEventService(ledger, service.clock,
                                     alerts=lambda scope: policy_alerts.alerts(scope, None)["alerts"], signing=signing,
                                     witness=release_service.witness)
    return GateRuntime(
        settings=settings,
        ledger=ledger,
        signing=signing,
        service=service,
        releases=release_service,
        events=events,
        holds=holds,
        scope_events=scope_events,
        keys=KeyService(ledger, signing, service.clock, release_service.safeguards),
        hold_sweeper=hold_sweeper(holds, settings.hold_sweep_ms / 1000) if settings.events_dispatch else None,
        dispatcher=Dispatcher(events, settings.events_interval_ms / 1000,
                              stream=JetStreamPublisher(events.outbox, settings.nats_url, settings.nats_stream)
                              if settings.nats_url else None,
                              tasks={"scheduled-reports": scope_events.run_due, **_notify_tasks(settings, ledger,
                                                                                                service.clock)},
                              concurrency=settings.events_concurrency)
        if settings.events_dispatch else None,
        limiter=limiter or make_rate_limiter(settings.redis_url),
        auth=Authenticator(ledger, settings.plans, cache_ms=settings.api_key_cache_ms,
                           ci=CIPrincipals(settings, lambda: service.clock.now().timestamp())
                           if settings.ci_issuer is not None else None),
        lifecycle=LifecycleService(ledger, service.clock, signing, after_outcome=release_service.after_outcome),
        audit=AuditChainService(ledger, signing, service.clock, checkpoint_log=settings.checkpoint_log),
        replays=ReplayService(service),
        pilots=PilotService(ledger, service.clock),
        proof_metrics=ProofMetricsService(ledger),
        policy_alerts=policy_alerts,
        reports=services.reports,
    )


def _notify_tasks(settings: Settings, ledger: Ledger, clock: Clock) -> dict[str, Callable[[], Any]]:
    """The reviewers' channels' passes (gate.services.notify), one dispatcher task per kind."""
    notifier = notifier_from_settings(ledger, settings, clock)
    return dict(notifier.tasks()) if notifier is not None else {}


def _mount_routes(app: Flask) -> None:
    """Every route module of `api/routes/` (found there, in name order) with its setup and blueprints."""
    for routes in route_tables():
        routes.mount(app)
    app.extensions[DOCUMENTS] = {build.__name__: build for build in (openapi_document, docs_document)}


def _install_request_checks(app: Flask, settings: Settings, signing: SigningSetup | LiveSigning) -> None:
    """What runs around every request, in this order: the metrics, the public routes' budgets,
    the signing keyring's pin, and the refusal of undecodable or control-character URLs."""
    init_metrics(app)
    init_public_limits(app, settings)
    if isinstance(signing, LiveSigning):
        _pin_signing_per_request(app, signing)
    app.before_request(_refuse_undecodable_url)
    app.before_request(_refuse_control_characters)


def _pin_signing_per_request(app: Flask, signing: LiveSigning) -> None:
    @app.before_request
    def _pin_signing() -> None:
        # One request signs with one keyring, even when a reload lands while it runs.
        request.environ["gate.signing_token"] = signing.pin()

    @app.teardown_request
    def _unpin_signing(_error: BaseException | None) -> None:
        token = request.environ.pop("gate.signing_token", None)
        if token is not None:
            signing.unpin(token)


def _refuse_control_characters() -> Response | None:
    # SECURITY: one rule on both ledgers (issue 6, defect 10). No identifier the gate issues
    # or stores holds a control character, and PostgreSQL cannot even compare NUL, so a
    # path or query value with one is a 400 before any lookup, on SQLite and PostgreSQL alike.
    values = [request.path, *request.args.keys(), *request.args.values()]
    if any(_CONTROL.search(value) for value in values):
        return error_response("REQUEST_INVALID", "path and query values must not contain control characters",
                              errors=[{"field": "url", "code": "invalid_value",
                                       "message": "control characters (U+0000-U+001F, U+007F-U+009F)"}])
    return None


def _install_error_bodies(app: Flask) -> None:
    """Every refusal and failure answers the spec's error body (`api.errors`)."""
    app.register_error_handler(HTTPException, _http_error)
    app.register_error_handler(GateError, _gate_error)
    app.register_error_handler(Exception, _unexpected)


def _http_error(error: HTTPException) -> Response:
    if error.code == 404:
        return error_response("NOT_FOUND", f"no route for {request.method} {request.path}")
    if error.code == 405:
        # RFC 9110 §15.5.6: a 405 names the methods the resource does serve.
        allowed = sorted(getattr(error, "valid_methods", None) or ())
        return error_response("METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.path}",
                              headers={"Allow": ", ".join(allowed)} if allowed else None)
    return error_response("REQUEST_INVALID", error.description or "bad request", status=error.code)


def _gate_error(error: GateError) -> Response:  # the one translator of the routes' refusals
    if error.code not in ERROR_TABLE:  # a refusal of the CLI or the workbench: here it is a fault
        return _unexpected(error)
    return refusal(error)


def _unexpected(error: Exception) -> Response:  # SECURITY: a crash is a 500, never an approval
    log.exception("unhandled error on %s %s", request.method, request.path)
    return error_response("INTERNAL_ERROR", "internal error; nothing was approved")
