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
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import re
import secrets
from datetime import timedelta
from typing import Any

from flask import Blueprint, Response, current_app, request

from api.client_limits import client_limit
from api.costs import REPORT_ROWS_PER_UNIT, Weight, charged, units
from api.errors import error_response, json_response
from api.jsonio import read_json
from api.runtime import keyed, runtime
from gate import vocabulary as C
from gate.clock import iso_ms
from gate.errors import GateError
from gate.ledger.operations import PilotStore, proof_counts, recent_policy_ids
from gate.policychecks.tables import load_tables
from gate.protocol.canonical import sha256_hex
from gate.services.decide import Caller
from workbench.dataset.load import from_ledger
from workbench.reports.policy import ReportParams, anomaly_report

bp = Blueprint("operations", __name__)

PILOT_MAX_BODY = 16_384
PILOT_USE_CASES = ("pricing_exception", "refund_review", "agent_action_gate", "crm_writeback_gate",
                   "policy_checks", "other")
PILOT_FIELDS = {"company": 200, "contact_name": 200, "contact_email": 254, "use_case": 40, "notes": 2000}
_EMAIL = re.compile(r"^[^@\s\x00-\x1f]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)+$")
_KEY = re.compile(r"^[\x21-\x7e]{1,300}$")
_PILOT_ID = re.compile(r"^pilot_[0-9a-f]{24}$")
EXPORT_COLUMNS = ("pilot_id", "created_at", "status", "confirmed_at", "company", "contact_name", "contact_email",
                  "use_case", "monthly_decisions", "notes")
MAX_ALERT_POLICIES = 10


def _store() -> PilotStore:
    store = current_app.extensions.get("pilot_store")
    if store is None:
        store = current_app.extensions["pilot_store"] = PilotStore(runtime().ledger)
    return store


def _now() -> str:
    return iso_ms(runtime().service.clock.now())


def _problem(field: str, code: str, message: str) -> dict[str, str]:
    return {"field": field, "code": code, "message": message}


# --------------------------------------------------------------------------- runtime config


@bp.get("/api/runtime-config")
def runtime_config():
    rt = runtime()
    settings = rt.settings
    signer = rt.signing.receipt_signer()
    advisory = rt.service.advisory
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
        "signing": {"required": rt.signing.required,
                    "receipt_signature_algorithm": signer.algorithm if signer else None,
                    "receipt_key_id": signer.key_id if signer else None,
                    "registry_signing": rt.signing.attestation_key() is not None},
        "ledger": {"dialect": rt.ledger.dialect},
        "rate_limits": {"backend": rt.limiter.backend, "window_seconds": 60,
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


def _validate_submission(body: dict[str, Any]) -> dict[str, Any]:
    problems = []
    allowed = set(PILOT_FIELDS) | {"monthly_decisions", "consent"}
    for name in sorted(set(body) - allowed):
        problems.append(_problem(name, "unknown_field", "is not a pilot intake field"))
    values: dict[str, Any] = {}
    for name, limit in PILOT_FIELDS.items():
        value = body.get(name)
        if name == "notes" and name not in body:  # absent; `null` is refused as a non-string
            values[name] = ""
            continue
        if not isinstance(value, str) or not value.strip():
            problems.append(_problem(name, "required" if name not in body else "invalid_type", "a non-empty string"))
            continue
        value = value.strip()
        if len(value) > limit or (name != "notes" and not value.isprintable()):
            problems.append(_problem(name, "invalid_value", f"at most {limit} printable characters"))
            continue
        values[name] = value
    if "contact_email" in values and not _EMAIL.fullmatch(values["contact_email"]):
        problems.append(_problem("contact_email", "invalid_value", "an e-mail address"))
    if "use_case" in values and values["use_case"] not in PILOT_USE_CASES:
        problems.append(_problem("use_case", "invalid_value", f"one of {', '.join(PILOT_USE_CASES)}"))
    count = body.get("monthly_decisions")
    if isinstance(count, float) and count.is_integer():
        count = int(count)  # JSON has one number type: 14599.0 is the integer 14599 (as JSON Schema reads it)
    if type(count) is not int or not 0 <= count <= 1_000_000_000:
        problems.append(_problem("monthly_decisions", "required" if count is None else "invalid_value",
                                 "a whole number from 0 to 1000000000"))
    else:
        values["monthly_decisions"] = count
    if body.get("consent") is not True:
        problems.append(_problem("consent", "required", "must be true: the gate stores the contact data"))
    if problems:
        raise GateError("REQUEST_INVALID", f"invalid pilot intake: {problems[0]['field']} {problems[0]['message']}",
                        errors=problems)
    return values


def _idempotency_key(values: dict[str, Any]) -> str:
    given = request.headers.get("Idempotency-Key")
    if given is not None:
        given = given.strip()
        if not _KEY.fullmatch(given):
            raise GateError("REQUEST_INVALID", "Idempotency-Key must be 1 to 300 visible ASCII characters",
                            errors=[_problem("Idempotency-Key", "invalid_value", "1 to 300 visible ASCII characters")])
        return given
    return "pilot:" + sha256_hex({"contact_email": values["contact_email"].lower(),
                                  "company": values["company"].casefold()})


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "replace")).hexdigest()


