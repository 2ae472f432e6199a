"""The record's `release_arm` member: which release arm decided a decide by reference.

`{release_arm_version: "release_arm_v1", rulebook_id, version, arm (active | canary | pinned |
replayed), release_seq (the release event the decide read), subject_hash (sha256 of the canary
subject, when a canary ran), release_arm_hash}`. Like `decision_confidence` and `audit_chain` it is
outside record_hash (the envelope is exactly an inline decide's), so the receipt key signs it on
its own: `release_arm_signature` over canon({decision_id, key_id, release_arm_hash}).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.protocol.canonical import canonical_bytes, sha256_hex


def release_arm_hash(block: Mapping[str, Any]) -> str:
    return sha256_hex({k: v for k, v in block.items() if k != "release_arm_hash"})


def release_arm_signature_payload(decision_id: Any, key_id: Any, arm_hash: Any) -> bytes:
    return canonical_bytes({"decision_id": decision_id, "key_id": key_id, "release_arm_hash": arm_hash})


def attach_release_arm(record: dict[str, Any], block: Mapping[str, Any], receipt_signer: Any) -> dict[str, Any]:
    """Give a built record its `release_arm` member (and signature, with a signer). Mutates `record`."""
    member = {k: v for k, v in block.items() if v is not None}
    member["release_arm_hash"] = release_arm_hash(member)
    record["release_arm"] = member
    record.pop("release_arm_signature", None)
    if receipt_signer is not None:
        record["release_arm_signature"] = receipt_signer.sign_payload(
            release_arm_signature_payload(record.get("decision_id"), receipt_signer.key_id,
                                          member["release_arm_hash"]))
    return record
