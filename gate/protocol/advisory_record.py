"""The advisory Decision Record's wire shape: its members, how it reads, and the hash over the
members only it has. The builder (`gate.advisory.record`) and the verifier (`gate.verify.record`)
share it, so it lives in the record protocol, below both.

How an advisory record reads (docs/advisory.md): the advisors' combined opinion (`yes`, `no`,
`review`) sets `verdict`, `c`, `v` and `action` as `READING` says, so no reader of `c` or
`verdict` alone can take an advisory approval for a production one; the contract members
`decision_contract` (`ADVISORY_CONTRACT`) and `production_binding_required: true` are on every
advisory record. `advisory_output_hash` binds the members the reference's envelope leaves out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypedDict

from gate.protocol.canonical import sha256_hex
from gate.strict_json import JsonValue

__all__ = [
    "ADVISORY_CONTRACT",
    "ADVISORY_RECORD_ALLOWED",
    "ADVISORY_RECORD_REQUIRED",
    "READING",
    "AdvisoryContract",
    "advisory_output_hash",
    "carries_advisory_members",
    "is_advisory",
    "reading_consistent",
]


class AdvisoryContract(TypedDict):
    """`decision_contract` of an advisory record or answer: it never authorizes production."""

    authority: Literal["advisory_only"]
    production_verdict: Literal[False]


ADVISORY_CONTRACT: AdvisoryContract = {"authority": "advisory_only", "production_verdict": False}

# combined opinion -> (verdict, c, v, action)
READING = {
    "yes": ("review", "unclear", "approved", "hold_for_binding_decision"),
    "no": ("no", "no", "denied", "block_action"),
    "review": ("review", "unclear", "review", "hold_for_owner_review"),
}

ADVISORY_RECORD_REQUIRED = frozenset({
    "decision_protocol_version", "decision_record_version", "status", "mode", "c", "v", "verdict",
    "advisory_verdict", "decision_contract", "production_binding_required", "advisory", "request_id",
    "decision_id", "evidence", "evidence_manifest", "action", "action_binding", "policy_id", "policy_version",
    "policy_hash", "input_hash", "output_hash", "record_hash", "receipt_hash", "replay_url", "verify_url",
    "decision_url", "integrity", "created_at",
})
ADVISORY_RECORD_ALLOWED = ADVISORY_RECORD_REQUIRED | {
    "idempotency_key", "receipt_key_id", "receipt_signature", "receipt_signature_algorithm",
    "receipt_public_key_fingerprint", "audit_chain", "audit_chain_signature",
}
_OUTPUT_MEMBERS = ("status", "mode", "c", "v", "verdict", "advisory_verdict", "action", "evidence",
                   "decision_contract", "production_binding_required", "advisory")


def is_advisory(record: object) -> bool:
    """THE rule for "is this record advisory?" (so it never approves an action), shared by the
    core, the routes and both client modules (`gate_client.client`, `gate_client.routing`).

    SECURITY: fail closed. A record is advisory when it is not an object, or it carries any part
    of the advisory contract: an `advisory` member; a `production_binding_required` that is
    anything but false; or a `decision_contract` that is not a production contract, that is an
    object whose `production_verdict` is exactly true and whose `authority` is a string other than
    `advisory_only` (any case, any surrounding space). A missing, null or malformed contract member
    counts against the record. A record with none of the three members is not advisory."""
    if not isinstance(record, Mapping):
        return True
    if "advisory" in record:
        return True
    if "production_binding_required" in record and record["production_binding_required"] is not False:
        return True
    return "decision_contract" in record and not _production_contract(record["decision_contract"])


def _production_contract(contract: object) -> bool:
    if not isinstance(contract, Mapping) or contract.get("production_verdict") is not True:
        return False
    authority = contract.get("authority")
    return isinstance(authority, str) and authority.strip().lower() != "advisory_only"


def carries_advisory_members(record: Mapping[str, JsonValue]) -> bool:
    """Whether the verifier checks `record` against the advisory record's closed member set: it
    carries any advisory member at all. Wider than `is_advisory` on purpose (every record
    `is_advisory` calls advisory carries one): a binding record that grew such a member is checked
    as advisory and fails `record_members`, never passes as binding."""
    return "decision_contract" in record or "advisory" in record or "production_binding_required" in record


def advisory_output_hash(record: Mapping[str, Any]) -> str:
    """sha256 of the members that only the advisory record has (missing members are null)."""
    return sha256_hex({name: record.get(name) for name in _OUTPUT_MEMBERS})


def reading_consistent(record: Mapping[str, JsonValue]) -> bool:
    """The contract holds: exact contract members, and c / v / verdict / action as `READING` says
    for the stated `advisory_verdict` (so an advisory approval can never read as `yes`)."""
    opinion = record.get("advisory_verdict")
    if opinion not in READING:
        return False
    verdict, c, v, action = READING[opinion]
    advisory = record.get("advisory")
    return (record.get("decision_contract") == ADVISORY_CONTRACT
            and record.get("production_binding_required") is True
            and record.get("verdict") == verdict and record.get("c") == c and record.get("v") == v
            and record.get("action") == action
            and isinstance(advisory, Mapping) and advisory.get("combined_decision") == opinion)
