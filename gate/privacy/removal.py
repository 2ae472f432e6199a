"""What is left of a decision whose inputs were removed (issue 67, items 3 and 4; docs/privacy.md,
"Retention"): pure, so the ledger, the outbox, the dataset and every verifier read one answer.

A removal takes out what the caller sent and what the record copied of it (the facts, the
action binding, the evidence) and keeps every hash: the decisions row keeps `input_hash`,
`record_hash`, `receipt_hash` and its seal; the chain links, the Merkle tree and the
checkpoints are untouched. The stored record becomes its *remainder*: the members in
`KEPT_MEMBERS` (ids, verdict, the policy's identity, the hashes, the receipt's signature over
{decision_id, key_id, receipt_hash, record_hash}, the audit chain position) plus
`inputs_removed`, which says by what (`cause`: `retention`, later `erasure`), when, and under what
(`ref`: the retention's days, an erasure event's number), and the two inner hashes of the
receipt (`action_binding_hash`, `evidence_manifest_hash`) so `receipt_hash` still recomputes.
The stored request becomes `removed_request`: the same marker, no member of the request.

What a remainder proves: its `receipt_signature` still verifies (it signs the hashes), its
`receipt_hash` recomputes, and its `record_hash` is the leaf's: chain membership by hash. What it
cannot prove is the body: a caller who kept the signed record proves it against the remainder's
`record_hash` (`gate verify`, or POST it to the verify route).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TypedDict

from gate.protocol.canonical import canonical_text, sha256_hex
from gate.protocol.records import receipt_hash_preimage

__all__ = ["CAUSES", "ERASURE", "KEPT_MEMBERS", "MARKER", "REMOVED_CODE", "RETENTION", "Cause", "InputsRemoved",
           "RemovedJSON", "event_remainder", "inputs_removed", "marker", "remainder", "remainder_receipt_hash",
           "removal_causes", "removed", "removed_request", "summary"]

MARKER = "inputs_removed"
RETENTION, ERASURE = "retention", "erasure"
CAUSES = (RETENTION, ERASURE)
REMOVED_CODE = "DECISION_INPUTS_REMOVED"

# Record members a remainder keeps: none of them holds a fact the caller sent (the idempotency
# key is also a column under the row's seal, which a removal never touches).
KEPT_MEMBERS = (
    "decision_protocol_version", "decision_record_version", "decision_id", "idempotency_key", "verdict", "application_verdict",
    "policy_id", "policy_version", "policy_hash", "policy_bundle_hash", "input_hash", "output_hash",
    "record_hash", "receipt_hash", "receipt_signature", "receipt_signature_algorithm", "receipt_key_id",
    "receipt_public_key_fingerprint", "created_at", "audit_chain", "rulebook",
    "rulebook_contract", "evaluator_version", "matched_rule_id", "reason_code", "replay_url", "verify_url",
    "rulebook_registry", "rulebook_attestation",
)


class RemovedJSON(TypedDict):
    """The `inputs_removed` member of a remainder and of a removed request."""

    cause: str
    ref: str
    removed_at: str
    action_binding_hash: str
    evidence_manifest_hash: str


class InputsRemoved(TypedDict):
    """How many decisions of a range had their inputs removed, per cause: the one shape the
    dry-run (`workbench.migration.summary`) and the policy reports (`workbench.reports.policy`)
    state, never counted as changed."""

    count: int
    by: dict[str, int]


def inputs_removed(causes: Mapping[str, int]) -> InputsRemoved:
    """`InputsRemoved` of per-cause counts (causes in order, none with zero)."""
    by = {cause: int(number) for cause, number in sorted(causes.items()) if number}
    return {"count": sum(by.values()), "by": by}


def removal_causes(rows: Iterable[Mapping[str, Any]]) -> Counter[str]:
    """The causes of the ledger rows (`gate.ledger.stream.DECISION_ROW_COLUMNS`) whose stored
    record is a remainder: the removal rewrites the record in the transaction that files its
    `decision_removals` row, so the rows read say it exactly for the decisions read."""
    causes: Counter[str] = Counter()
    for row in rows:
        text = row["record_json"]
        if MARKER in text:  # cheap first: a whole record parses only when the word appears in it
            found = removed(json.loads(text))
            if found is not None:
                causes[str(found.get("cause"))] += 1
    return causes


@dataclass(frozen=True, slots=True)
class Cause:
    """By what a decision's inputs were removed: `retention` (ref: "30 days") or `erasure`
    (ref: the erasure event), at `removed_at`."""

    cause: str
    ref: str
    removed_at: str

    def __post_init__(self) -> None:
        if self.cause not in CAUSES:
            raise ValueError(f"unknown removal cause {self.cause!r}")


def marker(record: Mapping[str, Any], cause: Cause) -> RemovedJSON:
    """The `inputs_removed` member for a record (its receipt's two inner hashes kept)."""
    preimage = receipt_hash_preimage(record)
    return {"cause": cause.cause, "ref": cause.ref, "removed_at": cause.removed_at,
            "action_binding_hash": str(preimage["action_binding_hash"]),
            "evidence_manifest_hash": str(preimage["evidence_manifest_hash"])}


def remainder(record: Mapping[str, Any], cause: Cause) -> dict[str, Any]:
    """The record as a removal leaves it: `KEPT_MEMBERS` and `inputs_removed` (a record removed
    before keeps its first marker: a second removal changes nothing)."""
    if MARKER in record:
        return dict(record)
    kept = {name: record[name] for name in KEPT_MEMBERS if name in record}
    return {**kept, MARKER: marker(record, cause)}


def removed_request(cause: Cause) -> str:
    """The stored request's text after a removal: only the marker (canonical JSON)."""
    return canonical_text({MARKER: {"cause": cause.cause, "ref": cause.ref, "removed_at": cause.removed_at}})


def removed(record: Any) -> Mapping[str, Any] | None:
    """The `inputs_removed` member of a remainder, or None for a whole record."""
    if not isinstance(record, Mapping):
        return None
    found = record.get(MARKER)
    return found if isinstance(found, Mapping) else None


def remainder_receipt_hash(record: Mapping[str, Any]) -> str | None:
    """A remainder's `receipt_hash` recomputed from its kept hashes and its marker's two inner
    hashes (None when `record` is not a remainder)."""
    found = removed(record)
    if found is None:
        return None
    preimage = receipt_hash_preimage(record)
    preimage.update(action_binding_hash=found.get("action_binding_hash"),
                    evidence_manifest_hash=found.get("evidence_manifest_hash"))
    return sha256_hex(preimage)


def event_remainder(event: Mapping[str, Any], cause: Cause) -> dict[str, Any] | None:
    """A stored event that copied a removed decision's record (`decision.created`) with the record
    replaced by its remainder; None when the event holds no record (nothing to change)."""
    data = event.get("data")
    if not isinstance(data, Mapping) or not isinstance(data.get("record"), Mapping):
        return None
    return {**event, "data": {**data, "record": remainder(data["record"], cause)}}


def summary(marker_json: Mapping[str, Any]) -> dict[str, str]:
    """What a verification, a packet or a replay answer states of a removal."""
    return {"cause": str(marker_json.get("cause")), "ref": str(marker_json.get("ref")),
            "removed_at": str(marker_json.get("removed_at"))}
