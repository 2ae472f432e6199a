"""Releases: which published version production runs, the shadow and canary on live traffic, and
the moves (approve, halt, rollback, activate, shadow, canary), all through the ReleaseService.

Every move is made by the session's principal with its permissions in the scope (`Rights`):
the page hides what the roles do not permit, and the store's service refuses it whatever the
page sends. Activate, canary and the approval of a pending one, the moves that change what
production callers get, are proposed first (`propose`) and made only on `confirm`, after the page
has shown the scope, the version, the arm shares and the impact headline (`confirmation_text`);
one confirmation for the three (issue 56: Approve request N activated at once)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

import param

from gate.errors import GateError
from gate.principals import Permission
from gate.releases.model import PendingJSON, ReleaseStateJSON
from gate.services.release_moves import RELEASE_DENIED
from gate.strict_json import JsonValue
from workbench.app.access import Rights
from workbench.app.store import WorkbenchStore
from workbench.migration.impact import headline

CONFIRMED_ACTIONS = ("activate", "canary", "approve")  # asked for confirmation before they are sent
# A move the page offers, and the permission each needs (gate.services.release_moves: approve needs
# approve, the rest release): a misspelt move, like a misspelt permission, is a type error.
Move = Literal["approve", "shadow", "canary", "activate", "halt", "rollback"]
MOVE_PERMISSION: dict[Move, Permission] = {"approve": "approve", "shadow": "release", "canary": "release",
                                           "activate": "release", "halt": "release", "rollback": "release"}


def arm_shares(state: ReleaseStateJSON | None, action: str, version: str, percent: float | None) -> str:
    """Who gets which version once `action` applies, from the release state as it is now."""
    arm = state.get("active") if state else None
    active = arm.get("version") if arm else None
    canary = state.get("canary") if state else None
    if action == "canary":
        share = float(percent or 0)
        return (f"canary {version}: {share:g}% of subjects; active {active or 'none'}: the other "
                f"{100 - share:g}%")
    if canary and canary["version"] != version:
        return (f"active {version}: {100 - canary['percent']:g}% of subjects (was {active or 'none'}); "
                f"canary {canary['version']} keeps {canary['percent']:g}%")
    return f"active {version}: 100% of decides (was {active or 'none'})" + (
        "; the canary of this version ends" if canary else "")


def impact_text(result: Mapping[str, JsonValue] | None, rulebook_id: str, version: str) -> str:
    """The impact headline of this session's dry-run (a `DryRunResult`) of exactly this
    version, or why there is none."""
    draft = result.get("draft") if result else None
    if not result or result.get("rulebook_id") != rulebook_id or not isinstance(draft, dict) \
            or draft.get("version") != version:
        return "not known: no dry-run of this version in this session (run one on the Migration page)"
    changed = f"{result['decisions_changed']:,} of {result['decisions_evaluated']:,} decisions change verdict"
    impact = result.get("impact")
    return f"{changed}; {headline(impact)}" if isinstance(impact, dict) and impact else changed


def confirmation_lines(question: str, state: ReleaseStateJSON | None, action: str, version: str,
                       percent: float | None, impact: str, approval_required: bool) -> str:
    """What a move that changes production says before it is confirmed (Releases and Migration
    pages alike): the question, the arm shares after it, the impact headline, and whether it only
    records a request for another person's approval."""
    return "\n".join([
        question,
        f"Arm shares: {arm_shares(state, action, version, percent)}",
        f"Impact: {impact}",
        "Approvals are required in this scope: this records a request that another person must approve."
        if approval_required else "This changes what production callers get as soon as it is confirmed."])


