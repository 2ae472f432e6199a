"""Inbox: the steps a reviewer takes on the scope's held actions (docs/holds.md,
docs/workbench.md; issue 65), over the Inbox's queue (`workbench.app.inbox_queue.InboxQueue`: the
filters, the page, the cursor, the poll, the open hold): the keys (`key`: j/k, Enter, a, d, c, x,
/, ?), a step on one hold (resolve with a reason code picked from the queue's list, claim and
release, reassign, escalate) or on the holds checked for bulk (deny, claim, reassign: one service
call per hold, each under its own quorum and four eyes).

Every step goes through the store's `HoldService` with the session's principal and its
permissions in the scope (`Rights`), decided at the moment of the call: the page hides the
steps a viewer may not take, and the service refuses them whatever the page sends. An approval
lets the held action go ahead, so it is proposed first and sent only on `confirm`, after the page
has shown what it approves (`confirmation_text`). Opening a hold, from the table or from a link,
only reads it.
"""

from __future__ import annotations

from collections.abc import Mapping

from gate.errors import GateError
from gate.services.hold_reads import HoldView
from gate.services.hold_rules import HOLD_DENIED
from gate.services.hold_writes import HoldStep
from gate.strict_json import JsonValue
from workbench.app.inbox_queue import RESOLVE_PERMISSION, InboxQueue

OWN_REQUEST = "your own request: another reviewer decides"
# The keys of the Inbox (workbench/app/assets/inbox-keys.js sends them; `?` lists them).
KEYS: tuple[tuple[str, str], ...] = (
    ("j", "next hold"), ("k", "previous hold"), ("Enter", "open the hold; with an approval shown, confirm it"),
    ("a", "approve the hold (shows what it approves; Enter confirms)"), ("d", "deny the hold with the deny code chosen"),
    ("c", "claim the hold"), ("x", "check or uncheck the hold for a bulk step"), ("/", "search"),
    ("Escape", "cancel the approval shown"), ("?", "show or hide these keys"))


def quorum_text(hold: HoldView) -> str:
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


class InboxState(InboxQueue):
    """The Inbox page's state: its queue and the steps a reviewer takes (see the module docstring)."""

    # -- keys --------------------------------------------------------------------------------

    def key(self, name: str) -> None:
        """One key from the page (untrusted text: an unknown one does nothing)."""
        actions = {"j": lambda: self.move(1), "k": lambda: self.move(-1), "Enter": self.enter,
                   "a": self.approve_cursor, "d": self.deny_cursor, "c": self.claim_cursor, "x": self.check_cursor,
                   "Escape": self.cancel, "?": self.toggle_help}
        action = actions.get(name)
        if action is not None:
            action()

    def enter(self) -> None:
        if self.proposal:
            self.confirm()
        elif self.cursor_id():
            self.open(self.cursor_id())

    def approve_cursor(self) -> None:
        """Propose the approval of the hold under the cursor (opened first: the confirmation shows it)."""
        if self.cursor_id() and self.cursor_id() != self.selected:
            self.open(self.cursor_id())
        self.resolve("approve", self.approve_code)

    def deny_cursor(self) -> None:
        self._act_on(self.cursor_id(), "resolve", {"decision": "deny", "reason_code": self.deny_code, "note": None})

    def claim_cursor(self) -> None:
        self._act_on(self.cursor_id(), "claim")

    # -- steps -------------------------------------------------------------------------------

    def resolve(self, decision: str, reason_code: str, note: str = "") -> None:
        """Deny at once; propose an approval for confirmation (the page shows `confirmation_text`)."""
        body = {"decision": decision, "reason_code": reason_code.strip(), "note": note.strip() or None}
        if decision != "approve":
            self._act("resolve", body)
            return
        if not self._ready("approve"):
            return
        if self.detail is not None and self.own(self.detail["hold"]):
            # HOLD_FOUR_EYES in the service; said here before a confirmation of what cannot be sent.
            self.message = f"{OWN_REQUEST} (four eyes); nothing was sent"
            return
        if self.detail is not None and self.detail["hold"].get("require_justification") and not body["note"]:
            # The service refuses it too (gate.services.hold_rules); this says why before a confirmation.
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

    def _act(self, action: str, body: Mapping[str, JsonValue] | None = None) -> None:
        """One step on the open hold."""
        self._act_on(self.selected, action, body)

    def _act_on(self, decision_id: str, action: str, body: Mapping[str, JsonValue] | None = None) -> None:
        """One step through the service with the session's principal and permissions, now."""
        if not self.scope or not decision_id:
            self.message = f"{action}: open a hold first"
            return
        self.proposal = None
        _done, text = self._step(decision_id, action, body)
        self.reload()  # a refused step may still have moved it (a step after the deadline expires the hold first)
        self.message = text

    def _step(self, decision_id: str, action: str, body: Mapping[str, JsonValue] | None) -> tuple[bool, str]:
        """(done, what the page says) of one step through the service."""
        try:
            answer = self.store.desk.hold_act(self.scope, self.rights.principal, self.rights.permissions_in(self.scope),
                                         decision_id, action, body)
        except GateError as exc:
            return False, f"{action} refused ({exc.code}): {exc}"
        return True, step_text(action, answer)

    # -- bulk --------------------------------------------------------------------------------

    def bulk(self, action: str, queue: str = "") -> None:
        """`deny` (with the deny code chosen), `claim` or `reassign` (to `queue`) every checked
        hold: one service call per hold, each under its own quorum, four eyes and claim; the
        message counts what was done and quotes each refusal. (No bulk approve: an approval is
        confirmed hold by hold.)"""
        steps = {"deny": ("resolve", {"decision": "deny", "reason_code": self.deny_code, "note": None}),
                 "claim": ("claim", None), "reassign": ("reassign", {"queue": queue})}
        if action not in steps or not self.checked:
            self.message = f"bulk {action}: check one or more holds first (x, or the boxes)"
            return
        step, body = steps[action]
        self.proposal = None
        answers = [(decision_id, *self._step(decision_id, step, body)) for decision_id in self.checked]
        refused = [f"{decision_id}: {text}" for decision_id, done, text in answers if not done]
        self.checked = []
        self.reload()
        self.message = (f"bulk {action}: {len(answers) - len(refused)} of {len(answers)} done"
                        + "".join(f"; {text}" for text in refused))
