"""The release state machine, pure: a release's state is the fold of its events.

State of one `(scope, rulebook_id)`:

* `active`: the version decide-by-reference runs (None until the first activation);
* `previous`: earlier active versions, newest last (what `rollback` restores);
* `shadow`: a version evaluated beside every live decide, never answering;
* `canary`: a version that decides `percent`% of subjects (by a hash of the subject);
* `pending`: requests waiting for a second identity's approval (canary, activate).

Actions: `shadow`, `canary`, `activate`, `halt` (stops the canary and the shadow), `rollback`
(restores the previous active version), `approve` (applies a pending request). `transition` checks
an action against the state and returns the state after it, or raises `ReleaseRefused` with the
error code the API answers. Nothing here reads a clock or a database.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal, NotRequired, TypedDict, TypeGuard, get_args

from gate.errors import GateError
from gate.principals import holder_id, is_distinct_approver
from gate.strict_json import JsonValue

ReleaseAction = Literal["shadow", "canary", "activate", "halt", "rollback", "approve"]
ACTIONS: tuple[ReleaseAction, ...] = get_args(ReleaseAction)
ApprovableAction = Literal["canary", "activate"]  # what may wait for a second holder's approval
APPROVABLE: tuple[ApprovableAction, ...] = get_args(ApprovableAction)
MAX_PREVIOUS = 50
DEFAULT_SUBJECT = "context.source_record_id"
BUCKETS = 10_000  # canary shares are whole basis points


def is_approvable(action: str) -> TypeGuard[ApprovableAction]:
    return action in APPROVABLE


class VersionJSON(TypedDict):
    version: str
    rulebook_hash: str


class CanaryJSON(VersionJSON):
    percent: float
    subject: str
    since_seq: int


class PendingJSON(VersionJSON):
    request_seq: int
    action: ApprovableAction
    percent: float | None
    subject: str | None
    requested_by: str
    expires_at: str
    requested_holder: NotRequired[str]


class ReleaseStateJSON(TypedDict):
    """A release's state as the API, the CLI and the release events state it."""

    rulebook_id: str
    seq: int
    head_event_hash: str | None
    active: VersionJSON | None
    previous: list[VersionJSON]
    shadow: VersionJSON | None
    canary: CanaryJSON | None
    pending: list[PendingJSON]


class ReleaseRefused(GateError):
    """An action the state does not allow: the refusal the API answers (`code`, `message`).
    `status` is the HTTP status `api.errors.ERROR_TABLE` gives its code, stated beside each rule."""

    def __init__(self, code: str, message: str, status: int = 409, **details: Any) -> None:
        super().__init__(code, message, **details)
        self.status = status


@dataclass(frozen=True, slots=True)
class Version:
    """A published version: its id and the hash it is bound to."""

    version: str
    rulebook_hash: str

    def to_json(self) -> VersionJSON:
        return {"version": self.version, "rulebook_hash": self.rulebook_hash}


@dataclass(frozen=True, slots=True)
class Canary:
    version: Version
    percent: float
    subject: str
    since_seq: int  # the event that started it: the guardrails compare the arms from there

    def to_json(self) -> CanaryJSON:
        return {**self.version.to_json(), "percent": self.percent, "subject": self.subject,
                "since_seq": self.since_seq}


@dataclass(frozen=True, slots=True)
class Pending:
    """A request waiting for approval (`seq` is the event that asked)."""

    seq: int
    action: ApprovableAction
    version: Version
    percent: float | None
    subject: str | None
    requested_by: str
    expires_at: str
    requested_holder: str | None = None  # the requester key's stated holder (issue 52); None: none stated

    def to_json(self) -> PendingJSON:
        """The request as a state member states it; `requested_holder` only when one was stated,
        so a state written before holders reads exactly as it did."""
        out: PendingJSON = {"request_seq": self.seq, "action": self.action, "version": self.version.version,
                            "rulebook_hash": self.version.rulebook_hash,
               "percent": self.percent, "subject": self.subject, "requested_by": self.requested_by,
               "expires_at": self.expires_at}
        if self.requested_holder is not None:
            out["requested_holder"] = self.requested_holder
        return out


@dataclass(frozen=True, slots=True)
class ReleaseState:
    rulebook_id: str
    seq: int = 0
    head_event_hash: str | None = None
    active: Version | None = None
    previous: tuple[Version, ...] = ()
    shadow: Version | None = None
    canary: Canary | None = None
    pending: tuple[Pending, ...] = field(default_factory=tuple)

    def to_json(self) -> ReleaseStateJSON:
        return {
            "rulebook_id": self.rulebook_id,
            "seq": self.seq,
            "head_event_hash": self.head_event_hash,
            "active": self.active.to_json() if self.active else None,
            "previous": [v.to_json() for v in self.previous],
            "shadow": self.shadow.to_json() if self.shadow else None,
            "canary": self.canary.to_json() if self.canary else None,
            "pending": [p.to_json() for p in self.pending],
        }

    def versions_in_use(self) -> tuple[str, ...]:
        return tuple(v.version for v in (self.active, self.shadow, self.canary.version if self.canary else None) if v)


@dataclass(frozen=True, slots=True)
class Action:
    """One requested transition, as checked (the version already resolved to its hash)."""

    action: str
    actor: str
    at: str
    version: Version | None = None
    percent: float | None = None
    subject: str | None = None
    request_seq: int | None = None
    approval_expires_at: str | None = None  # set when the scope's policy requires approval
    holder: str | None = None  # the acting key's stated holder (issue 52); None: the actor's own


def _need_version(action: Action) -> Version:
    if action.version is None:
        raise ReleaseRefused("RELEASE_ACTION_INVALID", f"{action.action} needs a published version", 400)
    return action.version


