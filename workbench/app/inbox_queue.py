"""The Inbox's queue (docs/holds.md, docs/workbench.md; issue 65): the scope's held actions in one
order over every hold the filters select (most urgent, then least time left: the service's,
`HoldService.list`), a cursor the keys move, the holds checked for a bulk step, a poll of the
scope's `HoldService.version` that reads the page again when a hold opened, moved or closed, and
the one hold open beside it (its detail, then the closed holds like it), opened from the table,
the cursor or a link. It only reads: the steps a reviewer takes are the page state's
(`workbench.app.state.inbox.InboxState`, built over this class), and opening a hold never acts on it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, cast

import param

from gate.clock import iso_ms
from gate.errors import GateError
from gate.holds.policy import PRIORITIES, reason_codes
from gate.principals import Permission
from gate.services.hold_reads import HoldView
from gate.services.hold_rules import own_request
from workbench.app.access import Rights
from workbench.app.paging import PagedState
from workbench.app.store import WorkbenchStore
from workbench.app.stores.holds import HoldDetail

STATE_CHOICES = ("open", "approved", "denied", "expired", "closed", "all")
RESOLVE_PERMISSION: Permission = "resolve"  # gate.services.hold_rules: every step on a hold needs it
ASSIGNEE_CHOICES = ("", "mine", "unassigned")  # "": everyone's
STALE_SECONDS = 30.0  # the relative times are redrawn at least this often while the page polls


class InboxQueue(PagedState):
    """The Inbox's list, its cursor and the hold open beside it (see the module docstring)."""

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
    rows = param.List(default=[], doc="the page's holds (gate.services.hold_reads.hold_view)")
    counts = param.Dict(default={}, doc="holds per state in the scope")
    queues = param.List(default=[], doc="the scope's queue names")
    selected = param.String(default="", doc="the open hold's decision id")
    detail = param.Dict(default=None, allow_None=True, doc="HoldDesk.hold_detail of the open hold")
    message = param.String(default="")
    proposal = param.Dict(default=None, allow_None=True, doc="an approval awaiting confirmation (InboxState)")

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

    def open_hold(self) -> HoldDetail | None:
        """The open hold's detail: what `detail` holds (param keeps `HoldDesk.hold_detail`'s answer,
        and only it, as a plain dict)."""
        return cast("HoldDetail | None", self.detail)

    def cursor_id(self) -> str:
        """The decision id of the hold under the cursor ("" on an empty page)."""
        return str(self.rows[self.cursor]["decision_id"]) if 0 <= self.cursor < len(self.rows) else ""

    def cursor_hold(self) -> HoldView | None:
        return self.rows[self.cursor] if 0 <= self.cursor < len(self.rows) else None

    def own(self, hold: HoldView | None) -> bool:
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

    # -- the cursor and the open hold ----------------------------------------------------------

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
