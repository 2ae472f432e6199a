"""Hold events (`hold_event_v1`): every step of a held action's life, hashed, chained and signed.

A hold opens with its decision: the signed record whose verdict holds the action is the proof it
exists, and the hold's row is written in the decide's own transaction. One chain per scope
(gap-free `seq`, each event linking the hash of the one before) then carries the votes of reviewers, the expiries and escalations of the clock, claims, reassignments and the
scope's hold-policy changes. An event that closes a hold states its `outcome` (`approved`,
`denied`, `expired`): that event is the hold's **resolution record**, bound to the decision by
`decision_id` and `record_hash`. `event_hash` = sha256(canon(the event without `event_hash` and
its signature members)); the receipt key signs canon({event_hash, key_id}) exactly like a release
event (gate.chain.sealing), so the same trust anchors verify both offline.

A closing approval states what it rests on: the quorum's `approvals_needed`, the hashes of the
earlier approving votes (`votes`), `four_eyes` and the principal that asked for the action
(`requested_by`, and `requested_holder` when that key states a holder: issue 52).
Every vote's `principal` states its key's holder when it has one; the quorum and four eyes count
distinct holders (gate.principals.is_distinct_approver), never keys. `hold_events_problems` checks a decision's events with no database: each
event's hash, signature and binding, their order, at most one close and only at the end, that an
approval has as many distinct approving holders as it needs, none of them the requester's under
four eyes, and that an expiry never reads as approval. `verify_resolution` is the caller's check
of one resolution before it proceeds.

A served history ends with the chain's signed head (`build_head`, `hold_chain_head_v1`): the
newest event's seq and hash as of a time, sealed like an event, so an offline check sees newest
events cut off (gate.holds.history).

A held decision's packet carries its signed **hold commitment** (`build_commitment`,
`hold_commitment_v1`): how many hold events the decision has and the newest one's hash, and the
size and RFC 6962 root of the scope's hold chain they were read from, as of a time, sealed like
an event. The record's `review` verdict says the decision was held, so a packet of it without
the commitment, or with fewer events than it states, is refused (`commitment_problems`); the
chain's size and root compare it with the witnessed checkpoints (gate.chain.event_witness).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, TypedDict, get_args

from gate.chain.sealing import Seal, event_hash, seal_of, sealed_members
from gate.chain.sealing import signature_problem as chain_signature_problem
from gate.holds.policy import HoldPolicyJSON
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.principals import Principal, holder_id, is_distinct_approver, parse_holder
from gate.vocabulary import HOLD_APPROVED, HOLD_DENIED, HOLD_EXPIRED, HOLD_OPEN, SIG_HMAC_SHA256, HoldState

HOLD_EVENT_VERSION = "hold_event_v1"
HOLD_HISTORY_VERSION = "hold_history_v1"
HOLD_HEAD_VERSION = "hold_chain_head_v1"
HOLD_COMMITMENT_VERSION = "hold_commitment_v1"
HELD_VERDICT = "review"  # the verdict that holds the action: its decide opens the hold
# A held decision's hold events as a packet carries them: their number and the newest one's hash
# (0 and null before the first), and the scope's hold chain (events, RFC 6962 root) they were read from.
COMMITMENT_MEMBERS = ("hold_commitment_version", "scope_hash", "decision_id", "record_hash", "count",
                      "last_event_hash", "chain_size", "chain_root", "as_of")
# The signed head a served history ends with: the chain's newest seq and event_hash (0 and null
# for an empty chain) as of a time; sealed like an event (event_hash is the head's own hash).
HEAD_MEMBERS = ("hold_chain_head_version", "scope_hash", "seq", "head_event_hash", "as_of")
HoldAction = Literal["vote", "expire", "escalate", "claim", "unclaim", "reassign", "policy_set"]
ACTIONS: tuple[HoldAction, ...] = get_args(HoldAction)
Vote = Literal["approve", "deny"]
VOTES: tuple[Vote, ...] = get_args(Vote)
APPROVED, DENIED, EXPIRED = HOLD_APPROVED, HOLD_DENIED, HOLD_EXPIRED  # gate.vocabulary.HOLD_STATES
OUTCOMES: tuple[HoldState, ...] = (APPROVED, DENIED, EXPIRED)
OPEN = HOLD_OPEN
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ISO_MS = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")
STATES: tuple[HoldState, ...] = (OPEN, *OUTCOMES)

EVENT_MEMBERS = ("hold_event_version", "scope_hash", "seq", "previous_event_hash", "action", "decision_id",
                 "record_hash", "principal", "actor", "created_at", "vote", "reason_code", "note", "queue",
                 "priority", "deadline_at", "outcome", "approvals_needed", "votes", "four_eyes", "requested_by",
                 "policy")

OPTIONAL_MEMBER = "requested_holder"  # the requester key's stated holder, present only when it states one


class HoldEventBody(TypedDict):
    """A hold event's members before its seal (EVENT_MEMBERS, `requested_holder` when stated)."""

    hold_event_version: str
    scope_hash: str
    seq: int
    previous_event_hash: str | None
    action: HoldAction
    decision_id: str | None
    record_hash: str | None
    principal: dict[str, str]
    actor: str
    created_at: str
    vote: str | None
    reason_code: str | None
    note: str | None
    queue: str | None
    priority: str | None
    deadline_at: str | None
    outcome: str | None
    approvals_needed: int | None
    votes: list[str]
    four_eyes: bool | None
    requested_by: str | None
    policy: HoldPolicyJSON | None  # a `policy_set` step's (made before issue 52; null since)
    requested_holder: NotRequired[str]


