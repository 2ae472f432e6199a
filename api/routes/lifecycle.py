"""Execution receipts, outcome records and CRM sync records: POST to record, GET to list."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request

from api import openapi_params as P
from api.errors import json_response
from api.jsonio import read_json
from api.query import int_arg
from api.routing import BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import idempotency_key_header, keyed
from gate.errors import GateError
from gate.services.decide import Caller, DecisionService
from gate.services.lifecycle import KINDS, Kind, LifecycleService
from gate.settings import Settings

routes = Routes("lifecycle", __name__)

HEADER_PREFIX = {"execution": "x-decision-execution", "outcome": "x-decision-outcome",
                 "crm_sync": "x-decision-crm-sync"}
PATHS = {"execution": "execution", "outcome": "outcome", "crm_sync": "crm-sync"}


def _endpoint(kind: Kind) -> Callable[..., Response]:
    @keyed(f"{kind.code}_UNAUTHORIZED")
    def view(caller: Caller, decision_id: str, *, service: DecisionService, lifecycle: LifecycleService,
             settings: Settings) -> Response:
        record = service.stored_record(caller, decision_id)
        if record is None:
            raise GateError("DECISION_NOT_FOUND", "no decision with this id in your scope")
        if request.method == "GET":
            body = lifecycle.list(kind, decision_id, limit=int_arg("limit", high=100, default=20),
                                  cursor=request.args.get("cursor"))
            return json_response(200, body)
        idempotency_key = idempotency_key_header()
        payload = read_json(request, settings.max_body_bytes)
        result = lifecycle.record(kind, scope=caller.scope, decision_id=decision_id, record=record,
                                  body=payload, idempotency_key=idempotency_key, reported_by=caller.key_id)
        receipt = result.receipt
        prefix = HEADER_PREFIX[kind.name]
        headers = {
            f"{prefix}-id": receipt[kind.id_field],
            f"{prefix}-hash": receipt[kind.hash_field],
            "x-idempotency-status": result.idempotency_status,
        }
        status = 201 if result.idempotency_status == "created" else 200
        return json_response(status, {"ok": True, kind.wrapper: receipt}, headers)

    view.__name__ = f"{kind.name}_receipts"
    return view


def _declared(kind: Kind) -> tuple[Endpoint, Endpoint]:
    """POST (record) and GET (list) of one kind's receipts."""
    path, code, wrapper, id_header = PATHS[kind.name], kind.code, kind.wrapper, HEADER_PREFIX[kind.name]
    record = Endpoint(
        "post", f"/api/decision/{{decision_id}}/{path}",
        f"Record a hashed {wrapper.replace('_', ' ')} receipt linked to the decision "
        f"(`{{ok, {wrapper}}}`); idempotent with x-idempotency-key.",
        True,
        {201: "created", 200: "idempotent replay (identical body)", 400: "malformed body",
         401: "missing or invalid key", 403: "disabled key", 404: "decision not in scope",
         409: "idempotency conflict, in progress, or record mismatch"
         + (" or execution mismatch (the linked execution receipt)" if path == "outcome" else ""),
         413: "body too large",
         415: MEDIA, 422: "credentials offered (CRM sync)", 503: "claim or storage failure: nothing recorded"},
        errors=(f"{code}_UNAUTHORIZED", "DECISION_NOT_FOUND", f"{code}_IDEMPOTENCY_CONFLICT",
                f"{code}_IDEMPOTENCY_IN_PROGRESS", f"{code}_RECORD_MISMATCH", f"{code}_UNAVAILABLE")
        + BODY_ERRORS + (("SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN",) if path == "crm-sync" else ())
        + (("SVC_OUTCOME_EXECUTION_MISMATCH",) if path == "outcome" else ()),
        request_body=f"{wrapper.title().replace('_', '')}Request",
        response_headers=(f"{id_header}-id", f"{id_header}-hash", "x-idempotency-status"),
        request_headers=("x-api-key", "x-idempotency-key", "x-request-id"),
        tags=("lifecycle",),
    )
    listing = Endpoint(
        "get", f"/api/decision/{{decision_id}}/{path}",
        f"List the decision's {wrapper.replace('_', ' ')} receipts, newest first, paged.",
        True, {200: "page", 400: "bad limit or cursor", 401: "missing or invalid key",
               403: "disabled key", 404: "decision not in scope"},
        errors=(f"{code}_UNAUTHORIZED", "DECISION_NOT_FOUND", "REQUEST_INVALID"),
        query=(("limit", "integer", "1-100, default 20", P.integer(1, 100)),
               ("cursor", "string", "next_cursor of the previous page")),
        tags=("lifecycle",),
    )
    return record, listing


for _kind in KINDS.values():
    routes.add(_endpoint(_kind), *_declared(_kind))
