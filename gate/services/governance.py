"""Safeguard settings, the use case: the one service every change of a scope's release policy,
hold policy, event settings and keys that act on production (gate.services.keys) goes through (issue 52; docs/releases.md, "One rule for every
safeguard").

A change needs `admin`; it is one signed, chained governance event (gate.releases.governance).
While the scope requires approvals (its release policy's `require_approval`), a change that the
table (gate.governance.table) says weakens the setting only adds a pending request, bound to the
governance sequence it was made at; a second, distinct principal with `approve` applies it. The
release service, the hold service and the event settings read their setting here; event settings
are also written to their table once a change applies (the decide path reads that table).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, timedelta
from typing import Any, TypedDict

from gate import bodies
from gate.chain.event_witness import ChainWitness
from gate.chain.links import scope_hash
from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.events.egress import EventSettings, EventSubscriptions
from gate.governance.table import (
    API_KEYS,
    DENIED,
    EVENT_SETTINGS,
    EVENT_SUBSCRIPTIONS,
    HOLD_POLICY,
    PRIVACY,
    SAFEGUARDS,
    SUBJECT_ERASURE,
)
from gate.holds.policy import HoldPolicy
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger
from gate.ledger.event_settings import EventSettingsLedger
from gate.ledger.holds import HoldLedger
from gate.ledger.outbox import Outbox, SubscriptionRow, event_types_of
from gate.ledger.releases import Announcement, ReleaseLedger, ReleaseRace
from gate.principals import Permission, Permissions, Principal, require
from gate.privacy.datamap import PrivacySettings
from gate.privacy.erasure import Erasure
from gate.protocol.canonical import canonical_text
from gate.releases.governance import (
    GOVERNANCE_ID,
    RELEASE_POLICY,
    GovernanceEvent,
    GovernanceState,
    PolicyAction,
    PolicyRequestJSON,
    build_governance_event,
    pending_request,
    refusal_code,
    replay_state,
    state_from_event,
)
from gate.releases.key_grants import key_grants_of
from gate.releases.policy import ReleasePolicy

CACHE_SECONDS = 1.0
APPROVAL = "setting-approval"  # gate/bodies/setting-approval.schema.json: {request_seq, reason?}
_REASON = bodies.schema(APPROVAL)["properties"]["reason"]  # a change's reason obeys the same bounds
RETRIES = 8
HISTORY_LIMIT = 100_000  # the changes a scope's history reads at most (the newest), a bound on one read
# What a change is announced as (docs/events.md): (while it waits for approval, once in force).
_ANNOUNCED = {RELEASE_POLICY: ("release.policy_change_requested", "release.policy_changed"),
              HOLD_POLICY: ("hold.policy_change_requested", "hold.policy_changed"),
              EVENT_SETTINGS: ("events.settings_change_requested", "events.settings_changed"),
              API_KEYS: ("keys.grant_requested", "keys.granted"),
              EVENT_SUBSCRIPTIONS: ("subscription.requested", "subscription.approved"),
              PRIVACY: ("privacy.change_requested", "privacy.changed"),
              SUBJECT_ERASURE: ("subject.erasure_requested", "subject.erased")}
_ANNOUNCED_MEMBERS = ("seq", "setting", "action", "actor", "principal", "created_at", "request_seq", "expires_at",
                      "reason", "policy_before", "policy_after", "weakens", "event_hash", "previous_event_hash",
                      "key_id")


class GovernanceDocument(TypedDict):
    """A setting in force (`policy`: its JSON as its safeguard states it), its live pending
    requests and the governance chain's seq."""

    policy: Any
    pending: list[PolicyRequestJSON]
    governance_seq: int