class HoldEvent(HoldEventBody, Seal):
    """A sealed `hold_event_v1`, as `build_event` makes it and the hold chain stores it."""


class HoldHeadBody(TypedDict):
    hold_chain_head_version: str
    scope_hash: str
    seq: int
    head_event_hash: str | None
    as_of: str


class HoldHead(HoldHeadBody, Seal):
    """A sealed `hold_chain_head_v1` (HEAD_MEMBERS)."""


class HoldCommitmentBody(TypedDict):
    hold_commitment_version: str
    scope_hash: str
    decision_id: object
    record_hash: object
    count: int
    last_event_hash: str | None
    chain_size: int
    chain_root: str
    as_of: str


class HoldCommitment(HoldCommitmentBody, Seal):
    """A sealed `hold_commitment_v1` (COMMITMENT_MEMBERS)."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one event states beyond its place in the chain (see EVENT_MEMBERS)."""

    action: HoldAction
    principal: Principal
    at: str
    decision_id: str | None = None
    record_hash: str | None = None
    vote: str | None = None
    reason_code: str | None = None
    note: str | None = None
    queue: str | None = None
    priority: str | None = None
    deadline_at: str | None = None
    outcome: HoldState | None = None
    approvals_needed: int | None = None
    votes: tuple[str, ...] = ()
    four_eyes: bool | None = None
    requested_by: str | None = None
    policy: HoldPolicyJSON | None = None
    requested_holder: str | None = None  # written only when stated (events before holders lack it)


def build_event(step: Step, *, scope_hash: str, seq: int, previous_event_hash: str | None,
                signer: ReceiptSigner | None) -> HoldEvent:
    """The sealed event for `step` at position `seq` of the scope's hold chain."""
    if step.action not in ACTIONS:
        raise ValueError(f"unknown hold action {step.action!r}")
    event: HoldEventBody = {
        "hold_event_version": HOLD_EVENT_VERSION, "scope_hash": scope_hash, "seq": seq,
        "previous_event_hash": previous_event_hash, "action": step.action, "decision_id": step.decision_id,
        "record_hash": step.record_hash, "principal": step.principal.to_json(), "actor": step.principal.actor,
        "created_at": step.at, "vote": step.vote, "reason_code": step.reason_code, "note": step.note,
        "queue": step.queue, "priority": step.priority, "deadline_at": step.deadline_at, "outcome": step.outcome,
        "approvals_needed": step.approvals_needed, "votes": list(step.votes), "four_eyes": step.four_eyes,
        "requested_by": step.requested_by, "policy": step.policy.copy() if step.policy is not None else None,
    }
    if step.requested_holder is not None:
        event["requested_holder"] = step.requested_holder
    return {**event, **seal_of(event, signer)}


