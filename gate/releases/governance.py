"""A scope's signed governance chain, pure: every change of a safeguard setting (issues 42, 52).

Every change of a scope's release policy, hold policy or event settings is an event
(`release_governance_event_v1`) hashed, chained and signed exactly like a release event
(gate.releases.events), carrying the setting it changes (`setting`; an event without it, made
before issue 52, changes the release policy), the whole value before and after it and the
principal who acted. What weakens each setting is one table (gate.governance.table, the
`Safeguard` rows this module folds with; `RELEASE_ONLY` knows the release policy alone). Three
actions:

* `policy_set`: a change that applies at once (it does not weaken a setting while the scope
  requires approvals, i.e. while its release policy's `require_approval` is on);
* `policy_request`: a weakening change while approvals are required; it only adds a pending
  request, which expires after the approval expiry of the release policy in force;
* `policy_approve`: a second, distinct principal (`distinct_approver`) applies a pending request,
  provided the setting has not changed since the request was made: a request is bound to the
  governance sequence it was made at (`applied`: the seq of each setting's last change), never
  to the setting's values, so a setting changed and changed back still refuses it.

The chain is stored beside the release chains of the scope under the reserved id
`GOVERNANCE_ID` (rulebook ids start with a letter, so it cannot collide). `verify_governance`
checks it offline; a release history carries it, and each release event names the governance
event in force when it was made (`governance_seq`), so a deleted or edited policy change fails
`gate verify` (gate.releases.events.verify_history).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, NotRequired, TypedDict

from gate.chain.event_check import EventChainCheck, keys_given
from gate.chain.sealing import Seal, chain_problem, seal_of
from gate.errors import GateError
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.principals import Principal, holder_id, is_distinct_approver
from gate.releases.model import ReleaseRefused
from gate.releases.policy import ReleasePolicy, weakenings
from gate.strict_json import JsonValue

GOVERNANCE_ID = "@release-policy"
GOVERNANCE_EVENT_VERSION = "release_governance_event_v1"
GOVERNANCE_ACTIONS = ("policy_set", "policy_request", "policy_approve")
RELEASE_POLICY = "release_policy"


@dataclass(frozen=True, slots=True)
class Safeguard:
    """One row of the table of safeguard settings: its name, how a whole value is read from JSON
    (raising the setting's own invalid code) and which members a change weakens."""

    name: str
    parse: Callable[[Any], Any]
    weakenings: Callable[[Any, Any], tuple[str, ...]]
    # Whether the chain holds the value in force. The scope's keys (`api_keys`) live in the
    # ledger's key rows, which change without a governance event while no approval is required:
    # a change states the value it read there, and a request is bound to the governance sequence.
    chained: bool = True
    # The holders a change gives rights to (the scope's keys: each grantee): none of them may
    # approve it, as the requester may not (`distinct_approver`).
    beneficiaries: Callable[[Any, Any], frozenset[str]] = lambda _before, _after: frozenset()
    # An act, not a setting (a data subject's erasure, gate.privacy.erasure): never set by one
    # holder, whatever the scope requires (a second, distinct holder approves each one); nothing
    # is in force after it, so a request is never made stale by another's approval.
    act: bool = False


RELEASE_SAFEGUARD = Safeguard(RELEASE_POLICY, ReleasePolicy.from_json, weakenings)
RELEASE_ONLY: Mapping[str, Safeguard] = {RELEASE_POLICY: RELEASE_SAFEGUARD}

# The refusals of the rules: a release-policy change keeps its codes of issue 42, any other
# setting's names the governance request.
_CODES = {"changed": ("RELEASE_POLICY_CHANGED", "GOVERNANCE_SETTING_CHANGED"),
          "required": ("RELEASE_POLICY_APPROVAL_REQUIRED", "GOVERNANCE_APPROVAL_REQUIRED"),
          "invalid": ("RELEASE_POLICY_INVALID", "GOVERNANCE_REQUEST_INVALID"),
          "not_found": ("RELEASE_APPROVAL_NOT_FOUND", "GOVERNANCE_REQUEST_NOT_FOUND"),
          "self": ("RELEASE_SELF_APPROVAL", "GOVERNANCE_SELF_APPROVAL"),
          "mismatch": ("RELEASE_APPROVAL_MISMATCH", "GOVERNANCE_APPROVAL_MISMATCH")}


def refusal_code(setting: str, kind: str) -> str:
    """The code of a governance refusal of `kind` for a change of `setting`."""
    release, other = _CODES[kind]
    return release if setting == RELEASE_POLICY else other


def distinct_approver(request: PolicyRequest, approver: Principal) -> bool:
    """Whether `approver` acts for another holder than the one that asked: every governed change
    counts holders through the one rule (gate.principals.is_distinct_approver), so a second key of
    the requester's holder is no second approver (issue 52)."""
    return is_distinct_approver(approver.holder_id, (holder_id(request.requested_by, request.requested_holder),))


def beneficiary_approver(request: PolicyRequest, approver: Principal, row: Safeguard) -> bool:
    """Whether `approver` acts for a holder the change gives rights to (`row.beneficiaries`: a
    key's grantee never approves its own grant, with any of its keys; issue 64)."""
    return not is_distinct_approver(approver.holder_id, row.beneficiaries(request.before, request.after))


class PolicyRequestJSON(TypedDict):
    """A pending request as a state states it (`setting` only for another setting than the
    release policy, `requested_holder` only when one was stated)."""

    setting: NotRequired[str]
    request_seq: int
    policy_before: dict[str, JsonValue]
    policy_after: dict[str, JsonValue]
    weakens: list[str]
    requested_by: str
    expires_at: str
    requested_holder: NotRequired[str]


class GovernanceStateJSON(TypedDict):
    """The state a governance event states (`settings` and `applied` since issue 52)."""

    policy: dict[str, bool | int | float] | None  # the release policy's (ReleasePolicy.to_json)
    pending: list[PolicyRequestJSON]
    settings: NotRequired[dict[str, dict[str, JsonValue]]]
    applied: NotRequired[dict[str, int]]


@dataclass(frozen=True, slots=True)
class PolicyRequest:
    """A weakening change waiting for a second principal (`seq`: the event that asked, which binds
    it: any change of its setting after `seq` makes it stale)."""

    seq: int
    before: Any
    after: Any
    requested_by: str
    expires_at: str
    setting: str = RELEASE_POLICY
    weakens: tuple[str, ...] | None = field(default=None, compare=False)  # stated, derived from the two
    requested_holder: str | None = None  # the requester key's stated holder (issue 52); None: none stated

    def to_json(self) -> PolicyRequestJSON:
        """`requested_holder` only when one was stated: a state written before holders reads as it did."""
        weakens = self.weakens if self.weakens is not None else weakenings(self.before, self.after)
        out: PolicyRequestJSON = {
            "request_seq": self.seq, "policy_before": self.before.to_json(), "policy_after": self.after.to_json(),
            "weakens": list(weakens), "requested_by": self.requested_by, "expires_at": self.expires_at}
        if self.requested_holder is not None:
            out["requested_holder"] = self.requested_holder
        return out if self.setting == RELEASE_POLICY else {"setting": self.setting, **out}


@dataclass(frozen=True, slots=True)
class GovernanceState:
    """The release policy in force (None before its first change: the scope's stored or default
    policy then), the other settings in force once governed (`settings`, by name), the seq of each
    setting's last change (`applied`) and the pending requests, as of event `seq`."""

    seq: int = 0
    head_event_hash: str | None = None
    policy: ReleasePolicy | None = None
    pending: tuple[PolicyRequest, ...] = field(default_factory=tuple)
    settings: Mapping[str, Any] = field(default_factory=dict)
    applied: Mapping[str, int] = field(default_factory=dict)

    def value(self, setting: str) -> Any:
        """The setting in force as the chain states it (None: not governed yet)."""
        return self.policy if setting == RELEASE_POLICY else self.settings.get(setting)

    def to_json(self, legacy: bool = False) -> GovernanceStateJSON:
        """The state an event states; `legacy`: as events made before issue 52 state it."""
        out: GovernanceStateJSON = {"policy": self.policy.to_json() if self.policy else None,
                                    "pending": [p.to_json() for p in self.pending]}
        if legacy:
            return out
        out["settings"] = {name: value.to_json() for name, value in sorted(self.settings.items())}
        out["applied"] = dict(sorted(self.applied.items()))
        return out


@dataclass(frozen=True, slots=True)
class PolicyAction:
    """One change of a setting: `before` is the value in force, `after` the value stated (for an
    approval, the request's). `approvals_required`: whether the scope required approvals, as the
    service read it (the history states it where the chain does not: before its first release
    policy change)."""

    action: str
    principal: Principal
    at: str
    before: Any
    after: Any
    request_seq: int | None = None
    expires_at: str | None = None
    reason: str | None = None
    setting: str = RELEASE_POLICY
    approvals_required: bool | None = field(default=None, compare=False)  # checked by `approvals_required`


def _live(state: GovernanceState, at: str) -> GovernanceState:
    return replace(state, pending=tuple(p for p in state.pending if p.expires_at > at))


def _refused(setting: str, kind: str, message: str, status: int) -> ReleaseRefused:
    return ReleaseRefused(refusal_code(setting, kind), message, status)


def approvals_required(state: GovernanceState, action: PolicyAction) -> bool:
    """Whether the scope requires approvals for this change: the release policy before it (for a
    release-policy change), the chain's release policy, else what the event states (raising
    when it states a value the chain contradicts)."""
    if action.setting == RELEASE_POLICY:
        return bool(action.before.require_approval)
    stated = action.approvals_required
    # (only another setting's change gets here: its refusals are the governance codes)
    if state.policy is not None and stated is not None and stated != state.policy.require_approval:
        raise ReleaseRefused("GOVERNANCE_SETTING_CHANGED", "approvals_required is not the release policy's in force",
                             409)
    if state.policy is not None:
        return state.policy.require_approval
    if type(stated) is not bool:
        raise ReleaseRefused("GOVERNANCE_REQUEST_INVALID", "a change states whether approvals were required", 400)
    return stated


def govern(state: GovernanceState, action: PolicyAction, seq: int,
           table: Mapping[str, Safeguard] = RELEASE_ONLY) -> GovernanceState:
    """The governance state after `action` as event `seq`, or ReleaseRefused."""
    state = _live(state, action.at)
    row = table.get(action.setting)
    if row is None:
        raise ReleaseRefused("GOVERNANCE_REQUEST_INVALID", f"a safeguard setting is one of {', '.join(table)}",
                             400)  # every table knows the release policy
    current = state.value(action.setting) if row.chained and not row.act else None
    if current is not None and action.before != current:
        raise _refused(action.setting, "changed", "policy_before is not the policy in force", 409)
    required = approvals_required(state, action)
    if action.action == "policy_set":
        if row.act or (required and row.weakenings(action.before, action.after)):
            raise _refused(action.setting, "required",
                           "a weakening change while approvals are required needs a second principal", 409)
        return _applied(state, action.setting, action.after, seq)
    if action.action == "policy_request":
        if action.expires_at is None:
            raise _refused(action.setting, "invalid", "a policy request states when it expires", 400)
        request = PolicyRequest(seq, action.before, action.after, action.principal.actor, action.expires_at,
                                action.setting, row.weakenings(action.before, action.after),
                                action.principal.holder)
        asked = replace(state, pending=(*state.pending, request))
        return asked if row.act else _with_value(asked, action.setting, action.before)
    if action.action == "policy_approve":
        return _approve(state, action, seq, row)
    raise _refused(action.setting, "invalid", f"a policy action is one of {', '.join(GOVERNANCE_ACTIONS)}", 400)


def _with_value(state: GovernanceState, setting: str, value: Any) -> GovernanceState:
    if setting == RELEASE_POLICY:
        return replace(state, policy=value)
    return replace(state, settings={**state.settings, setting: value})


def _applied(state: GovernanceState, setting: str, value: Any, seq: int) -> GovernanceState:
    return replace(_with_value(state, setting, value), applied={**state.applied, setting: seq})


def _approve(state: GovernanceState, action: PolicyAction, seq: int, row: Safeguard) -> GovernanceState:
    setting = action.setting
    request = next((p for p in state.pending if p.seq == action.request_seq and p.setting == setting), None)
    if request is None:
        raise _refused(setting, "not_found",
                       "no pending policy request has this request_seq (it may have expired or been applied)", 404)
    if not distinct_approver(request, action.principal):
        raise _refused(setting, "self", "a principal cannot approve its own request "
                       "(nor another key of the same holder)", 403)
    if beneficiary_approver(request, action.principal, row):
        raise _refused(setting, "self", "a holder cannot approve a grant to itself "
                       "(nor with another of its keys)", 403)
    if not row.act and (state.applied.get(setting, 0) > request.seq or request.before != action.before):
        raise _refused(setting, "changed", "the setting changed since this request was made: "
                       "request the change again", 409)
    if request.after != action.after:
        raise _refused(setting, "mismatch", "policy_after is not the requested policy", 409)
    after = (replace(state, applied={**state.applied, setting: seq}) if row.act
             else _applied(state, setting, request.after, seq))
    return replace(after, pending=tuple(p for p in state.pending if p.seq != request.seq))


def pending_request(state: GovernanceState, request_seq: int, at: str) -> PolicyRequest | None:
    return next((p for p in _live(state, at).pending if p.seq == request_seq), None)


class GovernanceEventBody(TypedDict):
    """A governance event's members before its seal (`setting` and `approvals_required` since
    issue 52: an event without `setting` changes the release policy)."""

    release_governance_event_version: str
    scope_hash: str
    seq: int
    setting: NotRequired[str]
    action: str
    actor: str
    principal: dict[str, str]
    created_at: str
    request_seq: int | None
    expires_at: str | None
    reason: str | None
    approvals_required: NotRequired[bool]
    policy_before: dict[str, JsonValue]
    policy_after: dict[str, JsonValue]
    weakens: list[str]
    previous_event_hash: str | None
    state: GovernanceStateJSON


class GovernanceEvent(GovernanceEventBody, Seal):
    """A sealed `release_governance_event_v1`, as `build_governance_event` makes it and the
    scope's governance chain stores it."""


def build_governance_event(state: GovernanceState, action: PolicyAction, scope_hash: str,
                           signer: ReceiptSigner | None,
                           table: Mapping[str, Safeguard] = RELEASE_ONLY) -> tuple[GovernanceEvent, GovernanceState]:
    """The signed governance event for `action`, and the state after it (raises ReleaseRefused)."""
    seq = state.seq + 1
    after = govern(state, action, seq, table)
    event: GovernanceEventBody = {
        "release_governance_event_version": GOVERNANCE_EVENT_VERSION,
        "scope_hash": scope_hash,
        "seq": seq,
        "setting": action.setting,
        "action": action.action,
        "actor": action.principal.actor,
        "principal": action.principal.to_json(),
        "created_at": action.at,
        "request_seq": action.request_seq,
        "expires_at": action.expires_at,
        "reason": action.reason,
        "approvals_required": approvals_required(state, action),
        "policy_before": action.before.to_json(),
        "policy_after": action.after.to_json(),
        "weakens": list(table[action.setting].weakenings(action.before, action.after)),
        "previous_event_hash": state.head_event_hash,
        "state": after.to_json(),
    }
    sealed: GovernanceEvent = {**event, **seal_of(event, signer)}
    return sealed, replace(after, seq=seq, head_event_hash=sealed["event_hash"])


def _setting_of(event: Mapping[str, Any]) -> str:
    """The setting an event changes (none stated: the release policy, as before issue 52)."""
    return str(event["setting"]) if "setting" in event else RELEASE_POLICY


def _parse(table: Mapping[str, Safeguard], setting: str, body: Any) -> Any:
    row = table.get(setting)
    if row is None:
        raise GateError("GOVERNANCE_REQUEST_INVALID", f"unknown safeguard setting {setting!r}")
    return row.parse(body)


def state_from_event(event: GovernanceEvent, table: Mapping[str, Safeguard] = RELEASE_ONLY) -> GovernanceState:
    """A stored governance event's stated state (what the service reads from the chain's head;
    an event made before issue 52 states no `applied`: `replay_state` then)."""
    body = event["state"]
    return GovernanceState(
        seq=event["seq"], head_event_hash=event["event_hash"],
        policy=ReleasePolicy.from_json(body["policy"]) if body.get("policy") is not None else None,
        pending=tuple(PolicyRequest(p["request_seq"], _parse(table, p.get("setting", RELEASE_POLICY), p["policy_before"]),
                                    _parse(table, p.get("setting", RELEASE_POLICY), p["policy_after"]),
                                    p["requested_by"], p["expires_at"], p.get("setting", RELEASE_POLICY),
                                    tuple(p["weakens"]), p.get("requested_holder")) for p in body.get("pending") or ()),
        settings={name: _parse(table, name, value) for name, value in (body.get("settings") or {}).items()},
        applied=dict(body.get("applied") or {}))


def action_of(event: Mapping[str, Any], table: Mapping[str, Safeguard] = RELEASE_ONLY) -> PolicyAction:
    """The action a governance event states (raises ValueError or GateError when malformed)."""
    setting = _setting_of(event)
    return PolicyAction(action=str(event.get("action")), principal=Principal.from_json(event.get("principal")),
                        at=str(event.get("created_at")), before=_parse(table, setting, event.get("policy_before")),
                        after=_parse(table, setting, event.get("policy_after")), request_seq=event.get("request_seq"),
                        expires_at=event.get("expires_at"), reason=event.get("reason"), setting=setting,
                        approvals_required=event.get("approvals_required"))


def replay_state(events: Sequence[GovernanceEvent], table: Mapping[str, Safeguard] = RELEASE_ONLY) -> GovernanceState:
    """The state a stored chain folds to (for a head made before issue 52, which states no
    `applied`): its events' actions, in order, as they were accepted when written."""
    state = GovernanceState()
    for event in events:
        after = govern(state, action_of(event, table), state.seq + 1, table)
        state = replace(after, seq=event["seq"], head_event_hash=event["event_hash"])
    return state


class ChangeSummary(TypedDict):
    """What `gate verify` shows of one change of a verified chain: its members as the event
    states them (None where it states none), who asked and who approved (the values before and
    after: the setting's JSON)."""

    seq: int | None
    setting: str
    action: str | None
    actor: str | None
    principal: dict[str, str] | None
    created_at: str | None
    request_seq: int | None
    requested_by: str | None
    approved_by: list[str | None]
    weakens: list[str] | None
    policy_before: Any
    policy_after: Any


def change_summary(event: Mapping[str, Any], requested_by: str | None = None) -> ChangeSummary:
    """What `gate verify` shows of one change: the setting, who asked and who approved (an
    approval: the requester and the second principal; a direct change: its actor alone; a
    request: nobody yet)."""
    actor = event.get("actor")
    approvers = {"policy_set": [actor], "policy_approve": [requested_by, actor]}.get(str(event.get("action")), [])
    return {"seq": event.get("seq"), "setting": _setting_of(event), "action": event.get("action"), "actor": actor,
            "principal": event.get("principal"), "created_at": event.get("created_at"),
            "request_seq": event.get("request_seq"), "requested_by": requested_by or actor, "approved_by": approvers,
            "weakens": event.get("weakens"), "policy_before": event.get("policy_before"),
            "policy_after": event.get("policy_after")}


@dataclass(frozen=True, slots=True, kw_only=True)
class GovernanceCheck(EventChainCheck):
    """What `verify_governance` found: the chain check (valid, signatures checked when keys were
    given, the first problem as `problem`), the release policy in force after each event
    (`policies[n]`: after event n; `policies[0]`: before the first change, None when there was
    none, i.e. the stored or default policy the history cannot state), and every change with who
    asked for it and who approved it."""

    policies: tuple[ReleasePolicy | None, ...]
    changes: tuple[ChangeSummary, ...]


def verify_governance(events: Sequence[Any], anchors: TrustAnchors | None, expected_scope_hash: Any,
                      table: Mapping[str, Safeguard] = RELEASE_ONLY) -> GovernanceCheck:
    """Check a governance chain offline: hashes, links, signatures, gap-free seqs, and that each
    stated state is the fold of the actions (no weakening applied without a distinct approval)."""
    state = GovernanceState()
    policies: list[ReleasePolicy | None] = [None]
    changes: list[ChangeSummary] = []
    checked = keys_given(anchors)
    for index, event in enumerate(events):
        where = f"policy event {index + 1}"
        if not isinstance(event, Mapping) or event.get("release_governance_event_version") != GOVERNANCE_EVENT_VERSION:
            return GovernanceCheck(valid=False, signatures_checked=checked, events=len(events),
                                   problems=(f"{where}: not a {GOVERNANCE_EVENT_VERSION} object",),
                                   policies=tuple(policies), changes=tuple(changes))
        problem = chain_problem(event, where, state.seq, state.head_event_hash, expected_scope_hash, anchors)
        request = next((p for p in state.pending if p.seq == event.get("request_seq")), None)
        if problem is None:
            problem, state = _fold_problem(event, where, state, table)
        if problem is not None:
            return GovernanceCheck(valid=False, signatures_checked=checked, events=len(events), problems=(problem,),
                                   policies=tuple(policies), changes=tuple(changes))
        policies.append(state.policy)
        changes.append(change_summary(event, request.requested_by if request is not None else None))
    first_release = next((e for e in events if _setting_of(e) == RELEASE_POLICY), None)
    if first_release is not None:  # the policy before the first change is the one it states it replaced
        before = ReleasePolicy.from_json(first_release["policy_before"])
        policies[:first_release["seq"]] = [before] * first_release["seq"]
    return GovernanceCheck(valid=True, signatures_checked=checked, events=len(events), policies=tuple(policies),
                           changes=tuple(changes))


def _fold_problem(event: Mapping[str, Any], where: str, state: GovernanceState,
                  table: Mapping[str, Safeguard]) -> tuple[str | None, GovernanceState]:
    try:
        action = action_of(event, table)
        after = govern(state, action, state.seq + 1, table)
    except ReleaseRefused as refused:  # before GateError: a refusal of the rules, not a malformed event
        return f"{where}: the governance rules refuse this change ({refused.code})", state
    except (ValueError, GateError):
        return f"{where}: its principal or policies are malformed", state
    if event.get("actor") != action.principal.actor:
        return f"{where}: actor is not its principal's", state
    if after.to_json(legacy="setting" not in event) != event.get("state"):
        return f"{where}: stated policy is not the fold of the changes", state
    return None, replace(after, seq=state.seq + 1, head_event_hash=event["event_hash"])
