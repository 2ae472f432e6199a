"""Flask application factory: `create_app(settings)` wires the core into the HTTP shell."""

from __future__ import annotations

import logging
import re

from flask import Flask, request
from werkzeug.exceptions import HTTPException

from api.auth import Authenticator
from api.errors import error_response, gate_error_body, json_response
from api.limits import make_rate_limiter
from api.query import undecodable_url_part
from api.runtime import GateRuntime
from gate.settings import Settings
from gate.adapters import default_registry
from gate.clock import Clock, IdSource
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.services.chains import AuditChainService
from gate.services.decide import DecisionService
from gate.services.lifecycle import LifecycleService
from gate.services.replay import ReplayService

log = logging.getLogger("gate.api")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc


def _refuse_undecodable_url():
    # SECURITY: WSGI hands the path and query over as latin-1 bytes, and Werkzeug decodes them
    # with errors="replace": `/policies/%FF/…` was looked up (and answered) as policy U+FFFD.
    # A URL that is not UTF-8 names nothing here; it is a 400 before any route sees it.
    field = undecodable_url_part(request.environ)
    if field is not None:
        return error_response("REQUEST_INVALID", f"the request {field} is not valid UTF-8",
                              errors=[{"field": field, "code": "invalid_encoding",
                                       "message": "percent-encoded bytes must form UTF-8"}])
    return None


def advisory_service(settings: Settings):
    """The advisory legacy modes' service (gate/advisory/), or None when GATE_ADVISORY_MODES is off."""
    if not settings.advisory_modes:
        return None
    from gate.advisory.http import HttpLLMAdvisor
    from gate.services.advisory import AdvisoryService

    http = [HttpLLMAdvisor(settings.advisor_base_url, model, api_key=settings.advisor_api_key,
                           timeout=settings.advisor_timeout) for model in settings.advisor_models]
    return AdvisoryService(http)


def create_app(
    settings: Settings | None = None,
    *,
    ledger: Ledger | None = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    limiter=None,
    signing: SigningSetup | None = None,
    adapters: AdapterRegistry | None = None,
) -> Flask:
    settings = settings or Settings.from_env()
    ledger = ledger or Ledger(settings.database_url)
    if settings.auto_migrate:
        ledger.upgrade()
    # The keyring file is followed while the app runs: signing-init / signing-rotate need no restart.
    signing = signing or LiveSigning(
        settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id, settings.require_signing,
        check_interval=settings.signing_key_check_ms / 1000,
    )
    service = DecisionService(
        ledger, signing, schema_url=settings.schema_url, clock=clock, ids=ids,
        adapters=adapters or default_registry(pool_size=settings.adapter_pool_size, memory_mb=settings.adapter_memory_mb,
                                  plugins=settings.adapter_plugins),
        confidence=settings.decide_confidence,
        advisory=advisory_service(settings),
    )
    app = Flask("decision_gate")
    app.config["MAX_CONTENT_LENGTH"] = None  # enforced by api.jsonio with the spec's error body
    app.json.sort_keys = False
    app.extensions["gate"] = GateRuntime(
        settings=settings,
        ledger=ledger,
        signing=signing,
        service=service,
        limiter=limiter or make_rate_limiter(settings.redis_url),
        auth=Authenticator(ledger, settings.plans),
        lifecycle=LifecycleService(ledger, service.clock, signing),
        audit=AuditChainService(ledger, signing, service.clock, checkpoint_log=settings.checkpoint_log),
        replays=ReplayService(service),
    )

    from api.routes import (
        chains,
        decide,
        decisions,
        lifecycle,
        meta,
        packets,
        reference,
        registries,
        replay,
        reports,
    )

    for module in (decide, decisions, lifecycle, chains, packets, registries, reports, replay, meta, reference):
        app.register_blueprint(module.bp)
    from api.routes import (  # issue 11: policy checks, workflow routes
        policychecks,
        workflows,
    )

    policychecks.init_app(app)
    app.register_blueprint(workflows.bp)
    from api.routes import patterns  # issue 11: policy patterns registry

    app.register_blueprint(patterns.bp)
    from api.routes import operations  # issue 11: operational routes

    app.register_blueprint(operations.bp)
    from api.metrics import (
        init_metrics,  # Prometheus /metrics and the request instrumentation
    )

    init_metrics(app)
    from api.public_limits import (
        init_public_limits,  # issue 18: budgets of the public routes
    )

    init_public_limits(app, settings)

    if isinstance(signing, LiveSigning):
        @app.before_request
        def _pin_signing():
            # One request signs with one keyring, even when a reload lands while it runs.
            request.environ["gate.signing_token"] = signing.pin()

        @app.teardown_request
        def _unpin_signing(_error):
            token = request.environ.pop("gate.signing_token", None)
            if token is not None:
                signing.unpin(token)

    app.before_request(_refuse_undecodable_url)

    @app.before_request
    def _refuse_control_characters():
        # SECURITY: one rule on both ledgers (issue 6, defect 10). No identifier the gate issues
        # or stores holds a control character, and PostgreSQL cannot even compare NUL, so a
        # path or query value with one is a 400 before any lookup, on SQLite and PostgreSQL alike.
        values = [request.path, *request.args.keys(), *request.args.values()]
        if any(_CONTROL.search(value) for value in values):
            return error_response("REQUEST_INVALID", "path and query values must not contain control characters",
                                  errors=[{"field": "url", "code": "invalid_value",
                                           "message": "control characters (U+0000-U+001F, U+007F-U+009F)"}])
        return None

    @app.errorhandler(HTTPException)
    def _http_error(error: HTTPException):
        if error.code == 404:
            return error_response("NOT_FOUND", f"no route for {request.method} {request.path}")
        if error.code == 405:
            # RFC 9110 §15.5.6: a 405 names the methods the resource does serve.
            allowed = sorted(getattr(error, "valid_methods", None) or ())
            return error_response("METHOD_NOT_ALLOWED", f"{request.method} is not allowed on {request.path}",
                                  headers={"Allow": ", ".join(allowed)} if allowed else None)
        return error_response("REQUEST_INVALID", error.description or "bad request", status=error.code)

    @app.errorhandler(GateError)
    def _gate_error(error: GateError):  # any refusal a route did not answer itself
        return json_response(*gate_error_body(error))

    @app.errorhandler(Exception)
    def _unexpected(error: Exception):  # SECURITY: a crash is a 500, never an approval
        log.exception("unhandled error on %s %s", request.method, request.path)
        return error_response("INTERNAL_ERROR", "internal error; nothing was approved")

    return app
