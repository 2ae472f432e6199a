"""Hashing, signing and link checks shared by the release chains and the governance chain.

`event_hash` = sha256(canon(the event without `event_hash` and its signature members)); the
receipt key signs canon({event_hash, key_id}). `chain_problem` checks one event's place in its
chain offline: gap-free seq, scope, link to the event before, content hash, signature.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.verify.signatures import signature_holds

SIGNATURE_MEMBERS = ("event_hash", "key_id", "signature_algorithm", "public_key_fingerprint", "signature")


def event_hash(event: Mapping[str, Any]) -> str:
    return sha256_hex({k: v for k, v in event.items() if k not in SIGNATURE_MEMBERS})


def signature_payload(event_hash_value: str, key_id: str) -> bytes:
    return canonical_bytes({"event_hash": event_hash_value, "key_id": key_id})


def seal(event: dict[str, Any], signer: ReceiptSigner | None) -> None:
    """Set the event's hash and, with a signer, its signature members (in place)."""
    event["event_hash"] = event_hash(event)
    if signer is not None:
        event["key_id"] = signer.key_id
        event["signature_algorithm"] = signer.algorithm
        event["public_key_fingerprint"] = signer.public_key_fingerprint
        event["signature"] = signer.sign_payload(signature_payload(event["event_hash"], signer.key_id))


def chain_problem(event: Mapping[str, Any], where: str, seq_before: int, head_before: str | None,
                  expected_scope_hash: Any, anchors: TrustAnchors | None) -> str | None:
    """The first problem of an event's place in its chain, or None."""
    if event.get("seq") != seq_before + 1:
        return f"{where}: seq {event.get('seq')!r}, expected {seq_before + 1} (gap or reorder)"
    if event.get("scope_hash") != expected_scope_hash:
        return f"{where}: belongs to another scope"
    if event.get("previous_event_hash") != head_before:
        return f"{where}: previous_event_hash does not link to the event before it"
    if event.get("event_hash") != event_hash(event):
        return f"{where}: event_hash does not match its content (tampered)"
    problem = signature_problem(event, anchors) if anchors is not None else None
    return f"{where}: {problem}" if problem is not None else None


def signature_problem(event: Mapping[str, Any], anchors: TrustAnchors) -> str | None:
    """The event's signature by a trusted key over canon({event_hash, key_id}), or what is wrong
    with it (release, governance and hold events alike)."""
    payload = signature_payload(str(event.get("event_hash")), str(event.get("key_id")))
    held = signature_holds(anchors, event.get("signature_algorithm"), event.get("key_id"),
                           event.get("public_key_fingerprint"), event.get("signature"), payload)
    if held is True:
        return None
    return "signature fails" if held is False else "signature has no trusted key"