def announcement(scope: str, event: GovernanceEvent) -> Announcement:
    """The outbox event of a signed change: a request while it waits for a second principal, a
    change once it is in force (set directly, or a request approved)."""
    requested, changed = _ANNOUNCED[str(event.get("setting", RELEASE_POLICY))]
    data: dict[str, object] = {member: event.get(member) for member in _ANNOUNCED_MEMBERS}
    if event.get("setting") == HOLD_POLICY and event["action"] != "policy_request":
        data["policy"] = event["policy_after"]  # hold.policy_changed carried the policy before issue 52
    return Announcement(requested if event["action"] == "policy_request" else changed, {"scope": scope, **data})


def require_permission(setting: str, principal: Principal, permissions: Permissions, permission: Permission) -> None:
    """A principal's right to change (`admin`) or approve (`approve`) a setting, refused with the
    setting's own code (gate.governance.table.DENIED)."""
    if not isinstance(principal, Principal):
        raise TypeError("a safeguard setting is changed by a Principal, never a name")
    require(permissions, permission, DENIED[setting])


def check_reason(setting: str, reason: Any) -> None:
    """A change's reason: absent, or text within the approval body's bounds for `reason`."""
    if reason is not None and (not isinstance(reason, str)
                               or not _REASON["minLength"] <= len(reason) <= _REASON["maxLength"]):
        raise GateError(refusal_code(setting, "invalid"), f"reason {_REASON['x-refusal']}")


def approval_members(setting: str, body: Any) -> tuple[Any, Any]:
    """The `request_seq` and `reason` of an approval body; refused with the setting's invalid code
    when it is no object or states another member (gate/bodies/setting-approval.schema.json). The
    members' values are checked by `GovernanceService.approve`, after the approver's permission."""
    error = bodies.first_error(APPROVAL, body)
    if error is not None and not error.absolute_path and error.validator in ("type", "additionalProperties"):
        raise GateError(refusal_code(setting, "invalid"), bodies.refusal(APPROVAL, error))
    return body.get("request_seq"), body.get("reason")


def subscriptions_of(rows: Sequence[SubscriptionRow]) -> EventSubscriptions:
    """A scope's webhook subscriptions in force, from their rows: every one but those waiting for
    a second holder's approval (`pending`)."""
    value = EventSubscriptions()
    for row in rows:
        if row["status"] != "pending":
            value = value.with_subscription(row["subscription_id"], row["url"], event_types_of(row))
    return value


