"""Policy releases, the one entry point for the API, the CLI and the workbench (docs/releases.md).

`ReleaseService` publishes immutable rulebook versions (the scope's snapshots), moves a rulebook's
release through signed, chained events (shadow, canary, activate, halt, rollback, approve), routes
a decide by reference to the version its release says, evaluates a shadow beside live decides,
and runs the canary guardrails off the decide path (after outcomes, on status reads, and every
`GUARD_EVERY` canary decides in a background thread), halting a canary on its own when one trips.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Any, Protocol, TypedDict, cast

from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger, StoredSnapshot
from gate.ledger.releases import (
    Announcement,
    ArmTally,
    ReleaseDecisionRow,
    ReleaseLedger,
    ReleaseRace,
    ShadowColumns,
    halt_rows,
    witnessed_chain_id,
)
from gate.principals import Permission, Permissions, Principal, require
from gate.protocol.canonical import canonical_text, sha256_hex
from gate.releases.events import (
    EventInputs,
    ReleaseEvent,
    ReleaseHistory,
    build_event,
    history_document,
    state_from_member,
)
from gate.releases.figures import canary_figures, shadow_figures
from gate.releases.governance import GOVERNANCE_ID, RELEASE_POLICY, GovernanceEvent, GovernanceState
from gate.releases.guardrails import ArmCounts, GuardrailReport, evaluate
from gate.releases.guards import head_problem, manifest_problems, scope_problem, stated_head
from gate.releases.halts import (
    OVERRIDE_HALT,
    SAME_RULES,
    halt_refusal,
    halted_versions,
    rules_hash,
    serving_version,
)
from gate.releases.model import (
    DEFAULT_SUBJECT,
    Action,
    Canary,
    ReleaseState,
    Version,
    in_canary,
    subject_value,
)
from gate.releases.policy import ReleasePolicy, needs_dry_run
from gate.rulebook import get_evaluator
from gate.rulebook.budget import check_evaluation_cost
from gate.services.chains import EventChainWitness
from gate.services.governance import GovernanceDocument, GovernanceService
from gate.services.operations import GuardrailAlert
from gate.services.periodic import PeriodicWorker
from gate.services.pipeline import Caller

CACHE_SECONDS = 1.0  # a transition reaches every other worker's decides within this bound
GUARD_EVERY = 25  # canary decides between two background guardrail checks of a release
GUARD_INTERVAL_SECONDS = 1.0  # how soon checks left by a failed one run (an owed check wakes it at once)
_BODY_MEMBERS = {"action", "version", "percent", "subject", "reason", "migration_manifest_hash", "request_seq",
                 "rulebook_hash", "migration_manifest", "override"}
_SUBJECT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}(\.[A-Za-z_][A-Za-z0-9_]{0,63}){0,7}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_ACTION_PERMISSION: dict[str, Permission] = {"approve": "approve"}
_MAX_MANIFEST_BYTES = 4 * 1024 * 1024
ARM_BLOCK_VERSION = "release_arm_v1"


@dataclass(frozen=True, slots=True)
class Routed:
    """Where a decide by reference went: the version that decided, and why."""

    rulebook_id: str
    version: str
    arm: str  # active | canary | pinned
    release_seq: int
    subject_hash: str | None


class ArmBlock(TypedDict):
    """The record's `release_arm` member of a decide by reference: the version that decided, and why."""

    release_arm_version: str
    rulebook_id: str
    version: str
    arm: str
    release_seq: int
    subject_hash: str | None


@dataclass(frozen=True, slots=True)
class Observed:
    """What a release adds to a decide: its row, the record's arm block, response headers."""

    row: ReleaseDecisionRow | None
    arm_block: ArmBlock | None
    headers: tuple[tuple[str, str], ...]


class ReleasePolicyDocument(GovernanceDocument):
    """What GET /api/decision/release-policy answers: the policy in force, the pending requests
    and every change (the signed governance events)."""

    history: list[GovernanceEvent]


RELEASE_DENIED = "RELEASE_PERMISSION_DENIED"  # the code of every right a release step lacks


# A release event's announcement type (docs/events.md); a canary or activation that waits for a
# second principal is announced as a request, not as the move it asks for.
_ANNOUNCED = {"shadow": "release.shadow", "canary": "release.canary", "activate": "release.activated",
              "halt": "release.halted", "rollback": "release.rolled_back", "approve": "release.approved"}
_ANNOUNCED_MEMBERS = ("rulebook_id", "seq", "action", "actor", "principal", "override", "created_at", "version",
                      "rulebook_hash", "percent",
                      "request_seq", "reason", "evidence", "event_hash", "previous_event_hash", "key_id")