def _pilot_answer(row: dict[str, Any]) -> dict[str, Any]:
    answer = {"ok": True, "pilot_id": row["pilot_id"], "status": row["status"], "created_at": row["created_at"],
              "use_case": row["use_case"]}
    if row.get("confirmed_at"):
        answer["confirmed_at"] = row["confirmed_at"]
    return answer


@bp.post("/api/pilot")
def pilot():
    limited = client_limit("pilot")
    if isinstance(limited, Response):
        return limited
    headers = limited
    try:
        body = read_json(request, PILOT_MAX_BODY, max_depth=8)
        if not isinstance(body, dict):
            raise GateError("REQUEST_INVALID", "the body must be a JSON object",
                            errors=[_problem("body", "invalid_type", "a JSON object")])
        if "confirmation_token" in body:
            return _confirm(body, headers)
        values = _validate_submission(body)
        key = _idempotency_key(values)
        input_hash = sha256_hex(values | {"consent": True})
        token = "pct_" + secrets.token_urlsafe(24)
        row = {"pilot_id": "pilot_" + secrets.token_hex(12), "idempotency_key": key, "input_hash": input_hash,
               **values, "status": "submitted", "token_hash": _token_hash(token), "created_at": _now(),
               "confirmed_at": None}
        existing = _store().store_or_existing(row)
    except GateError as error:
        return error_response(error.code, error.message, headers=headers, **error.details)
    if existing is None:
        answer = _pilot_answer(row) | {
            "confirmation_token": token,
            "confirmation": "POST /api/pilot with {pilot_id, confirmation_token} to confirm; the token is shown once"}
        return json_response(201, answer, {**headers, "x-idempotency-status": "created", "Cache-Control": "no-store"})
    if existing["input_hash"] != input_hash:
        return error_response("PILOT_IDEMPOTENCY_CONFLICT", "this idempotency key already holds a different pilot "
                              "intake; send another Idempotency-Key", headers=headers, idempotency_key=key)
    answer = _pilot_answer(existing) | {"confirmation_token_shown": False}
    return json_response(200, answer, {**headers, "x-idempotency-status": "replayed", "Cache-Control": "no-store"})


def _confirm(body: dict[str, Any], headers: dict[str, str]) -> Response:
    if set(body) != {"pilot_id", "confirmation_token"}:
        raise GateError("REQUEST_INVALID", "a confirmation is exactly {pilot_id, confirmation_token}",
                        errors=[_problem(name, "unknown_field" if name in body else "required", "confirmation member")
                                for name in sorted(set(body) ^ {"pilot_id", "confirmation_token"})])
    pilot_id, token = body["pilot_id"], body["confirmation_token"]
    if not isinstance(pilot_id, str) or not isinstance(token, str) or len(token) > 200:
        raise GateError("REQUEST_INVALID", "pilot_id and confirmation_token must be strings",
                        errors=[_problem("confirmation_token", "invalid_type", "strings")])
    row = _store().by_id(pilot_id) if _PILOT_ID.fullmatch(pilot_id) else None
    # SECURITY: constant-time comparison of digests; an unknown id and a wrong token read alike.
    expected = row["token_hash"] if row is not None else "0" * 64
    if not hmac.compare_digest(_token_hash(token), expected) or row is None:
        return error_response("PILOT_NOT_FOUND", "no pilot intake matches this id and confirmation token",
                              headers=headers)
    confirmed = _store().confirm(pilot_id, _now())
    return json_response(200, _pilot_answer(confirmed), {**headers, "Cache-Control": "no-store"})


