"""The helpdesk workflow use case behind `api/routes/workflows.py` (docs/policy-checks.md).

`WorkflowService.run` runs the policy check a workflow names (the same `PolicyCheckService` as
the MCP tools and REST twins), annotates the ticket, and stores the answer once per
(ticketing system, idempotency key): the same key with the same body answers the stored bytes
again (`replayed`); another body is 409 `WORKFLOW_IDEMPOTENCY_CONFLICT`.

SECURITY: advisory only. Every answer carries `decision_contract: {authority: "advisory_only",
production_verdict: false}` and `production_binding_required: true`; nothing here is a
Decision Record, and no workflow answer can be replayed as a production approval.
"""

from __future__ import annotations

import json
import re
import secrets
from dataclasses import dataclass
from typing import TypedDict

from gate import bodies
from gate.errors import GateError
from gate.ledger import Ledger
from gate.ledger.workflows import WorkflowStore
from gate.protocol.advisory_record import ADVISORY_CONTRACT, AdvisoryContract
from gate.protocol.canonical import sha256_hex
from gate.services.policychecks import CheckResult, PolicyCheckService
from gate.strict_json import JsonValue

WORKFLOWS = {"refund": "refund", "cancel": "cancellation", "return": "return", "trial": "trial"}
TICKETING_SYSTEMS = ("freshdesk", "front", "gorgias", "helpscout", "hubspot", "intercom", "jira",
                     "kustomer", "salesforce", "servicenow", "zendesk")
_TAG = re.compile(r"[^a-z0-9]+")
# The API's JSON writer (api.jsonio.dumps): the answer is stored and served as these bytes.
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

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


def body_schema(service: str) -> str:
    """The schema a workflow's body is checked by (`gate.bodies.composed`): its policy check's
    arguments (`policy-check-<service>`, the one statement of them) with the workflow's
    `ticket_id` (`workflow.schema.json`, which also states a body that is not an object)."""
    return bodies.composed(f"policy-check-{service}", "workflow", ("ticket_id",))


def ticket_text(value: JsonValue) -> str:
    """A ticket id its schema took (1 to 200 visible ASCII characters, or a whole number) as the
    answer and the default idempotency key write it: a number in decimal digits (JSON has one
    number type: 5.0 is the ticket 5, as JSON Schema reads an integer)."""
    return str(int(value)) if isinstance(value, int | float) else str(value)


def _tag(*parts: str) -> str:
    return "dg_" + "_".join(_TAG.sub("_", p.lower()).strip("_") for p in parts)


class Macro(TypedDict):
    id: str
    title: str


class TicketAnnotations(TypedDict):
    """What a helpdesk writes on the ticket: tags, an internal note, a macro and a priority."""

    tags: list[str]
    internal_note: str
    macro_suggestion: Macro
    priority: str


class WorkflowAnswerBody(TypedDict):
    """A workflow's answer, as stored and served (every replay answers the same bytes)."""

    ok: bool
    request_id: str
    ticketing_system: str
    workflow: str
    ticket_id: str
    action: str
    policy_class: str
    code: str
    message: str
    decision_contract: AdvisoryContract
    production_binding_required: bool
    ticket_annotations: TicketAnnotations
    idempotency_key: str
    created_at: str
    check: CheckResult


def ticket_annotations(workflow: str, result: CheckResult) -> TicketAnnotations:
    """Tags, an internal note, a macro suggestion and a priority for the ticket."""
    verdict = result["verdict"]
    macro, title, priority = _MACROS.get(verdict, _MACROS["UNKNOWN"])
    source = result["sources"][0]["source_url"] if result["sources"] else "no vendor row"
    note = (f"[Decision Gate, advisory] {workflow} check: {verdict} ({result['code']}). {result['message']} "
            f"Suggested action: {result['action']}. Source: {source}. Rules {result['rulebook_id']}@"
            f"{result['rules_version']}, policy {result['policy_version']}. Illustrative terms; not a production "
            f"verdict.")
    return {
        "tags": [_tag("policy_check"), _tag(workflow, verdict), _tag("code", result["code"]),
                 _tag("vendor", result["vendor"])],
        "internal_note": note,
        "macro_suggestion": {"id": f"dg_{macro}", "title": title},
        "priority": priority,
    }


