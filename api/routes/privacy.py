"""A scope's data map and masking rules over HTTP (issue 67; docs/privacy.md): read them, state
them (a signed governance event, setting `privacy`; a loosening while the scope requires
approvals is a request), approve another holder's request; a data subject's export (Art. 15) and
erasure (Art. 17, asked by one holder and approved by a second), the subject's key in a body so it
never lands in a URL or a log."""

from __future__ import annotations

from collections.abc import Callable

from flask import Response, request

from api.costs import Weight, charged
from api.errors import json_response
from api.jsonio import read_json
from api.routes.releases import principal_of
from api.routing import AUTH_ERRORS, BODY_ERRORS, MEDIA, Endpoint, Routes
from api.runtime import keyed
from gate.governance.table import DENIED, PRIVACY, SUBJECT_ERASURE
from gate.principals import require
from gate.privacy.erasure import INVALID as ERASURE_INVALID
from gate.privacy.erasure import NOT_FOUND as SUBJECT_NOT_FOUND
from gate.services.decide import Caller
from gate.services.erasure import ErasureService
from gate.services.governance import approval_members
from gate.services.privacy import PrivacyService
from gate.services.subjects import INVALID as SUBJECT_INVALID
from gate.services.subjects import UNDECLARED, SubjectService
from gate.settings import Settings

routes = Routes("privacy", __name__)
_ERRORS = AUTH_ERRORS + ("PRIVACY_PERMISSION_DENIED", "LEDGER_UNAVAILABLE")
_KEYED = {401: "missing or invalid key", 403: "key lacks admin"}
WEIGHT = Weight(base=2)
EXPORT_WEIGHT = Weight(base=20)  # a subject export reads up to 20,000 rows (gate.services.subjects.PAGE_ROWS)
ERASURE_WEIGHT = Weight(base=50)  # an erasure request reads every decision of the scope (the export's search)
_APPROVAL_ERRORS = ("GOVERNANCE_REQUEST_INVALID", "GOVERNANCE_REQUEST_NOT_FOUND", "GOVERNANCE_SELF_APPROVAL",
                    "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED")


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
def privacy(caller: Caller, *, privacy: PrivacyService, settings: Settings, wake_dispatcher: Callable[[], None]) -> Response:
    """GET: the scope's privacy settings. PUT (admin): 200 in force, or 202 waiting for a second holder."""
    require(caller.permissions, "admin", DENIED[PRIVACY])
    if request.method == "GET":
        answer = privacy.document(caller.scope)
        return json_response(200, {"ok": True, "privacy": answer["privacy"], "pending": answer["pending"],
                                   "governance_seq": answer["governance_seq"]})
    body = read_json(request, settings.max_body_bytes)
    answer = privacy.put(caller.scope, principal_of(caller), caller.permissions, body)
    wake_dispatcher()
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
def approve(caller: Caller, *, privacy: PrivacyService, settings: Settings, wake_dispatcher: Callable[[], None]) -> Response:
    """A second holder (`approve`) applies a pending privacy request."""
    request_seq, reason = approval_members(PRIVACY, read_json(request, settings.max_body_bytes))
    answer = privacy.approve(caller.scope, principal_of(caller), caller.permissions, request_seq, reason)
    wake_dispatcher()
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
def subject_export(caller: Caller, *, subjects: SubjectService, settings: Settings) -> Response:
    """One page of a subject's export (admin), read from the caller's scope only."""
    require(caller.permissions, "admin", DENIED[PRIVACY])
    body = read_json(request, settings.max_body_bytes)
    answer = subjects.export_body(caller.scope, body)
    return json_response(200, {"ok": True, **answer})


