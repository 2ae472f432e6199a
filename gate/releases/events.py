"""Release events (`release_event_v1`): each transition of a release, hashed, chained and signed.

An event states the action and its inputs (who, when, why, the dry-run manifest it rests on, the
guardrail evidence of an automatic halt), the hash of the event before it, and the release state
after it. Since issue 42 it also carries its signed `principal` (kind, id, and for people the
issuer, subject and display name) beside the `actor` string, the scope's policy event in force
(`governance_seq`) and an admin's `override` of a guardrail halt. `event_hash` = sha256(canon(the
event without `event_hash` and its signature members)); the receipt key signs
canon({event_hash, key_id}) (gate.chain.sealing). `verify_history` checks a whole history
offline: every hash, every link, every signature against the trust anchors, gap-free sequence
numbers, that each stated state is exactly the fold of the actions before it
(gate.releases.model), the scope's policy changes (gate.releases.governance), and that every
event since issue 42 was allowed by the policy in force when it was made and by the halt rule
(gate.releases.halts: no version its guardrail halted made to serve without an override).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NotRequired, TypedDict

from gate.chain.event_check import EventChainCheck, EventChainCheckJSON, keys_given
from gate.chain.sealing import (
    SIGNATURE_MEMBERS,
    Seal,
    chain_problem,
    event_hash,
    seal_of,
    signature_payload,
)
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.principals import Principal
from gate.releases.governance import (
    RELEASE_ONLY,
    ChangeSummary,
    GovernanceCheck,
    GovernanceEvent,
    Safeguard,
    verify_governance,
)
from gate.releases.halts import OVERRIDE_HALT, halt_refusal, halted_version, halted_versions
from gate.releases.model import (
    Action,
    Canary,
    CanaryJSON,
    Pending,
    PendingJSON,
    ReleaseRefused,
    ReleaseState,
    ReleaseStateJSON,
    Version,
    VersionJSON,
    transition,
)
from gate.releases.policy import ReleasePolicy, needs_dry_run
from gate.strict_json import JsonValue

EVENT_VERSION = "release_event_v1"
HISTORY_VERSION = "release_history_v1"


@dataclass(frozen=True, slots=True)
class EventInputs:
    """What an event states beyond the action itself."""

    scope_hash: str
    reason: str | None = None
    migration_manifest_hash: str | None = None
    evidence: Mapping[str, JsonValue] | None = None
    principal: Principal | None = None  # who acted (issue 42): signed beside the actor string
    governance_seq: int | None = None  # the scope's policy event in force (gate.releases.governance)
    override: str | None = None  # OVERRIDE_HALT, with the reason, when an admin overrode a halt


class StateMemberJSON(TypedDict):
    """`state` as an event states it: the release state less its sequence and head (the event's own)."""

    rulebook_id: str
    active: VersionJSON | None
    previous: list[VersionJSON]
    shadow: VersionJSON | None
    canary: CanaryJSON | None
    pending: list[PendingJSON]


class ReleaseEventBody(TypedDict):
    """A release event's members before its seal; `principal`, `governance_seq` and `override`
    since issue 42 (events before it lack them and still verify)."""

    release_event_version: str
    scope_hash: str
    rulebook_id: str
    seq: int
    action: str
    actor: str
    created_at: str
    version: str | None
    rulebook_hash: str | None
    percent: float | None
    subject: str | None
    request_seq: int | None
    approval_expires_at: str | None
    reason: str | None
    migration_manifest_hash: str | None
    evidence: dict[str, JsonValue] | None
    previous_event_hash: str | None
    state: StateMemberJSON
    principal: NotRequired[dict[str, str]]
    governance_seq: NotRequired[int | None]
    override: NotRequired[str | None]


class ReleaseEvent(ReleaseEventBody, Seal):
    """A sealed `release_event_v1`, as `build_event` makes it and the release chain stores it."""


def state_member(state: ReleaseState) -> StateMemberJSON:
    """The state an event states (its sequence and head are the event's own)."""
    body = state.to_json()
    return {"rulebook_id": body["rulebook_id"], "active": body["active"], "previous": body["previous"],
            "shadow": body["shadow"], "canary": body["canary"], "pending": body["pending"]}


def build_event(state: ReleaseState, action: Action, inputs: EventInputs,
                signer: ReceiptSigner | None) -> tuple[ReleaseEvent, ReleaseState]:
    """The signed event for `action` on `state`, and the state after it (raises ReleaseRefused)."""
    seq = state.seq + 1
    after = transition(state, action, seq)
    event: ReleaseEventBody = {
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
    if inputs.principal is not None:  # members of issue 42; events before it lack them and still verify
        if (inputs.principal.actor, inputs.principal.holder) != (action.actor, action.holder):
            raise ValueError("the event's actor and holder must be its principal's")
        event["principal"] = inputs.principal.to_json()
        event["governance_seq"] = inputs.governance_seq
        event["override"] = inputs.override
    sealed: ReleaseEvent = {**event, **seal_of(event, signer)}
    return sealed, replace(after, seq=seq, head_event_hash=sealed["event_hash"])


def action_of(event: Mapping[str, Any]) -> Action:
    """The action an event states, as the state machine takes it."""
    version = None
    if isinstance(event.get("version"), str) and isinstance(event.get("rulebook_hash"), str):
        version = Version(event["version"], event["rulebook_hash"])
    principal = event.get("principal")
    holder = principal.get("holder") if isinstance(principal, Mapping) else None
    return Action(action=str(event.get("action")), actor=str(event.get("actor")), at=str(event.get("created_at")),
                  version=version, percent=event.get("percent"), subject=event.get("subject"),
                  request_seq=event.get("request_seq"), approval_expires_at=event.get("approval_expires_at"),
                  holder=holder if isinstance(holder, str) else None)


def _version(body: Any) -> Version | None:
    return Version(body["version"], body["rulebook_hash"]) if isinstance(body, Mapping) else None


def state_from_member(rulebook_id: str, seq: int, head: str | None, body: StateMemberJSON) -> ReleaseState:
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
                              p.get("percent"), p.get("subject"), p["requested_by"], p["expires_at"],
                              p.get("requested_holder"))
                      for p in body.get("pending") or ()),
    )