class SafeguardSettings:
    """A scope's safeguard settings in force, read from its governance chain (what the decide
    path's hold opener needs: no signing, no clock)."""

    def __init__(self, ledger: Ledger, cache_seconds: float = CACHE_SECONDS,
                 witness: ChainWitness | None = None) -> None:
        self.ledger = ledger
        # Written through the release ledger, so the governance chain is checked against its
        # witnessed checkpoint before each event and checkpointed after it (issue 52, defect 6).
        self.store = ReleaseLedger(ledger, witness)
        self.cache_seconds = cache_seconds
        self._cache: dict[str, tuple[float, GovernanceState]] = {}
        self._hold_policies: dict[str, tuple[tuple[int | None, str | None, int | None], HoldPolicy]] = {}
        self._lock = threading.Lock()

    def state(self, scope: str, *, fresh: bool = False) -> GovernanceState:
        """The scope's governance chain at its head (cached for `cache_seconds`; a change here
        refreshes it at once). A head made before issue 52 states no `applied`: the chain is
        folded then."""
        now = time.monotonic()
        cached = None if fresh else self._cache.get(scope)
        if cached is not None and cached[0] > now:
            return cached[1]
        head = self.store.head(scope, GOVERNANCE_ID)
        event = None if head is None else json.loads(head["event_json"])
        if event is None:
            state = GovernanceState()
        elif "applied" in event["state"]:
            state = state_from_event(event, SAFEGUARDS)
        else:
            state = replay_state(self.history(scope), SAFEGUARDS)
        with self._lock:
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[scope] = (now + self.cache_seconds, state)
        return state

    def value(self, scope: str, setting: str, state: GovernanceState | None = None) -> Any:
        """The setting in force: the chain's, or (before its first change there) the one the scope
        kept before (the stored release policy, the hold chain's newest policy step, the event
        settings' row, the scope's active keys that act on production), or the default."""
        if setting == EVENT_SUBSCRIPTIONS:  # the scope's subscriptions in force: their rows
            return subscriptions_of(Outbox(self.ledger).subscriptions(scope))
        if not SAFEGUARDS[setting].chained:  # the scope's keys: their rows are the value in force
            return key_grants_of(self.ledger.list_api_keys(), scope)
        governed = (state or self.state(scope)).value(setting)
        if governed is not None:
            return governed
        if setting == RELEASE_POLICY:
            stored = self.store.policy(scope)
            return ReleasePolicy.stored(json.loads(stored)) if stored else ReleasePolicy()
        if setting == HOLD_POLICY:
            event = HoldLedger(self.ledger).policy_event(scope)
            return HoldPolicy.from_json(event["policy"]) if event is not None else HoldPolicy()
        if setting == PRIVACY:
            return PrivacySettings()  # nothing declared; the default rules
        if setting == SUBJECT_ERASURE:
            return Erasure()  # an act: nothing in force before or after one
        row = EventSettingsLedger(self.ledger).get(scope)
        return EventSettings(bool(row["decision_created"]), row["anomaly_every_seconds"]) if row else EventSettings()

    def hold_policy(self, scope: str) -> HoldPolicy:
        """The hold policy in force, as every held decide reads it (issue 68): kept by the version
        it was read at (`ReleaseLedger.hold_policy_version`, one statement of index reads, made
        before each use), so the policy's bodies are read again only after a change, and a change
        any process or worker commits is seen by the next decide: a cached policy is used only
        while the database still states the version it was read at."""
        version = self.store.hold_policy_version(scope)
        cached = self._hold_policies.get(scope)
        if cached is not None and cached[0] == version:
            return cached[1]
        policy: HoldPolicy = self.value(scope, HOLD_POLICY, self.state(scope, fresh=True))
        with self._lock:
            if len(self._hold_policies) >= 4096:
                self._hold_policies.clear()
            self._hold_policies[scope] = (version, policy)  # read at or after `version`: a newer one re-reads
        return policy

    def approvals_required(self, scope: str) -> bool:
        """Whether the scope requires approvals: its release policy's `require_approval` (the
        rule every weakening of a safeguard is asked under)."""
        return bool(self.value(scope, RELEASE_POLICY, self.state(scope, fresh=True)).require_approval)

    def history(self, scope: str) -> list[GovernanceEvent]:
        """Every signed change of the scope's safeguard settings, oldest first (the newest
        `HISTORY_LIMIT` of them)."""
        return [json.loads(row["event_json"]) for row in self.store.events(scope, GOVERNANCE_ID, limit=HISTORY_LIMIT)]