# --------------------------------------------------------------------------- metrics token reads


def metrics_token_refusal() -> Response | None:
    """None when the request carries the configured metrics token; else the refusal to answer."""
    token = runtime().settings.metrics_token
    if token is None:
        return error_response("METRICS_UNAVAILABLE", "no metrics token is configured (GATE_METRICS_TOKEN); "
                              "these reads are off")
    given = request.headers.get("x-metrics-token")
    if given is None:
        scheme, _, rest = (request.headers.get("Authorization") or "").partition(" ")
        given = rest.strip() if scheme.lower() == "bearer" else None
    # SECURITY: constant time over fixed-length digests.
    if given is None or not hmac.compare_digest(hashlib.sha256(given.strip().encode("utf-8", "replace")).digest(),
                                                hashlib.sha256(token.encode("utf-8")).digest()):
        return error_response("METRICS_UNAUTHORIZED", "a valid x-metrics-token header is required")
    return None


@bp.get("/api/proof-metrics")
def proof_metrics():
    refusal = metrics_token_refusal()
    if refusal is not None:
        return refusal
    rt = runtime()
    body = {"ok": True, "proof_metrics_version": "decision_proof_metrics_v1", "generated_at": _now(),
            "interface_version": C.INTERFACE_VERSION, **proof_counts(rt.ledger),
            "signing": {"ready": rt.signing.ready(), "required": rt.signing.required}}
    return json_response(200, body, {"Cache-Control": "no-store"})


# SECURITY: spreadsheet formula injection. A spreadsheet may split a line at any of , ; tab |
# (whichever its locale or import dialog picks) or at a line break, and may skip spaces and
# quotes before a cell's first character; a cell that then starts with = + - @ (or their
# full-width forms) is a formula. So a single quote goes in front of the field when it starts
# that way (or with tab, CR or LF, per OWASP), and after every separator inside it that such a
# character follows: whatever the separator, no cell cut out of the field starts a formula.
_FORMULA = r"[\s\"']*[=+\-@\uff1d\uff0b\uff0d\uff20]"
_FORMULA_AT_START = re.compile(_FORMULA + r"|[\t\r\n]")
_FORMULA_AFTER_SEPARATOR = re.compile(r"([,;\t|\r\n])(?=" + _FORMULA + ")")


def csv_cell(value: Any) -> str:
    """`value` as a spreadsheet-safe CSV cell (docs/operations.md, "Pilot intake")."""
    text = "" if value is None else str(value)
    text = ("'" if _FORMULA_AT_START.match(text) else "") + text
    return _FORMULA_AFTER_SEPARATOR.sub(r"\1'", text)


@bp.get("/api/pilot-export")
def pilot_export():
    refusal = metrics_token_refusal()
    if refusal is not None:
        return refusal
    raw = request.args.get("limit", "1000")
    if set(request.args) - {"limit"} or not raw.isascii() or not raw.isdigit() or not 1 <= int(raw) <= 10_000:
        return error_response("REQUEST_INVALID", "the only parameter is limit, a whole number from 1 to 10000",
                              errors=[_problem("limit", "invalid_value", "1 to 10000")])
    out = io.StringIO()
    # Every field quoted, so a reader splitting at , keeps each field whole whatever it holds.
    writer = csv.writer(out, lineterminator="\r\n", quoting=csv.QUOTE_ALL)
    writer.writerow(EXPORT_COLUMNS)
    for row in _store().export(int(raw)):
        writer.writerow([csv_cell(row[name]) for name in EXPORT_COLUMNS])
    return Response(out.getvalue(), status=200, mimetype="text/csv", headers={
        "Content-Disposition": 'attachment; filename="pilot-intakes.csv"', "Cache-Control": "no-store"})