@routes.route(
    Endpoint("get", "/api/subjects/erasures", "The scope's data subject erasures waiting for a second holder: each "
             "request's `request_seq`, `expires_at`, `requested_by` and `policy_after.decisions` (the decisions it "
             "names, by id, `input_hash` and `record_hash`; never the subject). Needs `admin`.", True,
             {200: "{ok, scope, pending, governance_seq}", **_KEYED}, errors=_ERRORS, tags=("privacy",), charged=True),
    Endpoint("post", "/api/subjects/erasures", "A data subject's erasure request (GDPR Art. 17): `{subject, reason?}` "
             "finds every decision of the caller's scope whose request names `subject` at the data map's "
             "`subject_key` (the export's search) and files a signed governance request (`subject.erasure_requested`) "
             "naming those decisions by id, `input_hash` and `record_hash`; the subject's value is kept nowhere. "
             "Needs `admin`. Always 202: nothing is removed until a second, distinct holder approves "
             "(POST /api/subjects/erasures/approvals). POST with the key in a body: it stays out of URLs and logs. "
             "Another scope's decisions are never read.", True,
             {202: "{ok, scope, request_seq, expires_at, decisions, more, event}: waits for a second holder",
              400: "malformed body", **_KEYED, 404: "no decision of the scope names the subject",
              409: "the scope's data map names no subject key", 413: "body too large", 415: MEDIA,
              503: "signing is required and no key is configured"},
             errors=BODY_ERRORS + _ERRORS + (ERASURE_INVALID, SUBJECT_NOT_FOUND, UNDECLARED,
                                             "GOVERNANCE_REQUEST_INVALID", "RULEBOOK_ATTESTATION_SIGNATURE_REQUIRED"),
             request_body="SubjectErasure", tags=("privacy",), charged=True),
)
@keyed("SVC_API_UNAUTHORIZED")
@charged(ERASURE_WEIGHT)
def subject_erasure(caller: Caller, *, erasures: ErasureService, settings: Settings, wake_dispatcher: Callable[[], None]) -> Response:
    """GET: the pending erasures (admin). POST (admin): a request a second holder approves (202)."""
    if request.method == "GET":
        return json_response(200, {"ok": True, **erasures.pending(caller.scope, principal_of(caller),
                                                                 caller.permissions)})
    require(caller.permissions, "admin", DENIED[SUBJECT_ERASURE])
    body = read_json(request, settings.max_body_bytes)
    answer = erasures.request(caller.scope, principal_of(caller), caller.permissions, body)
    wake_dispatcher()
    return json_response(202, {"ok": True, **answer})


@routes.route(Endpoint(
    "post", "/api/subjects/erasures/approvals", "Approve another holder's pending erasure `{request_seq, reason?}`: "
    "a signed governance event (`subject.erased`), then the named decisions' requests, record bodies, hold facts, "
    "outbox copies and delivery-attempt excerpts removed; every hash, chain link and checkpoint kept (each "
    "decision's remainder says `inputs_removed: {cause: erasure, ref: governance event N}`). Needs `approve`; "
    "never the requester's holder.", True,
    {200: "{ok, scope, erasure_event, decisions, removed, event}", 400: "malformed body",
     401: "missing or invalid key", 403: "key lacks approve, or approves its own holder's request",
     404: "no such pending erasure", 413: "body too large", 415: MEDIA,
     503: "signing is required and no key is configured"},
    errors=BODY_ERRORS + _ERRORS + _APPROVAL_ERRORS, request_body="SettingApproval", tags=("privacy",), charged=True))
@keyed("SVC_API_UNAUTHORIZED")
@charged(WEIGHT)
def approve_erasure(caller: Caller, *, erasures: ErasureService, settings: Settings,
                    wake_dispatcher: Callable[[], None]) -> Response:
    """A second holder (`approve`) approves a pending erasure: the named decisions' inputs go."""
    request_seq, reason = approval_members(SUBJECT_ERASURE, read_json(request, settings.max_body_bytes))
    answer = erasures.approve(caller.scope, principal_of(caller), caller.permissions, request_seq, reason)
    wake_dispatcher()
    return json_response(200, {"ok": True, **answer})
