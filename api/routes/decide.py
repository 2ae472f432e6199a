"""POST /api/decide: create (or idempotently replay) a signed Decision Record."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from flask import Response, request

from api.errors import carry_headers, json_response, json_text_response
from api.jsonio import read_json
from api.limits import RateLimiter
from api.metrics import record_decision
from api.routing import AUTH_ERRORS, BODY_ERRORS, DECIDE_HEADERS, MEDIA, REQUEST_HEADERS, Endpoint, Routes
from api.runtime import caller_request_id, idempotency_key_header, keyed, requested_view
from gate.errors import GateError
from gate.privacy.datamap import LOGS
from gate.privacy.logs import masking
from gate.protocol.advisory_record import is_advisory
from gate.protocol.decision_record import DecisionRecord
from gate.protocol.records import project_view
from gate.services.chains import AuditChainService
from gate.services.decide import Caller, DecisionService
from gate.services.privacy import PrivacyService
from gate.settings import Settings
from gate.vocabulary import VIEW_FULL

routes = Routes("decide", __name__)


def _cadence_witness(settings: Settings, audit: AuditChainService,
                     record: Mapping[str, Any]) -> Callable[[], None] | None:
    """Every GATE_CHECKPOINT_EVERY-th decision of a chain, the step that appends its signed
    checkpoint to the gate's checkpoint log (docs/verification.md §7.4); None for the others.
    The route runs it once the answer is sent (the response's close): the decision is already
    stored and the caller does not wait for the chain's checks, the signature, the checkpoint's
    own write transaction and the log's fsync (a few milliseconds, on every hundredth decide: the
    decide's 99th percentile). The serving thread does: a next request on the same keep-alive
    connection is read once it is done. A chain that fails its checks there is logged, never turned into
    an error of this decide; a process that stops before it runs leaves that checkpoint to the
    next one, which covers the chain up to its own, later head."""
    every, chain = settings.checkpoint_every, record.get("audit_chain")
    if not every or audit.checkpoint_log is None or not isinstance(chain, dict):
        return None
    position = chain.get("chain_position")
    if type(position) is not int or position % every:
        return None
    chain_id = chain["chain_id"]
    return lambda: audit.witness_after_answer(chain_id, position)


def _rate_checked(limiter: RateLimiter, now_ms: int, caller: Caller) -> dict[str, str]:
    """The rate-limit headers for this decide, carried to any refusal of it; 429 when the key is
    over its rate (GateError, 503, when the limiter is unavailable)."""
    rate = limiter.hit(caller.key_id, caller.rate_limit, now_ms)
    headers: dict[str, str] = rate.headers()
    carry_headers(headers)  # a refusal answers the rate headers too
    if not rate.allowed:
        # SECURITY: a refused request creates nothing and is never an approval.
        raise GateError("SVC_API_RATE_LIMITED",
                        f"rate limit of {rate.limit} decisions per minute exceeded for this key",
                        retry_after=rate.retry_after)
    return headers


def _record_headers(caller: Caller, record: DecisionRecord, used: int, idempotency_status: str) -> dict[str, str]:
    """Usage, the record's identity and hashes, its receipt signature and its confidence block."""
    headers = {
        "X-Usage-Monthly-Remaining": str(max(0, caller.monthly_cap - used)),
        "x-decision-id": record.decision_id,
        "x-decision-record-hash": record.record_hash,
        "x-decision-receipt-hash": record.receipt_hash,
        "x-idempotency-status": idempotency_status,
        "x-decision-verify-url": record["verify_url"],
    }
    if record.get("receipt_signature"):
        headers["x-decision-receipt-signature"] = record["receipt_signature"]
    confidence = record.get("decision_confidence")
    if isinstance(confidence, dict):
        headers["x-decision-confidence-score"] = str(confidence.get("score"))
        headers["x-decision-confidence-level"] = str(confidence.get("level"))
        headers["x-decision-confidence-hash"] = str(confidence.get("confidence_hash"))
    arm = record.get("release_arm")
    if isinstance(arm, dict):  # a decide by reference (docs/releases.md)
        headers["x-decision-release-arm"] = str(arm.get("arm"))
        headers["x-decision-rulebook-version"] = str(arm.get("version"))
    return headers


@routes.route(Endpoint(
    "post", "/api/decide", "Create a signed Decision Record (binding in rulebook mode; advisory in the legacy "
    "modes single, multi, runtime and when mode is omitted: decision_contract advisory_only, an advisory "
    "approval reads verdict review / c unclear) or replay one.",
    True,
    {200: "Decision Record in the requested view", 400: "malformed request", 401: "missing or invalid key",
     403: "disabled key", 404: "rulebook_ref names a rulebook or version not published in this scope",
     409: "idempotency or rulebook version conflict", 413: "body too large",
     415: MEDIA, 422: "rulebook or trusted adapter invocation refused, or evaluation limits exceeded (fail closed)",
     429: "rate limit or monthly cap",
     500: "trusted adapter output invalid or capability denied (nothing stored, nothing approved)",
     502: "advisory mode: the advisor failed (nothing stored)",
     503: "signing, ledger, limiter, adapter worker or (multi) advisors unavailable",
     504: "trusted adapter exceeded its 1,000 ms budget (nothing stored)"},
    errors=AUTH_ERRORS + BODY_ERRORS + (
        "SVC_API_RATE_LIMITED", "SVC_API_MONTHLY_CAP_EXCEEDED", "SVC_API_IDEMPOTENCY_CONFLICT",
        "LEGACY_MODE_UNAVAILABLE", "ADVISOR_UPSTREAM_FAILED", "ADVISOR_UNAVAILABLE", "RULEBOOK_INVALID",
        "RULEBOOK_BINDING_MODE_UNSUPPORTED", "RULEBOOK_BINDING_MODE_CONFLICT", "RULEBOOK_OUTPUT_MATERIAL_FORBIDDEN",
        "RULEBOOK_VERSION_CONFLICT", "RULEBOOK_NOT_FOUND", "TRUSTED_ADAPTER_INVALID", "TRUSTED_ADAPTER_NOT_REGISTERED",
        "TRUSTED_ADAPTER_MANIFEST_MISMATCH", "TRUSTED_ADAPTER_INPUT_INVALID",
        "TRUSTED_ADAPTER_EXECUTION_TIMEOUT", "TRUSTED_ADAPTER_OUTPUT_INVALID",
        "TRUSTED_ADAPTER_CAPABILITY_DENIED", "TRUSTED_ADAPTER_UNAVAILABLE",
        "EVALUATION_INPUT_TOO_LARGE", "EVALUATION_TOO_COSTLY",
        "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED", "LEDGER_UNAVAILABLE", "RATE_LIMITER_UNAVAILABLE",
        "INTERNAL_ERROR",
    ),
    request_body="DecisionRequest",
    response_headers=DECIDE_HEADERS + ("Retry-After",),
    request_headers=tuple(REQUEST_HEADERS),
    tags=("decisions",),
))
@keyed("SVC_API_UNAUTHORIZED")
def decide(caller: Caller, *, service: DecisionService, settings: Settings, audit: AuditChainService,
           privacy: PrivacyService, current_limiter: Callable[[], RateLimiter], now_ms: Callable[[], int]) -> Response:
    headers = _rate_checked(current_limiter(), now_ms(), caller)
    idempotency_key = idempotency_key_header()
    body = read_json(request, settings.max_body_bytes)
    body_view = body.get("response_view") if isinstance(body, dict) else None
    view, prefer_applied = requested_view(body_view if isinstance(body_view, str) else None)
    # Every log line made while the gate decides masks this request's personal values by the
    # scope's `logs` rule (gate.privacy.logs; docs/privacy.md).
    with masking(privacy.masker(caller.scope, LOGS, body)):
        result = service.decide(caller, body, idempotency_key=idempotency_key, request_id=caller_request_id())

    witness = None
    if result.idempotency_status == "created":  # Prometheus gate_decisions_total (api.metrics)
        record_decision("advisory" if is_advisory(result.record) else "binding", result.record.verdict)
        witness = _cadence_witness(settings, audit, result.record)
    used = service.monthly_used(caller, result)
    headers.update(_record_headers(caller, result.record, used, result.idempotency_status))
    headers.update(dict(result.headers))  # a superseded inline version says so (docs/releases.md)
    if prefer_applied:
        headers["Preference-Applied"] = f"return={view}"
    headers["Vary"] = "Prefer, x-decision-response-view"
    request_id = caller_request_id()
    if request_id:
        headers["x-request-id"] = request_id
    if view == VIEW_FULL and result.record_json is not None:  # the stored text: encoded once, by the seal
        response = json_text_response(200, result.record_json, headers)
    else:
        response = json_response(200, project_view(result.record, view), headers)
    if witness is not None:
        response.call_on_close(witness)  # once the answer is sent (see `_cadence_witness`)
    return response
