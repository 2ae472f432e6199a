"""Policy releases over HTTP (docs/releases.md): publish immutable rulebook versions, read and move
a rulebook's release, and the scope's release policy. Every route is keyed and scoped: another
scope's rulebook is 404, exactly like one that does not exist."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, request

from api.costs import Weight, charged
from api.errors import error_response, gate_error_body, json_response
from api.jsonio import read_json
from api.runtime import GateRuntime, idempotency_key_header, keyed, runtime
from gate.errors import GateError
from gate.principals import Principal
from gate.services.decide import Caller

bp = Blueprint("releases", __name__)

PUBLISH_WEIGHT = Weight(body=True)
STATUS_WEIGHT = Weight(base=10)  # the shadow and canary figures read up to 50,000 release rows
ACTION_WEIGHT = Weight(base=2)


def _refused(error: GateError) -> Response:
    status, body = gate_error_body(error)
    return json_response(status, body)


@bp.post("/api/decision/rulebooks")
@keyed("SVC_API_UNAUTHORIZED")
@charged(PUBLISH_WEIGHT)
def publish(caller: Caller) -> Response:
    """Publish a Rulebook v1 in the caller's scope: 201 new, 200 the same content again, 409
    `RULEBOOK_VERSION_CONFLICT` for other content under a published version, 422 invalid."""
    rt = runtime()
    try:
        body = read_json(request, rt.settings.max_body_bytes)
        metadata, created = rt.releases.publish(caller, body)
    except GateError as error:
        return _refused(error)
    return json_response(201 if created else 200, {"ok": True, "created": created, "rulebook": metadata})


@bp.get("/api/decision/rulebooks/<rulebook_id>/release")
@keyed("SVC_API_UNAUTHORIZED")
@charged(STATUS_WEIGHT)
def release_status(caller: Caller, rulebook_id: str) -> Response:
    """State (active, shadow, canary, pending approvals), policy, history and the live comparison."""
    try:
        status = runtime().releases.status(caller.scope, rulebook_id)
    except GateError as error:
        return _refused(error)
    return json_response(200, {"ok": True, **status})


@bp.get("/api/decision/rulebooks/<rulebook_id>/release/history")
@keyed("SVC_API_UNAUTHORIZED")
@charged(STATUS_WEIGHT)
def release_history(caller: Caller, rulebook_id: str) -> Response:
    """The portable release history that `gate verify --release-history` checks offline."""
    try:
        document = runtime().releases.history_document(caller.scope, rulebook_id)
    except GateError as error:
        return _refused(error)
    return json_response(200, document)


@bp.post("/api/decision/rulebooks/<rulebook_id>/release")
@keyed("SVC_API_UNAUTHORIZED")
@charged(ACTION_WEIGHT)
def release_action(caller: Caller, rulebook_id: str) -> Response:
    """One transition: 201 with the signed event, 200 when the idempotency key replays it."""
    rt = runtime()
    try:
        key = idempotency_key_header()
        body = read_json(request, rt.settings.max_body_bytes)
        if isinstance(body, dict) and "evidence" in body:
            return error_response("RELEASE_ACTION_INVALID", "evidence is recorded by the guardrails only")
        event, created = rt.releases.act(caller.scope, principal_of(caller), caller.permissions, rulebook_id, body, key)
    except GateError as error:
        return _refused(error)
    state = rt.releases.state(caller.scope, rulebook_id)
    return json_response(201 if created else 200, {"ok": True, "created": created, "event": event,
                                                   "state": state.to_json()},
                         {"x-idempotency-status": "created" if created else "replayed"})


def principal_of(caller: Caller) -> Principal:
    """The principal an API key acts as: its key id (never a name the request carries)."""
    try:
        return Principal.api_key(caller.key_id)
    except ValueError:
        raise GateError("RELEASE_PERMISSION_DENIED", "this API key's id cannot act on releases",
                        permission="release") from None


@bp.route("/api/decision/release-policy", methods=["GET", "PUT", "PATCH"])
@keyed("SVC_API_UNAUTHORIZED")
def release_policy(caller: Caller) -> Response:
    """The scope's release policy, its pending requests and its signed changes. PUT states the
    whole policy, PATCH the members it changes; both need the `admin` permission. While approvals
    are required a weakening change answers 202 with a request a second principal approves."""
    rt = runtime()
    try:
        if request.method == "GET":
            return json_response(200, {"ok": True, **rt.releases.policy_document(caller.scope)})
        body = read_json(request, rt.settings.max_body_bytes)
        event, _state = rt.releases.set_policy(caller.scope, principal_of(caller), caller.permissions, body,
                                                   partial=request.method == "PATCH")
    except GateError as error:
        return _refused(error)
    requested = event is not None and event["action"] == "policy_request"
    return json_response(202 if requested else 200, _policy_answer(rt, caller.scope, event))


@bp.post("/api/decision/release-policy/approvals")
@keyed("SVC_API_UNAUTHORIZED")
def approve_release_policy(caller: Caller) -> Response:
    """A second principal (the `approve` permission, never the requester) applies a pending
    policy request: `{"request_seq": N}`."""
    rt = runtime()
    try:
        body = read_json(request, rt.settings.max_body_bytes)
        if not isinstance(body, dict) or set(body) - {"request_seq", "reason"}:
            raise GateError("RELEASE_POLICY_INVALID", "the body is {request_seq, reason?}")
        event, _state = rt.releases.approve_policy(caller.scope, principal_of(caller), caller.permissions,
                                                       body.get("request_seq"), body.get("reason"))
    except GateError as error:
        return _refused(error)
    return json_response(200, _policy_answer(rt, caller.scope, event))


def _policy_answer(rt: GateRuntime, scope: str, event: dict[str, Any] | None) -> dict[str, Any]:
    """The policy in force after the change, the pending requests and the change's signed event."""
    document = rt.releases.policy_document(scope)
    return {"ok": True, "policy": document["policy"], "pending": document["pending"],
            "governance_seq": document["governance_seq"], "event": event}
