"""The Inbox page: the scope's held actions by deadline and priority (state and queue filters in
the URL), and one hold as a reviewer weighs it: its facts, the rule and reason that held it, the
decision's verification, its signed hold events, and the closed holds most like it with their
outcomes; then the steps (resolve with a reason code and a note, claim, release, reassign,
escalate), shown only to the scope's reviewers. Every value a caller or a reviewer chose
(decision ids, fact names and values, reason codes, notes, principals) is text: Markdown through
`md_text`/`md_cell`, tables as Tabulator cells."""

from __future__ import annotations

import json
from datetime import datetime
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import pandas as pd
import panel as pn
import param

from gate.holds.request import HoldRequest
from gate.holds.similar import NEAREST, WINDOW
from gate.services.hold_reads import HoldView
from workbench.app.pages.common import confirmation_box, note
from workbench.app.pages.decisions import MARKS
from workbench.app.state.inbox import KEYS, OWN_REQUEST, InboxState
from workbench.app.stores.holds import HeldBy, HoldDetail
from workbench.reports.textsafe import md_cell, md_text

# The list's columns, in order: what a reviewer reads before a click (issue 65).
HOLD_COLUMNS = ("check", "priority", "action", "target", "amount", "reason", "time left", "age", "assignee", "status",
                "decision_id")
_WIDTHS = {"check": 34, "priority": 70, "action": 100, "target": 112, "amount": 80, "reason": 128, "time left": 80,
           "age": 66, "assignee": 78, "status": 72, "decision_id": 0}  # 820 px: the list is 830 wide
# Colour chips: text colour on a tinted background, by priority and by state.
CHIPS = {"urgent": ("#ffffff", "#b42318"), "high": ("#7a2e0e", "#fddcab"), "normal": ("#1d2939", "#e4e7ec"),
         "low": ("#475467", "#f2f4f7"), "open": ("#05603a", "#d1fadf"), "approved": ("#054f31", "#a6f4c5"),
         "denied": ("#7a271a", "#fecdca"), "expired": ("#344054", "#d0d5dd"), "claimed": ("#1849a9", "#d1e9ff")}


