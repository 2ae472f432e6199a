"""Stored decisions and verification: read, verify stored, verify exported."""

from __future__ import annotations

from typing import Any

from flask import Response, request

from api import openapi_params as P
from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.public_limits import verification_body
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed, requested_view
from gate import bodies
from gate import vocabulary as C
from gate.errors import GateError
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger
from gate.protocol.canonical import MAX_DOCUMENT_DEPTH
from gate.protocol.records import project_view
from gate.services.chains import AuditChainService
from gate.services.decide import Caller, DecisionService
from gate.services.lifecycle import LifecycleService
from gate.services.verification import verify_stored_decision
from gate.settings import Settings
from gate.verify import verify_record

routes = Routes("decisions", __name__)

VERIFY_DESCRIPTION = {
    "ok": True,
    "endpoint": "/api/decision/verify",
    "method": "POST",
    "auth": "public",
    "request": {
        "record": "the exported Decision Record (full view)",
        "input": "optional: the original request body, checked against input_hash",
        "public_key": "optional PEM: used for a diagnostic check only, never as a trust anchor",
    },
    "result": ["verified", "integrity_valid", "authenticity_valid", "key_source", "checks",
               "failed_checks", "expected", "actual"],
    "trust": "authenticity needs a key from this gate's receipt-key registry or its HMAC secret",
    "canonicalization": C.CANONICALIZATION,
    "hash_algorithm": C.HASH_ALGORITHM,
    "algorithm_document": "docs/verification.md",
}


def _body_fields(name: str, body: Any) -> tuple[Any, Any, Any]:
    """The record, input and public key of a verification body, checked by its schema alone
    (gate/bodies/<name>.schema.json; a body of JSON `null`, or none, reads as `{}`)."""
    checked = bodies.checked(name, {} if body is None else body, "REQUEST_INVALID")
    return checked.get("record"), checked.get("input"), checked.get("public_key")


@routes.route(Endpoint(
    "get", "/api/decision/verify", "Describe exported-record verification.", False,
    {200: "endpoint metadata"}, tags=("verification",), budget="public",
))
def describe_verify() -> Response:
    return json_response(200, VERIFY_DESCRIPTION)


@routes.route(Endpoint(
    "post", "/api/decision/verify",
    "Verify an exported record `{record, input?, public_key?}` without a ledger lookup. "
    "A key in the request is never a trust anchor.",
    False, {200: "verification result", 400: "malformed body", 413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS, request_body="ExportedRecordVerificationRequest", tags=("verification",), budget="verify",
))
def verify_exported(*, settings: Settings, signing: SigningSetup | LiveSigning) -> Response:
    with verification_body(settings.max_body_bytes) as body:  # issue 18: 413, 503 when busy, then parsed
        record, original, public_key = _body_fields("exported-record-verification", body)
        result = verify_record(record, anchors=signing.trust_anchors(), original_input=original,
                               request_public_key=public_key)
    return json_response(200, {"ok": True, **result.to_dict()})


@routes.route(Endpoint(
    "get", "/api/decision/{decision_id}", "The stored Decision Record (full view unless a view is asked for). "
    "A row whose record is not bound to it (another id or scope) reads as absent.",
    True, {200: "Decision Record", 400: "response_view is not minimal, standard or full",
           401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
    errors=AUTH_ERRORS + ("DECISION_NOT_FOUND", "REQUEST_INVALID"),
    query=(("response_view", "string", "minimal, standard or full", P.view("minimal, standard or full")),),
    tags=("decisions",),
))
@keyed("SVC_API_UNAUTHORIZED")
def read_decision(caller: Caller, decision_id: str, *, service: DecisionService) -> Response:
    view, _ = requested_view(request.args.get("response_view"))
    if view not in C.VIEWS:
        raise GateError("REQUEST_INVALID", f"response_view must be one of {', '.join(C.VIEWS)}")
    record = service.stored_record(caller, decision_id)
    if record is None:
        raise GateError("DECISION_NOT_FOUND", "no decision with this id in your scope")
    headers = {"x-decision-id": record.decision_id, "x-decision-record-hash": record.record_hash,
               "x-decision-receipt-hash": record.receipt_hash}
    return json_response(200, project_view(record, view), headers)


# Re-hashing and re-verifying the stored record costs about four replays of it: charged first (api.costs).
VERIFY_WEIGHT = Weight(body=True, stored=4)


@routes.route(
    Endpoint(
        "get", "/api/decision/{decision_id}/verify",
        "Recompute the stored record's hashes and signatures, and bind it to its ledger row: id, scope, "
        "chain position, indexed columns, the row seal and the decision's receipt chain (docs/verification.md §9).",
        True, {200: "verification result", 401: "missing or invalid key", 403: "disabled key", 404: "not in scope"},
        errors=AUTH_ERRORS + ("DECISION_NOT_FOUND",), tags=("verification",), charged=True,
    ),
    Endpoint(
        "post", "/api/decision/{decision_id}/verify",
        "Verify a supplied record (`{record?, input?}`) against the stored one, or the stored one.",
        True, {200: "verification result", 400: "malformed body", 401: "missing or invalid key",
               403: "disabled key", 404: "not in scope", 413: "body too large", 415: MEDIA},
        errors=AUTH_ERRORS + BODY_ERRORS + ("DECISION_NOT_FOUND",),
        request_body="RecordVerificationRequest", tags=("verification",), charged=True,
    ),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(VERIFY_WEIGHT)
def verify_stored(caller: Caller, decision_id: str, *, service: DecisionService, settings: Settings, ledger: Ledger,
                  lifecycle: LifecycleService, signing: SigningSetup | LiveSigning, audit: AuditChainService) -> Response:
    body = read_json(request, settings.max_body_bytes, optional=True,
                     max_depth=MAX_DOCUMENT_DEPTH) if request.method == "POST" else None
    supplied, original, public_key = _body_fields("record-verification", body)
    stored = service.stored_decision(caller, decision_id)
    if stored is None:
        raise GateError("DECISION_NOT_FOUND", "no decision with this id in your scope")
    body = verify_stored_decision(ledger, lifecycle, signing, stored, supplied=supplied,
                                  original=original, public_key=public_key, audit=audit)
    return json_response(200, {"ok": True, **body})
