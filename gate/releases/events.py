"""Release events (`release_event_v1`): each transition of a release, hashed, chained and signed.

An event states the action and its inputs (who, when, why, the dry-run manifest it rests on, the
guardrail evidence of an automatic halt), the hash of the event before it, and the release state
after it. `event_hash` = sha256(canon(the event without `event_hash` and its signature members));
the receipt key signs canon({event_hash, key_id}). `verify_history` checks a whole history offline:
every hash, every link, every signature against the trust anchors, gap-free sequence numbers, and
that each stated state is exactly the fold of the actions before it (gate.releases.model).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gate.keys.signing import ReceiptSigner
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.releases.model import (
    Action,
    Canary,
    Pending,
    ReleaseRefused,
    ReleaseState,
    Version,
    transition,
)
from gate.verify.anchors import TrustAnchors
from gate.verify.signatures import signature_holds

EVENT_VERSION = "release_event_v1"
HISTORY_VERSION = "release_history_v1"
SIGNATURE_MEMBERS = ("event_hash", "key_id", "signature_algorithm", "public_key_fingerprint", "signature")


def event_hash(event: Mapping[str, Any]) -> str:
    return sha256_hex({k: v for k, v in event.items() if k not in SIGNATURE_MEMBERS})


def signature_payload(event_hash_value: str, key_id: str) -> bytes:
    return canonical_bytes({"event_hash": event_hash_value, "key_id": key_id})


@dataclass(frozen=True, slots=True)
class EventInputs:
    """What an event states beyond the action itself."""

    scope_hash: str
    reason: str | None = None
    migration_manifest_hash: str | None = None
    evidence: Mapping[str, Any] | None = None


def state_member(state: ReleaseState) -> dict[str, Any]:
    """The state an event states (its sequence and head are the event's own)."""
    body = state.to_json()
    body.pop("seq")
    body.pop("head_event_hash")
    return body


def build_event(state: ReleaseState, action: Action, inputs: EventInputs,
                signer: ReceiptSigner | None) -> tuple[dict[str, Any], ReleaseState]:
    """The signed event for `action` on `state`, and the state after it (raises ReleaseRefused)."""
    seq = state.seq + 1
    after = transition(state, action, seq)
    event: dict[str, Any] = {
        "release_event_version": EVENT_VERSION,
        "scope_hash": inputs.scope_hash,
        "rulebook_id": state.rulebook_id,
        "seq": seq,
        "action": action.action,
        "actor": action.actor,
        "created_at": action.at,
        "version": action.version.version if action.version else None,
        "rulebook_hash": action.version.rulebook_hash if action.version else None,
        "percent": action.percent,
        "subject": action.subject,
        "request_seq": action.request_seq,
        "approval_expires_at": action.approval_expires_at,
        "reason": inputs.reason,
        "migration_manifest_hash": inputs.migration_manifest_hash,
        "evidence": dict(inputs.evidence) if inputs.evidence is not None else None,
        "previous_event_hash": state.head_event_hash,
        "state": state_member(after),
    }
    event["event_hash"] = event_hash(event)
    if signer is not None:
        event["key_id"] = signer.key_id
        event["signature_algorithm"] = signer.algorithm
        event["public_key_fingerprint"] = signer.public_key_fingerprint
        event["signature"] = signer.sign_payload(signature_payload(event["event_hash"], signer.key_id))
    return event, replace(after, seq=seq, head_event_hash=event["event_hash"])


def action_of(event: Mapping[str, Any]) -> Action:
    """The action an event states, as the state machine takes it."""
    version = None
    if isinstance(event.get("version"), str) and isinstance(event.get("rulebook_hash"), str):
        version = Version(event["version"], event["rulebook_hash"])
    return Action(action=str(event.get("action")), actor=str(event.get("actor")), at=str(event.get("created_at")),
                  version=version, percent=event.get("percent"), subject=event.get("subject"),
                  request_seq=event.get("request_seq"), approval_expires_at=event.get("approval_expires_at"))


def _version(body: Any) -> Version | None:
    return Version(body["version"], body["rulebook_hash"]) if isinstance(body, Mapping) else None


def state_from_member(rulebook_id: str, seq: int, head: str | None, body: Mapping[str, Any]) -> ReleaseState:
    """A stored state member back to a ReleaseState (what decide reads from the head event)."""
    canary = body.get("canary")
    return ReleaseState(
        rulebook_id=rulebook_id, seq=seq, head_event_hash=head,
        active=_version(body.get("active")),
        previous=tuple(v for v in (_version(p) for p in body.get("previous") or ()) if v),
        shadow=_version(body.get("shadow")),
        canary=Canary(Version(canary["version"], canary["rulebook_hash"]), canary["percent"], canary["subject"],
                      canary["since_seq"])
        if isinstance(canary, Mapping) else None,
        pending=tuple(Pending(p["request_seq"], p["action"], Version(p["version"], p["rulebook_hash"]),
                              p.get("percent"), p.get("subject"), p["requested_by"], p["expires_at"])
                      for p in body.get("pending") or ()),
    )


@dataclass(frozen=True, slots=True)
class HistoryCheck:
    """What `verify_history` found: overall validity and the first problem of each event."""

    valid: bool
    events: int
    problems: tuple[str, ...] = field(default_factory=tuple)
    state: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "events": self.events, "problems": list(self.problems), "state": self.state}