def announcement(scope: str, event: Mapping[str, Any]) -> Announcement:
    """The outbox event of a signed release event: its members a receiver acts on, and the
    event hash that lets it fetch the history and verify the event (`gate verify`)."""
    name = _ANNOUNCED[str(event["action"])]
    if event["action"] in ("canary", "activate") and event.get("approval_expires_at") is not None:
        name = "release.approval_requested"
    data = {member: event.get(member) for member in _ANNOUNCED_MEMBERS}
    data["approval_expires_at"] = event.get("approval_expires_at")
    return Announcement(name, {"scope": scope, **data})


def _require(principal: Principal, permissions: Permissions, permission: Permission) -> None:
    """The service's own check of a principal's right (whatever a page or route already hid)."""
    if not isinstance(principal, Principal):
        raise TypeError("a release or policy change is made by a Principal, never a name")
    require(permissions, permission, RELEASE_DENIED)


class Snapshots(Protocol):
    """The rulebook snapshots a release moves between (`gate.services.snapshots.RulebookSnapshots`)."""

    def register_rulebook(self, scope: str, rulebook: Any) -> tuple[dict[str, Any], bool]: ...

    def bound_snapshot(self, scope: str, rulebook_id: str, version: str) -> StoredSnapshot | None: ...


def checked_ref(body: Mapping[str, Any]) -> Mapping[str, Any]:
    """A decide body's `rulebook_ref`, `{rulebook_id, version?}` (strings) in place of `rulebook`
    (gate/bodies/decide.schema.json), or RULEBOOK_REF_INVALID."""
    ref = body.get("rulebook_ref")
    if "rulebook" in body or not isinstance(ref, Mapping) or set(ref) - {"rulebook_id", "version"} \
            or not isinstance(ref.get("rulebook_id"), str) \
            or not isinstance(ref.get("version", ""), str):
        raise GateError("RULEBOOK_REF_INVALID", "rulebook_ref is {rulebook_id, version?} (strings) and replaces "
                        "rulebook: send one of them")
    return ref