_BODY = frozenset(EVENT_MEMBERS)


def members_hold(event: Mapping[str, Any]) -> bool:
    """An event has exactly hold_event_v1's members and a seal (`sealed_members`),
    `requested_holder` allowed beside them."""
    return sealed_members(event, _BODY) or sealed_members(event, _BODY | {OPTIONAL_MEMBER})


def fingerprint_problem(event: Mapping[str, Any], anchors: TrustAnchors) -> str | None:
    """SECURITY: the stated `public_key_fingerprint` names the trusted key that checks the
    signature (an HMAC signature states none), so no member of a signed event is left free to
    edit once a key is trusted (docs/verification.md §2.3 checks a record's the same way)."""
    stated = event.get("public_key_fingerprint")
    if event.get("signature_algorithm") == SIG_HMAC_SHA256:
        return None if stated is None else "an HMAC signature states no public_key_fingerprint"
    key = anchors.select_ed25519(event.get("key_id"), stated)
    if key is None or not isinstance(stated, str) or stated not in key.fingerprints:
        return "public_key_fingerprint does not name the trusted key"
    return None


def build_head(scope_hash: str, events: Sequence[HoldEvent], as_of: str,
               signer: ReceiptSigner | None) -> HoldHead:
    """The signed head of a scope's hold chain whose newest events are `events` (oldest first),
    as of `as_of`: what lets an offline check see that no newest event was cut off."""
    last = events[-1] if events else None
    head: HoldHeadBody = {"hold_chain_head_version": HOLD_HEAD_VERSION, "scope_hash": scope_hash,
                            "seq": last["seq"] if last is not None else 0,
                            "head_event_hash": last["event_hash"] if last is not None else None, "as_of": as_of}
    return {**head, **seal_of(head, signer)}


def build_commitment(scope_hash: str, record: Mapping[str, Any], events: Sequence[HoldEvent],
                     chain: tuple[int, str], as_of: str, signer: ReceiptSigner | None) -> HoldCommitment:
    """The signed hold commitment of a held decision whose events are `events` (oldest first),
    read from the scope's hold chain of `chain` = (size, RFC 6962 root) as of `as_of`."""
    commitment: HoldCommitmentBody = {
        "hold_commitment_version": HOLD_COMMITMENT_VERSION, "scope_hash": scope_hash,
        "decision_id": record.get("decision_id"), "record_hash": record.get("record_hash"), "count": len(events),
        "last_event_hash": events[-1]["event_hash"] if events else None, "chain_size": chain[0],
        "chain_root": chain[1], "as_of": as_of}
    return {**commitment, **seal_of(commitment, signer)}


def _commitment_form(commitment: Mapping[str, Any]) -> list[str]:
    problems = []
    if not sealed_members(commitment, frozenset(COMMITMENT_MEMBERS)):
        problems.append(f"members differ from {HOLD_COMMITMENT_VERSION}'s")
    if commitment.get("hold_commitment_version") != HOLD_COMMITMENT_VERSION:
        problems.append(f"hold_commitment_version must be {HOLD_COMMITMENT_VERSION}")
    if commitment.get("event_hash") != event_hash(commitment):
        problems.append("event_hash does not match its content (tampered)")
    for name in ("count", "chain_size"):
        if type(commitment.get(name)) is not int or commitment[name] < 0:
            problems.append(f"{name} must be a whole number")
    for name in ("scope_hash", "chain_root"):
        if not isinstance(commitment.get(name), str) or not _HEX64.fullmatch(commitment[name]):
            problems.append(f"{name} must be a sha256 hex")
    if not isinstance(commitment.get("as_of"), str) or not _ISO_MS.fullmatch(commitment["as_of"]):
        problems.append("as_of must be a UTC time in milliseconds")
    return problems