def _event_problem(event: Any, index: int, state: ReleaseState, anchors: TrustAnchors | None,
                   expected_scope_hash: Any) -> tuple[str | None, ReleaseState]:
    if not isinstance(event, Mapping) or event.get("release_event_version") != EVENT_VERSION:
        return f"event {index + 1}: not a {EVENT_VERSION} object", state
    if event.get("seq") != state.seq + 1:
        return f"event {index + 1}: seq {event.get('seq')!r}, expected {state.seq + 1} (gap or reorder)", state
    if event.get("rulebook_id") != state.rulebook_id or event.get("scope_hash") != expected_scope_hash:
        return f"event {index + 1}: belongs to another release", state
    if event.get("previous_event_hash") != state.head_event_hash:
        return f"event {index + 1}: previous_event_hash does not link to the event before it", state
    if event.get("event_hash") != event_hash(event):
        return f"event {index + 1}: event_hash does not match its content (tampered)", state
    if anchors is not None:
        payload = signature_payload(str(event.get("event_hash")), str(event.get("key_id")))
        held = signature_holds(anchors, event.get("signature_algorithm"), event.get("key_id"),
                               event.get("public_key_fingerprint"), event.get("signature"), payload)
        if held is not True:
            return f"event {index + 1}: signature {'fails' if held is False else 'has no trusted key'}", state
    try:
        after = replace(transition(state, action_of(event), state.seq + 1),
                        seq=state.seq + 1, head_event_hash=event["event_hash"])
    except ReleaseRefused as refused:
        return f"event {index + 1}: the state machine refuses this action ({refused.code})", state
    if state_member(after) != event.get("state"):
        return f"event {index + 1}: stated state is not the fold of the actions", state
    return None, after


def verify_history(events: Sequence[Any], anchors: TrustAnchors | None) -> HistoryCheck:
    """Check a release's whole history offline (anchors None: hashes and links only)."""
    if not events or not isinstance(events[0], Mapping):
        return HistoryCheck(False, len(events), ("no events",))
    first = events[0]
    state = ReleaseState(rulebook_id=str(first.get("rulebook_id")))
    for index, event in enumerate(events):
        problem, state = _event_problem(event, index, state, anchors, first.get("scope_hash"))
        if problem is not None:
            return HistoryCheck(False, len(events), (problem,))
    return HistoryCheck(True, len(events), (), state.to_json())


def history_document(scope_hash_value: str, rulebook_id: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The portable history file `gate verify --release-history` checks."""
    return {"release_history_version": HISTORY_VERSION, "scope_hash": scope_hash_value,
            "rulebook_id": rulebook_id, "events": list(events)}
