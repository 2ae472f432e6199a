"""Operational routes (spec "Operational routes"; docs/operations.md).

* `GET /api/runtime-config` (public): what a client or operator needs to know about this gate's
  configuration: versions, modes, signing algorithm and key id, registries, limits, which
  optional protections are on. No secret, URL credential, key or tenant data.
* `POST /api/pilot` (public, rate-limited per client address): a pilot intake submission
  (`{company, contact_name, contact_email, use_case, monthly_decisions, notes?, consent: true}`),
  stored once per idempotency key (`Idempotency-Key` header, else sha256 of the e-mail and
  company); 201 with a one-time `confirmation_token`, 200 `replayed` for the same body again,
  409 `PILOT_IDEMPOTENCY_CONFLICT` for another body. The same route confirms:
  `{pilot_id, confirmation_token}` → 200 `confirmed` (idempotent); an unknown id or a wrong token
  is 404 `PILOT_NOT_FOUND` (the token is compared in constant time, as its sha256).
* `GET /api/proof-metrics` and `GET /api/pilot-export` (CSV): `x-metrics-token` (or
  `Authorization: Bearer`), compared in constant time with `GATE_METRICS_TOKEN`; without a
  configured token they are 503 `METRICS_UNAVAILABLE` (fail closed), a missing or wrong one is
  401 `METRICS_UNAUTHORIZED`.
* `GET /api/policy-alerts` (API key, caller's scope only): alerts from the anomaly engine over
  the caller's policies (the same sealed anomaly report as `/anomalies`), and from vendor policy
  table rows whose `last_verified` is older than `GATE_POLICY_SOURCE_MAX_AGE_DAYS`.

The use cases live in `gate.services.operations`; this module parses requests and shapes answers.
"""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request

from api import openapi_params as P
from api.client_limits import client_limit
from api.costs import REPORT_ROWS_PER_UNIT, Weight, charged, units
from api.errors import carry_headers, json_response
from api.jsonio import read_json
from api.limits import RateLimiter
from api.metrics import metrics_token_refusal
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, RATE_HEADERS, Endpoint, Routes
from api.runtime import keyed
from gate import vocabulary as C
from gate.clock import iso_ms
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.reports.params import ReportParams
from gate.services.decide import Caller, DecisionService
from gate.services.operations import (
    MAX_ALERT_POLICIES,
    PilotService,
    PolicyAlertService,
    ProofMetricsService,
    csv_cell,
    problem,
)
from gate.settings import Settings

routes = Routes("operations", __name__)
_METRICS_ERRORS = ("METRICS_UNAUTHORIZED", "METRICS_UNAVAILABLE")

PILOT_MAX_BODY = 16_384

__all__ = ["csv_cell", "metrics_token_refusal", "routes"]


# --------------------------------------------------------------------------- runtime config


@routes.route(Endpoint(
    "get", "/api/runtime-config", "Public runtime configuration: versions, binding and advisory modes, "
    "advisor panel (models and provider hosts only), signing algorithm and key id, registries, limits, "
    "which protections are on. Never a secret.", False, {200: "runtime configuration"},
    tags=("operations",), budget="public"))
