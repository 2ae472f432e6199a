"""The record's `release_arm` member: which release arm decided a decide by reference.

`{release_arm_version: "release_arm_v1", rulebook_id, version, arm (active | canary | pinned |
replayed), release_seq (the release event the decide read), subject_hash (sha256 of the canary
subject, when a canary ran), release_arm_hash}`. Like `decision_confidence` and `audit_chain` it is
outside record_hash (the envelope is exactly an inline decide's), so the receipt key signs it on
its own: `release_arm_signature` over canon({decision_id, key_id, release_arm_hash}).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NotRequired, TypedDict

from gate.protocol.canonical import canonical_bytes, sha256_hex


class ArmBlock(TypedDict):
    """What a decide by reference observed (`gate.services.release_routing`): the version that
    decided, and why (`subject_hash` None when no canary ran)."""

    release_arm_version: str
    rulebook_id: str
    version: str
    arm: str
    release_seq: int
    subject_hash: str | None


class ReleaseArm(TypedDict):
    """The record's `release_arm` member: the `ArmBlock` without its None members, and its hash."""

    release_arm_version: str
    rulebook_id: str
    version: str
    arm: str
    release_seq: int
    subject_hash: NotRequired[str]
    release_arm_hash: str


def release_arm_hash(block: Mapping[str, Any]) -> str:
    return sha256_hex({k: v for k, v in block.items() if k != "release_arm_hash"})


def release_arm_signature_payload(decision_id: Any, key_id: Any, arm_hash: Any) -> bytes:
    return canonical_bytes({"decision_id": decision_id, "key_id": key_id, "release_arm_hash": arm_hash})


