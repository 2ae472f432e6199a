"""Events out over HTTP (docs/events.md): the scope's webhook subscriptions, their deliveries and
replays, and the scope's outbox read in order. Every route is keyed, needs the `admin`
permission and is scoped: another scope's subscription is 404, exactly like one that does not
exist. A subscription's secret is answered once, when it is made or rotated."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routes.releases import principal_of
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed
from gate import bodies
from gate.errors import GateError
from gate.governance.table import DENIED, EVENT_SETTINGS, EVENT_SUBSCRIPTIONS
from gate.principals import require
from gate.services.decide import Caller
from gate.services.events import EventService, event_data
from gate.services.governance import approval_members
from gate.services.scope_events import ScopeEventService
from gate.settings import Settings

routes = Routes("events", __name__)
_ERRORS = AUTH_ERRORS + ("EVENTS_PERMISSION_DENIED", "LEDGER_UNAVAILABLE")
_SUB = "/api/events/subscriptions/{subscription_id}"
_NOT_FOUND = "no such subscription in this scope"
_KEYED = {401: "missing or invalid key", 403: "key lacks admin"}

WEIGHT = Weight(base=2)
MAX_EVENTS_PAGE = 500


def _require_admin(caller: Caller) -> None:
    """Every events route needs `admin` (gate.principals.require), refused with EVENTS_PERMISSION_DENIED."""
    require(caller.permissions, "admin", DENIED[EVENT_SETTINGS])


@routes.route(
    Endpoint("get", "/api/events/subscriptions", "The scope's webhook subscriptions (never their secrets); needs "
             "`admin`.", True, {200: "{ok, subscriptions}", **_KEYED}, errors=_ERRORS, tags=("events",),
             charged=True),
    Endpoint("post", "/api/events/subscriptions", "Subscribe a webhook `{url, event_types?: [type | \"*\"], "
             "from?: \"now\" | \"beginning\"}`: deliveries are CloudEvents 1.0 signed per Standard Webhooks; the "
             "secret is answered once. An address inside (private, loopback, link-local) is refused unless the "
             "operator allows its host by name (GATE_WEBHOOK_ALLOW_HOSTS). Needs `admin`. While the scope requires "
             "approvals, a URL that would receive event types it does not yet receive is a request (202, the "
             "subscription `pending`, delivering nothing) a second, distinct holder approves (setting "
             "`event_subscriptions`).", True,
             {201: "{ok, subscription, secret, requested: false, event}",
              202: "{ok, subscription, secret, requested: true, event}: the subscription waits for approval",
              400: "malformed subscription or refused target", **_KEYED,
              409: "the scope has 20 subscriptions", 413: "body too large", 415: MEDIA,
              503: "signing is required and no key is configured"},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_TARGET_REFUSED",
                                             "EVENT_SUBSCRIPTION_LIMIT", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="EventSubscription", tags=("events",), charged=True),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def subscriptions(caller: Caller, *, events: EventService, settings: Settings, wake_dispatcher: Callable[[], None]) -> Response:
    """GET: the scope's subscriptions (no secrets). POST `{url, event_types?, from?}`: a new one,
    201 with its secret (shown this once); 400 `EVENT_TARGET_REFUSED` for an address inside."""
    _require_admin(caller)
    if request.method == "GET":
        return json_response(200, {"ok": True, "subscriptions": events.listed(caller.scope)})
    body = read_json(request, settings.max_body_bytes)
    view, secret, event = events.subscribe_governed(caller.scope, principal_of(caller), caller.permissions, body)
    wake_dispatcher()
    requested = event is not None and event["action"] == "policy_request"
    return json_response(202 if requested else 201, {"ok": True, "subscription": view, "secret": secret,
                                                     "requested": requested, "event": event})


@routes.route(
    Endpoint("get", "/api/events/subscriptions/approvals", "The scope's live subscription requests (setting "
             "`event_subscriptions`) and the governance chain's seq; needs `admin`.", True,
             {200: "{ok, pending, governance_seq}", **_KEYED, 503: "signing is required and no key is configured"},
             errors=_ERRORS + ("RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED",), tags=("events",), charged=True),
    Endpoint("post", "/api/events/subscriptions/approvals", "Approve another holder's pending subscription "
             "request `{request_seq, reason?}`: a signed governance event; its subscriptions then deliver. Needs "
             "`approve`; never the requester (nor another key of its holder).", True,
             {200: "{ok, subscriptions, event}", 400: "malformed body", 401: "missing or invalid key",
              403: "key lacks approve, or approves its own request", 404: "no such pending subscription request",
              409: "the scope's subscriptions changed since the request", 413: "body too large", 415: MEDIA,
              503: "signing is required and no key is configured"},
             errors=BODY_ERRORS + _ERRORS + ("GOVERNANCE_REQUEST_INVALID", "GOVERNANCE_REQUEST_NOT_FOUND",
                                             "GOVERNANCE_SELF_APPROVAL", "GOVERNANCE_SETTING_CHANGED",
                                             "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="SettingApproval", tags=("events",), charged=True),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def approve_subscriptions(caller: Caller, *, events: EventService, settings: Settings,
                          wake_dispatcher: Callable[[], None]) -> Response:
    """GET (admin): the live subscription requests. POST (`approve`, never the requester): apply one."""
    if request.method == "GET":
        _require_admin(caller)
        return json_response(200, {"ok": True, **events.pending_subscriptions(caller.scope)})
    request_seq, reason = approval_members(EVENT_SUBSCRIPTIONS, read_json(request, settings.max_body_bytes))
    started, event = events.approve_subscriptions(caller.scope, principal_of(caller), caller.permissions,
                                                     request_seq, reason)
    wake_dispatcher()
    return json_response(200, {"ok": True, "subscriptions": started, "event": event})


@routes.route(
    Endpoint("get", _SUB, "One subscription (no secret).", True,
             {200: "{ok, subscription}", **_KEYED, 404: _NOT_FOUND},
             errors=_ERRORS + ("EVENT_SUBSCRIPTION_NOT_FOUND",), tags=("events",), charged=True),
    Endpoint("patch", _SUB, "Enable or disable `{status: active | disabled, skip_pruned?: bool}`; enabling forgets "
             "the failures and carries on from the cursor, refused with 410 EVENTS_PRUNED when events after it "
             "were pruned meanwhile (unless `skip_pruned`: it then resumes from the oldest kept event).", True,
             {200: "{ok, subscription}", 400: "malformed body", **_KEYED, 404: _NOT_FOUND,
              409: "the subscription waits for approval", 410: "events after its cursor were pruned",
              413: "body too large", 415: MEDIA},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND",
                                             "EVENTS_PRUNED", "EVENT_SUBSCRIPTION_PENDING"),
             request_body="EventSubscriptionStatus", tags=("events",), charged=True),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def subscription(caller: Caller, subscription_id: str, *, events: EventService, settings: Settings,
                 wake_dispatcher: Callable[[], None]) -> Response:
    """GET: one subscription. PATCH `{"status": "active" | "disabled", "skip_pruned"?: bool}`: enable or
    disable it."""
    _require_admin(caller)
    if request.method == "GET":
        return json_response(200, {"ok": True, "subscription": events.show(caller.scope, subscription_id)})
    body = bodies.checked("event-subscription-status", read_json(request, settings.max_body_bytes),
                          "EVENT_SUBSCRIPTION_INVALID")
    view = events.set_status(caller.scope, subscription_id, body["status"], body.get("skip_pruned", False))
    wake_dispatcher()
    return json_response(200, {"ok": True, "subscription": view})


@routes.route(Endpoint(
    "post", _SUB + "/rotate", "A new secret `{overlap_seconds?}` (default 86,400, at most 604,800): the "
    "old one signs beside it until then.", True,
    {200: "{ok, subscription, secret}", 400: "malformed body", **_KEYED, 404: _NOT_FOUND,
     413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND"),
    request_body="EventSecretRotation", tags=("events",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def rotate(caller: Caller, subscription_id: str, *, events: EventService, settings: Settings) -> Response:
    """A new secret (shown once); the old one keeps signing beside it for `overlap_seconds`."""
    _require_admin(caller)
    body = bodies.checked("event-rotation", read_json(request, settings.max_body_bytes)
                          if request.content_length else {}, "EVENT_SUBSCRIPTION_INVALID")
    view, secret = events.rotate(caller.scope, subscription_id, body.get("overlap_seconds"))
    return json_response(200, {"ok": True, "subscription": view, "secret": secret})


@routes.route(Endpoint(
    "post", _SUB + "/replay", "Send events again `{seq}` or `{since, until}` (at most 10,000), with "
    "their original ids; 410 EVENTS_PRUNED when the seq or range reaches pruned events.", True,
    {202: "{ok, queued}", 400: "malformed body", **_KEYED, 404: "no such subscription or event",
     409: "the subscription waits for approval", 410: "the seq or range reaches pruned events",
     413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS + _ERRORS + ("EVENT_SUBSCRIPTION_INVALID", "EVENT_SUBSCRIPTION_NOT_FOUND",
                                    "EVENT_NOT_FOUND", "EVENTS_PRUNED", "EVENT_SUBSCRIPTION_PENDING"),
    tags=("events",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def replay(caller: Caller, subscription_id: str, *, events: EventService, settings: Settings,
           wake_dispatcher: Callable[[], None]) -> Response:
    """Send events again: `{"seq": n}` or `{"since": time, "until": time}`; 202 with the count queued."""
    _require_admin(caller)
    queued = events.replay(caller.scope, subscription_id, read_json(request, settings.max_body_bytes))
    wake_dispatcher()
    return json_response(202, {"ok": True, "queued": queued})


@routes.route(Endpoint(
    "get", _SUB + "/deliveries", "Deliveries: attempts, success rate, latency, lag, pending replays and "
    "the last failures with the receiver's status and the first 300 characters of its answer (text).",
    True, {200: "{ok, subscription, attempts, succeeded, success_rate, latency_ms_p50, lag, last_failures}",
           **_KEYED, 404: _NOT_FOUND},
    errors=_ERRORS + ("EVENT_SUBSCRIPTION_NOT_FOUND",), tags=("events",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def deliveries(caller: Caller, subscription_id: str, *, events: EventService) -> Response:
    """Success rate, latency, lag and the last failures (the receiver's status and answer, as text)."""
    _require_admin(caller)
    return json_response(200, {"ok": True, **events.deliveries(caller.scope, subscription_id)})


@routes.route(
    Endpoint("get", "/api/events/settings", "The scope's opt-in events: `decision_created` and the anomaly "
             "report's schedule; needs `admin`.", True, {200: "{ok, settings}", **_KEYED}, errors=_ERRORS,
             tags=("events",), charged=True),
    Endpoint("put", "/api/events/settings", "State `{decision_created: bool, anomaly_every_seconds: null | "
             "300-604800}`: every decision announced with its record, and the anomaly report run on a schedule "
             "(each anomaly announced once until it clears). Needs `admin`. A signed event of the scope's "
             "governance chain (setting `event_settings`); while the scope requires approvals, turning "
             "`decision_created` on is a request (202) a second, distinct principal approves.", True,
             {200: "{ok, settings, pending, governance_seq, requested, event} (event null: nothing changed)",
              202: "{ok, settings, pending, governance_seq, requested, event}: the change waits for approval",
              400: "malformed settings", **_KEYED, 413: "body too large", 415: MEDIA,
              503: "signing is required and no key is configured"},
             errors=BODY_ERRORS + _ERRORS + ("EVENT_SETTINGS_INVALID", "GOVERNANCE_REQUEST_INVALID",
                                             "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="EventSettings", tags=("events",), charged=True),
    name="settings",  # the endpoint's name since it was made; the view's own name is the setting's
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def event_settings(caller: Caller, *, scope_events: ScopeEventService, settings: Settings,
                   wake_dispatcher: Callable[[], None]) -> Response:
    """GET: the scope's opt-in events. PUT `{decision_created, anomaly_every_seconds}` (admin): 200
    in force, or 202 a request waiting for a second principal."""
    _require_admin(caller)
    if request.method == "GET":
        return json_response(200, {"ok": True, "settings": scope_events.settings(caller.scope)})
    body = read_json(request, settings.max_body_bytes)
    answer = scope_events.put_settings(caller.scope, principal_of(caller), caller.permissions, body)
    wake_dispatcher()
    return json_response(202 if answer["requested"] else 200, {"ok": True, **answer})


@routes.route(Endpoint(
    "post", "/api/events/settings/approvals", "Approve another principal's pending event-settings request "
    "`{request_seq, reason?}`: applies it as a signed governance event. Needs `approve`; never the "
    "requester.", True,
    {200: "{ok, settings, pending, governance_seq, requested, event}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or approves its own request",
     404: "no such pending event-settings request", 409: "the event settings changed since the request",
     413: "body too large", 415: MEDIA, 503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + _ERRORS + ("GOVERNANCE_REQUEST_INVALID", "GOVERNANCE_REQUEST_NOT_FOUND",
                                    "GOVERNANCE_SELF_APPROVAL", "GOVERNANCE_SETTING_CHANGED",
                                    "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
    request_body="SettingApproval", tags=("events",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def approve_settings(caller: Caller, *, scope_events: ScopeEventService, settings: Settings,
                     wake_dispatcher: Callable[[], None]) -> Response:
    """A second principal (`approve`, never the requester) applies a pending event-settings request."""
    request_seq, reason = approval_members(EVENT_SETTINGS, read_json(request, settings.max_body_bytes))
    answer = scope_events.approve_settings(caller.scope, principal_of(caller), caller.permissions,
                                                     request_seq, reason)
    wake_dispatcher()
    return json_response(200, {"ok": True, **answer})


@routes.route(Endpoint(
    "get", "/api/events", "The scope's outbox in order: CloudEvents after `after` (a seq), at most "
    "`limit` (1 to 500); 410 EVENTS_PRUNED when events after `after` were pruned (read from `pruned_through`).",
    True, {200: "{ok, events}", 400: "bad after or limit", **_KEYED, 410: "events after `after` were pruned"},
    errors=_ERRORS + ("REQUEST_INVALID", "EVENTS_PRUNED"),
    query=(("after", "integer", "the last seq already read (default 0)"),
           ("limit", "integer", "how many events at most (default 100, at most 500)")),
    tags=("events",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def events(caller: Caller, *, events: EventService) -> Response:
    """The scope's events after `after` (a seq, default 0), oldest first, at most `limit` (500)."""
    _require_admin(caller)
    after, limit = request.args.get("after", "0"), request.args.get("limit", "100")
    if not (after.isdigit() and limit.isdigit() and len(after) < 12 and 1 <= int(limit) <= MAX_EVENTS_PAGE):
        raise GateError("REQUEST_INVALID", f"after is a seq (a whole number) and limit 1 to {MAX_EVENTS_PAGE}")
    rows = events.read(caller.scope, int(after), int(limit))
    return json_response(200, {"ok": True, "events": [event_data(r) for r in rows]})
