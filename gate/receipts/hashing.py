"""Hash preimages of execution receipts, outcome records and CRM sync records.

Reference facts §6: each hash is ``sha256(canonical(compact(pick(receipt, MEMBERS))))`` where

* ``pick`` keeps only the listed members that the receipt has (any other member, including the
  hash member itself, is not hashed);
* ``compact`` drops, at the top level only, members whose value is ``null``, ``""`` or ``{}``
  (``false``, ``0`` and arrays are values and are kept);
* ``canonical`` is ``json.sort_deep.v1`` (`gate.protocol.canonical`), and the hash is the bare
  lowercase hex sha256 of its UTF-8 bytes.

Receipts built by this gate never contain null, "", {} or [] at any depth, so the top-level
compaction above and the deep compaction of `gate.protocol.records.compact_deep` give the same preimage
for them; only foreign receipts could tell the two apart, and for those we follow the
reference's top-level rule literally.

The member lists are part of the contract: changing one changes every hash. The CRM list is
ours (the reference facts do not list it) and is written out in docs/receipts.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.protocol.canonical import sha256_hex
from gate.strict_json import JsonValue

__all__ = [
    "EXECUTION_HASH_MEMBERS",
    "OUTCOME_HASH_MEMBERS",
    "OUTCOME_LINK_MEMBERS",
    "RECORD_LINKS",
    "SYNC_HASH_MEMBERS",
    "compact",
    "execution_hash_of",
    "hash_preimage",
    "outcome_hash_of",
    "sync_hash_of",
]

# Receipt member -> the decision record member it repeats: the decision a receipt follows, in
# every kind's preimage (and checked against the record by `gate.receipts.links` and the packet's
# fast path, `gate.packets.receipts_fast`).
RECORD_LINKS = (
    ("decision_id", "decision_id"),
    ("decision_record_hash", "record_hash"),
    ("decision_receipt_hash", "receipt_hash"),
    ("decision_verdict", "verdict"),
    ("decision_action", "action"),
    ("policy_id", "policy_id"),
    ("policy_version", "policy_version"),
    ("policy_bundle_hash", "policy_bundle_hash"),
)
# The members each kind's preimage shares, stated once (the hash is over canonical JSON, whose
# key order is its own: the lists keep the reference's order for reading, not for the hash).
_DECISION_BINDING = tuple(member for member, _source in RECORD_LINKS[1:])  # decision_id leads with the ids
_ACTION = ("action_taken", "target_system", "target_object_id", "mutation", "external_ref")
_REPORTED = ("reported_at", "decision_found")

EXECUTION_HASH_MEMBERS = (
    "decision_protocol_version",
    "decision_execution_version",
    "execution_receipt_id",
    "decision_id",
    "idempotency_key",
    "execution_status",
    "execution_result",
    *_ACTION,
    "execution_id",
    "executor",
    *_DECISION_BINDING,
    "action_binding",
    "action_binding_hash",
    "action_binding_match",
    "state_before_hash",
    "state_after_hash",
    "state_before_ref",
    "state_after_ref",
    "evidence_refs",
    "execution_input_hash",
    "executed_at",
    *_REPORTED,
)

OUTCOME_HASH_MEMBERS = (
    "decision_protocol_version",
    "decision_outcome_version",
    "outcome_id",
    "decision_id",
    "idempotency_key",
    "outcome_status",
    "action_executed",
    *_ACTION,
    *_DECISION_BINDING,
    "action_binding",
    "observed_metrics",
    "evidence_refs",
    "outcome_input_hash",
    "executed_at",
    *_REPORTED,
)

# The execution an Outcome Record follows (the reference's lifecycle example sends both with the
# outcome). Stated beside `outcome_hash`, never in it: `outcome_hash` stays over the reference's
# list above, so every outcome hashes as before. The link is checked against the named execution
# receipt instead: when written (SVC_OUTCOME_EXECUTION_MISMATCH), by packet verification
# (`gate.receipts.links`) and by the ledger's row seal (`gate.chain.rowseal`).
OUTCOME_LINK_MEMBERS = ("execution_receipt_id", "execution_hash")

# Ours, by analogy with the two lists above (docs/receipts.md, "CRM sync hash").
SYNC_HASH_MEMBERS = (
    "decision_protocol_version",
    "decision_crm_sync_version",
    "sync_id",
    "decision_id",
    "idempotency_key",
    "sync_status",
    "sync_direction",
    "crm_provider",
    "crm_object_type",
    "crm_object_id",
    "crm_record_url",
    "field_mapping",
    "external_ref",
    *_DECISION_BINDING,
    "sync_input_hash",
    "synced_at",
    *_REPORTED,
)


def _is_dropped(value: Any) -> bool:
    return value is None or (isinstance(value, str) and value == "") or (
        isinstance(value, Mapping) and len(value) == 0
    )


def compact(members: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """Top-level compaction of §6: drop members whose value is null, "" or {}."""
    return {name: value for name, value in members.items() if not _is_dropped(value)}


def hash_preimage(source: Mapping[str, JsonValue], members: tuple[str, ...]) -> dict[str, JsonValue]:
    """``compact(pick(source, members))``, in `members` order."""
    return compact({name: source[name] for name in members if name in source})


def execution_hash_of(receipt: Mapping[str, JsonValue]) -> str:
    """Recompute `execution_hash` from a stored or exported execution receipt."""
    return sha256_hex(hash_preimage(receipt, EXECUTION_HASH_MEMBERS))


def outcome_hash_of(outcome: Mapping[str, JsonValue]) -> str:
    """Recompute `outcome_hash` from a stored or exported Outcome Record."""
    return sha256_hex(hash_preimage(outcome, OUTCOME_HASH_MEMBERS))


def sync_hash_of(sync: Mapping[str, JsonValue]) -> str:
    """Recompute `sync_hash` from a stored or exported CRM sync record."""
    return sha256_hex(hash_preimage(sync, SYNC_HASH_MEMBERS))