def runtime_config(*, settings: Settings, signing: SigningSetup | LiveSigning, service: DecisionService,
                   current_limiter: Callable[[], RateLimiter]) -> Response:
    signer = signing.receipt_signer()
    advisory = service.advisory
    body = {
        "ok": True,
        "runtime_config_version": "decision_runtime_config_v1",
        "service": "decision-gate",
        "interface_version": C.INTERFACE_VERSION,
        "versions": {"protocol": C.DECISION_PROTOCOL_VERSION, "record": C.DECISION_RECORD_VERSION,
                     "packet": C.DECISION_PACKET_VERSION, "rulebook_schema": C.RULEBOOK_SCHEMA_VERSION,
                     "evaluator": C.EVALUATOR_VERSION, "canonicalization": C.CANONICALIZATION},
        "modes": {"binding": [C.MODE_RULEBOOK], "binding_modes": list(C.SUPPORTED_BINDING_MODES),
                  "advisory": list(C.LEGACY_MODES) if advisory is not None else [],
                  "default_mode": "single" if advisory is not None else None},
        "advisory": advisory.describe() if advisory is not None else {"enabled": False},
        "signing": {"required": signing.required,
                    "receipt_signature_algorithm": signer.algorithm if signer else None,
                    "receipt_key_id": signer.key_id if signer else None,
                    "registry_signing": signing.attestation_key() is not None},
        "ledger": {"dialect": service.ledger_dialect},
        "rate_limits": {"backend": current_limiter().backend, "window_seconds": 60,
                        "plans": {name: dict(limits) for name, limits in sorted(settings.plans.items())},
                        "policy_checks_per_client": settings.policycheck_rate_limit},
        "limits": {"max_body_bytes": settings.max_body_bytes, "max_packet_bytes": settings.max_packet_bytes,
                   "request_read_timeout_seconds": settings.request_read_timeout},
        "registries": {"receipt_keys": "/api/decision/receipt-keys", "policy_bundles": "/api/decision/policy-bundles",
                       "policy_patterns": "/api/decision/policy-patterns", "rulebooks": "/api/decision/rulebooks",
                       "policy_sources": "/rules/policy-sources.json", "schema": settings.schema_url},
        "protections": {"workflow_token_required": settings.workflow_token is not None,
                        "metrics_token_configured": settings.metrics_token is not None,
                        "decide_confidence": settings.decide_confidence},
        "operations": {"pilot": "/api/pilot", "proof_metrics": "/api/proof-metrics",
                       "pilot_export": "/api/pilot-export", "policy_alerts": "/api/policy-alerts",
                       "prometheus": "/metrics",
                       "policy_source_max_age_days": settings.policy_source_max_age_days},
    }
    return json_response(200, body, {"Cache-Control": "no-cache"})


# --------------------------------------------------------------------------- pilot


@routes.route(Endpoint(
    "post", "/api/pilot",
    "Pilot intake. Submission `{company, contact_name, contact_email, use_case, monthly_decisions, notes?, "
    "consent: true}` → 201 with pilot_id and a one-time confirmation_token; the same submission again (same "
    "Idempotency-Key, default sha256 of e-mail and company) → 200 replayed; another body under the key → 409. "
    "Confirmation `{pilot_id, confirmation_token}` → 200 confirmed (idempotent); unknown id or wrong token → "
    "404. Rate-limited per client address.",
    False, {201: "intake stored", 200: "replayed submission, or confirmed", 400: "invalid intake or confirmation",
            404: "no intake with this id and token", 409: "idempotency key holds another intake",
            413: "body over 16 KiB", 415: MEDIA, 429: "rate limited per client",
            503: "ledger or rate limiter unavailable"},
    errors=BODY_ERRORS + ("PILOT_IDEMPOTENCY_CONFLICT", "PILOT_NOT_FOUND", "SVC_API_RATE_LIMITED",
                          "RATE_LIMITER_UNAVAILABLE", "LEDGER_UNAVAILABLE"),
    request_body="PilotRequest", response_headers=RATE_HEADERS + ("x-idempotency-status",),
    request_headers=("Idempotency-Key",), tags=("operations",)))
def pilot(*, pilots: PilotService) -> Response:
    headers = client_limit("pilot")
    carry_headers(headers)  # a refusal answers the rate headers too
    body = read_json(request, PILOT_MAX_BODY, max_depth=8)
    if isinstance(body, dict) and "confirmation_token" in body:  # else a submission: its schema names a non-object
        confirmed = pilots.confirm(body)
        return json_response(200, confirmed, {**headers, "Cache-Control": "no-store"})
    outcome = pilots.submit(body, request.headers.get("Idempotency-Key"))
    return json_response(201 if outcome.status == "created" else 200, outcome.answer,
                         {**headers, "x-idempotency-status": outcome.status, "Cache-Control": "no-store"})


# --------------------------------------------------------------------------- metrics token reads


@routes.route(Endpoint(
    "get", "/api/proof-metrics", "Aggregate proof metrics (decisions by authority and verdict, receipts by "
    "kind, audit chains, workflow runs, pilots, signing readiness); no tenant names. Needs x-metrics-token.",
    False, {200: "proof metrics", 401: "missing or wrong metrics token",
            503: "no metrics token configured, or ledger unavailable"},
    errors=_METRICS_ERRORS + ("LEDGER_UNAVAILABLE",), request_headers=("x-metrics-token",),
    tags=("operations",)))