def _without_pending(state: ReleaseState, seq: int) -> tuple[Pending, ...]:
    return tuple(p for p in state.pending if p.seq != seq)


def _check_canary_percent(percent: float | None) -> float:
    if percent is None or not 0 < percent < 100:
        raise ReleaseRefused("RELEASE_ACTION_INVALID", "a canary needs a percent greater than 0 and below 100", 400)
    if round(percent * 100) != percent * 100:
        raise ReleaseRefused("RELEASE_ACTION_INVALID", "a canary percent has at most two decimals", 400)
    return percent


def _apply(state: ReleaseState, action: Action, seq: int) -> ReleaseState:
    """The state after an allowed (and, where required, approved) canary/activate/shadow."""
    version = _need_version(action)
    if action.action == "shadow":
        if state.active is not None and state.active.version == version.version:
            raise ReleaseRefused("RELEASE_TRANSITION_REFUSED", "the active version cannot also be the shadow")
        return replace(state, shadow=version)
    if action.action == "canary":
        if state.active is None:
            raise ReleaseRefused("RULEBOOK_NOT_ACTIVE", "a canary needs an active version to compare against")
        if state.active.version == version.version:
            raise ReleaseRefused("RELEASE_TRANSITION_REFUSED", "the canary must differ from the active version")
        canary = Canary(version, _check_canary_percent(action.percent), action.subject or DEFAULT_SUBJECT, seq)
        return replace(state, canary=canary)
    # activate
    previous = state.previous
    if state.active is not None and state.active.version != version.version:
        previous = (*state.previous, state.active)[-MAX_PREVIOUS:]
    shadow = None if state.shadow is not None and state.shadow.version == version.version else state.shadow
    kept = None if state.canary is not None and state.canary.version.version == version.version else state.canary
    return replace(state, active=version, previous=previous, shadow=shadow, canary=kept)


def transition(state: ReleaseState, action: Action, seq: int) -> ReleaseState:
    """The state after `action` as event `seq`, or `ReleaseRefused`. Requests needing approval
    (`approval_expires_at` set) only add a pending entry."""
    pending = tuple(p for p in state.pending if p.expires_at > action.at)
    state = replace(state, pending=pending)
    if action.action not in ACTIONS:
        raise ReleaseRefused("RELEASE_ACTION_INVALID", f"action must be one of {', '.join(ACTIONS)}", 400)
    if action.action == "halt":
        if state.canary is None and state.shadow is None:
            raise ReleaseRefused("RELEASE_NOTHING_TO_HALT", "no canary or shadow is running", 409)
        return replace(state, canary=None, shadow=None)
    if action.action == "rollback":
        if not state.previous:
            raise ReleaseRefused("RELEASE_NOTHING_TO_ROLL_BACK", "no earlier active version to restore", 409)
        return replace(state, active=state.previous[-1], previous=state.previous[:-1], canary=None, shadow=None)
    if action.action == "approve":
        return _approve(state, action, seq)
    if is_approvable(action.action) and action.approval_expires_at is not None:
        version = _need_version(action)
        if action.action == "canary":
            _check_canary_percent(action.percent)
        _apply(state, action, seq)  # refuse now what could never be applied
        request = Pending(seq, action.action, version, action.percent,
                          (action.subject or DEFAULT_SUBJECT) if action.action == "canary" else None,
                          action.actor, action.approval_expires_at, action.holder)
        return replace(state, pending=(*state.pending, request))
    return _apply(state, action, seq)


def _approve(state: ReleaseState, action: Action, seq: int) -> ReleaseState:
    request = next((p for p in state.pending if p.seq == action.request_seq), None)
    if request is None:
        raise ReleaseRefused("RELEASE_APPROVAL_NOT_FOUND",
                             "no pending request has this request_seq (it may have expired or been applied)", 404)
    if not is_distinct_approver(holder_id(action.actor, action.holder),
                                (holder_id(request.requested_by, request.requested_holder),)):
        raise ReleaseRefused("RELEASE_SELF_APPROVAL", "an identity cannot approve its own request "
                             "(nor another key of the same holder)", 403)
    if action.version is None or action.version != request.version:
        raise ReleaseRefused("RELEASE_APPROVAL_MISMATCH",
                             "the approval must name the requested version and its rulebook_hash", 409)
    requested = Action(request.action, request.requested_by, action.at, request.version, request.percent,
                       request.subject)
    return replace(_apply(state, requested, seq), pending=_without_pending(state, request.seq))


def canary_bucket(scope: str, rulebook_id: str, canary_version: str, subject_value: str) -> int:
    """The subject's bucket in [0, 10000): sha256 of the scope, rulebook id, canary version and
    subject, so a subject stays in one arm for the whole canary (retries and repeat subjects
    included) and a new canary reshuffles."""
    digest = hashlib.sha256("\x1f".join((scope, rulebook_id, canary_version, subject_value)).encode()).digest()
    return int.from_bytes(digest[:8], "big") % BUCKETS


def in_canary(canary: Canary, scope: str, rulebook_id: str, subject_value: str) -> bool:
    return canary_bucket(scope, rulebook_id, canary.version.version, subject_value) < round(canary.percent * 100)


def subject_value(request: Mapping[str, JsonValue], path: str, fallback: str) -> str:
    """The subject at a dotted path of the request (e.g. `context.source_record_id`), as text;
    `fallback` (the request's input hash) when it is absent or not a scalar."""
    node: Any = request
    for part in path.split("."):
        if not isinstance(node, dict) or part not in node:
            return fallback
        node = node[part]
    if isinstance(node, bool) or not isinstance(node, (str, int, float)):
        return fallback
    return str(node)
