"""Policy releases, the one entry point for the API, the CLI and the workbench (docs/releases.md).

`ReleaseService` publishes immutable rulebook versions (the scope's snapshots), moves a rulebook's
release through signed, chained events (shadow, canary, activate, halt, rollback, approve), changes
the release policy through the governed-change service, and answers a release's status and its
portable history. Its parts, built once by the composition root (`gate.services.root.release_service`)
and reachable here: `reader` (states, cached; versions; history; the policy in force,
`gate.services.release_reads`), `moves` (each move checked, signed and chained,
`gate.services.release_moves`), `guardrails` (the canary's checks off the decide path, halting it on
its own when one trips, `gate.services.release_guards`) and `router` (a decide by reference routed to
its version, the shadow beside live decides, `gate.services.release_routing`).
"""

from __future__ import annotations

from functools import partial
from typing import Any

from gate.chain.links import scope_hash
from gate.ledger.releases import witnessed_chain_id
from gate.principals import Permissions, Principal, require
from gate.releases.events import ReleaseEvent, ReleaseHistory, history_document
from gate.releases.figures import canary_figures, shadow_figures
from gate.releases.governance import GOVERNANCE_ID, RELEASE_POLICY, GovernanceEvent, GovernanceState
from gate.releases.guardrails import evaluate
from gate.releases.model import ReleaseState
from gate.releases.policy import ReleasePolicy
from gate.services.governance import GovernanceDocument, GovernanceService
from gate.services.pipeline import Caller
from gate.services.release_guards import ReleaseGuardrails
from gate.services.release_moves import RELEASE_DENIED, ReleaseMoves
from gate.services.release_reads import ReleaseReader, Snapshots
from gate.services.release_routing import ReleaseRouter


class ReleasePolicyDocument(GovernanceDocument):
    """What GET /api/decision/release-policy answers: the policy in force, the pending requests
    and every change (the signed governance events)."""

    history: list[GovernanceEvent]


class ReleaseService:
    """Publish, move, read and govern releases; scoped to the caller's scope throughout."""

    def __init__(self, reader: ReleaseReader, moves: ReleaseMoves, guardrails: ReleaseGuardrails,
                 router: ReleaseRouter, *, snapshots: Snapshots, safeguards: GovernanceService) -> None:
        """Built by the composition root (`gate.services.root.release_service`) with the parts it
        built once, the rulebook `snapshots` a version is published to, and its one governed-change
        service, `safeguards` (the release policy changes there; the decide path reads it)."""
        self.reader = reader
        self.moves = moves
        self.guardrails = guardrails
        self.router = router
        self.snapshots = snapshots
        self.safeguards = safeguards

    # ------------------------------------------------------------------ publish, move and read

    def publish(self, caller: Caller, rulebook: Any) -> tuple[dict[str, Any], bool]:
        """Bind a rulebook version in the caller's scope (immutable): (metadata, newly published)."""
        require(caller.permissions, "publish", RELEASE_DENIED)
        return self.snapshots.register_rulebook(caller.scope, rulebook)

    def act(self, scope: str, principal: Principal, permissions: Permissions, rulebook_id: str, body: Any,
            idempotency_key: str | None = None) -> tuple[dict[str, Any], bool]:
        """One move by an authenticated principal: (the signed event, newly created)
        (`ReleaseMoves.act`)."""
        return self.moves.act(scope, principal, permissions, rulebook_id, body, idempotency_key)

    def state(self, scope: str, rulebook_id: str, *, fresh: bool = False) -> ReleaseState:
        """The release state, cached for the reader's bound (`ReleaseReader.state`)."""
        return self.reader.state(scope, rulebook_id, fresh=fresh)

    def history(self, scope: str, rulebook_id: str) -> list[ReleaseEvent]:
        """The release's signed events, oldest first."""
        return self.reader.history(scope, rulebook_id)

    def running_rulebook(self, scope: str, rulebook_id: str) -> tuple[dict[str, Any], str] | None:
        """What production runs for the rulebook in `scope`, and where that comes from
        (`ReleaseReader.running_rulebook`: the dry-run's baseline)."""
        return self.reader.running_rulebook(scope, rulebook_id)

    # ------------------------------------------------------------------ the release policy and its governance

    def governance(self, scope: str, *, fresh: bool = False) -> GovernanceState:
        """The scope's governance chain at its head (cached like a release state)."""
        return self.reader.governance(scope, fresh=fresh)

    def policy(self, scope: str, *, fresh: bool = False) -> ReleasePolicy:
        """The release policy in force in `scope`."""
        return self.reader.policy(scope, fresh=fresh)

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
        """The scope's signed governance events, oldest first."""
        return self.safeguards.history(scope)

    def history_document(self, caller_scope: str, rulebook_id: str) -> ReleaseHistory:
        """The portable, offline-verifiable release history (`gate verify --release-history`),
        with the scope's policy changes. `CHAIN_INTEGRITY_FAILED` when either chain does not
        extend its witnessed checkpoint (`EventChainWitness.check`)."""
        self.reader.known(caller_scope, rulebook_id)
        with self.reader.ledger.one_snapshot():
            for chain in (rulebook_id, GOVERNANCE_ID):
                self.reader.witness.check(witnessed_chain_id(caller_scope, chain),
                                          partial(self.reader.store.event_hashes, caller_scope, chain))
            return history_document(scope_hash(caller_scope), rulebook_id, self.history(caller_scope, rulebook_id),
                                    self.governance_history(caller_scope))

    def status(self, scope: str, rulebook_id: str) -> dict[str, Any]:
        """State, policy, history and the live comparison; runs the guardrails (they may halt)."""
        self.reader.known(scope, rulebook_id)
        self.guardrails.check_guardrails(scope, rulebook_id)
        state = self.state(scope, rulebook_id, fresh=True)
        return {"rulebook_id": rulebook_id, "state": state.to_json(), "policy": self.policy(scope).to_json(),
                "comparison": self.comparison(scope, state), "history": self.history(scope, rulebook_id)}

    def comparison(self, scope: str, state: ReleaseState) -> dict[str, Any]:
        """The live figures of a running shadow (its verdicts beside the active's) and canary (its
        arm against the active arm, with the guardrails' report)."""
        shadow = None
        if state.shadow is not None:
            rows = self.reader.store.shadow_rows(scope, state.rulebook_id, state.shadow.version)
            shadow = {"version": state.shadow.version, **shadow_figures(rows)}
        canary = None
        if state.canary is not None:
            canary_counts, active_counts = self.guardrails.arm_counts(scope, state)
            canary = {"version": state.canary.version.version, "percent": state.canary.percent,
                      **canary_figures(canary_counts, active_counts, evaluate(canary_counts, active_counts))}
        return {"shadow": shadow, "canary": canary}


__all__ = ["ReleasePolicyDocument", "ReleaseService"]
