"""Execution receipts, outcome records and CRM sync records: POST to record, GET to list."""

from __future__ import annotations

from collections.abc import Callable

from flask import Blueprint, Response, request

from api.errors import error_response, json_response
from api.jsonio import read_json
from api.query import int_arg
from api.runtime import idempotency_key_header, keyed, runtime
from gate.services.decide import Caller
from gate.services.lifecycle import KINDS, Kind

bp = Blueprint("lifecycle", __name__)

HEADER_PREFIX = {"execution": "x-decision-execution", "outcome": "x-decision-outcome",
                 "crm_sync": "x-decision-crm-sync"}
PATHS = {"execution": "execution", "outcome": "outcome", "crm_sync": "crm-sync"}


def _endpoint(kind: Kind) -> Callable[[str], Response]:
    @keyed(f"{kind.code}_UNAUTHORIZED")
    def view(caller: Caller, decision_id: str) -> Response:
        rt = runtime()
        record = rt.service.stored_record(caller, decision_id)
        if record is None:
            return error_response("DECISION_NOT_FOUND", "no decision with this id in your scope")
        if request.method == "GET":
            body = rt.lifecycle.list(kind, decision_id, limit=int_arg("limit", high=100, default=20),
                                     cursor=request.args.get("cursor"))
            return json_response(200, body)
        idempotency_key = idempotency_key_header()
        payload = read_json(request, rt.settings.max_body_bytes)
        result = rt.lifecycle.record(kind, scope=caller.scope, decision_id=decision_id, record=record,
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


for _kind in KINDS.values():
    bp.add_url_rule(f"/api/decision/<decision_id>/{PATHS[_kind.name]}", view_func=_endpoint(_kind),
                    methods=["GET", "POST"])
