"""What a release reads (docs/releases.md): a rulebook's release state, cached for a bound,
its published versions and signed history, what production runs, and the scope's release
policy in force. Every other part of a release (moves, guardrails, the decide path) reads
through the one `ReleaseReader` the composition root builds, so they share one cache.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any, Protocol

from gate.errors import GateError
from gate.ledger import Ledger, StoredSnapshot
from gate.ledger.releases import ReleaseLedger
from gate.releases.events import ReleaseEvent, state_from_member
from gate.releases.governance import RELEASE_POLICY, GovernanceState
from gate.releases.model import ReleaseState, Version
from gate.releases.policy import ReleasePolicy
from gate.services.chains import EventChainWitness
from gate.services.governance import GovernanceService
from gate.strict_json import JsonValue

CACHE_SECONDS = 1.0  # a transition reaches every other worker's decides within this bound


class Snapshots(Protocol):
    """The rulebook snapshots a release moves between (`gate.services.snapshots.RulebookSnapshots`)."""

    def register_rulebook(self, scope: str, rulebook: Any) -> tuple[dict[str, JsonValue], bool]: ...

    def bound_snapshot(self, scope: str, rulebook_id: str, version: str) -> StoredSnapshot | None: ...


class ReleaseReader:
    """Release states (cached for `cache_seconds`; a transition here refreshes its own at once),
    versions, history and the release policy, scoped to the caller's scope throughout."""

    def __init__(self, ledger: Ledger, snapshots: Snapshots, witness: EventChainWitness,
                 safeguards: GovernanceService, cache_seconds: float = CACHE_SECONDS) -> None:
        """Built once by the composition root (`gate.services.root.release_service`) with its one
        `witness` (the release chains in the gate's checkpoint log) and its one governed-change
        service, `safeguards` (the release policy is read there)."""
        self.ledger = ledger
        self.snapshots = snapshots
        self.witness = witness
        self.store = ReleaseLedger(ledger, witness)
        self.safeguards = safeguards
        self.cache_seconds = cache_seconds
        self._cache: dict[tuple[str, str], tuple[float, ReleaseState]] = {}
        self._lock = threading.Lock()

    def known(self, scope: str, rulebook_id: str) -> None:
        """RULEBOOK_NOT_FOUND unless the scope has published a rulebook with this id."""
        if not isinstance(rulebook_id, str) or self.ledger.latest_rulebook_snapshot(scope, rulebook_id) is None:
            raise GateError("RULEBOOK_NOT_FOUND", "no rulebook with this id is published in this scope")

    def version(self, scope: str, rulebook_id: str, version: Any) -> Version:
        """The published version a move names, with its rulebook hash (RELEASE_ACTION_INVALID,
        RULEBOOK_NOT_FOUND otherwise)."""
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

    def running_rulebook(self, scope: str, rulebook_id: str) -> tuple[dict[str, JsonValue], str] | None:
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

    def governance(self, scope: str, *, fresh: bool = False) -> GovernanceState:
        """The scope's governance chain at its head (gate.services.governance, cached like a
        release state)."""
        return self.safeguards.state(scope, fresh=fresh)

    def policy_of(self, scope: str, governance: GovernanceState) -> ReleasePolicy:
        """The policy in force: the governance chain's, or (before its first change) the one a
        scope stored before issue 42, or the default."""
        policy: ReleasePolicy = self.safeguards.value(scope, RELEASE_POLICY, governance)
        return policy

    def policy(self, scope: str, *, fresh: bool = False) -> ReleasePolicy:
        """The release policy in force in `scope` (cached with its governance chain)."""
        return self.policy_of(scope, self.governance(scope, fresh=fresh))

    def history(self, scope: str, rulebook_id: str) -> list[ReleaseEvent]:
        """The release's signed events, oldest first."""
        return [json.loads(row["event_json"]) for row in self.store.events(scope, rulebook_id)]

