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

The use case lives in `gate.services.workflows`; this module parses the request and shapes the answer.
"""

from __future__ import annotations

import re

from flask import Response, request

from api.client_limits import client_limit
from api.errors import carry_headers
from api.jsonio import read_json
from api.mcp_http import MAX_BODY_BYTES, MAX_DEPTH
from api.routes.policychecks import CHECK_ERRORS
from api.routing import MEDIA, RATE_HEADERS, WORKFLOW_REQUEST_HEADERS, Endpoint, Routes
from gate.errors import GateError
from gate.services.operations import token_matches
from gate.services.policychecks import ArgumentsInvalid
from gate.services.workflows import (
    TICKETING_SYSTEMS,
    WORKFLOWS,
    WorkflowAnswer,
    WorkflowRequest,
    WorkflowService,
)
from gate.settings import Settings

routes = Routes("workflows", __name__)

REALM = 'Bearer realm="decision-gate-workflows"'
_KEY = re.compile(r"^[\x21-\x7e]{1,300}$")

__all__ = ["TICKETING_SYSTEMS", "WORKFLOWS", "routes"]


def _authorized(token: str | None) -> bool:
    if token is None:
        return True
    scheme, _, given = (request.headers.get("Authorization") or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return token_matches(given, token)  # SECURITY: constant time over fixed-length digests


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


def _refuse_route(ticketing_system: str, workflow: str, token: str | None) -> None:
    """401 without the workflow token (when one is configured); 400 for an unknown system or
    workflow (the rate headers are already carried)."""
    if not _authorized(token):
        carry_headers({"WWW-Authenticate": REALM})
        raise GateError("WORKFLOW_UNAUTHORIZED", "a valid Authorization: Bearer token is required")
    if ticketing_system not in TICKETING_SYSTEMS:
        raise GateError("WORKFLOW_UNSUPPORTED", f"unsupported ticketing system {ticketing_system[:60]!r}",
                        field="ticketing_system", supported=list(TICKETING_SYSTEMS))
    if workflow not in WORKFLOWS:
        raise GateError("WORKFLOW_UNSUPPORTED", f"unsupported workflow {workflow[:60]!r}",
                        field="workflow", supported=list(WORKFLOWS))


def _read_request(ticketing_system: str, workflow: str) -> WorkflowRequest:
    override = _override_key()
    return WorkflowRequest(ticketing_system, workflow, read_json(request, MAX_BODY_BYTES, max_depth=MAX_DEPTH),
                           override)


@routes.route(Endpoint(
    "post", "/api/v1/workflows/{ticketing_system}/{workflow}",
    "Helpdesk workflow (`workflow` = refund|cancel|return|trial): runs the policy check and answers request_id, "
    "action, policy_class and ticket_annotations. Advisory only. Idempotent per ticket (default key "
    "`<workflow>:<ticket_id>` within the ticketing system; `Idempotency-Key` overrides); a replay answers the "
    "same bytes with `x-idempotency-status: replayed`. Bearer token only when GATE_WORKFLOW_TOKEN is set.",
    False, {200: "workflow result (created or replayed)", 400: "missing or bad field, unsupported ticketing "
            "system or workflow", 401: "bearer token required", 409: "idempotency key holds another request",
            413: "body over 64 KiB", 415: MEDIA, 429: "rate limited per client",
            500: "the rulebook reached no verdict", 503: "ledger or rate limiter unavailable"},
    errors=CHECK_ERRORS + ("WORKFLOW_UNSUPPORTED", "WORKFLOW_UNAUTHORIZED", "WORKFLOW_IDEMPOTENCY_CONFLICT",
                           "LEDGER_UNAVAILABLE"),
    request_body="WorkflowRequest", response_headers=RATE_HEADERS + ("x-idempotency-status", "x-request-id"),
    request_headers=tuple(WORKFLOW_REQUEST_HEADERS), tags=("workflows",)))
def run_workflow(ticketing_system: str, workflow: str, *, workflows: WorkflowService, settings: Settings) -> Response:
    headers = client_limit("workflow")
    carry_headers(headers)  # a refusal (POLICY_CHECK_UNDECIDED among them) answers the rate headers too
    _refuse_route(ticketing_system, workflow, settings.workflow_token)
    workflows.tool(workflow)  # an unknown check service fails here, before the body is read
    try:
        run = _read_request(ticketing_system, workflow)
        ticket, result = workflows.evaluate(run)
    except ArgumentsInvalid as invalid:  # a Signal, answered here in REST's words
        raise GateError("REQUEST_INVALID", f"invalid workflow body: {invalid}", errors=invalid.errors) from None
    answer = workflows.store_answer(run, ticket, result)
    return _raw(answer, headers)


def _raw(answer: WorkflowAnswer, headers: dict[str, str]) -> Response:
    return Response(answer.text, status=200, mimetype="application/json", headers={
        **headers, "x-idempotency-status": answer.status, "x-request-id": answer.request_id})
