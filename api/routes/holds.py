"""Held actions over HTTP (docs/holds.md): the scope's inbox, a hold's signed steps, the scope's
hold policy and chain, and the caller's wait for its answer. Every route is keyed and scoped:
another scope's hold is 404, exactly like one that does not exist. Votes, claims, reassignments
and escalations need the `resolve` permission; the hold policy needs `admin`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.parking import PARK
from api.query import int_arg
from api.routes.releases import principal_of
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed
from gate.governance.table import HOLD_POLICY
from gate.holds.policy import PRIORITIES
from gate.services.decide import Caller
from gate.services.governance import approval_members
from gate.services.hold_reads import ASSIGNEES, LIST_FILTERS, MAX_SEARCH, SEARCH_PATTERN
from gate.services.holds import HoldService
from gate.settings import Settings

routes = Routes("holds", __name__)
_HOLD = "/api/holds/{decision_id}"
_HOLD_KEYED = {401: "missing or invalid key", 403: "key lacks resolve (or, under four eyes, its holder asked for the action)"}
_HOLD_ERRORS = AUTH_ERRORS + ("HOLD_NOT_FOUND", "LEDGER_UNAVAILABLE")
_HOLD_STEP_ERRORS = BODY_ERRORS + _HOLD_ERRORS + (
    "HOLD_PERMISSION_DENIED", "HOLD_FOUR_EYES", "HOLD_NOT_A_MEMBER", "HOLD_ALREADY_RESOLVED", "HOLD_ALREADY_VOTED",
    "HOLD_CLAIMED", "HOLD_RESOLUTION_INVALID", "HOLD_BUSY", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED",
    "CHAIN_INTEGRITY_FAILED")
_STEP_ANSWERS = {201: "{ok, event, hold}: the signed hold_event_v1 and the hold after it", 400: "malformed body",
                 **_HOLD_KEYED, 404: "no such hold in this scope",
                 409: "already resolved, voted or claimed; or the hold chain does not extend its witnessed checkpoint",
                 413: "body too large", 415: MEDIA, 503: "busy or no signing key"}

READ_WEIGHT = Weight(base=2)
ACTION_WEIGHT = Weight(base=2)
MAX_WAIT_SECONDS = 30
MAX_PAGE = 500
_IN_THREAD = object()  # no parking offered (the test client, the development server)


@routes.route(Endpoint(
    "get", "/api/holds", "The scope's holds over every page in one order: the most urgent first (priority as the "
    "hold policy ranks it: urgent, high, normal, low), then the least time left (deadline), then decision id. "
    "Filters: `state` (open, approved, denied, expired, closed, all), `queue`, `priority`, `policy`, `assignee` "
    "(`mine`: claimed by this key; `unassigned`: under no live claim), `search` (a target object id, a "
    "source record id, or a decision id or its beginning); `limit` (1-500), `offset`. A bad value is 400 REQUEST_INVALID naming it.", True,
    {200: "{ok, holds, count, total, counts}", 400: "bad query (REQUEST_INVALID, naming the parameter)",
     401: "missing or invalid key"},
    errors=AUTH_ERRORS + ("REQUEST_INVALID",),
    query=(("state", "string", "open (default), approved, denied, expired, closed or all",
            {"type": "string", "enum": ["open", "approved", "denied", "expired", "closed", "all"]}),
           ("queue", "string", "one queue only"),
           ("priority", "string", "one priority only", {"type": "string", "enum": list(PRIORITIES)}),
           ("policy", "string", "one rulebook policy id only"),
           ("assignee", "string", "mine (claimed by this key, a live claim) or unassigned (no live claim)",
            {"type": "string", "enum": list(ASSIGNEES)}),
           ("search", "string", (f"a target object id, a source record id, or a decision id or its beginning "
                                 f"(one line, at most {MAX_SEARCH} characters)"),
            {"type": "string", "maxLength": MAX_SEARCH, "pattern": SEARCH_PATTERN}),
           ("limit", "integer", "at most this many (default 50, at most 500)",
            {"type": "integer", "minimum": 1, "maximum": 500}),
           ("offset", "integer", "skip this many", {"type": "integer", "minimum": 0, "maximum": 1_000_000})),
    tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def inbox(caller: Caller, *, holds: HoldService) -> Response:
    """The scope's holds (`HoldService.list`: its order, filters and refusals), read as the key's
    principal (`assignee=mine`)."""
    state, queue = request.args.get("state", "open"), request.args.get("queue")
    limit = int_arg("limit", low=1, high=MAX_PAGE, default=50) or 50
    offset = int_arg("offset", low=0, high=1_000_000, default=0) or 0
    filters = {name: request.args.get(name) for name in LIST_FILTERS}
    return json_response(200, holds.list(caller.scope, state=state, queue=queue, limit=limit, offset=offset,
                                            filters=filters, reader=principal_of(caller).actor))


_GOVERNED = ("GOVERNANCE_REQUEST_INVALID", "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED")


@routes.route(Endpoint(
    "get", "/api/holds/policy", "The scope's hold policy: queues (deadline, quorum, members, "
    "justification, escalation), routes by policy and rule, four eyes; its pending change requests and "
    "the governance chain's seq.", True,
    {200: "{ok, policy, pending, governance_seq}", 401: "missing or invalid key"}, errors=AUTH_ERRORS,
    tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def policy(caller: Caller, *, holds: HoldService) -> Response:
    return json_response(200, holds.policy_document(caller.scope))


@routes.route(Endpoint(
    "put", "/api/holds/policy", "State the whole hold policy (needs `admin`): a signed event of the scope's "
    "governance chain (`release_governance_event_v1`, setting `hold_policy`). While the scope requires "
    "approvals, a weakening (four eyes off, a smaller quorum, fewer members under `all`, a later deadline, "
    "justification off, an escalation removed or later, records routed to a looser queue) is a request "
    "(202) a second, distinct principal approves.", True,
    {200: "{ok, policy, pending, governance_seq, requested, event} (event null: nothing changed)",
     202: "{ok, policy, pending, governance_seq, requested, event}: the change waits for approval",
     400: "invalid policy", 401: "missing or invalid key", 403: "key lacks admin",
     409: "the governance chain does not extend its witnessed checkpoint",
     413: "body too large", 415: MEDIA, 503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + AUTH_ERRORS + ("HOLD_POLICY_INVALID", "HOLD_PERMISSION_DENIED", "CHAIN_INTEGRITY_FAILED") + _GOVERNED,
    request_body="HoldPolicy", tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(ACTION_WEIGHT)
def set_policy(caller: Caller, *, holds: HoldService, settings: Settings) -> Response:
    """The whole hold policy (admin): 200 in force, or 202 a request waiting for a second principal."""
    body = read_json(request, settings.max_body_bytes)
    answer = holds.set_policy(caller.scope, principal_of(caller), caller.permissions, body)
    return json_response(202 if answer["requested"] else 200, answer)


@routes.route(Endpoint(
    "post", "/api/holds/policy/approvals", "Approve another principal's pending hold-policy request "
    "`{request_seq, reason?}`: applies it as a signed governance event. Needs `approve`; never the "
    "requester.", True,
    {200: "{ok, policy, pending, governance_seq, requested, event}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or approves its own request",
     404: "no such pending hold-policy request", 409: "the hold policy changed since the request",
     413: "body too large", 415: MEDIA, 503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + AUTH_ERRORS + ("HOLD_PERMISSION_DENIED", "GOVERNANCE_REQUEST_NOT_FOUND",
                                        "GOVERNANCE_SELF_APPROVAL", "GOVERNANCE_SETTING_CHANGED") + _GOVERNED,
    request_body="SettingApproval", tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(ACTION_WEIGHT)
def approve_policy(caller: Caller, *, holds: HoldService, settings: Settings) -> Response:
    """A second principal (`approve`, never the requester) applies a pending hold-policy request."""
    request_seq, reason = approval_members(HOLD_POLICY, read_json(request, settings.max_body_bytes))
    answer = holds.approve_policy(caller.scope, principal_of(caller), caller.permissions, request_seq, reason)
    return json_response(200, answer)


@routes.route(Endpoint(
    "get", "/api/holds/history", "The scope's hold chain (`hold_history_v1`) with its signed head, for "
    "offline checks (`gate verify --hold-history`).", True,
    {200: "hold_history_v1", 401: "missing or invalid key",
     409: "the hold chain does not extend its witnessed checkpoint (no head is signed)",
     503: "signing is required and no key is configured"},
    errors=AUTH_ERRORS + ("RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED", "CHAIN_INTEGRITY_FAILED"), tags=("holds",),
    charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(Weight(base=10))
def history(caller: Caller, *, holds: HoldService) -> Response:
    """The scope's hold chain (`hold_history_v1`, its head signed as of now) that `gate verify
    --hold-history` checks offline."""
    return json_response(200, holds.history_document(caller.scope))


@routes.route(Endpoint(
    "get", _HOLD, "One hold with its facts and its signed events.", True,
    {200: "{ok, hold}", 401: "missing or invalid key", 404: "no such hold in this scope"},
    errors=_HOLD_ERRORS, tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def show(caller: Caller, decision_id: str, *, holds: HoldService) -> Response:
    return json_response(200, {"ok": True, "hold": holds.show(caller.scope, decision_id)})


def act(caller: Caller, decision_id: str, action: str, *, holds: HoldService, settings: Settings,
        wake_dispatcher: Callable[[], None]) -> Response:
    """One signed step: `resolve` `{decision, reason_code, note?}`, `claim`, `unclaim`,
    `reassign` `{queue, note?}`, `escalate`. 201 with the event and the hold after it."""
    principal = principal_of(caller)
    body: Any = read_json(request, settings.max_body_bytes) if action in ("resolve", "reassign") else None
    if action == "resolve":
        answer = holds.resolve(caller.scope, principal, caller.permissions, decision_id, body)
    elif action in ("claim", "unclaim"):
        answer = holds.claim(caller.scope, principal, caller.permissions, decision_id, action == "unclaim")
    elif action == "reassign":
        answer = holds.reassign(caller.scope, principal, caller.permissions, decision_id, body)
    else:
        answer = holds.escalate(caller.scope, principal, caller.permissions, decision_id)
    wake_dispatcher()
    return json_response(201, answer)


def _step_route(endpoint: Endpoint) -> None:
    """POST /api/holds/<decision_id>/<action>: one route per step, so each is declared as it is."""
    action = endpoint.path.rsplit("/", 1)[-1]

    def route(caller: Caller, decision_id: str, *, holds: HoldService, settings: Settings,
              wake_dispatcher: Callable[[], None]) -> Response:
        return act(caller, decision_id, action, holds=holds, settings=settings, wake_dispatcher=wake_dispatcher)
    route.__name__ = f"hold_{action}"
    routes.add(keyed("SVC_API_UNAUTHORIZED")(charged(ACTION_WEIGHT)(route)), endpoint)


for _step in (
    Endpoint("post", _HOLD + "/resolve", "A reviewer's vote `{decision: approve | deny, reason_code, note?}` (needs "
             "`resolve`); it closes the hold when it denies or completes the queue's quorum.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS, request_body="HoldResolution", tags=("holds",), charged=True),
    Endpoint("post", _HOLD + "/claim", "Claim the hold (others cannot claim or resolve it for 30 minutes).", True,
             _STEP_ANSWERS, errors=_HOLD_STEP_ERRORS, tags=("holds",), charged=True),
    Endpoint("post", _HOLD + "/unclaim", "Release one's own claim.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS, tags=("holds",), charged=True),
    Endpoint("post", _HOLD + "/reassign", "Move the hold to another queue `{queue, note?}` with the votes it has; "
             "a queue whose guard is looser, or whose channels tell a new recipient, is refused.", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS + ("HOLD_MOVE_LOOSENS",), request_body="HoldReassign", tags=("holds",),
             charged=True),
    Endpoint("post", _HOLD + "/escalate", "Move the hold to its queue's escalation queue now (never to a looser "
             "guard or a new recipient).", True, _STEP_ANSWERS,
             errors=_HOLD_STEP_ERRORS + ("HOLD_NOT_ESCALABLE", "HOLD_MOVE_LOOSENS"), tags=("holds",), charged=True),
):
    _step_route(_step)


@routes.route(Endpoint(
    "get", "/api/decision/{decision_id}/resolution", "The held decision's state and, once closed, its "
    "signed resolution; `wait` (0-30 s) long-polls for the close without holding a server thread. An "
    "open or expired hold never reads as approval.", True,
    {200: "{ok, decision_id, state, approved, resolution, hold}", 400: "bad wait",
     401: "missing or invalid key", 404: "no hold for this decision in this scope"},
    errors=_HOLD_ERRORS + ("REQUEST_INVALID",),
    query=(("wait", "integer", "seconds to wait for the close (0 to 30)",
            {"type": "integer", "minimum": 0, "maximum": 30}),), tags=("holds",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def resolution(caller: Caller, decision_id: str, *, holds: HoldService) -> Response:
    """The held decision's state and, once closed, its signed resolution. `wait` (0-30 s) waits
    for the close: served by `gate serve`, the request is parked in the worker's event loop and
    holds no thread; it is answered within a second of a close in any process, or at the end of
    the wait with the state still `open` (never approval)."""
    wait = int_arg("wait", low=0, high=MAX_WAIT_SECONDS, default=0) or 0
    answer = holds.resolution(caller.scope, decision_id)
    if answer["state"] == "open" and wait > 0 and request.environ.get(PARK, _IN_THREAD) is not None:
        # None: this is the parked request's resumed run, which answers the state as it is now.
        park = request.environ.get(PARK, _IN_THREAD)
        if park is not _IN_THREAD and park(decision_id, float(wait)):
            return json_response(202, {"ok": True, "parked": True})  # never sent: the worker answers later
        answer = holds.wait_closed(caller.scope, decision_id, float(wait))  # no parking here (or lot full)
    return json_response(200, answer)
