"""Inbox: the scope's held actions (docs/holds.md), soonest deadline first, and the steps a
reviewer takes on one: resolve (approve or deny, with a reason code and a note, in one step),
claim and release, reassign to another queue, escalate.

Every step goes through the store's `HoldService` with the session's principal and its
permissions in the scope (`Rights`), decided at the moment of the call: the page hides the
steps a viewer may not take, and the service refuses them whatever the page sends. An approval
lets the held action go ahead, so it is proposed first and sent only on `confirm`, after the page
has shown what it approves (`confirmation_text`). Opening a hold, from the table or from a link,
only reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import param

from gate.errors import GateError
from gate.principals import Permission
from gate.services.holds import HOLD_DENIED, HoldStep
from workbench.app.access import Rights
from workbench.app.paging import PagedState
from workbench.app.store import WorkbenchStore

STATE_CHOICES = ("open", "approved", "denied", "expired", "closed", "all")
RESOLVE_PERMISSION: Permission = "resolve"  # gate.services.holds: every step on a hold needs it


def quorum_text(hold: dict[str, Any]) -> str:
    """What one more approval does to this hold: close it, or wait for more reviewers."""
    given, needed = len(hold.get("approvals") or []), int(hold.get("approvals_needed") or 1)
    if given + 1 >= needed:
        return (f"approval {given + 1} of {needed}: it closes the hold as approved, and the caller may go ahead "
                "with the action")
    return f"approval {given + 1} of {needed}: the hold stays open until {needed} distinct reviewers approve"


def step_text(action: str, answer: HoldStep) -> str:
    """What a step did, from the service's answer (the signed event and the hold after it)."""
    event, hold = answer["event"], answer["hold"]
    signed = f"hold event {event['seq']} ({str(event['event_hash'])[:12]}…)"
    if action == "resolve":
        if hold["state"] != "open":
            return f"{hold['decision_id']} is {hold['state']}: {signed}"
        return (f"approval recorded ({len(hold['approvals'])} of {hold['approvals_needed']}): {signed}; "
                "the hold stays open")
    done = {"claim": "claimed", "release": "released", "reassign": f"moved to queue {hold['queue']}",
            "escalate": f"escalated to queue {hold['queue']}"}[action]
    return f"{hold['decision_id']} {done}: {signed}"