def commitment_problems(commitment: Any, record: Mapping[str, Any], events: Sequence[Any]) -> list[str]:
    """Every problem of a packet's hold commitment against the record and the packet's hold
    events (signature aside), or []: its form and recomputed hash, the record's decision and
    record hash, exactly `count` events (an omitted event is named here), the newest one's hash,
    the events' scope, and a chain at least as long as the newest event's seq."""
    if not isinstance(commitment, Mapping):
        return ["a held decision's packet must carry its hold_commitment (the record's verdict holds the action)"]
    problems = _commitment_form(commitment)
    for name in ("decision_id", "record_hash"):
        if not isinstance(commitment.get(name), str) or commitment.get(name) != record.get(name):
            problems.append(f"{name} is not the decision record's")
    count = commitment.get("count")
    if count != len(events):
        problems.append(f"count is {count!r}, the packet carries {len(events)} hold event(s) (events omitted)")
    last = events[-1] if events and isinstance(events[-1], Mapping) else {}
    if commitment.get("last_event_hash") != last.get("event_hash"):
        problems.append("last_event_hash is not the packet's newest hold event's")
    if any(isinstance(e, Mapping) and e.get("scope_hash") != commitment.get("scope_hash") for e in events):
        problems.append("scope_hash is not the hold events' scope")
    seq, size = last.get("seq", 0), commitment.get("chain_size")
    if type(seq) is int and type(size) is int and size < seq:
        problems.append(f"chain_size {size} is below the newest hold event's seq {seq}")
    return problems


def signature_problem(event: Mapping[str, Any], anchors: TrustAnchors) -> str | None:
    """The event's signature by a trusted key, over canon({event_hash, key_id}), and the key's
    fingerprint; None when both hold."""
    problem = chain_signature_problem(event, anchors)  # the release chains' own check
    return fingerprint_problem(event, anchors) if problem is None else problem


def event_problems(event: Any, record: Mapping[str, Any], anchors: TrustAnchors | None) -> list[str]:
    """One event of a decision's hold, alone: its members, content hash, signature and binding
    (`anchors` None: everything but the signature, which a caller then checks on its own)."""
    if not isinstance(event, Mapping):
        return ["a hold event must be a JSON object"]
    problems = []
    if not members_hold(event):
        problems.append("members differ from hold_event_v1's")
    if event.get("hold_event_version") != HOLD_EVENT_VERSION:
        problems.append(f"hold_event_version must be {HOLD_EVENT_VERSION}")
    if event.get("event_hash") != event_hash(event):
        problems.append("event_hash does not match its content (tampered)")
    signature = signature_problem(event, anchors) if anchors is not None else None
    if signature is not None:
        problems.append(signature)
    for name in ("decision_id", "record_hash"):
        if not isinstance(event.get(name), str) or event.get(name) != record.get(name):
            problems.append(f"{name} is not the decision record's")
    try:
        principal = Principal.from_json(event.get("principal"))
        if principal.actor != event.get("actor"):
            problems.append("actor is not its principal's")
    except ValueError as exc:
        problems.append(f"principal is malformed ({exc})")
    if OPTIONAL_MEMBER in event:
        try:
            parse_holder(event[OPTIONAL_MEMBER])
        except ValueError as exc:
            problems.append(f"requested_holder is malformed ({exc})")
    return problems


def _holder(event: Mapping[str, Any]) -> str:
    """The holder a (checked) vote's principal acted for."""
    return Principal.from_json(event.get("principal")).holder_id


