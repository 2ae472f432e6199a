"""Request validation for the execution, outcome and CRM sync write endpoints.

Every request object is closed: a member not listed here is refused (`unknown_field`).
All problems of a body are collected and reported together in one
``GateError("REQUEST_INVALID", message, errors=[{field, code, message}, …])``; unknown members
come first (in body order), then the problems of the listed members in the order of the
tables below. The validators return the normalized members (trimmed text; absent, null and
blank members omitted), which is what the builders store.

CRM sync bodies are first scanned for credential material (`gate.receipts.credentials`);
SECURITY: that refusal (SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN) comes before every other check so
that no path stores, hashes or echoes a credential.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.receipts import fields as F
from gate.receipts.credentials import credential_paths
from gate.receipts.hashing import OUTCOME_LINK_MEMBERS
from gate.receipts.values import (
    EXECUTION_STATUSES,
    OUTCOME_STATUSES,
    SYNC_DIRECTION_DEFAULT,
    SYNC_DIRECTIONS,
    SYNC_STATUSES,
)
from gate.strict_json import JsonValue
from gate.vocabulary import VERDICTS

__all__ = [
    "CRM_SYNC_REQUEST_MEMBERS",
    "EXECUTION_REQUEST_MEMBERS",
    "OUTCOME_REQUEST_MEMBERS",
    "REQUIRED_CRM_SYNC_MEMBERS",
    "REQUIRED_EXECUTION_MEMBERS",
    "REQUIRED_OUTCOME_MEMBERS",
    "request_input_hash",
    "validate_crm_sync_request",
    "validate_execution_request",
    "validate_outcome_request",
]

CREDENTIALS_FORBIDDEN = "SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN"

# member → check. Order is the reporting order: `decision_id`, then the order of the hash
# preimage lists (gate.receipts.hashing).
EXECUTION_REQUEST_MEMBERS: dict[str, F.Check] = {
    "decision_id": F.decision_id,
    "execution_status": F.one_of(EXECUTION_STATUSES),
    "execution_result": F.result_text_or_object,
    "action_taken": F.label,
    "target_system": F.label,
    "target_object_id": F.identifier,
    "mutation": F.label,
    "external_ref": F.identifier,
    "execution_id": F.identifier,
    "executor": F.executor,
    "decision_record_hash": F.hex64,
    "decision_receipt_hash": F.hex64,
    "action_binding": F.action_binding,
    "state_before_hash": F.opaque_hash,
    "state_after_hash": F.opaque_hash,
    "state_before_ref": F.reference,
    "state_after_ref": F.reference,
    "evidence_refs": F.evidence_refs,
    "executed_at": F.timestamp,
}
# SECURITY: an execution receipt must prove which record it executes, so both record hashes
# are required (docs/receipts.md, "Required members").
REQUIRED_EXECUTION_MEMBERS = ("execution_status", "decision_record_hash", "decision_receipt_hash")

OUTCOME_REQUEST_MEMBERS: dict[str, F.Check] = {
    "decision_id": F.decision_id,
    "outcome_status": F.one_of(OUTCOME_STATUSES),
    "action_executed": F.boolean,
    "action_taken": F.label,
    "target_system": F.label,
    "target_object_id": F.identifier,
    "mutation": F.label,
    "external_ref": F.identifier,
    "decision_record_hash": F.hex64,
    "decision_receipt_hash": F.hex64,
    "observed_metrics": F.observed_metrics,
    "evidence_refs": F.evidence_refs,
    "executed_at": F.timestamp,
    # The execution this outcome follows (OUTCOME_LINK_MEMBERS): both or neither, outside the hash.
    "execution_receipt_id": F.identifier,
    "execution_hash": F.hex64,
}
REQUIRED_OUTCOME_MEMBERS = ("outcome_status",)

CRM_SYNC_REQUEST_MEMBERS: dict[str, F.Check] = {
    "decision_id": F.decision_id,
    "sync_status": F.one_of(SYNC_STATUSES),
    "sync_direction": F.one_of(SYNC_DIRECTIONS),
    "crm_provider": F.label,
    "crm_object_type": F.label,
    "crm_object_id": F.identifier,
    "crm_record_url": F.http_url,
    "field_mapping": F.field_mapping,
    "external_ref": F.identifier,
    "decision_record_hash": F.hex64,
    "decision_receipt_hash": F.hex64,
    "decision_verdict": F.one_of(VERDICTS),
    "decision_action": F.label,
    "policy_id": F.label,
    "policy_version": F.label,
    "synced_at": F.timestamp,
}
REQUIRED_CRM_SYNC_MEMBERS = ("sync_status", "crm_provider")


def _validate(body: Any, members: Mapping[str, F.Check], required: tuple[str, ...],
              what: str) -> tuple[dict[str, JsonValue], F.Problems]:
    if not isinstance(body, dict):
        problems = F.Problems()
        problems.add("$", "invalid_type", "request body must be a JSON object")
        return {}, problems
    problems = F.Problems()
    for key in body:
        if key not in members:
            problems.add(key, "unknown_field", f"{key} is not a member of the {what} request")
    normalized: dict[str, JsonValue] = {}
    for name, check in members.items():
        validate = F.required(check) if name in required else check
        value = validate(body.get(name), name, problems)
        if value is not None:
            normalized[name] = value
    return normalized, problems


def _raise(problems: F.Problems, what: str) -> None:
    count = len(problems.items)
    first = problems.items[0]
    raise GateError(
        "REQUEST_INVALID",
        f"{what} request is invalid ({count} problem{'s' if count != 1 else ''}); "
        f"first: {first['field']}: {first['message']}",
        errors=list(problems.items),
    )


def validate_execution_request(body: Any) -> dict[str, JsonValue]:
    """Normalized execution receipt request; REQUEST_INVALID listing every problem."""
    fields, problems = _validate(body, EXECUTION_REQUEST_MEMBERS, REQUIRED_EXECUTION_MEMBERS,
                                 "execution receipt")
    if problems:
        _raise(problems, "execution receipt")
    return fields


def validate_outcome_request(body: Any) -> dict[str, JsonValue]:
    """Normalized outcome request; REQUEST_INVALID listing every problem. The link to an
    execution receipt names it by id and hash, so one of the two alone is `missing_field` for
    the other."""
    fields, problems = _validate(body, OUTCOME_REQUEST_MEMBERS, REQUIRED_OUTCOME_MEMBERS, "outcome")
    stated = [name for name in OUTCOME_LINK_MEMBERS if name in fields]
    if len(stated) == 1:
        (missing,) = (name for name in OUTCOME_LINK_MEMBERS if name not in fields)
        if not problems.at(missing):
            problems.add(missing, "missing_field",
                         f"{missing} is required with {stated[0]}: a link names the execution receipt by both")
    if problems:
        _raise(problems, "outcome")
    return fields


def validate_crm_sync_request(body: Any) -> dict[str, JsonValue]:
    """Normalized CRM sync request.

    Raises SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN (`forbidden_fields`) first when the body carries
    credential material, else REQUEST_INVALID listing every problem. `sync_direction` defaults
    to `writeback`; `crm_object_id` is required when `sync_status` is `written` (a write names
    the object written).
    """
    if isinstance(body, dict):
        forbidden = credential_paths(body)
        if forbidden:
            raise GateError(
                CREDENTIALS_FORBIDDEN,
                "the CRM sync request carries credential material; credentials are never "
                "accepted or stored: remove them and send only mapped field names and the CRM "
                "object reference",
                forbidden_fields=forbidden,
            )
    fields, problems = _validate(body, CRM_SYNC_REQUEST_MEMBERS, REQUIRED_CRM_SYNC_MEMBERS, "CRM sync")
    if fields.get("sync_status") == "written" and "crm_object_id" not in fields \
            and not problems.at("crm_object_id"):
        problems.add("crm_object_id", "missing_field",
                     "crm_object_id is required when sync_status is written")
    if problems:
        _raise(problems, "CRM sync")
    fields.setdefault("sync_direction", SYNC_DIRECTION_DEFAULT)
    return fields


def request_input_hash(body: Any) -> str:
    """sha256 of the canonical request body exactly as received: the idempotency comparison key
    (`execution_input_hash`, `outcome_input_hash`, `sync_input_hash`)."""
    return sha256_hex(body)
