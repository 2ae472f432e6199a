"""Inbox: the scope's held actions as a triage queue (docs/holds.md, docs/workbench.md; issue 65):
one order over every hold the filters select (most urgent, then least time left: the service's,
`HoldService.list`), a cursor the keys move (`key`: j/k, Enter, a, d, c, x, /, ?), the steps a
reviewer takes on one hold (resolve with a reason code picked from the queue's list, claim and
release, reassign, escalate) or on the holds checked for bulk (deny, claim, reassign: one
service call per hold, each under its own quorum and four eyes), and a poll of the scope's
`HoldService.version` that reads the page again when a hold opened, moved or closed.

Every step goes through the store's `HoldService` with the session's principal and its
permissions in the scope (`Rights`), decided at the moment of the call: the page hides the
steps a viewer may not take, and the service refuses them whatever the page sends. An approval
lets the held action go ahead, so it is proposed first and sent only on `confirm`, after the page
has shown what it approves (`confirmation_text`). Opening a hold, from the table or from a link,
only reads it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import param

from gate.clock import iso_ms
from gate.errors import GateError
from gate.holds.policy import PRIORITIES, reason_codes
from gate.principals import Permission
from gate.services.hold_rules import HOLD_DENIED, own_request
from gate.services.hold_writes import HoldStep
from workbench.app.access import Rights
from workbench.app.paging import PagedState
from workbench.app.store import WorkbenchStore

STATE_CHOICES = ("open", "approved", "denied", "expired", "closed", "all")
RESOLVE_PERMISSION: Permission = "resolve"  # gate.services.holds: every step on a hold needs it
ASSIGNEE_CHOICES = ("", "mine", "unassigned")  # "": everyone's
OWN_REQUEST = "your own request: another reviewer decides"
# The keys of the Inbox (workbench/app/assets/inbox-keys.js sends them; `?` lists them).
KEYS: tuple[tuple[str, str], ...] = (
    ("j", "next hold"), ("k", "previous hold"), ("Enter", "open the hold; with an approval shown, confirm it"),
    ("a", "approve the hold (shows what it approves; Enter confirms)"), ("d", "deny the hold with the deny code chosen"),
    ("c", "claim the hold"), ("x", "check or uncheck the hold for a bulk step"), ("/", "search"),
    ("Escape", "cancel the approval shown"), ("?", "show or hide these keys"))
STALE_SECONDS = 30.0  # the relative times are redrawn at least this often while the page polls


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
    assignee: param.Selector[str] = param.Selector(default="", objects=list(ASSIGNEE_CHOICES))
    priority: param.Selector[str] = param.Selector(default="", objects=["", *PRIORITIES])
    policy_id = param.String(default="", doc="a rulebook policy id; empty for every one")
    search = param.String(default="", doc="a decision id or its beginning")
    cursor = param.Integer(default=0, bounds=(0, None), doc="the row the keys act on")
    checked = param.List(default=[], doc="the decision ids checked for a bulk step")
    codes = param.Dict(default={"approve": [], "deny": []}, doc="the cursor hold's queue's reason codes")
    approve_code = param.String(default="")
    deny_code = param.String(default="")
    help_shown = param.Boolean(default=False, doc="the keys are listed")
    now = param.String(default="", doc="when the page was read (its relative times count from it)")
    rows = param.List(default=[], doc="the page's holds (gate.services.holds.hold_view)")
    counts = param.Dict(default={}, doc="holds per state in the scope")
    queues = param.List(default=[], doc="the scope's queue names")
    selected = param.String(default="", doc="the open hold's decision id")
    detail = param.Dict(default=None, allow_None=True, doc="HoldDesk.hold_detail of the open hold")
    message = param.String(default="")
    proposal = param.Dict(default=None, allow_None=True, doc="an approval awaiting confirmation")

    def __init__(self, store: WorkbenchStore, rights: Rights, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.rights = rights
        # The served page's "later" (its next tick): the closed holds like the open one, the slowest
        # read of its detail, come after it, so a key that opens a hold answers first. None: at once.
        self.defer: Callable[[Callable[[], None]], object] | None = None
        self.seen: tuple[int, int] | None = None  # the scope's hold version the page was read at
        self.read_at = 0.0  # time.monotonic() of that read
        self.refresh()

    def may_act(self) -> bool:
        """Whether the session's roles in the scope permit a step on a hold (what the page shows)."""
        return self.rights.may(self.scope, RESOLVE_PERMISSION)

    @param.depends("scope", "state", "queue", "assignee", "priority", "policy_id", "search", "page_size", watch=True)
    def _filters_changed(self) -> None:
        self.checked = []
        self.first_page()

    def filters(self) -> dict[str, str | None]:
        """The page's filters as `HoldService.list` takes them (LIST_FILTERS)."""
        return {"assignee": self.assignee or None, "priority": self.priority or None,
                "policy": self.policy_id or None, "search": self.search.strip() or None}

    @param.depends("page", watch=True)
    def refresh(self) -> None:
        """Load the current page of holds (and the counts and queues beside it); the cursor stays
        on its hold while it is on the page, else at its row."""
        if not self.scope:
            self.rows, self.total, self.counts, self.queues = [], 0, {}, []
            return
        at = self.cursor_id()
        try:
            self.seen = self.store.desk.hold_version(self.scope)
            page = self.store.desk.hold_page(self.scope, state=self.state, queue=self.queue or None,
                                        offset=(min(self.page, 10**9) - 1) * self.page_size, limit=self.page_size,
                                        filters=self.filters(), reader=self.rights.principal.actor)
        except GateError as exc:
            self.rows, self.total = [], 0
            self.message = f"the inbox cannot be read ({exc.code}): {exc}"
            return
        self.read_at, self.now = time.monotonic(), iso_ms(self.store.clock.now())
        self.queues, self.counts, self.total = page["queues"], page["counts"], page["total"]
        ids = [str(hold["decision_id"]) for hold in page["holds"]]
        self.cursor = ids.index(at) if at in ids else min(self.cursor, max(0, len(ids) - 1))
        self.rows = page["holds"]
        self._codes()
        where = f" in queue {self.queue}" if self.queue else ""
        self.message = f"{self.total} {self.state} hold(s){where} · page {self.page} of {self.pages}"

    def poll(self) -> bool:
        """Read the page again when the scope's holds moved since it was read (one cheap read,
        `HoldService.version`, whatever the number of holds), or when its relative times are
        STALE_SECONDS old. True when it read the page again."""
        if not self.scope:
            return False
        try:
            version = self.store.desk.hold_version(self.scope)
        except GateError:
            return False  # the ledger is away: the next poll tries again
        if version == self.seen and time.monotonic() - self.read_at < STALE_SECONDS:
            return False
        self.reload()
        return True

    def cursor_id(self) -> str:
        """The decision id of the hold under the cursor ("" on an empty page)."""
        return str(self.rows[self.cursor]["decision_id"]) if 0 <= self.cursor < len(self.rows) else ""

    def cursor_hold(self) -> dict[str, Any] | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def own(self, hold: Mapping[str, Any] | None) -> bool:
        """Whether the hold is the session's own request under four eyes (`own_request`, the
        service's rule): its approval is not offered, and the page says so before any click."""
        return hold is not None and own_request(bool(hold.get("four_eyes")), str(hold.get("requested_holder")),
                                                self.rights.principal.holder_id)

    def _codes(self) -> None:
        """The reason codes of the cursor hold's queue (`gate.holds.policy.reason_codes`), the
        choice kept while the list still has it."""
        hold = self.cursor_hold() or ((self.detail or {}).get("hold"))
        queue = self.store.holds.policy(self.scope).queue(hold["queue"]) if hold and self.scope else None
        codes = reason_codes(queue)
        if codes != self.codes:
            self.codes = codes
        if self.approve_code not in codes["approve"]:
            self.approve_code = codes["approve"][0] if codes["approve"] else ""
        if self.deny_code not in codes["deny"]:
            self.deny_code = codes["deny"][0] if codes["deny"] else ""

    # -- keys --------------------------------------------------------------------------------

    def key(self, name: str) -> None:
        """One key from the page (untrusted text: an unknown one does nothing)."""
        actions = {"j": lambda: self.move(1), "k": lambda: self.move(-1), "Enter": self.enter,
                   "a": self.approve_cursor, "d": self.deny_cursor, "c": self.claim_cursor, "x": self.check_cursor,
                   "Escape": self.cancel, "?": self.toggle_help}
        action = actions.get(name)
        if action is not None:
            action()

    def move(self, step: int) -> None:
        """The cursor one row down (`step` 1) or up (-1), onto the next or previous page at an end."""
        target = self.cursor + step
        if 0 <= target < len(self.rows):
            self.cursor = target
        elif target >= len(self.rows) and self.page < self.pages:
            self.cursor = 0
            self.next_page()
        elif target < 0 and self.page > 1:
            self.previous_page()
            self.cursor = max(0, len(self.rows) - 1)
        self._codes()

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

    def check_cursor(self) -> None:
        decision_id = self.cursor_id()
        if decision_id:
            self.checked = ([i for i in self.checked if i != decision_id] if decision_id in self.checked
                            else [*self.checked, decision_id])

    def toggle_help(self) -> None:
        self.help_shown = not self.help_shown

    def open(self, decision_id: str) -> None:
        """Open one hold of this scope: read it, never act on it (another scope's id reads as not
        found, like one with no hold)."""
        decision_id = decision_id.strip()
        self.proposal = None
        self.selected = decision_id
        later = self.defer is not None
        self.detail = (self.store.desk.hold_detail(self.scope, decision_id, similar=not later)
                       if decision_id and self.scope else None)
        if decision_id and self.detail is None:
            self.message = f"no hold {decision_id!r} in scope {self.scope!r}"
        elif self.detail is not None and self.defer is not None:
            self.defer(lambda: self._similar(decision_id))
        ids = [str(hold["decision_id"]) for hold in self.rows]
        if decision_id in ids:
            self.cursor = ids.index(decision_id)
        self._codes()

    def _similar(self, decision_id: str) -> None:
        """The open hold's closed holds like it, read after the rest of its detail (`defer`)."""
        if self.detail is not None and self.selected == decision_id and self.detail.get("similar") is None:
            self.detail = {**self.detail, "similar": self.store.desk.similar_holds(self.scope, decision_id)}

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
            proposal = self.proposal
            self.open(self.selected)
            hold = (self.detail or {}).get("hold") or {}
            if proposal and proposal.get("decision_id") == self.selected and hold.get("state") == "open":
                self.proposal = proposal  # a poll does not cancel the approval being confirmed

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
        """One step on the open hold."""
        self._act_on(self.selected, action, body)

    def _act_on(self, decision_id: str, action: str, body: Mapping[str, object] | None = None) -> None:
        """One step through the service with the session's principal and permissions, now."""
        if not self.scope or not decision_id:
            self.message = f"{action}: open a hold first"
            return
        self.proposal = None
        _done, text = self._step(decision_id, action, body)
        self.reload()  # a refused step may still have moved it (a step after the deadline expires the hold first)
        self.message = text

    def _step(self, decision_id: str, action: str, body: Mapping[str, object] | None) -> tuple[bool, str]:
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