class ReleaseService:
    """Publish, release, route, shadow and guard; scoped to the caller's scope throughout."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, *, snapshots: Snapshots,
                 clock: Clock, witness: EventChainWitness, safeguards: GovernanceService,
                 cache_seconds: float = CACHE_SECONDS,
                 on_trip: Callable[[str, str, GuardrailReport], None] | None = None) -> None:
        """Built by the composition root (`gate.services.root`) with its one `witness` (the release
        and governance chains in the gate's checkpoint log, `GATE_CHECKPOINT_LOG`) and its one
        governed-change service, `safeguards` (the decide path reads the release policy there)."""
        self.ledger = ledger
        self.signing = signing
        self.snapshots = snapshots
        self.clock = clock
        self.witness = witness
        self.store = ReleaseLedger(ledger, self.witness)
        self.cache_seconds = cache_seconds
        self.on_trip = on_trip
        self._cache: dict[tuple[str, str], tuple[float, ReleaseState]] = {}
        self.safeguards = safeguards
        self._lock = threading.Lock()
        self._canary_decides: dict[tuple[str, str], int] = {}
        # The releases whose guardrails are owed a check (oldest first), run by the `release-guard`
        # worker off the decide's path; it starts at the first one owed.
        self._guard_due: dict[tuple[str, str], None] = {}
        self.guard = PeriodicWorker("release-guard", self._run_due_guards, GUARD_INTERVAL_SECONDS,
                                    log=logging.getLogger("gate.releases"))

    # ------------------------------------------------------------------ publish and read

    def publish(self, caller: Caller, rulebook: Any) -> tuple[dict[str, Any], bool]:
        """Bind a rulebook version in the caller's scope (immutable): (metadata, newly published)."""
        require(caller.permissions, "publish", RELEASE_DENIED)
        return self.snapshots.register_rulebook(caller.scope, rulebook)

    def _known(self, scope: str, rulebook_id: str) -> None:
        if not isinstance(rulebook_id, str) or self.ledger.latest_rulebook_snapshot(scope, rulebook_id) is None:
            raise GateError("RULEBOOK_NOT_FOUND", "no rulebook with this id is published in this scope")

    def _version(self, scope: str, rulebook_id: str, version: Any) -> Version:
        if not isinstance(version, str) or not version:
            raise GateError("RELEASE_ACTION_INVALID", "version must be a published version string")
        snapshot = self.snapshots.bound_snapshot(scope, rulebook_id, version)
        if snapshot is None:
            raise GateError("RULEBOOK_NOT_FOUND", f"version {version!r} of this rulebook is not published in this scope")
        return Version(version, snapshot["rulebook_hash"])

    def state(self, scope: str, rulebook_id: str, *, fresh: bool = False) -> ReleaseState:
        """The release state (cached for `cache_seconds`; transitions here refresh it at once)."""
        key = (scope, rulebook_id)
        now = time.monotonic()
        if not fresh:
            cached = self._cache.get(key)
            if cached is not None and cached[0] > now:
                return cached[1]
        head = self.store.head(scope, rulebook_id)
        state = ReleaseState(rulebook_id) if head is None else state_from_member(
            rulebook_id, head["seq"], head["event_hash"], json.loads(head["event_json"])["state"])
        with self._lock:
            if len(self._cache) >= 4096:
                self._cache.clear()
            self._cache[key] = (now + self.cache_seconds, state)
        return state

    def running_rulebook(self, scope: str, rulebook_id: str) -> tuple[dict[str, Any], str] | None:
        """What production runs for the rulebook in `scope` and where that comes from: the active
        release version's bound snapshot ("active release"), or, where the rulebook has no active
        release, the newest version callers sent inline and the ledger registered ("newest inline
        version"); None when the scope has neither, or when that newest version is one published for
        shadow, canary or a pending activation (it does not run: what callers send is not known
        then). (The dry-run's baseline: docs/dry-run.md.)"""
        state = self.state(scope, rulebook_id)
        if state.active is not None:
            row = self.snapshots.bound_snapshot(scope, rulebook_id, state.active.version)
            source = f"active release {state.active.version}"
        else:
            row = self.ledger.latest_rulebook_snapshot(scope, rulebook_id)
            source = "newest inline version (no release)"
            candidates = {*state.versions_in_use(), *(pending.version.version for pending in state.pending)}
            if row is not None and row["version"] in candidates:
                return None  # a version published for shadow, canary or approval does not run: unknown
        return (json.loads(row["body_json"]), source) if row else None

    # ------------------------------------------------------------------ the release policy and its governance

    def governance(self, scope: str, *, fresh: bool = False) -> GovernanceState:
        """The scope's governance chain at its head (gate.services.governance, cached like a
        release state)."""
        return self.safeguards.state(scope, fresh=fresh)

    def _policy_of(self, scope: str, governance: GovernanceState) -> ReleasePolicy:
        """The policy in force: the governance chain's, or (before its first change) the one a
        scope stored before issue 42, or the default."""
        policy: ReleasePolicy = self.safeguards.value(scope, RELEASE_POLICY, governance)
        return policy

    def policy(self, scope: str, *, fresh: bool = False) -> ReleasePolicy:
        return self._policy_of(scope, self.governance(scope, fresh=fresh))

    def set_policy(self, scope: str, principal: Principal, permissions: Permissions, body: Any, *,
                   partial: bool = False, reason: str | None = None) -> tuple[GovernanceEvent | None, GovernanceState]:
        """Change the policy (PUT: `body` states it whole; PATCH, `partial`: the members named):
        (the signed governance event, or None when nothing changes; the state after). A weakening
        change while approvals are required becomes a pending request (the one rule of every
        safeguard setting, gate.services.governance)."""
        def make(before: ReleasePolicy) -> ReleasePolicy:
            return before.patched(body) if partial else ReleasePolicy.from_json(body)
        return self.safeguards.change(scope, RELEASE_POLICY, principal, permissions, make, reason)

    def approve_policy(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                       reason: str | None = None) -> tuple[GovernanceEvent, GovernanceState]:
        """A second principal applies a pending policy request (the `approve` permission)."""
        return self.safeguards.approve(scope, RELEASE_POLICY, principal, permissions, request_seq, reason)

    def policy_document(self, scope: str) -> ReleasePolicyDocument:
        """What GET /api/decision/release-policy answers: the policy in force, the pending
        requests and every change (the signed governance events)."""
        return {**self.safeguards.document(scope, RELEASE_POLICY), "history": self.governance_history(scope)}

    def governance_history(self, scope: str) -> list[GovernanceEvent]:
        return self.safeguards.history(scope)

    def _signer(self) -> ReceiptSigner | None:
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()  # SECURITY: no unsigned release or policy event where signing is required
        return signer

    def history(self, scope: str, rulebook_id: str) -> list[ReleaseEvent]:
        return [json.loads(row["event_json"]) for row in self.store.events(scope, rulebook_id)]

    def history_document(self, caller_scope: str, rulebook_id: str) -> ReleaseHistory:
        """The portable, offline-verifiable release history (`gate verify --release-history`),
        with the scope's policy changes. `CHAIN_INTEGRITY_FAILED` when either chain does not
        extend its witnessed checkpoint (`EventChainWitness.check`)."""
        self._known(caller_scope, rulebook_id)
        with self.ledger.one_snapshot():
            for chain in (rulebook_id, GOVERNANCE_ID):
                self.witness.check(witnessed_chain_id(caller_scope, chain),
                                   partial(self.store.event_hashes, caller_scope, chain))
            return history_document(scope_hash(caller_scope), rulebook_id, self.history(caller_scope, rulebook_id),
                                    self.governance_history(caller_scope))

    def status(self, scope: str, rulebook_id: str) -> dict[str, Any]:
        """State, policy, history and the live comparison; runs the guardrails (they may halt)."""
        self._known(scope, rulebook_id)
        self.check_guardrails(scope, rulebook_id)
        state = self.state(scope, rulebook_id, fresh=True)
        return {"rulebook_id": rulebook_id, "state": state.to_json(), "policy": self.policy(scope).to_json(),
                "comparison": self.comparison(scope, state), "history": self.history(scope, rulebook_id)}

    def comparison(self, scope: str, state: ReleaseState) -> dict[str, Any]:
        shadow = None
        if state.shadow is not None:
            rows = self.store.shadow_rows(scope, state.rulebook_id, state.shadow.version)
            shadow = {"version": state.shadow.version, **shadow_figures(rows)}
        canary = None
        if state.canary is not None:
            canary_counts, active_counts = self._arm_counts(scope, state)
            canary = {"version": state.canary.version.version, "percent": state.canary.percent,
                      **canary_figures(canary_counts, active_counts, evaluate(canary_counts, active_counts))}
        return {"shadow": shadow, "canary": canary}

    # ------------------------------------------------------------------ transitions

    def act(self, scope: str, principal: Principal, permissions: Permissions, rulebook_id: str, body: Any,
            idempotency_key: str | None = None) -> tuple[dict[str, Any], bool]:
        """Apply one action by an authenticated principal: (the signed event, newly created). The
        same idempotency key with the same body answers the same event; with another body it is 409."""
        if not isinstance(principal, Principal):
            raise TypeError("a release action is taken by a Principal, never a name")
        checked = self._checked_body(body)
        _require(principal, permissions, _ACTION_PERMISSION.get(checked["action"], "release"))
        self._known(scope, rulebook_id)
        request_hash = sha256_hex({"actor": principal.actor, "body": checked})
        for _attempt in range(8):
            if idempotency_key is not None:
                known = self.store.by_idempotency(scope, rulebook_id, idempotency_key)
                if known is not None:
                    if known["request_hash"] != request_hash:
                        raise GateError("RELEASE_IDEMPOTENCY_CONFLICT",
                                        "this idempotency key was already used with another release request")
                    return json.loads(known["event_json"]), False
            event = self._event(scope, principal, permissions, rulebook_id, checked)
            try:
                self.store.append({"scope": scope, "rulebook_id": rulebook_id, "seq": event["seq"],
                                   "action": event["action"], "event_hash": event["event_hash"],
                                   "idempotency_key": idempotency_key, "request_hash": request_hash,
                                   "created_at": event["created_at"], "event_json": canonical_text(event)},
                                  announcement(scope, event))
            except ReleaseRace:
                continue  # another transition took this seq (or this key): read the new head
            self.state(scope, rulebook_id, fresh=True)
            return {**event}, True  # the event as its shells serve it: a JSON object
        raise GateError("LEDGER_UNAVAILABLE", "release transitions raced too often; retry")

    def _event(self, scope: str, principal: Principal, permissions: Permissions, rulebook_id: str,
               checked: dict[str, Any]) -> ReleaseEvent:
        state = self.state(scope, rulebook_id, fresh=True)
        governance = self.governance(scope, fresh=True)
        policy = self._policy_of(scope, governance)
        name = checked["action"]
        now = self.clock.now()
        version = self._version(scope, rulebook_id, checked["version"]) if checked.get("version") is not None else None
        if name == "approve" and version is not None and checked.get("rulebook_hash") != version.rulebook_hash:
            raise GateError("RELEASE_APPROVAL_MISMATCH", "rulebook_hash is not the published hash of this version")
        expires = None
        if name in ("canary", "activate") and policy.require_approval:
            expires = iso_ms(_utc(now) + timedelta(seconds=policy.approval_ttl_seconds))
        # SECURITY: every halt of the release, not the newest page of its history: a halt 1,000
        # events back binds as much as the last one (issue 41 mutation finding).
        halted = halted_versions(self.store.halt_events(scope, rulebook_id))
        checked = self._same_rules(scope, rulebook_id, state, checked, halted)
        override = self._halt_override(state, checked, permissions, halted)
        manifest_hash = self._dry_run_evidence(scope, rulebook_id, policy, checked, version, now)
        action = Action(name, principal.actor, iso_ms(now), version, checked.get("percent"),
                        checked.get("subject") if name == "canary" else None, checked.get("request_seq"), expires,
                        holder=principal.holder)
        inputs = EventInputs(scope_hash(scope), checked.get("reason"), manifest_hash, checked.get("evidence"),
                             principal, governance.seq, override)
        event, _after = build_event(state, action, inputs, self._signer())
        return event

    def _same_rules(self, scope: str, rulebook_id: str, state: ReleaseState, checked: dict[str, Any],
                    halted: frozenset[str]) -> dict[str, Any]:
        """`checked` with its evidence naming the halted version whose rules (`rules_hash`) the
        move makes serve under another label (issue 64), which the signed event keeps; a caller's
        own `same_rules_as` is never taken."""
        evidence = checked.get("evidence")
        kept = {k: v for k, v in evidence.items() if k != SAME_RULES} if isinstance(evidence, Mapping) else evidence
        checked = {**checked, "evidence": kept} if kept is not None else checked
        version = serving_version(checked, state)
        if version is None or version in halted or not halted:
            return checked
        served = self._rules_hash(scope, rulebook_id, version)
        same = next((name for name in sorted(halted) if self._rules_hash(scope, rulebook_id, name) == served), None)
        if served is None or same is None:
            return checked
        return {**checked, "evidence": {**(kept if isinstance(kept, Mapping) else {}), SAME_RULES: same}}

    def _rules_hash(self, scope: str, rulebook_id: str, version: str) -> str | None:
        snapshot = self.snapshots.bound_snapshot(scope, rulebook_id, version)
        return rules_hash(json.loads(snapshot["body_json"])) if snapshot is not None else None

    def _halt_override(self, state: ReleaseState, checked: Mapping[str, Any], permissions: Permissions,
                       halted: frozenset[str]) -> str | None:
        """The halt rule (gate.releases.halts) for every move: a version its guardrail halted (or
        one with its rules) is made to serve (activated, a canary, rolled back to, requested or
        approved) only by an admin who says so and why; the override it records."""
        refusal = halt_refusal(checked, state, halted)
        if refusal is not None:
            raise refusal
        if checked.get("override") is None:
            return None
        require(permissions, "admin", RELEASE_DENIED)
        return OVERRIDE_HALT

    def _dry_run_evidence(self, scope: str, rulebook_id: str, policy: ReleasePolicy, checked: Mapping[str, Any],
                          version: Version | None, now: datetime) -> str | None:
        """The migration_hash the event records: a passed manifest's, checked in full, where the
        policy asks for one (or whenever one is passed); else the hash the caller stated, if any."""
        manifest = checked.get("migration_manifest")
        if manifest is None:
            if needs_dry_run(policy, checked["action"], checked.get("percent")):
                raise GateError("RELEASE_DRY_RUN_REQUIRED", f"this scope's policy requires a signed dry-run manifest "
                                f"of the version for {checked['action']}: pass migration_manifest")
            stated: str | None = checked.get("migration_manifest_hash")
            return stated
        if version is None or checked["action"] not in ("canary", "activate"):
            raise GateError("RELEASE_ACTION_INVALID", "migration_manifest goes with a canary or an activation")
        problems = manifest_problems(manifest, rulebook_id, version, self.signing.trust_anchors(), _utc(now),
                                     policy.dry_run_max_age_seconds)
        if not problems:  # a verified manifest: is it of this scope's history, recent enough? (issue 64)
            problems = self._coverage_problems(scope, manifest["dry_run"], _utc(now), policy.dry_run_max_age_seconds)
        if problems:
            raise GateError("RELEASE_DRY_RUN_REJECTED", problems[0], problems=problems)
        digest: str = manifest["migration_hash"]
        if checked.get("migration_manifest_hash") not in (None, digest):
            raise GateError("RELEASE_ACTION_INVALID", "migration_manifest_hash is not the passed manifest's")
        return digest

    def _coverage_problems(self, scope: str, dry_run: Mapping[str, Any], now: datetime,
                           max_age_seconds: int) -> list[str]:
        """A dry-run of another scope (or every scope) is refused; one that states the scope's chain
        head it read must cover a head this scope's chain had, left out nothing older than the bound."""
        wrong_scope = scope_problem(dry_run, scope)
        if wrong_scope is not None:
            return [wrong_scope]
        head = stated_head(dry_run)
        if head is None:
            return []
        current = self.ledger.chain_head(str(head.get("chain_id")))
        stated = head.get("size")
        size = stated if isinstance(stated, int) and not isinstance(stated, bool) else -1
        if current is None or current["scope"] != scope or size < 0:
            current, links = None, []
        else:
            links = self.ledger.chain_links_window(current["chain_id"], size, size + 1)
        covered = next((link["link_hash"] for link in links if link["chain_position"] == size), None)
        left_out = next((link for link in links if link["chain_position"] == size + 1), None)
        stored = self.ledger.decision(scope, left_out["decision_id"]) if left_out is not None else None
        first_left_out = _utc(datetime.fromisoformat(stored.created_at.replace("Z", "+00:00"))) if stored else None
        problem = head_problem(head, current, covered, first_left_out, now, max_age_seconds)
        return [problem] if problem else []

    @staticmethod
    def _checked_body(body: Any) -> dict[str, Any]:
        if not isinstance(body, Mapping):
            raise GateError("RELEASE_ACTION_INVALID", "the body must be a JSON object")
        unknown = sorted(set(body) - _BODY_MEMBERS - {"evidence"})
        if unknown:
            raise GateError("RELEASE_ACTION_INVALID", f"unknown member(s): {', '.join(unknown)}")
        problems = _body_problems(body)
        if problems:
            raise GateError("RELEASE_ACTION_INVALID", problems[0], problems=problems)
        return {k: v for k, v in body.items() if v is not None}

    # ------------------------------------------------------------------ decide: route and observe

    def prior_version(self, scope: str, idempotency_key: str | None, rulebook_id: str) -> str | None:
        """The version of `rulebook_id` an earlier decide under this idempotency key ran (a retry
        stays in its arm); None when the key is new or was used for another rulebook (whose replay
        then answers the idempotency conflict)."""
        if idempotency_key is None:
            return None
        stored = self.ledger.decision_by_idempotency(scope, idempotency_key)
        if stored is None or stored.columns.get("policy_id") != rulebook_id:
            return None
        # the decisions table's text column: a version's text, or NULL (a decide that named none)
        return cast("str | None", stored.columns.get("policy_version"))

    def route(self, caller: Caller, body: dict[str, Any], idempotency_key: str | None,
              prior_version: Callable[[str], str | None] | None = None) -> tuple[dict[str, Any], Routed]:
        """The request an inline decide of the referenced version would be, and where it went.
        `prior_version(rulebook_id)` names the version an earlier decide under the same
        idempotency key ran (by default read from the ledger: `prior_version`), so a retry replays
        in its arm whatever the release did since."""
        ref = checked_ref(body)
        rulebook_id, scope = ref["rulebook_id"], caller.scope
        state = self.state(scope, rulebook_id)
        version, arm, subject_hash = ref.get("version"), "pinned", None
        if version is None:
            prior = prior_version or (lambda rid: self.prior_version(scope, idempotency_key, rid))
            version = prior(rulebook_id) if idempotency_key is not None else None
            arm = "replayed" if version is not None else "active"
        if version is None:
            if state.active is None:
                self._known(scope, rulebook_id)  # 404 for an id not published here, before the 409
                raise GateError("RULEBOOK_NOT_ACTIVE", f"rulebook {rulebook_id!r} has no active version: activate "
                                "one (POST /api/decision/rulebooks/{id}/release) or name a version")
            version = state.active.version
            if state.canary is not None:
                subject = subject_value(body, state.canary.subject, sha256_hex(body))
                subject_hash = sha256_hex(subject)
                if in_canary(state.canary, scope, rulebook_id, subject):
                    version, arm = state.canary.version.version, "canary"
        snapshot = self.snapshots.bound_snapshot(scope, rulebook_id, version)
        if snapshot is None:
            raise GateError("RULEBOOK_NOT_FOUND", f"version {version!r} of this rulebook is not published in this scope")
        request = {k: v for k, v in body.items() if k != "rulebook_ref"}
        request["rulebook"] = self._body(snapshot)
        return request, Routed(rulebook_id, version, arm, state.seq, subject_hash)

    def _body(self, snapshot: Mapping[str, Any]) -> dict[str, Any]:
        """A fresh parse of the snapshot's canonical body (the decide path must not share a
        mutable document between requests)."""
        fresh: dict[str, Any] = json.loads(snapshot["body_json"])
        return fresh

    def check_inline(self, scope: str, rulebook: Mapping[str, Any], rulebook_hash: str) -> tuple[tuple[str, str], ...]:
        """An inline decide of a released id: the superseded header, or 409 when the scope refuses."""
        rulebook_id = rulebook.get("rulebook_id")
        if not isinstance(rulebook_id, str):
            return ()
        active = self.state(scope, rulebook_id).active
        if active is None or active.rulebook_hash == rulebook_hash:
            return ()
        if self.policy(scope).refuse_superseded_inline:
            raise GateError("RULEBOOK_SUPERSEDED", f"rulebook {rulebook_id!r} has an active release, version "
                            f"{active.version!r}, with other content: decide by reference or send that version",
                            active_version=active.version)
        return (("x-decision-rulebook-superseded-by", active.version),)

    def observe(self, scope: str, record: Mapping[str, Any], facts: Mapping[str, Any],
                routed: Routed | None) -> Observed:
        """The release row of a decide (arm, and the shadow's result on the same facts), and the
        arm block its record carries when it was decided by reference."""
        rulebook_id = record.get("policy_id")
        if not isinstance(rulebook_id, str):
            return Observed(None, None, ())
        state = self.state(scope, rulebook_id)
        if state.seq == 0 and routed is None:
            return Observed(None, None, ())
        shadow: ShadowColumns = {}
        if state.shadow is not None and state.shadow.version != record["policy_version"]:
            shadow = self._shadow(scope, rulebook_id, state.shadow, facts)
        row: ReleaseDecisionRow = {
            "decision_id": record["decision_id"], "scope": scope, "rulebook_id": rulebook_id,
            "release_seq": routed.release_seq if routed else state.seq, "arm": routed.arm if routed else "inline",
            "version": record["policy_version"], "verdict": record["verdict"], "created_at": record["created_at"],
            "shadow_version": shadow.get("shadow_version"), "shadow_verdict": shadow.get("shadow_verdict"),
            "shadow_reason_code": shadow.get("shadow_reason_code"),
            "shadow_matched_rule_id": shadow.get("shadow_matched_rule_id"),
        }
        block: ArmBlock | None = None
        if routed is not None:
            block = {"release_arm_version": ARM_BLOCK_VERSION, "rulebook_id": rulebook_id,
                     "version": routed.version, "arm": routed.arm, "release_seq": routed.release_seq,
                     "subject_hash": routed.subject_hash}
            if routed.arm == "canary":
                self._count_canary_decide(scope, rulebook_id)
        return Observed(row, block, ())

    def _shadow(self, scope: str, rulebook_id: str, shadow: Version, facts: Mapping[str, Any]) -> ShadowColumns:
        """The shadow version on the live decision's facts (no adapter runs again). A shadow that
        cannot be evaluated (over budget, invalid) records no verdict; it never fails the decide."""
        snapshot = self.snapshots.bound_snapshot(scope, rulebook_id, shadow.version)
        if snapshot is None:
            return {"shadow_version": shadow.version}
        rulebook = self._body(snapshot)
        try:
            evaluator = get_evaluator(rulebook, shadow.rulebook_hash)
            check_evaluation_cost(evaluator.document, shadow.rulebook_hash, dict(facts))
            evaluation = evaluator.evaluate(dict(facts))
        except GateError:
            return {"shadow_version": shadow.version}
        return {"shadow_version": shadow.version, "shadow_verdict": evaluation.decision,
                "shadow_reason_code": evaluation.reason_code, "shadow_matched_rule_id": evaluation.matched_rule_id}

    # ------------------------------------------------------------------ guardrails

    def _arm_counts(self, scope: str, state: ReleaseState) -> tuple[ArmCounts, ArmCounts]:
        since = state.canary.since_seq if state.canary else state.seq
        tallies = self.store.arm_tallies(scope, state.rulebook_id, since)
        empty = ArmTally({}, 0, 0)

        def counts(tally: ArmTally) -> ArmCounts:
            return ArmCounts(tally.verdicts, tally.failed, tally.succeeded)

        return counts(tallies.get("canary", empty)), counts(tallies.get("active", empty))

    def check_guardrails(self, scope: str, rulebook_id: str,
                         trigger: Mapping[str, Any] | None = None) -> GuardrailReport | None:
        """Run the guardrails of a running canary; a tripped one halts it with its evidence
        (`trigger`: the outcome whose report ran them, and the key that reported it)."""
        state = self.state(scope, rulebook_id, fresh=True)
        if state.canary is None:
            return None
        canary_counts, active_counts = self._arm_counts(scope, state)
        report = evaluate(canary_counts, active_counts)
        if report.tripped:
            self._halt_for(scope, rulebook_id, state.canary, report, trigger)
        return report

    def _halt_for(self, scope: str, rulebook_id: str, canary: Canary, report: GuardrailReport,
                  trigger: Mapping[str, Any] | None) -> None:
        body = {"action": "halt", "reason": f"guardrail tripped: {', '.join(report.tripped)}",
                "evidence": {"canary_version": canary.version.version, "canary_since_seq": canary.since_seq,
                             **report.to_json(), "trigger": dict(trigger) if trigger is not None else None}}
        try:
            self.act(scope, Principal.guardrail(), frozenset({"release"}), rulebook_id, body,
                     idempotency_key=f"guardrail:{canary.since_seq}")
        except GateError as error:
            # Someone halted it first (a person, or another check of this canary, whose evidence
            # differs under the same key): nothing to do.
            if error.code not in ("RELEASE_NOTHING_TO_HALT", "RELEASE_IDEMPOTENCY_CONFLICT"):
                raise
        if self.on_trip is not None:
            self.on_trip(scope, rulebook_id, report)

    def after_outcome(self, scope: str, decision_id: str, outcome_id: str, reported_by: str | None) -> None:
        """Called after an Outcome Record is stored: a canary decision's outcome re-runs its guardrails.
        A halt it causes names this outcome, its arm and the API key that reported it (`trigger`)."""
        row = self.store.release_row(scope, decision_id)
        if row is not None and row["arm"] in ("canary", "active"):
            state = self.state(scope, row["rulebook_id"], fresh=True)
            if state.canary is not None:
                self.check_guardrails(scope, row["rulebook_id"], {
                    "outcome_id": outcome_id, "decision_id": decision_id, "arm": row["arm"],
                    "reported_by": reported_by})

    def _count_canary_decide(self, scope: str, rulebook_id: str) -> None:
        key = (scope, rulebook_id)
        with self._lock:
            count = self._canary_decides.get(key, 0) + 1
            self._canary_decides[key] = count
            if count % GUARD_EVERY:
                return
            self._guard_due[key] = None
        self.guard.start()
        self.guard.wake()

    def _run_due_guards(self) -> None:
        """Every guardrail check owed, oldest first. One that raises ends the pass (the worker
        logs it with its traceback and counts it); the others wait for the next pass."""
        while True:
            with self._lock:
                if not self._guard_due:
                    return
                key = next(iter(self._guard_due))
                del self._guard_due[key]
            self.check_guardrails(*key)

    def guardrail_alerts(self, scope: str) -> list[GuardrailAlert]:
        """`/api/policy-alerts` entries: canaries a guardrail halted, with the evidence event."""
        alerts: list[GuardrailAlert] = []
        for row in halt_rows(self.store, scope):
            event = json.loads(row["event_json"])
            if event.get("actor") != "guardrail":
                continue
            evidence = event.get("evidence") or {}
            alerts.append({
                "alert_id": "release:" + event["event_hash"][:24], "source": "release_guardrail",
                "kind": "canary_halted", "severity": "high", "policy_id": event["rulebook_id"],
                "canary_version": evidence.get("canary_version"), "guardrails": evidence.get("tripped", []),
                "release_seq": event["seq"], "event_hash": event["event_hash"], "halted_at": event["created_at"],
                "trigger": evidence.get("trigger"),
                "reasons": [(f"the canary of version {evidence.get('canary_version')} was halted on its own: "
                             f"{', '.join(evidence.get('tripped', []))} tripped (always-valid test, "
                             f"alpha {evidence.get('settings', {}).get('alpha')})")],
            })
        return alerts


def _utc(moment: datetime) -> datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _body_problems(body: Mapping[str, Any]) -> list[str]:
    problems = []
    action = body.get("action")
    if not isinstance(action, str):
        problems.append("action is required: shadow, canary, activate, halt, rollback or approve")
    percent = body.get("percent")
    if percent is not None and (isinstance(percent, bool) or not isinstance(percent, (int, float))):
        problems.append("percent must be a number")
    for name, limit in (("reason", 500), ("version", 80)):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not 0 < len(value) <= limit):
            problems.append(f"{name} must be a string of 1 to {limit} characters")
    subject = body.get("subject")
    if subject is not None and (not isinstance(subject, str) or not _SUBJECT.fullmatch(subject)):
        problems.append("subject must be a dotted path such as context.source_record_id")
    for name in ("migration_manifest_hash", "rulebook_hash"):
        value = body.get(name)
        if value is not None and (not isinstance(value, str) or not _HEX64.fullmatch(value)):
            problems.append(f"{name} must be 64 lowercase hex characters")
    seq = body.get("request_seq")
    if seq is not None and (type(seq) is not int or seq < 1):
        problems.append("request_seq must be a positive integer")
    if action == "approve" and (seq is None or body.get("version") is None or body.get("rulebook_hash") is None):
        problems.append("approve needs request_seq, and the requested version with its rulebook_hash")
    evidence = body.get("evidence")
    if evidence is not None and not isinstance(evidence, Mapping):
        problems.append("evidence must be an object")
    if body.get("migration_manifest") is not None and not isinstance(body.get("migration_manifest"), Mapping):
        problems.append("migration_manifest must be a dry-run's manifest (a JSON object)")
    if body.get("override") not in (None, OVERRIDE_HALT):
        problems.append(f"override, when given, is {OVERRIDE_HALT!r} (an admin making a version its guardrail "
                        "halted serve again, with a reason)")
    return problems


__all__ = ["DEFAULT_SUBJECT", "Observed", "ReleasePolicy", "ReleaseService", "Routed", "checked_ref", "require"]