class InboxState(PagedState):
    scope = param.String(default="")
    state: param.Selector[str] = param.Selector(default="open", objects=list(STATE_CHOICES))
    queue = param.String(default="", doc="a queue of the scope; empty for every queue")
    rows = param.List(default=[], doc="the page's holds (gate.services.holds.hold_view)")
    counts = param.Dict(default={}, doc="holds per state in the scope")
    queues = param.List(default=[], doc="the scope's queue names")
    selected = param.String(default="", doc="the open hold's decision id")
    detail = param.Dict(default=None, allow_None=True, doc="WorkbenchStore.hold_detail of the open hold")
    message = param.String(default="")
    proposal = param.Dict(default=None, allow_None=True, doc="an approval awaiting confirmation")

    def __init__(self, store: WorkbenchStore, rights: Rights, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.rights = rights
        self.refresh()

    def may_act(self) -> bool:
        """Whether the session's roles in the scope permit a step on a hold (what the page shows)."""
        return self.rights.may(self.scope, RESOLVE_PERMISSION)

    @param.depends("scope", "state", "queue", "page_size", watch=True)
    def _filters_changed(self) -> None:
        self.first_page()

    @param.depends("page", watch=True)
    def refresh(self) -> None:
        """Load the current page of holds (and the counts and queues beside it)."""
        if not self.scope:
            self.rows, self.total, self.counts, self.queues = [], 0, {}, []
            return
        try:
            page = self.store.hold_page(self.scope, state=self.state, queue=self.queue or None,
                                        offset=(min(self.page, 10**9) - 1) * self.page_size, limit=self.page_size)
        except GateError as exc:
            self.rows, self.total = [], 0
            self.message = f"the inbox cannot be read ({exc.code}): {exc}"
            return
        self.queues, self.counts, self.total, self.rows = page["queues"], page["counts"], page["total"], page["holds"]
        where = f" in queue {self.queue}" if self.queue else ""
        self.message = f"{self.total} {self.state} hold(s){where} · page {self.page} of {self.pages}"

    def open(self, decision_id: str) -> None:
        """Open one hold of this scope: read it, never act on it (another scope's id reads as not
        found, like one with no hold)."""
        decision_id = decision_id.strip()
        self.proposal = None
        self.selected = decision_id
        self.detail = self.store.hold_detail(self.scope, decision_id) if decision_id and self.scope else None
        if decision_id and self.detail is None:
            self.message = f"no hold {decision_id!r} in scope {self.scope!r}"

    def follow(self, state: str, queue: str, hold: str) -> None:
        """Apply a link's values (untrusted text): a known state, one of the scope's queues, and
        the hold it names, opened only (a link alone never resolves anything)."""
        if state in STATE_CHOICES and state != self.state:
            self.state = state
        if queue != self.queue and (not queue or queue in self.queues):
            self.queue = queue
        if hold and hold != self.selected:
            self.open(hold)

    def reload(self) -> None:
        """Read the page and the open hold again (steps taken elsewhere: the API, the CLI, the clock)."""
        self.refresh()
        if self.selected:
            self.open(self.selected)

    # -- steps -------------------------------------------------------------------------------

    def resolve(self, decision: str, reason_code: str, note: str = "") -> None:
        """Deny at once; propose an approval for confirmation (the page shows `confirmation_text`)."""
        body = {"decision": decision, "reason_code": reason_code.strip(), "note": note.strip() or None}
        if decision != "approve":
            self._act("resolve", body)
            return
        if not self._ready("approve"):
            return
        if self.detail is not None and self.detail["hold"].get("require_justification") and not body["note"]:
            # The service refuses it too (gate.services.holds); this says why before a confirmation.
            self.message = ("approve refused (HOLD_RESOLUTION_INVALID): this queue requires a written justification "
                            "(note); write one in Note. Nothing was sent")
            return
        self.proposal = {"decision_id": self.selected, **body}

    def confirmation_text(self) -> str:
        """Plain text (the page escapes it): what the approval approves and what it does."""
        proposal, detail = self.proposal, self.detail
        if not proposal or not detail:
            return ""
        hold, rule = detail["hold"], detail["rule"]
        held_by = (f"Held by rule {rule['rule_id']} of {rule['policy_id']} {rule['policy_version']}: "
                   f"{rule['reason_code']}") + (f" ({rule['condition']})" if rule.get("condition") else "")
        note = f"; note: {proposal['note']}" if proposal.get("note") else ""
        return "\n".join([
            f"Approve held action {proposal['decision_id']} in scope {self.scope}?",
            held_by,
            f"Quorum: {quorum_text(hold)}",
            (f"Reason code {proposal['reason_code']}{note}; signed as {self.rights.principal.actor} in the scope's "
             "hold chain.")])

    def confirm(self) -> None:
        proposal, self.proposal = self.proposal, None
        if not proposal:
            return
        decision_id = proposal.pop("decision_id")
        if decision_id != self.selected:  # SECURITY: the approval confirmed is the hold shown
            self.message = "cancelled: another hold was opened; nothing was sent"
            return
        self._act("resolve", proposal)

    def cancel(self) -> None:
        self.proposal = None
        self.message = "cancelled: nothing was sent"

    def claim(self) -> None:
        self._act("claim")

    def release(self) -> None:
        self._act("release")

    def reassign(self, queue: str, note: str = "") -> None:
        self._act("reassign", {"queue": queue, **({"note": note.strip()} if note.strip() else {})})

    def escalate(self) -> None:
        self._act("escalate")

    def _ready(self, action: str) -> bool:
        """A hold is open and the session may act; else the message says why (the service would
        refuse too: this only spares a confirmation of what cannot be sent)."""
        if not self.scope or not self.selected or self.detail is None:
            self.message = f"{action}: open a hold first"
            return False
        try:
            self.rights.require(self.scope, RESOLVE_PERMISSION, HOLD_DENIED)
        except GateError as refused:
            self.message = f"{action} refused ({refused.code}): {refused.message}"
            return False
        return True

    def _act(self, action: str, body: Mapping[str, object] | None = None) -> None:
        """One step through the service with the session's principal and permissions, now."""
        if not self.scope or not self.selected:
            self.message = f"{action}: open a hold first"
            return
        self.proposal = None
        decision_id = self.selected
        try:
            answer = self.store.hold_act(self.scope, self.rights.principal, self.rights.permissions_in(self.scope),
                                         decision_id, action, body)
        except GateError as exc:
            text = f"{action} refused ({exc.code}): {exc}"
        else:
            text = step_text(action, answer)
        self.reload()  # a refused step may still have moved it (a step after the deadline expires the hold first)
        self.message = text
