"""Policy releases over HTTP (docs/releases.md): publish immutable rulebook versions, read and move
a rulebook's release, and the scope's release policy. Every route is keyed and scoped: another
scope's rulebook is 404, exactly like one that does not exist."""

from __future__ import annotations

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import idempotency_key_header, keyed
from gate.errors import GateError
from gate.principals import Principal
from gate.releases.governance import RELEASE_POLICY, GovernanceEvent
from gate.services.decide import Caller
from gate.services.governance import GovernanceDocument, approval_members
from gate.services.releases import ReleaseService
from gate.settings import Settings

routes = Routes("releases", __name__)
_RELEASE_ERRORS = BODY_ERRORS + AUTH_ERRORS + ("RULEBOOK_NOT_FOUND", "RELEASE_PERMISSION_DENIED",
                                               "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED",
                                               "CHAIN_INTEGRITY_FAILED")

PUBLISH_WEIGHT = Weight(body=True)
STATUS_WEIGHT = Weight(base=10)  # the shadow and canary figures read up to 50,000 release rows
ACTION_WEIGHT = Weight(base=2)


@routes.route(Endpoint(
    "post", "/api/decision/rulebooks", "Publish a Rulebook v1 (body) as an immutable version of the "
    "caller's scope; needs the `publish` permission.", True,
    {200: "{ok, created: false, rulebook} the same content again", 201: "{ok, created: true, rulebook}",
     400: "malformed JSON body", 401: "missing or invalid key", 403: "key lacks publish",
     409: "other content under a published version", 413: "body too large", 415: MEDIA,
     422: "invalid rulebook"},
    errors=_RELEASE_ERRORS + ("RULEBOOK_VERSION_CONFLICT", "RULEBOOK_INVALID"),
    request_body="RulebookPublishRequest", request_headers=("x-gate-scope",), tags=("releases",), charged=True))
@keyed("SVC_API_UNAUTHORIZED", ci=True)
@charged(PUBLISH_WEIGHT)
def publish(caller: Caller, *, releases: ReleaseService, settings: Settings) -> Response:
    """Publish a Rulebook v1 in the caller's scope: 201 new, 200 the same content again, 409
    `RULEBOOK_VERSION_CONFLICT` for other content under a published version, 422 invalid."""
    body = read_json(request, settings.max_body_bytes)
    metadata, created = releases.publish(caller, body)
    return json_response(201 if created else 200, {"ok": True, "created": created, "rulebook": metadata})


@routes.route(Endpoint(
    "get", "/api/decision/rulebooks/{rulebook_id}/release", "A rulebook's release: state (active, "
    "previous, shadow, canary, pending approvals), the scope's release policy, the live shadow and canary "
    "comparison with intervals and guardrails, and the signed event history.", True,
    {200: "{ok, rulebook_id, state, policy, comparison, history}", 401: "missing or invalid key",
     404: "not published in this scope"},
    errors=AUTH_ERRORS + ("RULEBOOK_NOT_FOUND",), request_headers=("x-gate-scope",), tags=("releases",),
    charged=True))
@keyed("SVC_API_UNAUTHORIZED", ci=True)
@charged(STATUS_WEIGHT)
def release_status(caller: Caller, rulebook_id: str, *, releases: ReleaseService) -> Response:
    """State (active, shadow, canary, pending approvals), policy, history and the live comparison."""
    status = releases.status(caller.scope, rulebook_id)
    return json_response(200, {"ok": True, **status})


@routes.route(Endpoint(
    "get", "/api/decision/rulebooks/{rulebook_id}/release/history", "The portable release history "
    "(`release_history_v1`) that `gate verify` checks offline, with the scope's signed policy changes "
    "(`governance`).", True,
    {200: "{release_history_version, scope_hash, rulebook_id, events, governance}", 401: "missing or invalid key",
     404: "not published in this scope", 409: "a chain does not extend its witnessed checkpoint"},
    errors=AUTH_ERRORS + ("RULEBOOK_NOT_FOUND", "CHAIN_INTEGRITY_FAILED"), request_headers=("x-gate-scope",),
    tags=("releases",), charged=True))