def proof_metrics(*, proof_metrics: ProofMetricsService, service: DecisionService,
                  signing: SigningSetup | LiveSigning) -> Response:
    refusal = metrics_token_refusal()
    if refusal is not None:
        return refusal
    body = {"ok": True, "proof_metrics_version": "decision_proof_metrics_v1",
            "generated_at": iso_ms(service.clock.now()),
            "interface_version": C.INTERFACE_VERSION, **proof_metrics.counts(),
            "signing": {"ready": signing.ready(), "required": signing.required}}
    return json_response(200, body, {"Cache-Control": "no-store"})


@routes.route(Endpoint(
    "get", "/api/pilot-export", "Pilot intakes as CSV (text/csv, oldest first; every field quoted, and a ' put "
    "before any = + - @ that could start a cell under the separators , ; tab | or a line "
    "break, against formula injection). Needs x-metrics-token.",
    False, {200: "CSV export", 400: "bad limit", 401: "missing or wrong metrics token",
            503: "no metrics token configured, or ledger unavailable"},
    errors=_METRICS_ERRORS + ("REQUEST_INVALID", "LEDGER_UNAVAILABLE"),
    query=(("limit", "integer", "1-10000, default 1000", P.integer(1, 10_000)),),
    request_headers=("x-metrics-token",),
    tags=("operations",)))
def pilot_export(*, pilots: PilotService) -> Response:
    refusal = metrics_token_refusal()
    if refusal is not None:
        return refusal
    raw = request.args.get("limit", "1000")
    if set(request.args) - {"limit"} or not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 10_000:
        raise GateError("REQUEST_INVALID", "the only parameter is limit, a whole number from 1 to 10000",
                              errors=[problem("limit", "invalid_value", "1 to 10000")])
    return Response(pilots.export_csv(int(raw)), status=200, mimetype="text/csv", headers={
        "Content-Disposition": 'attachment; filename="pilot-intakes.csv"', "Cache-Control": "no-store"})


# --------------------------------------------------------------------------- policy alerts


def _wanted_policy() -> str | None:
    """The `policy_id` query parameter, or None; 400 for anything else."""
    if set(request.args) - {"policy_id"}:
        raise GateError("REQUEST_INVALID", "the only parameter is policy_id",
                        errors=[problem(min(set(request.args) - {"policy_id"}), "unknown_field",
                                        "not a parameter of this route")])
    wanted = request.args.get("policy_id")
    if wanted is not None and (not 1 <= len(wanted) <= 120 or not wanted.isprintable()):
        raise GateError("REQUEST_INVALID", "policy_id must be 1 to 120 printable characters",
                        errors=[problem("policy_id", "invalid_value", "1 to 120 printable characters")])
    return wanted


def _alert_report_units() -> int:
    """One anomaly report's units per policy read: the named one, else up to MAX_ALERT_POLICIES
    (api.costs); a bad query is a 400 before the charge."""
    per_report = units(ReportParams().ledger_limit, REPORT_ROWS_PER_UNIT)
    return per_report * (1 if _wanted_policy() is not None else MAX_ALERT_POLICIES)


@routes.route(Endpoint(
    "get", "/api/policy-alerts", "Alerts for the caller's scope: anomalies of the caller's ten most recently "
    "decided policies (or `policy_id`), from the same anomaly engine and report as /anomalies, and vendor "
    "policy-table rows verified longer ago than GATE_POLICY_SOURCE_MAX_AGE_DAYS.",
    True, {200: "alerts", 400: "bad query", 401: "missing or invalid key", 403: "disabled key",
           503: "ledger unavailable, or the gate was composed without report engines"},
    errors=AUTH_ERRORS + ("REQUEST_INVALID", "LEDGER_UNAVAILABLE", "REPORTS_UNAVAILABLE"),
    query=(("policy_id", "string", "only this policy's anomalies",
            P.printable(1, P.MAX_POLICY_ID, "only this policy's anomalies")),), tags=("operations",),
    charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(Weight(query=_alert_report_units))
def policy_alerts(caller: Caller, *, policy_alerts: PolicyAlertService) -> Response:
    return json_response(200, policy_alerts.alerts(caller.scope, _wanted_policy()))
