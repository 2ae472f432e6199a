"""Hashing, signing and link checks shared by the signed chains: the release chains, the
governance chain, the key grant chain and the hold chains.

`event_hash` = sha256(canon(the event without `event_hash` and its signature members)); the
receipt key signs canon({event_hash, key_id}). `chain_problem` checks one event's place in its
chain offline: gap-free seq, scope, link to the event before, content hash, signature.
"""

from __future__ import annotations

from collections.abc import Mapping, Set
from typing import Any, NotRequired, TypedDict

from gate.keys.anchors import TrustAnchors
from gate.keys.detached import signature_holds
from gate.keys.signing import ReceiptSigner
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.strict_json import JsonValue

SIGNATURE_MEMBERS = ("event_hash", "key_id", "signature_algorithm", "public_key_fingerprint", "signature")
_SEAL = frozenset(SIGNATURE_MEMBERS)
_HASH_ONLY = frozenset({"event_hash"})
UNSIGNED = "unsigned (written with signing off): no key vouches for it"


class Seal(TypedDict):
    """The members `seal` adds to an event: its hash always, the signature members with a signer."""

    event_hash: str
    key_id: NotRequired[str]
    signature_algorithm: NotRequired[str]
    public_key_fingerprint: NotRequired[str | None]
    signature: NotRequired[str]


def event_hash(event: Mapping[str, object]) -> str:
    return sha256_hex({k: v for k, v in event.items() if k not in SIGNATURE_MEMBERS})


def sealed_members(event: Mapping[str, JsonValue], body: Set[str]) -> bool:
    """Whether `event`'s members are exactly `body`'s and a seal's: `event_hash` alone (what a
    gate with signing off, GATE_REQUIRE_SIGNING=false and no key, writes) or with every signature
    member. An event without a signature is intact, never authentic: where trust anchors are
    given, the signature check names it (`signature_problem`: "signature has no trusted key")."""
    members = frozenset(map(str, event))
    return members - _SEAL == body and members & _SEAL in (_HASH_ONLY, _SEAL)


def signature_payload(event_hash_value: str, key_id: str) -> bytes:
    return canonical_bytes({"event_hash": event_hash_value, "key_id": key_id})


def seal_of(body: Mapping[str, object], signer: ReceiptSigner | None) -> Seal:
    """The hash of an event's `body` (no signature member in it) and, with a signer, its
    signature members, in the order they follow the body: `{**body, **seal_of(body, signer)}`."""
    sealed: Seal = {"event_hash": event_hash(body)}
    if signer is not None:
        sealed["key_id"] = signer.key_id
        sealed["signature_algorithm"] = signer.algorithm
        sealed["public_key_fingerprint"] = signer.public_key_fingerprint
        sealed["signature"] = signer.sign_payload(signature_payload(sealed["event_hash"], signer.key_id))
    return sealed


def chain_problem(event: Mapping[str, JsonValue], where: str, seq_before: int, head_before: str | None,
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


def signature_problem(event: Mapping[str, JsonValue], anchors: TrustAnchors) -> str | None:
    """The event's signature by a trusted key over canon({event_hash, key_id}), or what is wrong
    with it (release, governance and hold events alike). An event written with signing off
    carries no signature member: it is named unsigned, never checked against a key."""
    if "signature" not in event:
        return UNSIGNED
    payload = signature_payload(str(event.get("event_hash")), str(event.get("key_id")))
    held = signature_holds(anchors, event.get("signature_algorithm"), event.get("key_id"),
                           event.get("public_key_fingerprint"), event.get("signature"), payload)
    if held is True:
        return None
    return "signature fails" if held is False else "signature has no trusted key"


def seal(event: dict[str, object], signer: ReceiptSigner | None) -> None:
    """Set the event's hash and, with a signer, its signature members (in place): an event
    edited after it was built, sealed again (what tests of a forged event do)."""
    event.update(seal_of(event, signer))  # event_hash leaves the signature members out
