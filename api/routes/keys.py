"""The scope's keys that act on production over HTTP (issue 52; docs/releases.md, "Keys"): the
grants in force and the grant requests waiting for a second holder, and that holder's approval.
Keys are created, enabled, widened and disabled by the operator (`gate keys`), never over HTTP;
while the scope requires approvals a grant of `release`, `approve`, `resolve` or `admin` is a
request of the one governed-change service, approved here (needs `approve`; never by the
requester's holder, with any of its keys)."""

from __future__ import annotations

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routes.releases import principal_of
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed
from gate.governance.table import API_KEYS
from gate.services.decide import Caller
from gate.services.governance import approval_members
from gate.services.keys import KeyService
from gate.settings import Settings

routes = Routes("keys", __name__)

READ_WEIGHT = Weight(base=2)
ACTION_WEIGHT = Weight(base=2)


@routes.route(Endpoint(
    "get", "/api/keys/grants", "The scope's keys that act on production (`policy.keys`: key id -> holder, "
    "permissions; never a key), the grant requests waiting for a second holder and the governance chain's seq.",
    True, {200: "{ok, policy, pending, governance_seq}", 401: "missing or invalid key"}, errors=AUTH_ERRORS,
    tags=("keys",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(READ_WEIGHT)
def grants(caller: Caller, *, keys: KeyService) -> Response:
    return json_response(200, keys.document(caller.scope))


@routes.route(Endpoint(
    "post", "/api/keys/grants/approvals", "Approve another holder's pending key grant request "
    "`{request_seq, reason?}`: a signed governance event (setting `api_keys`), after which the key acts "
    "with the rights granted (its signed grant event). Needs `approve`; never the requester's holder.", True,
    {200: "{ok, policy, pending, governance_seq, event, grants}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or its holder asked for the grant",
     404: "no such pending grant request", 409: "the scope's keys changed since the request",
     413: "body too large", 415: MEDIA, 503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + AUTH_ERRORS + ("KEYS_PERMISSION_DENIED", "GOVERNANCE_REQUEST_INVALID",
                                        "GOVERNANCE_REQUEST_NOT_FOUND", "GOVERNANCE_SELF_APPROVAL",
                                        "GOVERNANCE_SETTING_CHANGED", "LEDGER_UNAVAILABLE",
                                        "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED", "CHAIN_INTEGRITY_FAILED"),
    request_body="SettingApproval", tags=("keys",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(ACTION_WEIGHT)
def approve_grant(caller: Caller, *, keys: KeyService, settings: Settings) -> Response:
    """A second holder (`approve`, never the requester's) applies a pending key grant request."""
    request_seq, reason = approval_members(API_KEYS, read_json(request, settings.max_body_bytes))
    change = keys.approve(caller.scope, principal_of(caller), caller.permissions, request_seq, reason)
    return json_response(200, {**keys.document(caller.scope), "event": change.governance,
                               "grants": list(change.grants)})
