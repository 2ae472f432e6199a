"""Flask application factory: `create_app(settings)` wires the core into the HTTP shell."""

from __future__ import annotations

import logging
import re

from flask import Flask, Response, request
from flask.json.provider import DefaultJSONProvider
from werkzeug.exceptions import HTTPException

# Its tables are built at import (0.6–0.8 s), here, not at a worker's first decide with a key that
# is not ASCII: gate.protocol.canonical keys ASCII text without them and loads the module on the
# first key of another character (issue 68).
import gate.protocol.collation  # noqa: F401
from api.auth import Authenticator
from api.ci import CIPrincipals
from api.errors import ERROR_TABLE, error_response, refusal
from api.limits import RateLimiter, make_rate_limiter
from api.mcp_servers import mcp_servers
from api.metrics import init_metrics, record_guardrail_trip, record_webhook_attempt
from api.openapi import docs_document, openapi_document
from api.public_limits import init_public_limits
from api.query import undecodable_url_part
from api.routes import route_tables
from api.routing import DOCUMENTS, LazyBuildRule
from api.runtime import GateRuntime
from gate.adapters import AdapterRegistry
from gate.clock import Clock, IdSource
from gate.errors import GateError
from gate.events.outbound import check_operator_urls
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.privacy.logs import install as install_log_masking
from gate.services.analytics import Analytics, NoAnalytics
from gate.services.policychecks import PolicyCheckService
from gate.services.root import (
    decision_services,
    ledger_of,
    live_signing,
    policy_check_services,
    serving_services,
)
from gate.settings import Settings, SettingsError

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
    analytics: Analytics | None = None,
    policychecks: PolicyCheckService | None = None,
) -> Flask:
    """The API: the core's services over the ledger of `settings`, its routes, request checks and
    error bodies. The keyword arguments replace a part (tests, benchmarks); None builds it from `settings`.
    `policychecks`: the policy checks' tables and rulebooks (tests); None, the shipped ones.
    `analytics`: the report engines the report, packet and policy-alert routes compute with,
    handed in by the composition root above the API and the workbench (`gate_cli.served_app`); None, the
    API alone, which answers each report 503 `REPORTS_UNAVAILABLE` (the API imports no analytics)."""
    settings = settings or Settings.from_env()
    try:  # SECURITY (SSRF): the operator's own outbound URLs, before anything starts
        check_operator_urls(settings)
    except ValueError as refused:
        raise SettingsError(str(refused)) from None
    ledger = ledger or ledger_of(settings)
    if settings.auto_migrate:
        ledger.upgrade()
    # The keyring file is followed while the app runs: signing-init / signing-rotate need no restart.
    signing = signing or live_signing(settings)
    install_log_masking()  # a line logged while a request is handled masks its personal values (docs/privacy.md)
    app = Flask("decision_gate")
    app.url_rule_class = LazyBuildRule  # its URL builders compiled when first used (none are, serving)
    app.config["MAX_CONTENT_LENGTH"] = None  # enforced by api.jsonio with the spec's error body
    if isinstance(app.json, DefaultJSONProvider):  # Flask's own provider, the one it always installs
        app.json.sort_keys = False
    runtime = _runtime(settings, ledger, signing, clock=clock, ids=ids, limiter=limiter, adapters=adapters,
                       analytics=analytics or NoAnalytics(), policychecks=policychecks)
    app.extensions["gate"] = runtime
    _mount_routes(app, runtime)
    _install_request_checks(app, settings, signing)
    _install_error_bodies(app)
    return app


def _runtime(settings: Settings, ledger: Ledger, signing: SigningSetup | LiveSigning, *, clock: Clock | None,
             ids: IdSource | None, limiter: RateLimiter | None, adapters: AdapterRegistry | None,
             analytics: Analytics, policychecks: PolicyCheckService | None) -> GateRuntime:
    """The core's services and background workers the routes are given (`GateRuntime.route_services`), all
    built by the core's composition root (`gate.services.root`) with the serving settings, the
    guardrail and webhook hooks and the analytics' anomaly report (the policy alerts' source);
    this shell adds only its own: the rate limiter and the keys' check."""
    core = decision_services(ledger, signing, settings=settings, clock=clock, ids=ids, adapters=adapters,
                             on_trip=record_guardrail_trip, on_attempt=record_webhook_attempt)
    serving = serving_services(core, ledger, signing, settings, anomalies=analytics.anomalies)
    clock = core.decisions.clock
    checks, workflows = policy_check_services(ledger, clock, policychecks)
    return GateRuntime(
        settings=settings, ledger=ledger, signing=signing, service=core.decisions, releases=core.release_service(),
        events=core.events, holds=core.holds, lifecycle=core.lifecycle, audit=core.audit,
        scope_events=serving.scope_events, keys=serving.keys, replays=serving.replays, pilots=serving.pilots,
        proof_metrics=serving.proof_metrics, policy_alerts=serving.policy_alerts, analytics=analytics,
        privacy=serving.privacy, subjects=serving.subjects, erasures=serving.erasures,
        policychecks=checks, workflows=workflows, mcp_servers=mcp_servers(checks),
        hold_sweeper=serving.hold_sweeper, dispatcher=serving.dispatcher,
        limiter=limiter or make_rate_limiter(settings.redis_url),
        auth=Authenticator(ledger, settings.plans, cache_ms=settings.api_key_cache_ms,
                           ci=CIPrincipals(settings, lambda: clock.now().timestamp())
                           if settings.ci_issuer is not None else None),
    )


def _mount_routes(app: Flask, runtime: GateRuntime) -> None:
    """Every route module of `api/routes/` (found there, in name order) with its setup and blueprints,
    each view given the services it names (`api.routing.given`)."""
    services = runtime.route_services()
    for routes in route_tables():
        routes.mount(app, services)
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
