"""The caller's audit chain: the chain view, its signed checkpoint, inclusion proofs and
consistency proofs.

The chain view re-verifies every link of its page, so it is charged to the key's cost window
first (`api.costs`): one unit plus one per started 10 links of `limit` (default 20: 3 units).
The checkpoint and the proofs read O(log n) nodes and are not charged.
"""

from __future__ import annotations

from collections.abc import Mapping

from flask import Response, request

from api import openapi_params as P
from api.costs import LINKS_PER_UNIT, Weight, charged, units
from api.errors import json_response
from api.query import int_arg
from api.routing import Endpoint, Routes
from api.runtime import keyed
from gate.errors import GateError
from gate.services.chain_view import chain_view
from gate.services.chains import AuditChainService, consistency_for, inclusion_for
from gate.services.decide import Caller

routes = Routes("chains", __name__)
_ERRORS = ("SVC_CHAIN_UNAUTHORIZED", "CHAIN_NOT_FOUND", "REQUEST_INVALID")


def _answer(body: Mapping[str, object] | None) -> Response:
    if body is None:
        raise GateError("CHAIN_NOT_FOUND", "no audit chain (or decision in it) with this id in your scope")
    return json_response(200, body)


def _limit() -> int:
    return int_arg("limit", high=1000, default=20) or 20


CHAIN_WEIGHT = Weight(query=lambda: units(_limit(), LINKS_PER_UNIT))


@routes.route(Endpoint(
    "get", "/api/decision/chains/{chain_id}",
    "The caller's audit chain: retained links, chain_size, rolling merkle_root, head_link_hash, "
    "RFC 6962 tree root, signed checkpoint, the window's outcomes linked to their execution receipts "
    "(execution_links) and verification recomputed from storage.",
    True, {200: "chain view", 400: "bad limit", 401: "missing or invalid key", 403: "disabled key",
           404: "not in scope"},
    errors=_ERRORS,
    query=(("limit", "integer", "retained links, 1-1000, default 20", P.integer(1, 1000)),), tags=("audit",),
    charged=True,
))
@keyed("SVC_CHAIN_UNAUTHORIZED")
@charged(CHAIN_WEIGHT)
def chain(caller: Caller, chain_id: str, *, audit: AuditChainService) -> Response:
    return _answer(chain_view(audit, caller.scope, chain_id, _limit()))


@routes.route(Endpoint(
    "get", "/api/decision/chains/{chain_id}/inclusion",
    "RFC 6962 inclusion proof of a decision's leaf at a tree size (default: the head), with the signed "
    "checkpoint of that size.",
    True, {200: "inclusion proof", 400: "missing decision_id or bad tree_size", 401: "missing or invalid key",
           403: "disabled key", 404: "chain or decision not in scope",
           409: "the stored chain head contradicts its links or nodes"},
    errors=(*_ERRORS, "CHAIN_INTEGRITY_FAILED"),
    query=(("decision_id", "string", "required", {**P.text(), "minLength": 1, "x-required": True}),
           ("tree_size", "integer", "record position … chain size", P.integer(1, P.INT_ARG_MAX))),
    tags=("audit",),
))
@keyed("SVC_CHAIN_UNAUTHORIZED")
def inclusion(caller: Caller, chain_id: str, *, audit: AuditChainService) -> Response:
    decision_id = request.args.get("decision_id")
    if not decision_id:
        raise GateError("REQUEST_INVALID", "decision_id is required",
                        errors=[{"field": "decision_id", "code": "missing_field", "message": "required"}])
    body = inclusion_for(audit, caller.scope, chain_id, decision_id, int_arg("tree_size"))
    return _answer(body)


@routes.route(Endpoint(
    "get", "/api/decision/chains/{chain_id}/consistency",
    "RFC 6962 consistency proof between two tree sizes (second defaults to the head), both roots "
    "recomputed from stored nodes, and both signed checkpoints.",
    True, {200: "consistency proof", 400: "bad sizes", 401: "missing or invalid key", 403: "disabled key",
           404: "chain not in scope", 409: "the stored chain head contradicts its links or nodes"},
    errors=(*_ERRORS, "CHAIN_INTEGRITY_FAILED"),
    query=(("first", "integer", "required, ≥ 1", {**P.integer(1, P.INT_ARG_MAX), "x-required": True}),
           ("second", "integer", "first … chain size", P.integer(1, P.INT_ARG_MAX))),
    tags=("audit",),
))
@keyed("SVC_CHAIN_UNAUTHORIZED")
def consistency(caller: Caller, chain_id: str, *, audit: AuditChainService) -> Response:
    first = int_arg("first")
    if first is None:
        raise GateError("REQUEST_INVALID", "first is required",
                        errors=[{"field": "first", "code": "missing_field", "message": "required"}])
    return _answer(consistency_for(audit, caller.scope, chain_id, first, int_arg("second")))


@routes.route(Endpoint(
    "get", "/api/decision/chains/{chain_id}/checkpoint",
    "The signed checkpoint of the caller's chain at its head, appended to the gate's checkpoint log "
    "(GATE_CHECKPOINT_LOG), with `first` also the consistency proof from that tree size (for a witness: "
    "`gate checkpoint save`).",
    True, {200: "checkpoint", 400: "bad first", 401: "missing or invalid key", 403: "disabled key",
           404: "chain not in scope or without decisions",
           409: "the stored chain contradicts its links, nodes or the gate's checkpoint log",
           503: "the checkpoint log cannot be written"},
    errors=(*_ERRORS, "CHAIN_INTEGRITY_FAILED", "LEDGER_UNAVAILABLE"),
    query=(("first", "integer", "optional, 1 … chain size: include the consistency proof from it",
            P.integer(1, P.INT_ARG_MAX)),),
    tags=("audit",),
))
@keyed("SVC_CHAIN_UNAUTHORIZED")
def checkpoint(caller: Caller, chain_id: str, *, audit: AuditChainService) -> Response:
    """The signed checkpoint of the caller's chain at its head (appended to the gate's own
    checkpoint log), and with `first` the consistency proof from that tree size, so a witness
    can check it extends the checkpoint it holds. 409 `CHAIN_INTEGRITY_FAILED` when the stored
    chain contradicts itself or the gate's log; nothing is signed then."""
    if not audit.owns(caller.scope, chain_id):
        return _answer(None)
    published = audit.publish_checkpoint(chain_id, int_arg("first"))
    return _answer({"ok": True, **published} if published else None)