class GovernanceService(SafeguardSettings):
    """Read and change a scope's safeguard settings through its governance chain."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock | None = None,
                 cache_seconds: float = CACHE_SECONDS, witness: ChainWitness | None = None) -> None:
        super().__init__(ledger, cache_seconds, witness)
        self.signing = signing
        self.clock = clock or SystemClock()

    def change(self, scope: str, setting: str, principal: Principal, permissions: Permissions,
               make: Callable[[Any], Any], reason: str | None = None) -> tuple[GovernanceEvent | None, GovernanceState]:
        """Change a setting to `make(value in force)`: (the signed event, or None when nothing
        changes; the state after). A weakening while approvals are required is a pending request."""
        require_permission(setting, principal, permissions, "admin")
        check_reason(setting, reason)
        for _attempt in range(RETRIES):
            state = self.state(scope, fresh=True)
            before = self.value(scope, setting, state)
            after = make(before)
            if after == before:
                return None, state
            release = self.value(scope, RELEASE_POLICY, state)
            now = self.clock.now()
            expires = None
            row = SAFEGUARDS[setting]  # an act (an erasure) always waits for a second holder
            if (release.require_approval or row.act) and row.weakenings(before, after):
                moment = now if now.tzinfo else now.replace(tzinfo=UTC)
                expires = iso_ms(moment + timedelta(seconds=release.approval_ttl_seconds))
            action = PolicyAction("policy_request" if expires else "policy_set", principal, iso_ms(now), before, after,
                                  expires_at=expires, reason=reason, setting=setting,
                                  approvals_required=release.require_approval)
            done = self._append(scope, state, action)
            if done is not None:
                return done
        raise GateError("LEDGER_UNAVAILABLE", "safeguard setting changes raced too often; retry")

    def approve(self, scope: str, setting: str, principal: Principal, permissions: Permissions, request_seq: Any,
                reason: str | None = None) -> tuple[GovernanceEvent, GovernanceState]:
        """A second, distinct principal (`approve`) applies a pending request of `setting`."""
        require_permission(setting, principal, permissions, "approve")
        bodies.check(APPROVAL, {"reason": reason, "request_seq": request_seq}, refusal_code(setting, "invalid"))
        for _attempt in range(RETRIES):
            state = self.state(scope, fresh=True)
            at = iso_ms(self.clock.now())
            request = pending_request(state, request_seq, at)
            if request is None or request.setting != setting:
                raise GateError(refusal_code(setting, "not_found"), "no pending request of this setting has this "
                                "request_seq (it may have expired or been applied)")
            action = PolicyAction("policy_approve", principal, at, self.value(scope, setting, state), request.after,
                                  request_seq=request_seq, reason=reason, setting=setting,
                                  approvals_required=self.value(scope, RELEASE_POLICY, state).require_approval)
            done = self._append(scope, state, action)
            if done is not None:
                return done
        raise GateError("LEDGER_UNAVAILABLE", "safeguard setting changes raced too often; retry")

    def _append(self, scope: str, state: GovernanceState,
                action: PolicyAction) -> tuple[GovernanceEvent, GovernanceState] | None:
        """Append one governance event (None: another change took its seq; the caller re-reads),
        then apply an event-settings change to the table the decide path reads."""
        event, after = build_governance_event(state, action, scope_hash(scope), self._signer(), SAFEGUARDS)
        try:
            self.store.append({"scope": scope, "rulebook_id": GOVERNANCE_ID, "seq": event["seq"],
                               "action": event["action"], "event_hash": event["event_hash"], "idempotency_key": None,
                               "request_hash": event["event_hash"], "created_at": event["created_at"],
                               "event_json": canonical_text(event)}, announcement(scope, event))
        except ReleaseRace:
            return None
        if action.setting == EVENT_SETTINGS and action.action != "policy_request":
            self._apply_event_settings(scope, after.value(EVENT_SETTINGS), event)
        self.state(scope, fresh=True)
        return event, after

    def _apply_event_settings(self, scope: str, settings: EventSettings, event: GovernanceEvent) -> None:
        every = settings.anomaly_every_seconds
        EventSettingsLedger(self.ledger).put({
            "scope": scope, "decision_created": int(settings.decision_created), "anomaly_every_seconds": every,
            "anomaly_next_at": event["created_at"] if every is not None else None,  # the first run comes at once
            "updated_at": event["created_at"], "updated_by": event["actor"]})

    def document(self, scope: str, setting: str) -> GovernanceDocument:
        """A setting in force, its live pending requests and the chain's seq."""
        state = self.state(scope, fresh=True)
        at = iso_ms(self.clock.now())
        return {"policy": self.value(scope, setting, state).to_json(),
                "pending": [p.to_json() for p in state.pending if p.expires_at > at and p.setting == setting],
                "governance_seq": state.seq}

    def _signer(self) -> ReceiptSigner | None:
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()  # SECURITY: no unsigned governance event where signing is required
        return signer