def _ago(seconds: float) -> str:
    """A span of time in the largest units that fit: 45 s, 12 m, 3 h 5 m, 2 d 4 h."""
    seconds = int(abs(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, hours, days = seconds // 60, seconds // 3600, seconds // 86_400
    if hours == 0:
        return f"{minutes} m"
    if days == 0:
        return f"{hours} h {minutes % 60} m" if minutes % 60 else f"{hours} h"
    return f"{days} d {hours % 24} h" if hours % 24 else f"{days} d"


def _seconds(later: str, earlier: str) -> float:
    def parse(text: str) -> datetime:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    return (parse(later) - parse(earlier)).total_seconds()


def time_left(hold: HoldView, now: str) -> str:
    """The hold's time left before its deadline, relative ("3 h 5 min", "overdue 4 min"); a
    closed hold's state instead."""
    if hold["state"] != "open":
        return "closed"
    left = _seconds(hold["deadline_at"], now) if now else 0.0
    return _ago(left) if left > 0 else f"overdue {_ago(left)}"


def reason_words(code: str | None) -> str:
    """A reason code in words: MARGIN_BELOW_FLOOR → "Margin below floor"."""
    return code.replace("_", " ").strip().capitalize() if code else "no reason code"


def amount_text(request: HoldRequest) -> str:
    amount = request.get("amount")
    if isinstance(amount, bool) or not isinstance(amount, (int, float)):
        return ""
    text = f"{amount:,.2f}".rstrip("0").rstrip(".") if isinstance(amount, float) else f"{amount:,}"
    return f"{text} {request.get('currency') or ''}".strip()


def target_text(request: HoldRequest) -> str:
    return " ".join(str(part) for part in (request.get("target_system"), request.get("target_object_id")) if part)


def _assignee(hold: HoldView) -> str:
    claimed = hold.get("claimed_by")
    return str(claimed).rsplit("#", 1)[-1] if claimed else "nobody"


def _hold_rows(holds: list[HoldView], now: str = "", cursor: int = -1,
               checked: tuple[str, ...] = ()) -> pd.DataFrame:
    """The list's rows: the request (its action, target and amount, `hold["request"]`), the
    reason in words, the time left and the age from `now`, priority, assignee and state. Every
    value is text (Tabulator shows it as text)."""
    rows = []
    for index, hold in enumerate(holds):
        request = hold.get("request") or {}
        rows.append({
            "check": ("▶ " if index == cursor else "") + ("☑" if hold["decision_id"] in checked else "☐"),
            "priority": hold["priority"], "action": str(request.get("requested_action") or "—"),
            "target": target_text(request) or "—", "amount": amount_text(request),
            "reason": reason_words(hold.get("reason_code")), "time left": time_left(hold, now),
            "age": _ago(_seconds(now, hold["opened_at"])) if now else "", "assignee": _assignee(hold),
            "status": hold["state"], "decision_id": hold["decision_id"]})
    return pd.DataFrame(rows, columns=list(HOLD_COLUMNS))


def _chip(value: Any) -> str:
    colour, background = CHIPS.get(str(value), ("#1d2939", "#ffffff"))
    return f"color: {colour}; background-color: {background}; font-weight: 600; border-radius: 10px"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _held_by(rule: HeldBy) -> str:
    """The rule that held the record, or its rulebook's default outcome where no rule matched (a
    record's `matched_rule_id` is then null: the bold marks alone read as "****")."""
    if rule.get("rule_id") is None:
        return "the **default outcome** (no rule matched)"
    return f"rule **{md_text(rule['rule_id'])}**"


REQUEST_LABELS = (("question", "question"), ("requested_action", "requested action"),
                  ("target_system", "target system"), ("target_object_id", "target object"), ("amount", "amount"),
                  ("currency", "currency"), ("source_record_id", "source record"), ("workflow", "workflow"),
                  ("requester", "requested by"))


def request_markdown(request: HoldRequest | None) -> list[str]:
    """What the caller asked, first (issue 65): the request's members as signed (read from the
    stored request bound to the record's input_hash), each a text cell; or a line saying none is."""
    if not request or not request.get("signed"):
        return ["**Request**: not shown: no stored request is bound to this record's input_hash.", ""]
    cells = [f"| {label} | {md_cell(_text(value))} |" for name, label in REQUEST_LABELS
             if (value := request.get(name)) is not None]
    return ["**Request** (as signed)", "", "| | |", "|---|---|", *cells, ""]


def summary_markdown(detail: HoldDetail | None) -> str:
    """The open hold: what it asks (its request, first), where it stands, the rule and reason that
    held it, and its facts (a table of text cells)."""
    if not detail:
        return "*Pick a hold (click a row, or j/k then Enter; ? lists the keys).*"
    hold, rule = detail["hold"], detail["rule"]
    claimed = (f"claimed by {md_text(hold['claimed_by'])} at {md_text(hold['claimed_at'])}"
               if hold.get("claimed_by") else "not claimed")
    asker = md_text(hold.get("requested_holder") or hold["requested_by"])  # the holder (issue 65), then its key
    lines = [
        f"### Hold {md_text(hold['decision_id'])} · {md_text(hold['state'])}",
        *request_markdown(hold.get("request")),
        f"- queue **{md_text(hold['queue'])}**, priority **{md_text(hold['priority'])}**, deadline "
        f"{md_text(hold['deadline_at'])}" + (f", escalates at {md_text(hold['escalate_at'])}"
                                             if hold.get("escalate_at") else ""),
        f"- opened {md_text(hold['opened_at'])}, asked for by {asker} (key {md_text(hold['requested_by'])}); {claimed}",
        f"- approvals {len(hold['approvals'])} of {hold['approvals_needed']}"
        + ("; four eyes: the requester cannot resolve it" if hold.get("four_eyes") else "")
        + ("; a written justification (note) is required" if hold.get("require_justification") else ""),
        f"- held by {_held_by(rule)} of {md_text(rule['policy_id'])} "
        f"{md_text(rule['policy_version'])}: reason **{md_text(rule['reason_code'] or 'no reason code')}**"
        + (f" · condition {md_text(rule['condition'])}" if rule.get("condition") else "")
        + (f" · action {md_text(rule['action'])}" if rule.get("action") else ""),
    ]
    if hold.get("resolved_by"):
        lines.append(f"- resolved by {md_text(hold['resolved_by'])} at {md_text(hold['resolved_at'])}")
    facts = hold.get("facts") or {}
    cells = [f"| {md_cell(name)} | {md_cell(_text(value))} |" for name, value in sorted(facts.items())]
    table = ["", "| fact | value |", "|---|---|", *cells] if cells else ["", "*No facts were stored.*"]
    return "\n".join([*lines, *table])


def verification_markdown(detail: HoldDetail | None) -> str:
    """The decision's fresh verification, its hold events' offline check and, once closed, its
    resolution's: pass or FAIL with what failed."""
    if not detail:
        return ""
    verification = detail.get("verification") or {}
    failed = verification.get("failed_checks") or []
    if verification.get("verified"):
        record = (f"{MARKS[True]} · the decision record verifies (recomputed now from the ledger with this gate's "
                  "trust anchors)")
    else:
        record = f"{MARKS[False]} · the decision record does NOT verify" + (
            ": failed " + ", ".join(md_text(name) for name in failed) if failed else "")
    events = detail.get("hold_events") or {}
    request = ((detail.get("hold") or {}).get("request")) or {}
    bound = (f"{MARKS[True]} · the request shown is the stored request bound to this record's input_hash"
             if request.get("signed") else
             f"{MARKS[False]} · no stored request is bound to this record's input_hash: the request is not shown")
    lines = ["### Verification", f"- {record}", f"- {bound}",
             (f"- {MARKS[bool(events.get('verified'))]} · its {events.get('count', 0)} signed hold event(s) verify "
              "offline (hashes, signatures, chain order, quorum)")]
    lines += [f"  - {md_text(problem)}" for problem in events.get("problems") or []]
    resolution = detail.get("resolution")
    if resolution is not None:
        outcome = md_text(resolution.get("outcome") or "none")
        lines.append(f"- {MARKS[bool(resolution.get('verified'))]} · the resolution ({outcome}) verifies, bound to "
                     "this record" + ("; it approves the action" if resolution.get("approved") else
                                      "; it does not approve the action"))
        lines += [f"  - {md_text(problem)}" for problem in resolution.get("problems") or []]
    return "\n".join(lines)


def _numbers(facts: Any) -> str:
    if not isinstance(facts, dict):
        return ""
    return ", ".join(f"{name}={value}" for name, value in sorted(facts.items())
                     if isinstance(value, (int, float)) and not isinstance(value, bool))


def similar_rows(detail: HoldDetail | None) -> pd.DataFrame:
    """The closed holds most like the open one, nearest first: how each closed and went."""
    rows = [{"decision_id": hold["decision_id"], "closed as": hold["state"],
             "reason": (hold.get("resolution") or {}).get("reason_code") or "",
             "note": (hold.get("resolution") or {}).get("note") or "",
             "later outcome": hold.get("latest_outcome") or "not reported",
             "distance": round(float(hold["distance"]), 3), "numeric facts": _numbers(hold.get("facts")),
             "opened": hold["opened_at"]} for hold in (detail["similar"] if detail else None) or []]
    return pd.DataFrame(rows, columns=["decision_id", "closed as", "reason", "note", "later outcome", "distance",
                                       "numeric facts", "opened"])


def event_rows(detail: HoldDetail | None) -> pd.DataFrame:
    rows = [{"#": event["seq"], "at": event["created_at"], "action": event["action"], "by": event["actor"],
             "vote": event.get("vote") or "", "reason": event.get("reason_code") or "", "note": event.get("note") or "",
             "queue": event.get("queue") or "", "outcome": event.get("outcome") or ""}
            for event in (detail["events"] if detail else None) or []]
    return pd.DataFrame(rows, columns=["#", "at", "action", "by", "vote", "reason", "note", "queue", "outcome"])


ASSETS = Path(str(resources.files("workbench.app") / "assets"))  # served at /workbench-assets (inbox-keys.js)
POLL_MS = 500  # new and closed holds show within 2 s: a poll every half second (HoldService.version, one cheap read)


def _table(frame: pd.DataFrame, css: str, height: int | None, selectable: bool = False) -> pn.widgets.Tabulator:
    """`height`: fixed (the table scrolls inside it), or None to fit every row."""
    return pn.widgets.Tabulator(frame, disabled=True, show_index=False, height=height, sizing_mode="stretch_width",
                                selectable=1 if selectable else False, css_classes=[css])


def _hold_table(state: InboxState) -> pn.widgets.Tabulator:
    """The page of holds, kept in step with the view-model. The highlighted row is the cursor's
    (what the keys act on); a click on a row opens its hold and moves the cursor there, a click
    on its box checks it for a bulk step. Text columns wrap: nothing is cut off at 1,280 px."""

    def frame() -> pd.DataFrame:
        return _hold_rows(state.rows, state.now, state.cursor, tuple(state.checked))

    # No fixed height: every hold of the page is on the page (issue 56: rows behind a scroll).
    table = pn.widgets.Tabulator(
        frame(), disabled=True, show_index=False, selectable=1, css_classes=["inbox-holds"], layout="fit_columns",
        widths={name: width for name, width in _WIDTHS.items() if width}, hidden_columns=["decision_id"],
        titles={"check": "", "time left": "time left"}, text_align={"amount": "right", "time left": "right",
                                                                     "age": "right"},
        header_align={"amount": "right", "time left": "right", "age": "right"},
        formatters={name: {"type": "textarea"} for name in ("action", "target", "reason", "assignee")},
        sortable=False, width=830)  # the server's order (priority, then time left) over every page
    styler = table.style  # a pandas Styler over the table's value (None only without one)
    if styler is not None:
        styler.map(_chip, subset=["priority", "status"])

    def follow(*_: object) -> None:
        table.value = frame()
        wanted = [state.cursor] if state.rows else []
        if list(table.selection) != wanted:
            table.selection = wanted

    def clicked(event: Any) -> None:
        if event.row is None or not 0 <= event.row < len(state.rows):
            return
        state.cursor = event.row
        if event.column == "check":
            state.check_cursor()
        else:
            state.open(str(state.rows[event.row]["decision_id"]))

    def selection(event: param.parameterized.Event) -> None:
        wanted = [state.cursor] if state.rows else []
        if list(event.new) != wanted:  # a click's own (un)selection: the highlight stays the cursor's
            table.selection = wanted

    state.param.watch(follow, ["rows", "cursor", "checked", "now"])
    table.on_click(clicked)
    table.param.watch(selection, "selection")
    follow()
    return table


def _filters(state: InboxState) -> pn.Row:
    search = pn.widgets.TextInput.from_param(state.param.search, name="Search (/)", width=230,
                                             placeholder="decision id, target or source record",
                                             css_classes=["inbox-search"])
    queue = pn.widgets.Select.from_param(state.param.queue, name="Queue", options=["", *state.queues], width=120)
    state.param.watch(lambda event: setattr(queue, "options", ["", *event.new]), "queues")
    assignee = pn.widgets.Select.from_param(state.param.assignee, name="Assignee", width=120,
                                            options={"everyone": "", "mine": "mine", "unassigned": "unassigned"})
    priority = pn.widgets.Select.from_param(state.param.priority, name="Priority", width=100)
    policy = pn.widgets.TextInput.from_param(state.param.policy_id, name="Policy", width=150, placeholder="every policy")
    previous, following = pn.widgets.Button(name="◀", width=40), pn.widgets.Button(name="▶", width=40)
    previous.on_click(lambda _: state.previous_page())
    following.on_click(lambda _: state.next_page())
    keys = pn.widgets.Button(name="? keys", width=70, css_classes=["inbox-keys-help"])
    keys.on_click(lambda _: state.toggle_help())
    return pn.Row(search, pn.widgets.Select.from_param(state.param.state, name="State", width=100), assignee, queue,
                  priority, policy, previous, following, keys, align="end", sizing_mode="stretch_width")


def _counts(counts: dict[str, int]) -> str:
    return " · ".join(f"{md_text(name)} {count}" for name, count in sorted(counts.items())) or "no holds yet"


def keys_markdown(shown: bool) -> str:
    if not shown:
        return ""
    return "\n".join(["**Keys** (not while typing in a field)", "", "| key | does |", "|---|---|",
                      *(f"| `{key}` | {md_text(does)} |" for key, does in KEYS)])


def new_keys(value: str, done: int) -> tuple[list[str], int]:
    """The keys of the field's `value` ("12:j 13:k 14:Enter", the newest the page kept) numbered
    after `done`, in order, and the newest number. Untrusted text: a malformed item is skipped."""
    keys: list[tuple[int, str]] = []
    for item in value.split(" "):
        number, _, key = item.partition(":")
        if number.isascii() and number.isdigit() and len(number) < 12 and int(number) > done:
            keys.append((int(number), key))
    keys.sort()
    return [key for _number, key in keys], max([done, *(number for number, _key in keys)])


def _key_input(state: InboxState) -> pn.widgets.TextInput:
    """The hidden field the page's key handler (assets/inbox-keys.js) writes the newest keys to;
    each key is acted on once, in order (`InboxState.key` ignores one it does not know)."""
    sink = pn.widgets.TextInput(name="inbox keys", visible=False, css_classes=["inbox-keys"])
    done = [0]

    def pressed(event: param.parameterized.Event) -> None:
        keys, done[0] = new_keys(str(event.new or ""), done[0])
        for key in keys:
            state.key(key)

    sink.param.watch(pressed, "value")
    return sink


def _code_pickers(state: InboxState) -> tuple[pn.widgets.Select, pn.widgets.Select]:
    """The queue's reason codes, picked (never typed): one list to approve with, one to deny with."""
    approve = pn.widgets.Select.from_param(state.param.approve_code, name="Approve as",
                                           options=state.codes["approve"], width=200, css_classes=["inbox-approve-code"])
    deny = pn.widgets.Select.from_param(state.param.deny_code, name="Deny as", options=state.codes["deny"],
                                        width=200, css_classes=["inbox-deny-code"])

    def codes(event: param.parameterized.Event) -> None:
        approve.options, deny.options = event.new["approve"], event.new["deny"]

    state.param.watch(codes, "codes")
    return approve, deny


def _steps(state: InboxState) -> pn.Column:
    """The steps on the open hold, shown while the session may take them and the hold is open;
    Approve is not offered on the session's own request (four eyes). SECURITY: hiding is a
    courtesy; InboxState sends the session's permissions and the service refuses what they do
    not cover, whatever the browser sends."""
    approve_code, deny_code = _code_pickers(state)
    text = pn.widgets.TextAreaInput(name="Note", placeholder="why (signed into the hold event)", width=400, height=60)
    target = pn.widgets.Select(name="Move to queue", options=[], width=140)
    buttons = {name: pn.widgets.Button(name=label, button_type=kind, css_classes=[f"inbox-{name}"])
               for name, label, kind in (("approve", "Approve (a)", "success"), ("deny", "Deny (d)", "danger"),
                                         ("claim", "Claim (c)", "default"), ("release", "Release", "default"),
                                         ("reassign", "Reassign", "default"), ("escalate", "Escalate", "warning"))}
    buttons["approve"].on_click(lambda _: state.resolve("approve", state.approve_code, text.value or ""))
    buttons["deny"].on_click(lambda _: state.resolve("deny", state.deny_code, text.value or ""))
    buttons["claim"].on_click(lambda _: state.claim())
    buttons["release"].on_click(lambda _: state.release())
    buttons["reassign"].on_click(lambda _: state.reassign(target.value or "", text.value or ""))
    buttons["escalate"].on_click(lambda _: state.escalate())
    box = pn.Column(pn.Row(approve_code, deny_code, align="end"), text,
                    pn.Row(buttons["approve"], buttons["deny"], buttons["claim"], buttons["release"]),
                    pn.Row(buttons["reassign"], target, buttons["escalate"], align="end"),
                    visible=False, css_classes=["inbox-steps"])

    def follow(*_: object) -> None:
        detail = state.open_hold()
        hold = detail["hold"] if detail else None
        box.visible = state.may_act() and hold is not None and hold["state"] == "open"
        buttons["approve"].visible = approve_code.visible = not state.own(hold)
        target.options = [name for name in state.queues if hold is None or name != hold["queue"]]
        buttons["reassign"].visible = target.visible = bool(target.options)  # one queue: nowhere to move it

    state.param.watch(follow, ["detail", "scope", "queues"])
    follow()
    return box


def _checked_text(checked: list[str], deny_code: str) -> str:
    return f"**{len(checked)} checked** · deny as {md_text(deny_code)}"


def _bulk(state: InboxState) -> pn.Row:
    """Bulk deny, claim and reassign over the checked holds (x, or a row's box), one service call
    each; shown while the session may act and holds are checked."""
    target = pn.widgets.Select(name="to queue", options=list(state.queues), width=120)
    state.param.watch(lambda event: setattr(target, "options", list(event.new)), "queues")
    deny = pn.widgets.Button(name="Deny checked", button_type="danger", css_classes=["inbox-bulk-deny"])
    claim = pn.widgets.Button(name="Claim checked", css_classes=["inbox-bulk-claim"])
    move = pn.widgets.Button(name="Reassign checked", css_classes=["inbox-bulk-reassign"])
    deny.on_click(lambda _: state.bulk("deny"))
    claim.on_click(lambda _: state.bulk("claim"))
    move.on_click(lambda _: state.bulk("reassign", target.value or ""))
    count = pn.pane.Markdown(pn.bind(_checked_text, state.param.checked, state.param.deny_code),
                             css_classes=["inbox-checked"])
    row = pn.Row(count, deny, claim, move, target, align="center", css_classes=["inbox-bulk"])

    def follow(*_: object) -> None:
        row.visible = bool(state.checked) and state.may_act()

    state.param.watch(follow, ["checked", "scope"])
    follow()
    return row


def _own_banner(detail: HoldDetail | None, state: InboxState) -> str:
    hold = detail["hold"] if detail else None
    if not hold or hold["state"] != "open" or not state.own(hold):
        return ""
    return (f"**{OWN_REQUEST[0].upper() + OWN_REQUEST[1:]}.** You asked for this action; under four eyes "
            "your approval is not offered, and the gate refuses it (HOLD_FOUR_EYES).")


def _poll_once(state: InboxState) -> None:
    state.poll()


def _poll(state: InboxState) -> None:
    """Poll the scope's holds each POLL_MS while the page is served (stopped with its session),
    and read the open hold's closed holds like it on the next tick, after the rest of its detail."""
    document = pn.state.curdoc
    if document is not None and document.session_context is not None:
        pn.state.add_periodic_callback(partial(_poll_once, state), period=POLL_MS)
        state.defer = document.add_next_tick_callback


def inbox_page(state: InboxState) -> pn.viewable.Viewable:
    similar = _table(similar_rows(state.open_hold()), "inbox-similar", 200)
    events = _table(event_rows(state.open_hold()), "inbox-events", 180)

    def detail_changed(event: param.parameterized.Event) -> None:
        similar.value, events.value = similar_rows(event.new), event_rows(event.new)

    state.param.watch(detail_changed, "detail")
    _poll(state)
    listing = pn.Column(_bulk(state), _hold_table(state), width=840, css_classes=["inbox-list"])
    detail = pn.Column(
        pn.pane.Markdown(pn.bind(_own_banner, state.param.detail, state), css_classes=["inbox-own"],
                         styles={"color": "#7a271a"}),
        pn.pane.Markdown(pn.bind(summary_markdown, state.param.detail), css_classes=["inbox-hold"],
                         sizing_mode="stretch_width"),
        _steps(state),
        confirmation_box(state.param.proposal, state.confirmation_text, state.confirm, state.cancel, "inbox"),
        pn.pane.Markdown(pn.bind(verification_markdown, state.param.detail), css_classes=["inbox-verification"],
                         sizing_mode="stretch_width"),
        pn.pane.Markdown(f"**Closed holds most like this one** (same policy and rule: the {NEAREST} nearest by "
                         f"the numeric facts of the newest {WINDOW:,})"),
        similar,
        pn.pane.Markdown("**Signed hold events** (the scope's hold chain; `gate verify --hold-history` checks it)"),
        events,
        sizing_mode="stretch_width", min_width=380, css_classes=["inbox-detail"],
    )
    return pn.Column(
        _filters(state),
        pn.pane.Markdown(pn.bind(_counts, state.param.counts), css_classes=["inbox-counts"]),
        note(state.param.message),
        pn.pane.Markdown(pn.bind(keys_markdown, state.param.help_shown), css_classes=["inbox-keys-list"]),
        _key_input(state),
        pn.Row(listing, detail, sizing_mode="stretch_width"),
        name="Inbox",
        sizing_mode="stretch_width",
    )