def _approval_problems(closing: Mapping[str, Any], votes: Sequence[Mapping[str, Any]]) -> list[str]:
    """A closing approval's quorum: enough distinct approving holders, all listed, none the requester's."""
    needed = closing.get("approvals_needed")
    if type(needed) is not int or needed < 1:
        return ["an approval must state approvals_needed (at least 1)"]
    approving = [v for v in votes if v.get("vote") == "approve"] + [closing]
    listed = closing.get("votes")
    if not isinstance(listed, list) or listed != [v.get("event_hash") for v in approving[:-1]]:
        return ["an approval's votes must list the hashes of the earlier approving votes, in order"]
    holders = [_holder(v) for v in approving]
    problems = []
    if any(not is_distinct_approver(h, holders[:i]) for i, h in enumerate(holders)):
        problems.append("one holder approved twice")
    if len(set(holders)) < needed:
        problems.append(f"approved by {len(set(holders))} distinct holder(s), the quorum needs {needed}")
    requester = closing.get("requested_by")  # its requested_holder was checked with the event's members
    requester_holder = holder_id(requester, closing.get(OPTIONAL_MEMBER)) if isinstance(requester, str) else None
    if closing.get("four_eyes") is not False and not all(is_distinct_approver(h, (requester_holder,)) for h in holders):
        problems.append("approved by the holder that asked for the action (four eyes)")
    return problems


_CLOSES_AS: dict[tuple[str, object], HoldState] = {("vote", "approve"): APPROVED, ("vote", "deny"): DENIED, ("expire", None): EXPIRED}


def _closes_as(event: Mapping[str, Any]) -> HoldState | None:
    """The outcome an event's action and vote may close a hold with (None: it cannot close one)."""
    return _CLOSES_AS.get((str(event.get("action")), event.get("vote")))


def _close_problems(events: Sequence[Mapping[str, Any]]) -> list[str]:
    """At most one closing event, the last; what it closes as is what its action allows."""
    closing = [i for i, e in enumerate(events) if e.get("outcome") is not None]
    if not closing:
        return []
    if closing[0] != len(events) - 1:  # a second close would come after the first
        return ["a hold closes once, with its last event"]
    last = events[-1]
    outcome, action = last.get("outcome"), last.get("action")
    if _closes_as(last) != outcome:
        return [f"a {action} event cannot close a hold as {outcome!r}"]
    if outcome == APPROVED:
        return _approval_problems(last, [e for e in events[:-1] if e.get("action") == "vote"])
    return []


def hold_events_problems(record: Mapping[str, Any], events: Sequence[Any], anchors: TrustAnchors | None) -> list[str]:
    """Every problem of a decision's hold events (oldest first), or [] when they verify offline.
    With `anchors` None the signatures are left out (integrity and the closing rules only): the
    packet verifier checks them as authenticity, the hold history along its chain."""
    problems = []
    for index, event in enumerate(events):
        problems += [f"hold_events[{index}]: {p}" for p in event_problems(event, record, anchors)]
    if problems:
        return problems
    seqs = [e.get("seq") for e in events]
    if any(type(s) is not int for s in seqs) or seqs != sorted(set(seqs)):
        return ["hold_events must be in chain order, each once"]
    return _close_problems(events)


@dataclass(frozen=True, slots=True)
class ResolutionCheck:
    """The caller's check of one resolution: whether it verifies, and whether it approves."""

    verified: bool
    approved: bool
    outcome: str | None
    problems: tuple[str, ...]

    def to_json(self) -> dict[str, bool | str | list[str] | None]:
        return {"verified": self.verified, "approved": self.approved, "outcome": self.outcome,
                "problems": list(self.problems)}


def verify_resolution(record: Mapping[str, Any], resolution: Any, anchors: TrustAnchors) -> ResolutionCheck:
    """SECURITY: a resolution approves only when it verifies against a trusted key, is bound to
    this record (decision id and record hash) and closes the hold as `approved`; an expiry, a
    denial, a partial vote, a tampered or foreign event never does (silence is not consent)."""
    problems = event_problems(resolution, record, anchors)
    if isinstance(resolution, Mapping):
        if resolution.get("outcome") not in OUTCOMES:
            problems.append("this event does not close the hold (no outcome)")
        elif _closes_as(resolution) != resolution.get("outcome"):
            problems.append("its outcome does not follow from its action")
    outcome = resolution.get("outcome") if isinstance(resolution, Mapping) else None
    verified = not problems
    return ResolutionCheck(verified, verified and outcome == APPROVED, outcome if verified else None, tuple(problems))