class HistoryCheckJSON(EventChainCheckJSON):
    """`HistoryCheck` as JSON: the chain check's members, then the state and the policy changes."""

    state: ReleaseStateJSON | None
    policy_changes: list[ChangeSummary]


@dataclass(frozen=True, slots=True, kw_only=True)
class HistoryCheck(EventChainCheck):
    """What `verify_history` found: the chain check (overall validity, signatures checked when
    keys were given, the first problem), the state after the last event and every change of the
    scope's release policy the history carries."""

    state: ReleaseStateJSON | None = None
    policy_changes: tuple[ChangeSummary, ...] = field(default_factory=tuple)

    def to_json(self) -> HistoryCheckJSON:
        return {**EventChainCheck.to_json(self), "state": self.state, "policy_changes": list(self.policy_changes)}


def override_problem(event: Mapping[str, JsonValue], state: ReleaseState, halted: frozenset[str]) -> str | None:
    """The halt rule (gate.releases.halts) on a signed event: a version its guardrail halted made
    to serve (activated, a canary, rolled back to, requested or approved) without an override and
    a reason, or an override where none was needed."""
    refusal = halt_refusal(event, state, halted)
    return refusal.message if refusal is not None else None


def policy_problem(event: Mapping[str, JsonValue], policy: ReleasePolicy) -> str | None:
    """A canary or activation the policy in force did not allow as stated."""
    name = event.get("action")
    if name not in ("canary", "activate"):
        return None
    if policy.require_approval and event.get("approval_expires_at") is None:
        return f"{name} applied alone while the policy in force required approval"
    if needs_dry_run(policy, name, event.get("percent")) and not event.get("migration_manifest_hash"):
        return f"{name} without the dry-run manifest the policy in force required"
    return None


def principal_problem(event: Mapping[str, JsonValue]) -> str | None:
    try:
        principal = Principal.from_json(event.get("principal"))
    except ValueError as exc:
        return f"its principal is malformed ({exc})"
    return None if principal.actor == event.get("actor") else "actor is not its principal's"


def _governed_problem(event: Mapping[str, JsonValue], state: ReleaseState, governance: GovernanceCheck,
                      last_seq: int, halted: frozenset[str]) -> str | None:
    """The checks of an event made since issue 42 (it carries its principal): who, which policy
    event was in force (present, never going back), whether that policy allowed it, and halts."""
    seq = event.get("governance_seq")
    if type(seq) is not int or seq < last_seq:
        return f"governance_seq {seq!r} goes back before policy event {last_seq}"
    if seq >= len(governance.policies):
        return f"names policy event {seq}, which the history lacks (deleted)"
    policy = governance.policies[seq]
    return (principal_problem(event) or (policy_problem(event, policy) if policy is not None else None)
            or override_problem(event, state, halted))


