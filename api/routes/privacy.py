"""A scope's data map and masking rules over HTTP (issue 67; docs/privacy.md): read them, state
them (a signed governance event, setting `privacy`; a loosening while the scope requires
approvals is a request), approve another holder's request; and a data subject's export (Art. 15),
the subject's key in a body so it never lands in a URL or a log."""

from __future__ import annotations

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routes.releases import principal_of
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed, runtime
from gate.governance.table import DENIED, PRIVACY
from gate.principals import require
from gate.services.decide import Caller
from gate.services.governance import approval_members
from gate.services.subjects import INVALID as SUBJECT_INVALID
from gate.services.subjects import UNDECLARED

routes = Routes("privacy", __name__)
_ERRORS = AUTH_ERRORS + ("PRIVACY_PERMISSION_DENIED", "LEDGER_UNAVAILABLE")
_KEYED = {401: "missing or invalid key", 403: "key lacks admin"}
WEIGHT = Weight(base=2)
EXPORT_WEIGHT = Weight(base=20)  # a subject export reads up to 20,000 rows (gate.services.subjects.PAGE_ROWS)


@routes.route(
    Endpoint("get", "/api/privacy", "The scope's data map (which request members are personal or sensitive, "
             "and the data subject's key) and the masking rule of every destination (events, notices, dataset, "
             "logs, mcp); needs `admin`.", True, {200: "{ok, privacy, pending, governance_seq}", **_KEYED},
             errors=_ERRORS, tags=("privacy",), charged=True),
    Endpoint("put", "/api/privacy", "State the scope's `{data_map: {members: {path: personal | sensitive}, "
             "subject_key}, rules: {events, notices, dataset, logs, mcp: {personal, sensitive: keep | hash | drop, "
             "members?}}}`. Needs `admin`. A signed event of the scope's governance chain (setting `privacy`); "
             "while the scope requires approvals, a change that lets more out (a looser action, a member "
             "declassified, the subject key moved) is a request (202) a second, distinct holder approves.", True,
             {200: "{ok, privacy, pending, governance_seq, requested, event} (event null: nothing changed)",
              202: "{ok, privacy, pending, governance_seq, requested, event}: the change waits for approval",
              400: "malformed settings", **_KEYED, 413: "body too large", 415: MEDIA,
              503: "signing is required and no key is configured"},
             errors=BODY_ERRORS + _ERRORS + ("PRIVACY_SETTINGS_INVALID", "GOVERNANCE_REQUEST_INVALID",
                                             "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="PrivacySettings", tags=("privacy",), charged=True),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def privacy(caller: Caller) -> Response:
    """GET: the scope's privacy settings. PUT (admin): 200 in force, or 202 waiting for a second holder."""
    require(caller.permissions, "admin", DENIED[PRIVACY])
    service = runtime().privacy
    if request.method == "GET":
        answer = service.document(caller.scope)
        return json_response(200, {"ok": True, "privacy": answer["privacy"], "pending": answer["pending"],
                                   "governance_seq": answer["governance_seq"]})
    body = read_json(request, runtime().settings.max_body_bytes)
    answer = service.put(caller.scope, principal_of(caller), caller.permissions, body)
    runtime().wake_dispatcher()
    return json_response(202 if answer["requested"] else 200, {"ok": True, **answer})


@routes.route(Endpoint(
    "post", "/api/privacy/approvals", "Approve another holder's pending privacy request `{request_seq, reason?}`: "
    "applies it as a signed governance event. Needs `approve`; never the requester's holder.", True,
    {200: "{ok, privacy, pending, governance_seq, requested, event}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or approves its own holder's request",
     404: "no such pending privacy request", 409: "the privacy settings changed since the request",
     413: "body too large", 415: MEDIA, 503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + _ERRORS + ("GOVERNANCE_REQUEST_INVALID", "GOVERNANCE_REQUEST_NOT_FOUND",
                                    "GOVERNANCE_SELF_APPROVAL", "GOVERNANCE_SETTING_CHANGED",
                                    "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
    request_body="SettingApproval", tags=("privacy",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def approve(caller: Caller) -> Response:
    """A second holder (`approve`) applies a pending privacy request."""
    request_seq, reason = approval_members(PRIVACY, read_json(request, runtime().settings.max_body_bytes))
    answer = runtime().privacy.approve(caller.scope, principal_of(caller), caller.permissions, request_seq, reason)
    runtime().wake_dispatcher()
    return json_response(200, {"ok": True, **answer})


@routes.route(Endpoint(
    "post", "/api/subjects/exports", "A data subject's access request (GDPR Art. 15): `{subject, after?}` lists "
    "every decision of the caller's scope whose request names `subject` at the data map's `subject_key`, the "
    "holds of those decisions and the outbox events about them, each with the members that hold the subject's "
    "values (request paths with their values; JSON Pointers where a record, hold or event copies one). Needs "
    "`admin`. POST, not GET: the key is personal data and stays out of URLs and logs. One call reads at most "
    "20,000 rows; `next` (null at the end) is the cursor the next call sends as `after`. Another scope's "
    "decisions are never read: a subject found nowhere answers 200 with empty lists.", True,
    {200: "{ok, scope, subject, subject_key, decisions, holds, events, scanned, next}", 400: "malformed body",
     **_KEYED, 409: "the scope's data map names no subject key", 413: "body too large", 415: MEDIA},
    errors=BODY_ERRORS + _ERRORS + (SUBJECT_INVALID, UNDECLARED), request_body="SubjectExport",
    tags=("privacy",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(EXPORT_WEIGHT)
def subject_export(caller: Caller) -> Response:
    """One page of a subject's export (admin), read from the caller's scope only."""
    require(caller.permissions, "admin", DENIED[PRIVACY])
    body = read_json(request, runtime().settings.max_body_bytes)
    answer = runtime().subjects.export_body(caller.scope, body)
    return json_response(200, {"ok": True, **answer})