@keyed("SVC_API_UNAUTHORIZED", ci=True)
@charged(STATUS_WEIGHT)
def release_history(caller: Caller, rulebook_id: str, *, releases: ReleaseService) -> Response:
    """The portable release history that `gate verify --release-history` checks offline."""
    document = releases.history_document(caller.scope, rulebook_id)
    return json_response(200, document)


@routes.route(Endpoint(
    "post", "/api/decision/rulebooks/{rulebook_id}/release", "One transition `{action: shadow | canary | "
    "activate | halt | rollback | approve, version?, percent?, subject?, reason?, migration_manifest?, "
    "migration_manifest_hash?, override?, request_seq?, rulebook_hash?}`: a signed, chained release event "
    "naming its principal (the key). Needs `release` (`approve` for approve; `admin` for override). Where "
    "the policy sets require_dry_run, activate (and a canary above dry_run_canary_percent) passes the "
    "version's signed dry-run manifest; a move that makes a version its guardrail halted serve (activate, "
    "canary, rollback, approve) needs override `guardrail_halt` and a reason. Idempotent under "
    "x-idempotency-key.", True,
    {200: "{ok, created: false, event, state} replayed", 201: "{ok, created: true, event, state}",
     400: "malformed action", 401: "missing or invalid key",
     403: "permission, or a holder approving its own request (with any of its keys)",
     404: "rulebook, version or pending request not found",
     409: "the release state or policy refuses the action (a halted version, a missing dry-run), or "
          "another body under the key",
     413: "body too large", 415: MEDIA, 422: "the dry-run manifest does not allow this move"},
    errors=_RELEASE_ERRORS + ("RELEASE_ACTION_INVALID", "RELEASE_TRANSITION_REFUSED",
                              "RELEASE_NOTHING_TO_HALT", "RELEASE_NOTHING_TO_ROLL_BACK",
                              "RELEASE_APPROVAL_NOT_FOUND", "RELEASE_APPROVAL_MISMATCH",
                              "RELEASE_SELF_APPROVAL", "RELEASE_IDEMPOTENCY_CONFLICT", "RULEBOOK_NOT_ACTIVE",
                              "RELEASE_VERSION_HALTED", "RELEASE_DRY_RUN_REQUIRED",
                              "RELEASE_DRY_RUN_REJECTED"),
    request_body="ReleaseActionRequest", request_headers=("x-idempotency-key", "x-gate-scope"),
    response_headers=("x-idempotency-status",), tags=("releases",), charged=True))
@keyed("SVC_API_UNAUTHORIZED", ci=True)
@charged(ACTION_WEIGHT)
def release_action(caller: Caller, rulebook_id: str, *, releases: ReleaseService, settings: Settings) -> Response:
    """One transition: 201 with the signed event, 200 when the idempotency key replays it."""
    key = idempotency_key_header()
    body = read_json(request, settings.max_body_bytes)
    if isinstance(body, dict) and "evidence" in body:
        raise GateError("RELEASE_ACTION_INVALID", "evidence is recorded by the guardrails only")
    event, created = releases.act(caller.scope, principal_of(caller), caller.permissions, rulebook_id, body, key)
    state = releases.state(caller.scope, rulebook_id)
    return json_response(201 if created else 200, {"ok": True, "created": created, "event": event,
                                                   "state": state.to_json()},
                         {"x-idempotency-status": "created" if created else "replayed"})


def principal_of(caller: Caller) -> Principal:
    """The principal an API key acts as: its key id and the holder stored with the key (never a
    name the request carries); a CI run's, from its verified token (api.ci)."""
    if caller.principal is not None:
        return caller.principal
    try:
        return Principal.api_key(caller.key_id, caller.holder)
    except ValueError:  # fail closed: a stored id or holder this build cannot read acts on nothing
        raise GateError("RELEASE_PERMISSION_DENIED", "this API key's id or holder cannot act on releases",
                        permission="release") from None