@dataclass(frozen=True, slots=True)
class WorkflowRequest:
    ticketing_system: str
    workflow: str
    body: JsonValue  # as read; `evaluate` checks it
    override_key: str | None  # Idempotency-Key / x-idempotency-key, already checked by the shell


@dataclass(frozen=True, slots=True)
class WorkflowAnswer:
    """The answer's JSON text as stored, its request id, and `created` or `replayed`."""

    status: str
    text: str
    request_id: str


def _answer(run: WorkflowRequest, ticket: str, key: str, result: CheckResult) -> WorkflowAnswerBody:
    return {
        "ok": True,
        "request_id": "wfr_" + secrets.token_hex(12),
        "ticketing_system": run.ticketing_system,
        "workflow": run.workflow,
        "ticket_id": ticket,
        "action": result["action"],
        "policy_class": result["verdict"],
        "code": result["code"],
        "message": result["message"],
        "decision_contract": ADVISORY_CONTRACT.copy(),
        "production_binding_required": True,
        "ticket_annotations": ticket_annotations(run.workflow, result),
        "idempotency_key": key,
        "created_at": result["evaluated_at"],
        "check": result,
    }


class WorkflowService:
    def __init__(self, ledger: Ledger, checks: PolicyCheckService) -> None:
        self.store = WorkflowStore(ledger)
        self.checks = checks

    def tool(self, workflow: str) -> str:
        """The policy check tool a (supported) workflow runs."""
        return self.checks.spec_for_service(WORKFLOWS[workflow]).tool

    def evaluate(self, run: WorkflowRequest) -> tuple[str, CheckResult]:
        """The ticket id and the check's result (pure). Raises `ArgumentsInvalid` naming every
        problem of the body (`body_schema`: the check's arguments and the ticket id, unknown
        members first), or `CheckFailed`."""
        spec = self.checks.spec_for_service(WORKFLOWS[run.workflow])
        result = self.checks.check(spec.tool, run.body, body_schema(spec.service))  # the body, checked once
        if not isinstance(run.body, dict):  # pragma: no cover - its schema takes objects only
            raise TypeError("a workflow body its schema passed is not an object")
        return ticket_text(run.body["ticket_id"]), result

    def store_answer(self, run: WorkflowRequest, ticket: str, result: CheckResult) -> WorkflowAnswer:
        """Store the answer once per key: the stored bytes are what every later replay answers."""
        key = run.override_key or f"{run.workflow}:{ticket}"
        input_hash = sha256_hex({"ticketing_system": run.ticketing_system, "workflow": run.workflow,
                                 "body": run.body})
        answer = _answer(run, ticket, key, result)
        text = _ENCODER.encode(answer)
        existing = self.store.store_or_existing({
            "ticketing_system": run.ticketing_system, "idempotency_key": key, "request_id": answer["request_id"],
            "workflow": run.workflow, "ticket_id": ticket, "input_hash": input_hash,
            "created_at": result["evaluated_at"], "response_json": text,
        })
        if existing is None:
            return WorkflowAnswer("created", text, answer["request_id"])
        if existing["input_hash"] != input_hash:
            raise GateError("WORKFLOW_IDEMPOTENCY_CONFLICT",
                            "this idempotency key already holds a different request; send another Idempotency-Key "
                            "to evaluate again", idempotency_key=key, request_id=existing["request_id"])
        return WorkflowAnswer("replayed", existing["response_json"], existing["request_id"])


__all__ = [
    "TICKETING_SYSTEMS",
    "WORKFLOWS",
    "WorkflowAnswer",
    "WorkflowRequest",
    "WorkflowService",
    "body_schema",
    "ticket_annotations",
    "ticket_text",
]
