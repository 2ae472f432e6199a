"""The caller's audit chain: the chain view, its signed checkpoint, inclusion proofs and
consistency proofs.

The chain view re-verifies every link of its page, so it is charged to the key's cost window
first (`api.costs`): one unit plus one per started 10 links of `limit` (default 20: 3 units).
The checkpoint and the proofs read O(log n) nodes and are not charged.
"""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from api.costs import LINKS_PER_UNIT, Weight, charged, units
from api.errors import error_response, json_response
from api.query import int_arg
from api.runtime import keyed, runtime
from gate.errors import GateError
from gate.services.chains import consistency_for, inclusion_for
from gate.services.decide import Caller

bp = Blueprint("chains", __name__)


def _answer(body: dict[str, Any] | None) -> Response:
    if body is None:
        return error_response("CHAIN_NOT_FOUND", "no audit chain (or decision in it) with this id in your scope")
    return json_response(200, body)


def _limit() -> int:
    return int_arg("limit", high=1000, default=20) or 20


CHAIN_WEIGHT = Weight(query=lambda: units(_limit(), LINKS_PER_UNIT))


@bp.get("/api/decision/chains/<chain_id>")
@keyed("SVC_CHAIN_UNAUTHORIZED")
@charged(CHAIN_WEIGHT)
def chain(caller: Caller, chain_id: str) -> Response:
    return _answer(runtime().audit.chain_view(caller.scope, chain_id, _limit()))


@bp.get("/api/decision/chains/<chain_id>/inclusion")
@keyed("SVC_CHAIN_UNAUTHORIZED")
def inclusion(caller: Caller, chain_id: str) -> Response:
    decision_id = request.args.get("decision_id")
    if not decision_id:
        raise GateError("REQUEST_INVALID", "decision_id is required",
                        errors=[{"field": "decision_id", "code": "missing_field", "message": "required"}])
    body = inclusion_for(runtime().audit, caller.scope, chain_id, decision_id, int_arg("tree_size"))
    return _answer(body)


@bp.get("/api/decision/chains/<chain_id>/consistency")
@keyed("SVC_CHAIN_UNAUTHORIZED")
def consistency(caller: Caller, chain_id: str) -> Response:
    first = int_arg("first")
    if first is None:
        raise GateError("REQUEST_INVALID", "first is required",
                        errors=[{"field": "first", "code": "missing_field", "message": "required"}])
    return _answer(consistency_for(runtime().audit, caller.scope, chain_id, first, int_arg("second")))


@bp.get("/api/decision/chains/<chain_id>/checkpoint")
@keyed("SVC_CHAIN_UNAUTHORIZED")
def checkpoint(caller: Caller, chain_id: str) -> Response:
    """The signed checkpoint of the caller's chain at its head (appended to the gate's own
    checkpoint log), and with `first` the consistency proof from that tree size, so a witness
    can check it extends the checkpoint it holds. 409 `CHAIN_INTEGRITY_FAILED` when the stored
    chain contradicts itself or the gate's log; nothing is signed then."""
    if not runtime().audit.owns(caller.scope, chain_id):
        return _answer(None)
    published = runtime().audit.publish_checkpoint(chain_id, int_arg("first"))
    return _answer({"ok": True, **published} if published else None)