@routes.route(
    Endpoint(
        "get", "/api/decision/release-policy", "The scope's release policy in force, its pending requests "
        "and every change (the signed `release_governance_event_v1` chain).", True,
        {200: "{ok, policy, pending, governance_seq, history}", 401: "missing or invalid key"},
        errors=AUTH_ERRORS, tags=("releases",)),
    Endpoint(
        "put", "/api/decision/release-policy", "State the scope's whole release policy (every member of "
        "ReleasePolicy; a missing one is a 400 naming it). Needs `admin`. A signed policy event; while "
        "approvals are required a weakening change is a request (202) a second holder approves.", True,
        {200: "{ok, policy, pending, governance_seq, event} (event null: nothing changed)",
         202: "{ok, policy, pending, governance_seq, event}: the change waits for approval",
         400: "malformed or incomplete policy", 401: "missing or invalid key", 403: "key lacks admin",
         413: "body too large", 415: MEDIA},
        errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                            "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED",
                                            "CHAIN_INTEGRITY_FAILED"),
        request_body="ReleasePolicy", tags=("releases",)),
    Endpoint(
        "patch", "/api/decision/release-policy", "Change the named members of the scope's release policy; "
        "every other member keeps its value. Needs `admin`; otherwise as PUT.", True,
        {200: "{ok, policy, pending, governance_seq, event} (event null: nothing changed)",
         202: "{ok, policy, pending, governance_seq, event}: the change waits for approval",
         400: "malformed policy member", 401: "missing or invalid key", 403: "key lacks admin",
         413: "body too large", 415: MEDIA},
        errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                            "LEDGER_UNAVAILABLE", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED",
                                            "CHAIN_INTEGRITY_FAILED"),
        request_body="ReleasePolicyPatch", tags=("releases",)),
)
@keyed("SVC_API_UNAUTHORIZED", ci=True)
def release_policy(caller: Caller, *, releases: ReleaseService, settings: Settings) -> Response:
    """The scope's release policy, its pending requests and its signed changes. PUT states the
    whole policy, PATCH the members it changes; both need the `admin` permission. While approvals
    are required a weakening change answers 202 with a request a second principal approves."""
    if request.method == "GET":
        return json_response(200, {"ok": True, **releases.policy_document(caller.scope)})
    body = read_json(request, settings.max_body_bytes)
    event, _state = releases.set_policy(caller.scope, principal_of(caller), caller.permissions, body,
                                               partial=request.method == "PATCH")
    requested = event is not None and event["action"] == "policy_request"
    return json_response(202 if requested else 200, _policy_answer(releases, caller.scope, event))


@routes.route(Endpoint(
    "post", "/api/decision/release-policy/approvals", "Approve another principal's pending policy "
    "request `{request_seq, reason?}`: applies it as a signed policy event. Needs `approve`; never the "
    "requester.", True,
    {200: "{ok, policy, pending, governance_seq, event}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or its holder approves its own request",
     404: "no such pending request", 409: "the policy changed since the request",
     413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS + AUTH_ERRORS + ("RELEASE_POLICY_INVALID", "RELEASE_PERMISSION_DENIED",
                                        "RELEASE_APPROVAL_NOT_FOUND", "RELEASE_SELF_APPROVAL",
                                        "RELEASE_POLICY_CHANGED", "LEDGER_UNAVAILABLE",
                                        "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED", "CHAIN_INTEGRITY_FAILED"),
    request_body="ReleasePolicyApproval", tags=("releases",)))
@keyed("SVC_API_UNAUTHORIZED")
def approve_release_policy(caller: Caller, *, releases: ReleaseService, settings: Settings) -> Response:
    """A second principal (the `approve` permission, never the requester) applies a pending
    policy request: `{"request_seq": N}`."""
    request_seq, reason = approval_members(RELEASE_POLICY, read_json(request, settings.max_body_bytes))
    event, _state = releases.approve_policy(caller.scope, principal_of(caller), caller.permissions,
                                                   request_seq, reason)
    return json_response(200, _policy_answer(releases, caller.scope, event))


class PolicyChangeAnswer(GovernanceDocument):
    """A release-policy change's answer: the policy in force after it, the pending requests, the
    governance chain's seq and the change's signed event (None: nothing changed)."""

    ok: bool
    event: GovernanceEvent | None


def _policy_answer(releases: ReleaseService, scope: str, event: GovernanceEvent | None) -> PolicyChangeAnswer:
    """The policy in force after the change, the pending requests and the change's signed event."""
    document = releases.policy_document(scope)
    return {"ok": True, "policy": document["policy"], "pending": document["pending"],
            "governance_seq": document["governance_seq"], "event": event}
