"""Held actions over HTTP (docs/holds.md): the scope's inbox, a hold's signed steps, the scope's
hold policy and chain, and the caller's wait for its answer. Every route is keyed and scoped:
another scope's hold is 404, exactly like one that does not exist. Votes, claims, reassignments
and escalations need the `resolve` permission; the hold policy needs `admin`."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from api.costs import Weight, charged
from api.errors import gate_error_body, json_response
from api.jsonio import read_json
from api.parking import PARK
from api.query import int_arg
from api.routes.releases import principal_of
from api.runtime import keyed, runtime
from gate.errors import GateError
from gate.services.decide import Caller
from gate.services.holds import HoldService

bp = Blueprint("holds", __name__)

READ_WEIGHT = Weight(base=2)
ACTION_WEIGHT = Weight(base=2)
MAX_WAIT_SECONDS = 30
MAX_PAGE = 500
_IN_THREAD = object()  # no parking offered (the test client, the development server)


def _refused(error: GateError) -> Response:
    status, body = gate_error_body(error)
    return json_response(status, body)


def _holds() -> HoldService:
    service: HoldService = runtime().holds
    return service


@bp.get("/api/holds")
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def inbox(caller: Caller) -> Response:
    """The scope's holds: `state` (open, approved, denied, expired, closed, all; default open),
    `queue`, `limit` (1-500, default 50) and `offset`; soonest deadline first, then most urgent."""
    try:
        state, queue = request.args.get("state", "open"), request.args.get("queue")
        limit = int_arg("limit", low=1, high=MAX_PAGE, default=50) or 50
        offset = int_arg("offset", low=0, high=1_000_000, default=0) or 0
        return json_response(200, _holds().list(caller.scope, state=state, queue=queue, limit=limit, offset=offset))
    except GateError as error:
        return _refused(error)


@bp.get("/api/holds/policy")
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def policy(caller: Caller) -> Response:
    return json_response(200, {"ok": True, "policy": _holds().policy(caller.scope).to_json()})


@bp.put("/api/holds/policy")
@keyed("SVC_API_UNAUTHORIZED")
@charged(ACTION_WEIGHT)
def set_policy(caller: Caller) -> Response:
    """The whole hold policy (admin): 200 with the signed `policy_set` event of the hold chain."""
    try:
        body = read_json(request, runtime().settings.max_body_bytes)
        return json_response(200, _holds().set_policy(caller.scope, principal_of(caller), caller.permissions, body))
    except GateError as error:
        return _refused(error)


@bp.get("/api/holds/history")
@keyed("SVC_API_UNAUTHORIZED")
@charged(Weight(base=10))
def history(caller: Caller) -> Response:
    """The scope's hold chain (`hold_history_v1`) that `gate verify --hold-history` checks offline."""
    return json_response(200, _holds().history_document(caller.scope))


@bp.get("/api/holds/<decision_id>")
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def show(caller: Caller, decision_id: str) -> Response:
    try:
        return json_response(200, {"ok": True, "hold": _holds().show(caller.scope, decision_id)})
    except GateError as error:
        return _refused(error)


def act(caller: Caller, decision_id: str, action: str) -> Response:
    """One signed step: `resolve` `{decision, reason_code, note?}`, `claim`, `unclaim`,
    `reassign` `{queue, note?}`, `escalate`. 201 with the event and the hold after it."""
    service = _holds()
    try:
        principal = principal_of(caller)
        body: Any = read_json(request, runtime().settings.max_body_bytes) if action in ("resolve", "reassign") else None
        if action == "resolve":
            answer = service.resolve(caller.scope, principal, caller.permissions, decision_id, body)
        elif action in ("claim", "unclaim"):
            answer = service.claim(caller.scope, principal, caller.permissions, decision_id, action == "unclaim")
        elif action == "reassign":
            answer = service.reassign(caller.scope, principal, caller.permissions, decision_id, body)
        else:
            answer = service.escalate(caller.scope, principal, caller.permissions, decision_id)
    except GateError as error:
        return _refused(error)
    runtime().wake_dispatcher()
    return json_response(201, answer)


def _step_route(action: str) -> None:
    """POST /api/holds/<decision_id>/<action>: one route per step, so each is declared as it is."""
    def route(caller: Caller, decision_id: str) -> Response:
        return act(caller, decision_id, action)
    route.__name__ = f"hold_{action}"
    bp.add_url_rule(f"/api/holds/<decision_id>/{action}", view_func=keyed("SVC_API_UNAUTHORIZED")(
        charged(ACTION_WEIGHT)(route)), methods=["POST"])


for _action in ("resolve", "claim", "unclaim", "reassign", "escalate"):
    _step_route(_action)


@bp.get("/api/decision/<decision_id>/resolution")
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def resolution(caller: Caller, decision_id: str) -> Response:
    """The held decision's state and, once closed, its signed resolution. `wait` (0-30 s) waits
    for the close: served by `gate serve`, the request is parked in the worker's event loop and
    holds no thread; it is answered within a second of a close in any process, or at the end of
    the wait with the state still `open` (never approval)."""
    try:
        wait = int_arg("wait", low=0, high=MAX_WAIT_SECONDS, default=0) or 0
        service = _holds()
        answer = service.resolution(caller.scope, decision_id)
        if answer["state"] == "open" and wait > 0 and request.environ.get(PARK, _IN_THREAD) is not None:
            # None: this is the parked request's resumed run, which answers the state as it is now.
            park = request.environ.get(PARK, _IN_THREAD)
            if park is not _IN_THREAD and park(decision_id, float(wait)):
                return json_response(202, {"ok": True, "parked": True})  # never sent: the worker answers later
            answer = service.wait_closed(caller.scope, decision_id, float(wait))  # no parking here (or lot full)
        return json_response(200, answer)
    except GateError as error:
        return _refused(error)