# --------------------------------------------------------------------------- policy alerts


def _wanted_policy() -> str | None:
    """The `policy_id` query parameter, or None; 400 for anything else."""
    if set(request.args) - {"policy_id"}:
        raise GateError("REQUEST_INVALID", "the only parameter is policy_id",
                        errors=[_problem(min(set(request.args) - {"policy_id"}), "unknown_field",
                                         "not a parameter of this route")])
    wanted = request.args.get("policy_id")
    if wanted is not None and (not 1 <= len(wanted) <= 120 or not wanted.isprintable()):
        raise GateError("REQUEST_INVALID", "policy_id must be 1 to 120 printable characters",
                        errors=[_problem("policy_id", "invalid_value", "1 to 120 printable characters")])
    return wanted


def _alert_report_units() -> int:
    """One anomaly report's units per policy read: the named one, else up to MAX_ALERT_POLICIES
    (api.costs); a bad query is a 400 before the charge."""
    per_report = units(ReportParams().limit, REPORT_ROWS_PER_UNIT)
    return per_report * (1 if _wanted_policy() is not None else MAX_ALERT_POLICIES)


@bp.get("/api/policy-alerts")
@keyed("SVC_API_UNAUTHORIZED")
@charged(Weight(query=_alert_report_units))
def policy_alerts(caller: Caller):
    rt = runtime()
    wanted = _wanted_policy()
    policies = [wanted] if wanted is not None else recent_policy_ids(rt.ledger, caller.scope, MAX_ALERT_POLICIES)
    alerts: list[dict[str, Any]] = []
    reports = []
    params = ReportParams()
    for policy_id in policies:
        frames = from_ledger(rt.ledger, caller.scope, policy_id, limit=params.limit)
        report = anomaly_report(frames, policy_id, params)
        reports.append({"policy_id": policy_id, "anomaly_hash": report["anomaly_hash"],
                        "anomaly_count": report["anomaly_count"], "recommendation": report["recommendation"]})
        for anomaly in report["anomalies"]:
            alerts.append({"alert_id": "anomaly:" + sha256_hex([policy_id, anomaly["anomaly_id"]])[:24],
                           "source": "anomaly_engine", "kind": anomaly["kind"], "severity": anomaly["severity"],
                           "policy_id": policy_id, "anomaly_id": anomaly["anomaly_id"],
                           "anomaly_score": anomaly["anomaly_score"], "reasons": anomaly["reasons"],
                           "decision_ids": anomaly["decision_ids"], "anomaly_hash": report["anomaly_hash"]})
    now = rt.service.clock.now()
    max_age = rt.settings.policy_source_max_age_days
    oldest_allowed = (now - timedelta(days=max_age)).date()
    rows_checked = 0
    for service, table in sorted(load_tables().items()):
        for row in table.rows:
            rows_checked += 1
            if row.last_verified < oldest_allowed:
                age = (now.date() - row.last_verified).days
                alerts.append({"alert_id": "source:" + row.source_hash[:24], "source": "vendor_policy_table",
                               "kind": "policy_source_stale", "severity": "high" if age > 2 * max_age else "medium",
                               "service": service, "vendor": row.vendor, "region": row.region, "plan": row.plan,
                               "last_verified": row.last_verified.isoformat(), "age_days": age,
                               "reasons": [f"{service} terms of {row.vendor} ({row.region}, {row.plan}) were last "
                                           f"verified {age} days ago, beyond the {max_age}-day limit; re-verify "
                                           f"{row.source_url}"],
                               "source_url": row.source_url, "source_hash": row.source_hash})
    body = {"ok": True, "policy_alerts_version": "decision_policy_alerts_v1", "generated_at": iso_ms(now),
            "count": len(alerts), "alerts": alerts,
            "checked": {"anomaly_reports": reports,
                        "vendor_tables": {"rows": rows_checked, "max_age_days": max_age,
                                          "table_versions": {s: t.policy_version() for s, t in
                                                             sorted(load_tables().items())}}}}
    return json_response(200, body)