class ReleasesState(param.Parameterized):
    scope = param.String(default="")
    rulebook_id = param.String(default="")
    status = param.Dict(default=None, allow_None=True, doc="the release status (ReleaseService.status)")
    message = param.String(default="")
    proposal = param.Dict(default=None, allow_None=True, doc="a move awaiting confirmation: action and body")

    def __init__(self, store: WorkbenchStore, rights: Rights,
                 dry_run_result: Callable[[], Mapping[str, JsonValue] | None] = lambda: None, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.rights = rights
        self.dry_run_result = dry_run_result  # the Migration page's last dry-run (for the impact headline)
        self.refresh()

    @param.depends("scope", "rulebook_id", watch=True)
    def refresh(self) -> None:
        """Read the release again (its guardrails run on the way: a tripped one halts the canary)."""
        self.proposal = None
        if not self.scope or not self.rulebook_id:
            self.status = None
            return
        try:
            self.status = self.store.release_status(self.scope, self.rulebook_id)
        except GateError as exc:
            self.status = None
            self.message = (f"{self.rulebook_id} has no published version in this scope yet"
                            if exc.code == "RULEBOOK_NOT_FOUND" else f"{self.rulebook_id}: {exc}")

    def may(self, move: Move) -> bool:
        """Whether the session's roles in the scope permit `move` (what the page shows)."""
        return self.rights.may(self.scope, MOVE_PERMISSION[move])

    def versions(self) -> list[str]:
        """The rulebook's published versions in this scope, newest first (the version picker)."""
        if not self.scope or not self.rulebook_id:
            return []
        return self.store.published_versions(self.scope, self.rulebook_id)

    def pending(self) -> list[PendingJSON]:
        """The pending requests (each with its request_seq), oldest first."""
        return list(((self.status or {}).get("state") or {}).get("pending") or [])

    def propose(self, action: Move, **body: Any) -> None:
        """Ask for confirmation of an activate, a canary or the approval of a pending request
        (`request_seq`) (the page shows `confirmation_text`)."""
        if action not in CONFIRMED_ACTIONS:
            self.act(action, **body)
            return
        try:  # nothing to confirm when the service would refuse it
            self.rights.require(self.scope, MOVE_PERMISSION[action], RELEASE_DENIED)
        except GateError as refused:
            self.message = f"{action} refused ({refused.code}): {refused.message}"
            return
        if action == "approve":
            pending = self._pending(body.get("request_seq"))
            if pending is None:
                self.message = f"no pending request {body.get('request_seq')}"
                return
            body = {"request_seq": pending["request_seq"], "version": pending["version"],
                    "rulebook_hash": pending["rulebook_hash"]}
        if not body.get("version"):
            self.message = f"{action}: pick a published version first"
            return
        self.proposal = {"action": action, **{k: v for k, v in body.items() if v not in (None, "")}}

    def confirmation_text(self) -> str:
        """Plain text (the page escapes it): scope, version, arm shares, impact headline."""
        proposal = self.proposal
        if not proposal:
            return ""
        version, action, percent = proposal["version"], proposal["action"], proposal.get("percent")
        verb = {"activate": "Activate", "canary": "Start a canary of"}
        if action == "approve":  # the approval makes the request's move: its arm shares apply now
            pending = self._pending(proposal["request_seq"])
            move: str = pending["action"] if pending else "activate"
            percent = pending["percent"] if pending else None
            question = (f"Approve request {proposal['request_seq']} by {pending['requested_by'] if pending else '?'}: "
                        f"{verb.get(move, move).lower()} {self.rulebook_id} version {version} in scope {self.scope}?")
            required = False
        else:
            move = action
            question = f"{verb[action]} {self.rulebook_id} version {version} in scope {self.scope}?"
            required = bool(self.store.release_policy(self.scope).get("require_approval"))  # as it is now
        return confirmation_lines(question, (self.status or {}).get("state"), move, version, percent,
                                  impact_text(self.dry_run_result(), self.rulebook_id, version), required)

    def confirm(self) -> None:
        proposal, self.proposal = self.proposal, None
        if proposal:
            self.act(**proposal)

    def cancel(self) -> None:
        self.proposal = None
        self.message = "cancelled: nothing was sent"

    def act(self, action: str, **body: Any) -> None:
        """One transition; the message says what happened or why it was refused."""
        if not self.scope or not self.rulebook_id:
            self.message = "pick a scope and a policy first"
            return
        try:
            event = self.store.release_act(self.scope, self.rulebook_id,
                                           {"action": action, **{k: v for k, v in body.items() if v not in (None, "")}},
                                           self.rights.principal, self.rights.permissions_in(self.scope))
        except GateError as exc:
            self.message = f"{action} refused ({exc.code}): {exc}"
            self.refresh()
            return
        pending = event["state"]["pending"]
        self.refresh()
        if pending and pending[-1]["request_seq"] == event["seq"]:
            self.message = (f"{action} of {event.get('version')} requested (request {event['seq']}): waiting for "
                            "another person's approval")
        else:
            self.message = f"{action} recorded as release event {event['seq']} ({event['event_hash'][:12]}…)"

    def approve(self, request_seq: int) -> None:
        """Ask for confirmation of the approval of pending request `request_seq` (Approve request N)."""
        self.propose("approve", request_seq=request_seq)

    def _pending(self, request_seq: Any) -> PendingJSON | None:
        return next((p for p in self.pending() if p["request_seq"] == request_seq), None)
