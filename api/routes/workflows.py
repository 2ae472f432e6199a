"""`POST /api/v1/workflows/{ticketing_system}/{refund|cancel|return|trial}`: policy checks for helpdesks.

A helpdesk automation posts a ticket's facts; the gate runs the matching policy check (the same
`PolicyCheckService` as the MCP tools and REST twins) and answers `request_id`, `action`,
`policy_class` (the check's verdict, e.g. `ALLOWED`) and `ticket_annotations` (tags, an
internal note, a macro suggestion). The caller stores `request_id` with the ticket.

- Advisory only: every answer carries `decision_contract: {authority: "advisory_only",
  production_verdict: false}` and `production_binding_required: true`; nothing here is a
  Decision Record, and SECURITY: no workflow answer can be replayed as a production approval.
- Idempotent per ticket: the default key is `<workflow>:<ticket_id>` within the ticketing
  system; `Idempotency-Key` or `x-idempotency-key` overrides it. The first result is stored
  (`workflow_runs`); the same key with the same body answers the stored bytes again with
  `x-idempotency-status: replayed`; with another body, 409 `WORKFLOW_IDEMPOTENCY_CONFLICT`.
- Rate-limited per client address (`GATE_POLICYCHECK_RATE_LIMIT` per minute), before the body.
- Optional bearer token (`GATE_WORKFLOW_TOKEN`; unset, as in the reference's usage, means no
  token): compared in constant time; a missing or wrong token is 401 `WORKFLOW_UNAUTHORIZED`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import Any

from flask import Blueprint, Response, current_app, request

from api.client_limits import client_limit
from api.errors import error_response
from api.jsonio import dumps, read_json
from api.routes.policychecks import MAX_BODY_BYTES, MAX_DEPTH, checks
from api.runtime import runtime
from gate.errors import GateError
from gate.ledger.workflows import WorkflowStore
from gate.protocol.canonical import sha256_hex
from gate.services.policychecks import ArgumentsInvalid, CheckFailed

bp = Blueprint("workflows", __name__)

WORKFLOWS = {"refund": "refund", "cancel": "cancellation", "return": "return", "trial": "trial"}
TICKETING_SYSTEMS = ("freshdesk", "front", "gorgias", "helpscout", "hubspot", "intercom", "jira",
                     "kustomer", "salesforce", "servicenow", "zendesk")
REALM = 'Bearer realm="decision-gate-workflows"'
ADVISORY_CONTRACT = {"authority": "advisory_only", "production_verdict": False}
_KEY = re.compile(r"^[\x21-\x7e]{1,300}$")
_TICKET = re.compile(r"^[\x21-\x7e]{1,200}$")
_TAG = re.compile(r"[^a-z0-9]+")

# verdict class → (macro id suffix, macro title, priority)
_MACROS = {
    "ALLOWED": ("approve_refund", "Refund: approve and confirm to customer", "normal"),
    "DENIED": ("decline_refund", "Refund: explain the vendor's refund terms", "normal"),
    "FREE_CANCEL": ("confirm_cancellation", "Cancellation: confirm, no fee", "normal"),
    "PENALTY": ("explain_cancellation_fee", "Cancellation: explain the early-termination fee", "high"),
    "LOCKED": ("explain_commitment", "Cancellation: explain the commitment term", "high"),
    "RETURNABLE": ("send_return_label", "Return: send return instructions", "normal"),
    "EXPIRED": ("decline_return_expired", "Return: window has passed", "normal"),
    "NON_RETURNABLE": ("decline_return_item", "Return: item is not returnable", "normal"),
    "TRIAL_AVAILABLE": ("share_trial_terms", "Trial: share trial terms", "low"),
    "NO_TRIAL": ("explain_no_trial", "Trial: no free trial available", "low"),
    "UNKNOWN": ("escalate_policy_check", "Escalate: verify the vendor's policy manually", "high"),
}


def _store() -> WorkflowStore:
    store = current_app.extensions.get("workflow_store")
    if store is None:
        store = current_app.extensions["workflow_store"] = WorkflowStore(runtime().ledger)
    return store


def _authorized() -> bool:
    token = runtime().settings.workflow_token
    if token is None:
        return True
    scheme, _, given = (request.headers.get("Authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    # SECURITY: constant time over fixed-length digests (no early exit on the first wrong byte).
    return hmac.compare_digest(hashlib.sha256(given.strip().encode("utf-8", "replace")).digest(),
                               hashlib.sha256(token.encode("utf-8")).digest())


def _override_key() -> str | None:
    values = {name: request.headers.get(name) for name in ("Idempotency-Key", "x-idempotency-key")}
    given = {v.strip() for v in values.values() if v is not None}
    if not given:
        return None
    if len(given) > 1 or not _KEY.fullmatch(next(iter(given))):
        raise GateError("REQUEST_INVALID", "Idempotency-Key / x-idempotency-key must be one value of 1 to 300 "
                        "visible ASCII characters", errors=[{"field": "Idempotency-Key", "code": "invalid_value",
                                                             "message": "1 to 300 visible ASCII characters"}])
    return next(iter(given))


def _ticket_id(body: dict[str, Any]) -> str:
    value = body.get("ticket_id")
    if isinstance(value, float) and value.is_integer():
        value = int(value)  # JSON has one number type: 5.0 is the integer 5 (as JSON Schema reads it)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    if value is None or not isinstance(value, str) or not _TICKET.fullmatch(value):
        code = "required" if value is None else "invalid_value"
        raise ArgumentsInvalid([{"field": "ticket_id", "code": code,
                                 "message": "ticket_id is required: 1 to 200 visible ASCII characters, or a "
                                            "non-negative integer"}])
    return value


def _annotations(workflow: str, result: dict[str, Any]) -> dict[str, Any]:
    verdict = result["verdict"]
    macro, title, priority = _MACROS.get(verdict, _MACROS["UNKNOWN"])

    def tag(*parts: str) -> str:
        return "dg_" + "_".join(_TAG.sub("_", p.lower()).strip("_") for p in parts)

    source = result["sources"][0]["source_url"] if result["sources"] else "no vendor row"
    note = (f"[Decision Gate, advisory] {workflow} check: {verdict} ({result['code']}). {result['message']} "
            f"Suggested action: {result['action']}. Source: {source}. Rules {result['rulebook_id']}@"
            f"{result['rules_version']}, policy {result['policy_version']}. Illustrative terms; not a production "
            f"verdict.")
    return {
        "tags": [tag("policy_check"), tag(workflow, verdict), tag("code", result["code"]), tag("vendor", result["vendor"])],
        "internal_note": note,
        "macro_suggestion": {"id": f"dg_{macro}", "title": title},
        "priority": priority,
    }


def _refused(code: str, message: str, headers: dict[str, str], **details) -> Response:
    return error_response(code, message, headers=headers, **details)


@bp.post("/api/v1/workflows/<ticketing_system>/<workflow>")
def run_workflow(ticketing_system: str, workflow: str):
    headers = client_limit("workflow")
    if isinstance(headers, Response):
        return headers
    if not _authorized():
        return _refused("WORKFLOW_UNAUTHORIZED", "a valid Authorization: Bearer token is required",
                        {**headers, "WWW-Authenticate": REALM})
    if ticketing_system not in TICKETING_SYSTEMS:
        return _refused("WORKFLOW_UNSUPPORTED", f"unsupported ticketing system {ticketing_system[:60]!r}", headers,
                        field="ticketing_system", supported=list(TICKETING_SYSTEMS))
    if workflow not in WORKFLOWS:
        return _refused("WORKFLOW_UNSUPPORTED", f"unsupported workflow {workflow[:60]!r}", headers,
                        field="workflow", supported=list(WORKFLOWS))
    service = WORKFLOWS[workflow]
    tool = checks().spec_for_service(service).tool
    try:
        override = _override_key()
        body = read_json(request, MAX_BODY_BYTES, max_depth=MAX_DEPTH)
        if not isinstance(body, dict):
            raise ArgumentsInvalid([{"field": "body", "code": "invalid_type", "message": "must be a JSON object"}])
        ticket_id = _ticket_id(body)
        arguments = {k: v for k, v in body.items() if k != "ticket_id"}
        result = checks().check(tool, arguments)
    except GateError as error:
        return _refused(error.code, error.message, headers, **error.details)
    except ArgumentsInvalid as invalid:
        return _refused("REQUEST_INVALID", f"invalid workflow body: {invalid}", headers, errors=invalid.errors)
    except CheckFailed as failed:
        return _refused("POLICY_CHECK_UNDECIDED", str(failed), headers)

    key = override or f"{workflow}:{ticket_id}"
    input_hash = sha256_hex({"ticketing_system": ticketing_system, "workflow": workflow, "body": body})
    request_id = "wfr_" + secrets.token_hex(12)
    answer = {
        "ok": True,
        "request_id": request_id,
        "ticketing_system": ticketing_system,
        "workflow": workflow,
        "ticket_id": ticket_id,
        "action": result["action"],
        "policy_class": result["verdict"],
        "code": result["code"],
        "message": result["message"],
        "decision_contract": dict(ADVISORY_CONTRACT),
        "production_binding_required": True,
        "ticket_annotations": _annotations(workflow, result),
        "idempotency_key": key,
        "created_at": result["evaluated_at"],
        "check": result,
    }
    text = dumps(answer)
    try:
        existing = _store().store_or_existing({
            "ticketing_system": ticketing_system, "idempotency_key": key, "request_id": request_id,
            "workflow": workflow, "ticket_id": ticket_id, "input_hash": input_hash,
            "created_at": result["evaluated_at"], "response_json": text,
        })
    except GateError as error:
        return _refused(error.code, error.message, headers)
    if existing is None:
        return _raw(200, text, {**headers, "x-idempotency-status": "created", "x-request-id": request_id})
    if existing["input_hash"] != input_hash:
        return _refused("WORKFLOW_IDEMPOTENCY_CONFLICT",
                        "this idempotency key already holds a different request; send another Idempotency-Key "
                        "to evaluate again", headers, idempotency_key=key, request_id=existing["request_id"])
    return _raw(200, existing["response_json"],
                {**headers, "x-idempotency-status": "replayed", "x-request-id": existing["request_id"]})


def _raw(status: int, text: str, headers: dict[str, str]) -> Response:
    return Response(text, status=status, mimetype="application/json", headers=headers)
