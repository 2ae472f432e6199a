"""Builders of the stored execution receipt, Outcome Record and CRM sync record.

Pure: ids, the idempotency key, the clock value and the stored Decision Record are passed in.
Each builder validates the request (REQUEST_INVALID, or SVC_CRM_SYNC_CREDENTIALS_FORBIDDEN),
checks the record references (`*_RECORD_MISMATCH`), then returns the receipt: the compacted
hash-preimage members (`gate.receipts.hashing`) plus the hash member. A built receipt has no
other member, so everything it states is hashed, with one exception: an Outcome Record's link to
the execution it follows (`OUTCOME_LINK_MEMBERS`), stated beside `outcome_hash` so that hash stays
over the reference's list; the builder refuses a link that does not name a stored execution
receipt of the same decision with that hash (`SVC_OUTCOME_EXECUTION_MISMATCH`). The write endpoints wrap it as
``{execution: …}``, ``{outcome: …}``, ``{crm_sync: …}`` (reference facts §6).

Members copied from the record, never from the request: `decision_id`,
`decision_record_hash` (= record `record_hash`), `decision_receipt_hash` (= `receipt_hash`),
`decision_verdict` (= `verdict`), `decision_action` (= `action`), `policy_id`,
`policy_version`, `policy_bundle_hash`; the Outcome Record also copies the record's
`action_binding`. `decision_found` is always true: a receipt is only ever built for a stored
record in the caller's scope (otherwise DECISION_NOT_FOUND).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from gate import bodies
from gate.bodies.text import utf16_length
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.protocol.records import MAX_IDEMPOTENCY_KEY
from gate.receipts.binding import (
    action_binding_match,
    check_record_references,
    derived_action_binding,
)
from gate.receipts.hashing import (
    EXECUTION_HASH_MEMBERS,
    OUTCOME_HASH_MEMBERS,
    OUTCOME_LINK_MEMBERS,
    SYNC_HASH_MEMBERS,
    hash_preimage,
)
from gate.receipts.kinds import CrmSyncRecord, ExecutionReceipt, OutcomeRecord
from gate.receipts.validation import (
    request_input_hash,
    validate_crm_sync_request,
    validate_execution_request,
    validate_outcome_request,
)
from gate.strict_json import JsonValue
from gate.vocabulary import (
    DECISION_CRM_SYNC_VERSION,
    DECISION_EXECUTION_VERSION,
    DECISION_OUTCOME_VERSION,
    DECISION_PROTOCOL_VERSION,
)

__all__ = [
    "CRM_SYNC_RECORD_MISMATCH",
    "EXECUTION_RECORD_MISMATCH",
    "OUTCOME_EXECUTION_MISMATCH",
    "OUTCOME_RECORD_MISMATCH",
    "ExecutionLookup",
    "build_crm_sync_record",
    "build_execution_receipt",
    "build_outcome_record",
    "check_execution_link",
]

EXECUTION_RECORD_MISMATCH = "SVC_EXECUTION_RECORD_MISMATCH"
OUTCOME_RECORD_MISMATCH = "SVC_OUTCOME_RECORD_MISMATCH"
CRM_SYNC_RECORD_MISMATCH = "SVC_CRM_SYNC_RECORD_MISMATCH"
OUTCOME_EXECUTION_MISMATCH = "SVC_OUTCOME_EXECUTION_MISMATCH"

# execution_receipt_id → the stored execution receipt of the outcome's decision, None when the
# decision has no execution receipt with that id.
ExecutionLookup = Callable[[str], Mapping[str, JsonValue] | None]

_HEX64 = re.compile(r"^[0-9a-f]{64}$")
# A receipt id the service gives may be as long as a caller's identifier (its kind in the receipts'
# body schemas, whose one home that limit is).
MAX_ID: int = bodies.schema("execution")["$defs"]["identifier"]["x-js-max-length"]

def _stored_record(record: Any) -> Mapping[str, JsonValue]:
    if record is None:
        raise GateError("DECISION_NOT_FOUND", "no decision with this id in your scope")
    if not isinstance(record, Mapping):
        raise TypeError("record must be the stored Decision Record (a mapping)")
    return record


def _server_text(name: str, value: Any, limit: int = MAX_ID) -> str:
    """Ids and clock values come from the service: a bad one is a programming error."""
    if not isinstance(value, str) or not value or utf16_length(value) > limit:
        raise ValueError(f"{name} must be a non-empty string of at most {limit} characters")
    return value


def _input_hash(name: str, value: str | None, body: Any) -> str:
    if value is None:
        return request_input_hash(body)
    if not isinstance(value, str) or not _HEX64.fullmatch(value):
        raise ValueError(f"{name} must be 64 lowercase hex characters (request_input_hash(body))")
    return value


def _common(record: Mapping[str, JsonValue], idempotency_key: str | None) -> dict[str, JsonValue]:
    if idempotency_key:  # None or "" mean: no key was sent
        _server_text("idempotency_key", idempotency_key, MAX_IDEMPOTENCY_KEY)
    return {
        "decision_protocol_version": DECISION_PROTOCOL_VERSION,
        "decision_id": record.get("decision_id"),
        "idempotency_key": idempotency_key,
        "decision_record_hash": record.get("record_hash"),
        "decision_receipt_hash": record.get("receipt_hash"),
        "decision_verdict": record.get("verdict"),
        "decision_action": record.get("action"),
        "policy_id": record.get("policy_id"),
        "policy_version": record.get("policy_version"),
        "policy_bundle_hash": record.get("policy_bundle_hash"),
        "decision_found": True,
    }


def _start(
    record: Any,
    body: Any,
    validate: Callable[[Any], dict[str, JsonValue]],
    code: str,
    idempotency_key: str | None,
    *,
    crm: bool = False,
) -> tuple[Mapping[str, JsonValue], dict[str, JsonValue], dict[str, JsonValue]]:
    """Not found, then validation, then record references; returns (record, fields, members)
    where members = the normalized request members overlaid with the record-derived ones."""
    record = _stored_record(record)
    fields = validate(body)
    check_record_references(fields, record, code=code, crm=crm)
    return record, fields, {**fields, **_common(record, idempotency_key)}


def _seal(members: dict[str, JsonValue], order: tuple[str, ...], hash_member: str) -> dict[str, JsonValue]:
    receipt = hash_preimage(members, order)
    receipt[hash_member] = sha256_hex(receipt)
    return receipt


def build_execution_receipt(
    *,
    body: Any,
    record: Mapping[str, Any] | None,
    execution_receipt_id: str,
    idempotency_key: str | None,
    reported_at: str,
    execution_input_hash: str | None = None,
) -> ExecutionReceipt:
    """The stored Action Execution Receipt (`decision_execution_v1`).

    `action_binding` is the supplied one, else the one derived from action_taken /
    target_system / target_object_id / mutation; `action_binding_hash` = sha256 of that binding
    ({} when there is none); `action_binding_match` follows `gate.receipts.binding`.
    `execution_input_hash` must be `request_input_hash(body)` (computed when None).
    """
    record, fields, members = _start(record, body, validate_execution_request, EXECUTION_RECORD_MISMATCH,
                                     idempotency_key)
    binding = fields.get("action_binding") or derived_action_binding(fields)
    members.update(
        decision_execution_version=DECISION_EXECUTION_VERSION,
        execution_receipt_id=_server_text("execution_receipt_id", execution_receipt_id),
        action_binding=binding,
        action_binding_hash=sha256_hex(binding),
        action_binding_match=action_binding_match(record.get("action_binding"), binding),
        execution_input_hash=_input_hash("execution_input_hash", execution_input_hash, body),
        reported_at=_server_text("reported_at", reported_at),
    )
    # The validated request's members, the record's and the ones set above, compacted: the shape
    # `ExecutionReceipt` states (tests/receipts/test_receipt_kinds.py builds one of each).
    return cast(ExecutionReceipt, _seal(members, EXECUTION_HASH_MEMBERS, "execution_hash"))


def check_execution_link(fields: Mapping[str, Any], lookup: ExecutionLookup | None) -> dict[str, str]:
    """The outcome's link members (`{}` without a link); SVC_OUTCOME_EXECUTION_MISMATCH unless
    they name an execution receipt of the outcome's decision (`lookup`) and its `execution_hash`.

    An unknown id and an id of another decision's receipt get the same answer, so the refusal
    never tells a caller that a receipt id exists outside its decision."""
    link = {name: fields[name] for name in OUTCOME_LINK_MEMBERS if name in fields}
    if not link:
        return {}
    stored = lookup(link["execution_receipt_id"]) if lookup is not None else None
    if stored is None:
        raise GateError(OUTCOME_EXECUTION_MISMATCH,
                        "execution_receipt_id names no execution receipt of this decision; "
                        "record the execution first (POST .../execution) and send its id and hash",
                        fields=["execution_receipt_id"], supplied=link)
    if stored.get("execution_hash") != link["execution_hash"]:
        raise GateError(OUTCOME_EXECUTION_MISMATCH,
                        "execution_hash is not the hash of the named execution receipt",
                        fields=["execution_hash"], supplied=link,
                        expected={"execution_receipt_id": link["execution_receipt_id"],
                                  "execution_hash": stored.get("execution_hash")})
    return link


def build_outcome_record(
    *,
    body: Any,
    record: Mapping[str, JsonValue] | None,
    outcome_id: str,
    idempotency_key: str | None,
    reported_at: str,
    outcome_input_hash: str | None = None,
    execution_lookup: ExecutionLookup | None = None,
) -> OutcomeRecord:
    """The stored Outcome Record (`decision_outcome_v1`); `action_binding` is the record's.

    With `execution_receipt_id` and `execution_hash` in the body, `execution_lookup` must find
    that execution receipt of the decision (`check_execution_link`); the two members follow the
    hash member, outside `outcome_hash`."""
    record, fields, members = _start(record, body, validate_outcome_request, OUTCOME_RECORD_MISMATCH,
                                     idempotency_key)
    link = check_execution_link(fields, execution_lookup)
    members.update(
        decision_outcome_version=DECISION_OUTCOME_VERSION,
        outcome_id=_server_text("outcome_id", outcome_id),
        action_binding=copy.deepcopy(record.get("action_binding")),
        outcome_input_hash=_input_hash("outcome_input_hash", outcome_input_hash, body),
        reported_at=_server_text("reported_at", reported_at),
    )
    # As the execution receipt's: the shape `OutcomeRecord` states, the link last.
    return cast(OutcomeRecord, {**_seal(members, OUTCOME_HASH_MEMBERS, "outcome_hash"), **link})


def build_crm_sync_record(
    *,
    body: Any,
    record: Mapping[str, JsonValue] | None,
    sync_id: str,
    idempotency_key: str | None,
    reported_at: str,
    sync_input_hash: str | None = None,
) -> CrmSyncRecord:
    """The stored CRM sync record (`decision_crm_sync_v1`): mapped field names and the CRM
    object reference, never credentials."""
    record, _, members = _start(record, body, validate_crm_sync_request, CRM_SYNC_RECORD_MISMATCH,
                                idempotency_key, crm=True)
    members.update(
        decision_crm_sync_version=DECISION_CRM_SYNC_VERSION,
        sync_id=_server_text("sync_id", sync_id),
        sync_input_hash=_input_hash("sync_input_hash", sync_input_hash, body),
        reported_at=_server_text("reported_at", reported_at),
    )
    # As the execution receipt's: the shape `CrmSyncRecord` states.
    return cast(CrmSyncRecord, _seal(members, SYNC_HASH_MEMBERS, "sync_hash"))