def _event_problem(event: Any, index: int, state: ReleaseState, anchors: TrustAnchors | None,
                   expected_scope_hash: Any) -> tuple[str | None, ReleaseState]:
    where = f"event {index + 1}"
    if not isinstance(event, Mapping) or event.get("release_event_version") != EVENT_VERSION:
        return f"{where}: not a {EVENT_VERSION} object", state
    if event.get("seq") != state.seq + 1:
        return f"{where}: seq {event.get('seq')!r}, expected {state.seq + 1} (gap or reorder)", state
    if event.get("rulebook_id") != state.rulebook_id or event.get("scope_hash") != expected_scope_hash:
        return f"{where}: belongs to another release", state
    problem = chain_problem(event, where, state.seq, state.head_event_hash, expected_scope_hash, anchors)
    if problem is not None:
        return problem, state
    try:
        after = replace(transition(state, action_of(event), state.seq + 1),
                        seq=state.seq + 1, head_event_hash=event["event_hash"])
    except ReleaseRefused as refused:
        return f"{where}: the state machine refuses this action ({refused.code})", state
    if state_member(after) != event.get("state"):
        return f"{where}: stated state is not the fold of the actions", state
    return None, after


def verify_history(events: Sequence[Any], anchors: TrustAnchors | None,
                   governance: Sequence[Any] = (), table: Mapping[str, Safeguard] = RELEASE_ONLY) -> HistoryCheck:
    """Check a release's whole history offline (anchors None: hashes and links only), with the
    scope's governance chain: every change of a safeguard setting `table` knows (the release
    policy's alone by default; `gate verify` passes gate.governance.table.SAFEGUARDS), and that
    each event since issue 42 names a policy event the history holds and was allowed by it (and
    by the halt rule). Once an event carries its principal every later one must: an event in the
    form before issue 42 cannot follow one in the later form (it would escape those checks)."""
    checked = keys_given(anchors)
    if not events or not isinstance(events[0], Mapping):
        return HistoryCheck(valid=False, signatures_checked=checked, events=len(events), problems=("no events",))
    first = events[0]
    policy_check = verify_governance(governance, anchors, first.get("scope_hash"), table)
    changes = policy_check.changes
    if policy_check.problem is not None:
        return HistoryCheck(valid=False, signatures_checked=checked, events=len(events),
                            problems=(policy_check.problem,), policy_changes=changes)
    state, last_seq, halted = ReleaseState(rulebook_id=str(first.get("rulebook_id"))), 0, frozenset[str]()
    governed_from: int | None = None  # the first event that carries its principal
    for index, event in enumerate(events):
        problem, after = _event_problem(event, index, state, anchors, first.get("scope_hash"))
        if problem is None and "principal" in event:
            governed = _governed_problem(event, state, policy_check, last_seq, halted)
            problem = f"event {index + 1}: {governed}" if governed else None
            last_seq = event["governance_seq"] if governed is None else last_seq
            governed_from = index if governed_from is None else governed_from
        elif problem is None and governed_from is not None:
            problem = (f"event {index + 1}: lacks the principal every event carries since event {governed_from + 1} "
                       "(the form before issue 42 cannot follow it)")
        if problem is not None:
            return HistoryCheck(valid=False, signatures_checked=checked, events=len(events), problems=(problem,),
                                policy_changes=changes)
        state, halted = after, halted | halted_versions((event,))
    return HistoryCheck(valid=True, signatures_checked=checked, events=len(events), state=state.to_json(),
                        policy_changes=changes)


class ReleaseHistory(TypedDict):
    """`release_history_v1`: a release's events and its scope's governance chain."""

    release_history_version: str
    scope_hash: str
    rulebook_id: str
    events: list[ReleaseEvent]
    governance: list[GovernanceEvent]


def history_document(scope_hash_value: str, rulebook_id: str, events: Sequence[ReleaseEvent],
                     governance: Sequence[GovernanceEvent] = ()) -> ReleaseHistory:
    """The portable history file `gate verify --release-history` checks: the release's events
    and the scope's policy changes (its governance chain)."""
    return {"release_history_version": HISTORY_VERSION, "scope_hash": scope_hash_value,
            "rulebook_id": rulebook_id, "events": list(events), "governance": list(governance)}


__all__ = ["EVENT_VERSION", "HISTORY_VERSION", "OVERRIDE_HALT", "SIGNATURE_MEMBERS", "EventInputs", "HistoryCheck",
           "action_of", "build_event", "event_hash", "halted_version", "history_document", "override_problem",
           "signature_payload", "state_from_member", "verify_history"]
