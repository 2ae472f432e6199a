"""The release policy's own signed history, pure: a scope's governance chain (issue 42).

Every change of a scope's release policy is an event (`release_governance_event_v1`) hashed,
chained and signed exactly like a release event (gate.releases.events), carrying the whole
policy before and after it and the principal who acted. Three actions:

* `policy_set`: a change that applies at once (it does not weaken a policy that requires
  approvals);
* `policy_request`: a weakening change while approvals are required; it only adds a pending
  request, which expires after the approval expiry of the policy in force;
* `policy_approve`: a second principal applies a pending request (never its own), provided the
  policy is still the one the request was made against.

The chain is stored beside the release chains of the scope under the reserved id
`GOVERNANCE_ID` (rulebook ids start with a letter, so it cannot collide). `verify_governance`
checks it offline; a release history carries it, and each release event names the governance
event in force when it was made (`governance_seq`), so a deleted or edited policy change fails
`gate verify` (gate.releases.events.verify_history).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gate.errors import GateError
from gate.keys.signing import ReceiptSigner
from gate.principals import Principal, holder_id, is_distinct_approver
from gate.releases.model import ReleaseRefused
from gate.releases.policy import ReleasePolicy, needs_approval, weakenings
from gate.releases.sealing import chain_problem, seal

GOVERNANCE_ID = "@release-policy"
GOVERNANCE_EVENT_VERSION = "release_governance_event_v1"
GOVERNANCE_ACTIONS = ("policy_set", "policy_request", "policy_approve")


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """A weakening change waiting for a second principal (`seq`: the event that asked)."""

    seq: int
    before: ReleasePolicy
    after: ReleasePolicy
    requested_by: str
    expires_at: str
    requested_holder: str | None = None  # the requester key's stated holder (issue 52); None: none stated

    def to_json(self) -> dict[str, Any]:
        """`requested_holder` only when one was stated: a state written before holders reads as it did."""
        out = {"request_seq": self.seq, "policy_before": self.before.to_json(), "policy_after": self.after.to_json(),
               "weakens": list(weakenings(self.before, self.after)), "requested_by": self.requested_by,
               "expires_at": self.expires_at}
        if self.requested_holder is not None:
            out["requested_holder"] = self.requested_holder
        return out


@dataclass(frozen=True, slots=True)
class GovernanceState:
    """The policy in force (None before the first change: the scope's stored or default policy
    then) and the pending requests, as of event `seq`."""

    seq: int = 0
    head_event_hash: str | None = None
    policy: ReleasePolicy | None = None
    pending: tuple[PolicyRequest, ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy.to_json() if self.policy else None,
                "pending": [p.to_json() for p in self.pending]}


@dataclass(frozen=True, slots=True)
class PolicyAction:
    """One change of the policy: `before` is the policy in force, `after` the policy stated
    (for an approval, the request's)."""

    action: str
    principal: Principal
    at: str
    before: ReleasePolicy
    after: ReleasePolicy
    request_seq: int | None = None
    expires_at: str | None = None
    reason: str | None = None


def _live(state: GovernanceState, at: str) -> GovernanceState:
    return replace(state, pending=tuple(p for p in state.pending if p.expires_at > at))


def govern(state: GovernanceState, action: PolicyAction, seq: int) -> GovernanceState:
    """The governance state after `action` as event `seq`, or ReleaseRefused."""
    state = _live(state, action.at)
    if state.policy is not None and action.before != state.policy:
        raise ReleaseRefused("RELEASE_POLICY_CHANGED", "policy_before is not the policy in force", 409)
    if action.action == "policy_set":
        if needs_approval(action.before, action.after):
            raise ReleaseRefused("RELEASE_POLICY_APPROVAL_REQUIRED",
                                 "a weakening change while approvals are required needs a second principal", 409)
        return replace(state, policy=action.after)
    if action.action == "policy_request":
        if action.expires_at is None:
            raise ReleaseRefused("RELEASE_POLICY_INVALID", "a policy request states when it expires", 400)
        request = PolicyRequest(seq, action.before, action.after, action.principal.actor, action.expires_at,
                                action.principal.holder)
        return replace(state, policy=action.before, pending=(*state.pending, request))
    if action.action == "policy_approve":
        return _approve(state, action)
    raise ReleaseRefused("RELEASE_POLICY_INVALID", f"a policy action is one of {', '.join(GOVERNANCE_ACTIONS)}", 400)


def _approve(state: GovernanceState, action: PolicyAction) -> GovernanceState:
    request = next((p for p in state.pending if p.seq == action.request_seq), None)
    if request is None:
        raise ReleaseRefused("RELEASE_APPROVAL_NOT_FOUND",
                             "no pending policy request has this request_seq (it may have expired or been applied)", 404)
    if not is_distinct_approver(action.principal.holder_id,
                                (holder_id(request.requested_by, request.requested_holder),)):
        raise ReleaseRefused("RELEASE_SELF_APPROVAL", "a principal cannot approve its own request "
                             "(nor another key of the same holder)", 403)
    if request.before != action.before:
        raise ReleaseRefused("RELEASE_POLICY_CHANGED", "the policy changed since this request was made: "
                             "request the change again", 409)
    if request.after != action.after:
        raise ReleaseRefused("RELEASE_APPROVAL_MISMATCH", "policy_after is not the requested policy", 409)
    return replace(state, policy=request.after, pending=tuple(p for p in state.pending if p.seq != request.seq))


def pending_request(state: GovernanceState, request_seq: int, at: str) -> PolicyRequest | None:
    return next((p for p in _live(state, at).pending if p.seq == request_seq), None)


def build_governance_event(state: GovernanceState, action: PolicyAction, scope_hash: str,
                           signer: ReceiptSigner | None) -> tuple[dict[str, Any], GovernanceState]:
    """The signed governance event for `action`, and the state after it (raises ReleaseRefused)."""
    seq = state.seq + 1
    after = govern(state, action, seq)
    event: dict[str, Any] = {
        "release_governance_event_version": GOVERNANCE_EVENT_VERSION,
        "scope_hash": scope_hash,
        "seq": seq,
        "action": action.action,
        "actor": action.principal.actor,
        "principal": action.principal.to_json(),
        "created_at": action.at,
        "request_seq": action.request_seq,
        "expires_at": action.expires_at,
        "reason": action.reason,
        "policy_before": action.before.to_json(),
        "policy_after": action.after.to_json(),
        "weakens": list(weakenings(action.before, action.after)),
        "previous_event_hash": state.head_event_hash,
        "state": after.to_json(),
    }
    seal(event, signer)
    return event, replace(after, seq=seq, head_event_hash=event["event_hash"])


def _policy(body: Any) -> ReleasePolicy:
    return ReleasePolicy.from_json(body)


def state_from_event(event: Mapping[str, Any]) -> GovernanceState:
    """A stored governance event's stated state (what the service reads from the chain's head)."""
    body = event["state"]
    return GovernanceState(
        seq=event["seq"], head_event_hash=event["event_hash"],
        policy=_policy(body["policy"]) if body.get("policy") is not None else None,
        pending=tuple(PolicyRequest(p["request_seq"], _policy(p["policy_before"]), _policy(p["policy_after"]),
                                    p["requested_by"], p["expires_at"], p.get("requested_holder"))
                      for p in body.get("pending") or ()))


def action_of(event: Mapping[str, Any]) -> PolicyAction:
    """The action a governance event states (raises ValueError or GateError when malformed)."""
    return PolicyAction(action=str(event.get("action")), principal=Principal.from_json(event.get("principal")),
                        at=str(event.get("created_at")), before=_policy(event.get("policy_before")),
                        after=_policy(event.get("policy_after")), request_seq=event.get("request_seq"),
                        expires_at=event.get("expires_at"), reason=event.get("reason"))


def change_summary(event: Mapping[str, Any]) -> dict[str, Any]:
    """What `gate verify` shows of one policy change."""
    return {"seq": event.get("seq"), "action": event.get("action"), "actor": event.get("actor"),
            "principal": event.get("principal"), "created_at": event.get("created_at"),
            "request_seq": event.get("request_seq"), "weakens": event.get("weakens"),
            "policy_before": event.get("policy_before"), "policy_after": event.get("policy_after")}


@dataclass(frozen=True, slots=True)
class GovernanceCheck:
    """What `verify_governance` found: the first problem, and the policy in force after each
    event (`policies[n]`: after event n; `policies[0]`: before the first change, None when
    there was none, i.e. the stored or default policy the history cannot state)."""

    problem: str | None
    policies: tuple[ReleasePolicy | None, ...]
    changes: tuple[dict[str, Any], ...]


def verify_governance(events: Sequence[Any], anchors: Any, expected_scope_hash: Any) -> GovernanceCheck:
    """Check a governance chain offline: hashes, links, signatures, gap-free seqs, and that each
    stated state is the fold of the actions (no weakening applied without an approval)."""
    state = GovernanceState()
    policies: list[ReleasePolicy | None] = [None]
    changes: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        where = f"policy event {index + 1}"
        if not isinstance(event, Mapping) or event.get("release_governance_event_version") != GOVERNANCE_EVENT_VERSION:
            return GovernanceCheck(f"{where}: not a {GOVERNANCE_EVENT_VERSION} object", tuple(policies), tuple(changes))
        problem = chain_problem(event, where, state.seq, state.head_event_hash, expected_scope_hash, anchors)
        if problem is None:
            problem, state = _fold_problem(event, where, state)
        if problem is not None:
            return GovernanceCheck(problem, tuple(policies), tuple(changes))
        policies.append(state.policy)
        changes.append(change_summary(event))
    if events:  # the policy before the first change is the one that change states it replaced
        policies[0] = _policy(events[0]["policy_before"])
    return GovernanceCheck(None, tuple(policies), tuple(changes))


def _fold_problem(event: Mapping[str, Any], where: str, state: GovernanceState) -> tuple[str | None, GovernanceState]:
    try:
        action = action_of(event)
        after = govern(state, action, state.seq + 1)
    except ReleaseRefused as refused:  # before GateError: a refusal of the rules, not a malformed event
        return f"{where}: the governance rules refuse this change ({refused.code})", state
    except (ValueError, GateError):
        return f"{where}: its principal or policies are malformed", state
    if event.get("actor") != action.principal.actor:
        return f"{where}: actor is not its principal's", state
    if after.to_json() != event.get("state"):
        return f"{where}: stated policy is not the fold of the changes", state
    return None, replace(after, seq=state.seq + 1, head_event_hash=event["event_hash"])
