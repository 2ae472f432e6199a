"""Events out over HTTP (docs/events.md): the scope's webhook subscriptions, their deliveries and
replays, and the scope's outbox read in order. Every route is keyed, needs the `admin`
permission and is scoped: another scope's subscription is 404, exactly like one that does not
exist. A subscription's secret is answered once, when it is made or rotated."""

from __future__ import annotations

from flask import Blueprint, Response, request

from api.costs import Weight, charged
from api.errors import gate_error_body, json_response
from api.jsonio import read_json
from api.routes.releases import principal_of
from api.runtime import keyed, runtime
from gate.errors import GateError
from gate.services.decide import Caller
from gate.services.events import EventService, event_data
from gate.services.releases import require

bp = Blueprint("events", __name__)

WEIGHT = Weight(base=2)
MAX_EVENTS_PAGE = 500


def _refused(error: GateError) -> Response:
    status, body = gate_error_body(error)
    return json_response(status, body)


def _events() -> EventService:
    service: EventService = runtime().events
    return service


@bp.route("/api/events/subscriptions", methods=["GET", "POST"])
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def subscriptions(caller: Caller) -> Response:
    """GET: the scope's subscriptions (no secrets). POST `{url, event_types?, from?}`: a new one,
    201 with its secret (shown this once); 400 `EVENT_TARGET_REFUSED` for an address inside."""
    try:
        require(caller, "admin")
        if request.method == "GET":
            return json_response(200, {"ok": True, "subscriptions": _events().listed(caller.scope)})
        body = read_json(request, runtime().settings.max_body_bytes)
        view, secret = _events().subscribe(caller.scope, caller.key_id, body)
    except GateError as error:
        return _refused(error)
    runtime().wake_dispatcher()
    return json_response(201, {"ok": True, "subscription": view, "secret": secret})


@bp.route("/api/events/subscriptions/<subscription_id>", methods=["GET", "PATCH"])
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def subscription(caller: Caller, subscription_id: str) -> Response:
    """GET: one subscription. PATCH `{"status": "active" | "disabled"}`: enable or disable it."""
    try:
        require(caller, "admin")
        if request.method == "GET":
            return json_response(200, {"ok": True, "subscription": _events().show(caller.scope, subscription_id)})
        body = read_json(request, runtime().settings.max_body_bytes)
        if not isinstance(body, dict) or set(body) != {"status"}:
            raise GateError("EVENT_SUBSCRIPTION_INVALID", "the body is {\"status\": \"active\" | \"disabled\"}")
        view = _events().set_status(caller.scope, subscription_id, body["status"])
    except GateError as error:
        return _refused(error)
    runtime().wake_dispatcher()
    return json_response(200, {"ok": True, "subscription": view})


@bp.post("/api/events/subscriptions/<subscription_id>/rotate")
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def rotate(caller: Caller, subscription_id: str) -> Response:
    """A new secret (shown once); the old one keeps signing beside it for `overlap_seconds`."""
    try:
        require(caller, "admin")
        body = read_json(request, runtime().settings.max_body_bytes) if request.content_length else {}
        if not isinstance(body, dict) or set(body) - {"overlap_seconds"}:
            raise GateError("EVENT_SUBSCRIPTION_INVALID", "the body is {\"overlap_seconds\": n} or empty")
        view, secret = _events().rotate(caller.scope, subscription_id, body.get("overlap_seconds"))
    except GateError as error:
        return _refused(error)
    return json_response(200, {"ok": True, "subscription": view, "secret": secret})


@bp.post("/api/events/subscriptions/<subscription_id>/replay")
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def replay(caller: Caller, subscription_id: str) -> Response:
    """Send events again: `{"seq": n}` or `{"since": time, "until": time}`; 202 with the count queued."""
    try:
        require(caller, "admin")
        queued = _events().replay(caller.scope, subscription_id, read_json(request, runtime().settings.max_body_bytes))
    except GateError as error:
        return _refused(error)
    runtime().wake_dispatcher()
    return json_response(202, {"ok": True, "queued": queued})


@bp.get("/api/events/subscriptions/<subscription_id>/deliveries")
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def deliveries(caller: Caller, subscription_id: str) -> Response:
    """Success rate, latency, lag and the last failures (the receiver's status and answer, as text)."""
    try:
        require(caller, "admin")
        return json_response(200, {"ok": True, **_events().deliveries(caller.scope, subscription_id)})
    except GateError as error:
        return _refused(error)


@bp.route("/api/events/settings", methods=["GET", "PUT"])
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def settings(caller: Caller) -> Response:
    """GET: the scope's opt-in events. PUT `{decision_created, anomaly_every_seconds}` (admin)."""
    try:
        require(caller, "admin")
        service = runtime().scope_events
        if request.method == "GET":
            return json_response(200, {"ok": True, "settings": service.settings(caller.scope)})
        body = read_json(request, runtime().settings.max_body_bytes)
        view = service.put_settings(caller.scope, principal_of(caller), caller.permissions, body)
    except GateError as error:
        return _refused(error)
    runtime().wake_dispatcher()
    return json_response(200, {"ok": True, "settings": view})


@bp.get("/api/events")
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def events(caller: Caller) -> Response:
    """The scope's events after `after` (a seq, default 0), oldest first, at most `limit` (500)."""
    try:
        require(caller, "admin")
        after, limit = request.args.get("after", "0"), request.args.get("limit", "100")
        if not (after.isdigit() and limit.isdigit() and len(after) < 12 and 1 <= int(limit) <= MAX_EVENTS_PAGE):
            raise GateError("REQUEST_INVALID", f"after is a seq (a whole number) and limit 1 to {MAX_EVENTS_PAGE}")
        rows = _events().outbox.events_after(caller.scope, int(after), int(limit))
    except GateError as error:
        return _refused(error)
    return json_response(200, {"ok": True, "events": [event_data(r) for r in rows]})
