"""The Inbox page: the scope's held actions by deadline and priority (state and queue filters in
the URL), and one hold as a reviewer weighs it: its facts, the rule and reason that held it, the
decision's verification, its signed hold events, and the closed holds most like it with their
outcomes; then the steps (resolve with a reason code and a note, claim, release, reassign,
escalate), shown only to the scope's reviewers. Every value a caller or a reviewer chose
(decision ids, fact names and values, reason codes, notes, principals) is text: Markdown through
`md_text`/`md_cell`, tables as Tabulator cells."""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import panel as pn
import param

from gate.holds.similar import NEAREST, WINDOW
from workbench.app.pages.common import confirmation_box, note
from workbench.app.pages.decisions import MARKS
from workbench.app.state.inbox import InboxState
from workbench.reports.textsafe import md_cell, md_text

HOLD_COLUMNS = ("decision_id", "priority", "deadline_at", "queue", "rule_id", "reason_code", "policy_id",
                "claimed_by", "approvals", "opened_at")


def _hold_rows(holds: list[dict[str, Any]]) -> pd.DataFrame:
    rows = [{**{name: hold.get(name) or "" for name in HOLD_COLUMNS},
             "approvals": f"{len(hold['approvals'])} of {hold['approvals_needed']}", "state": hold["state"]}
            for hold in holds]
    return pd.DataFrame(rows, columns=[*HOLD_COLUMNS, "state"])


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _held_by(rule: dict[str, Any]) -> str:
    """The rule that held the record, or its rulebook's default outcome where no rule matched (a
    record's `matched_rule_id` is then null: the bold marks alone read as "****")."""
    if rule.get("rule_id") is None:
        return "the **default outcome** (no rule matched)"
    return f"rule **{md_text(rule['rule_id'])}**"


REQUEST_LABELS = (("question", "question"), ("requested_action", "requested action"),
                  ("target_system", "target system"), ("target_object_id", "target object"), ("amount", "amount"),
                  ("currency", "currency"), ("source_record_id", "source record"), ("workflow", "workflow"),
                  ("requester", "requested by"))


def request_markdown(request: dict[str, Any] | None) -> list[str]:
    """What the caller asked, first (issue 65): the request's members as signed (read from the
    stored request bound to the record's input_hash), each a text cell; or a line saying none is."""
    if not request or not request.get("signed"):
        return ["**Request**: not shown: no stored request is bound to this record's input_hash.", ""]
    cells = [f"| {label} | {md_cell(_text(request[name]))} |" for name, label in REQUEST_LABELS
             if request.get(name) is not None]
    return ["**Request** (as signed)", "", "| | |", "|---|---|", *cells, ""]


def summary_markdown(detail: dict[str, Any] | None) -> str:
    """The open hold: what it asks (its request, first), where it stands, the rule and reason that
    held it, and its facts (a table of text cells)."""
    if not detail:
        return "*Select a hold, or open one by its decision id.*"
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


def verification_markdown(detail: dict[str, Any] | None) -> str:
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


def similar_rows(detail: dict[str, Any] | None) -> pd.DataFrame:
    """The closed holds most like the open one, nearest first: how each closed and went."""
    rows = [{"decision_id": hold["decision_id"], "closed as": hold["state"],
             "reason": (hold.get("resolution") or {}).get("reason_code") or "",
             "note": (hold.get("resolution") or {}).get("note") or "",
             "later outcome": hold.get("latest_outcome") or "not reported",
             "distance": round(float(hold["distance"]), 3), "numeric facts": _numbers(hold.get("facts")),
             "opened": hold["opened_at"]} for hold in (detail or {}).get("similar") or []]
    return pd.DataFrame(rows, columns=["decision_id", "closed as", "reason", "note", "later outcome", "distance",
                                       "numeric facts", "opened"])


def event_rows(detail: dict[str, Any] | None) -> pd.DataFrame:
    rows = [{"#": event["seq"], "at": event["created_at"], "action": event["action"], "by": event["actor"],
             "vote": event.get("vote") or "", "reason": event.get("reason_code") or "", "note": event.get("note") or "",
             "queue": event.get("queue") or "", "outcome": event.get("outcome") or ""}
            for event in (detail or {}).get("events") or []]
    return pd.DataFrame(rows, columns=["#", "at", "action", "by", "vote", "reason", "note", "queue", "outcome"])


def _table(frame: pd.DataFrame, css: str, height: int | None, selectable: bool = False) -> pn.widgets.Tabulator:
    """`height`: fixed (the table scrolls inside it), or None to fit every row."""
    return pn.widgets.Tabulator(frame, disabled=True, show_index=False, height=height, sizing_mode="stretch_width",
                                selectable=1 if selectable else False, css_classes=[css])


def _hold_table(state: InboxState) -> pn.widgets.Tabulator:
    """The page of holds, kept in step with the view-model; a picked row opens that hold. The row
    highlighted is the open hold's, or none where it is not on this page (closed by a step, another
    page, another state): a highlight left on a row index once pointed at the hold that moved into
    it while the detail still showed the closed one, and clicking that row changed nothing."""
    # No fixed height: every hold of the page is on the page. A 320 px table showed ten of twelve,
    # the rest behind a scroll that overlay scrollbars (and headless chromium) do not show.
    table = _table(_hold_rows(state.rows), "inbox-holds", None, selectable=True)

    def highlight(*_: object) -> None:
        ids = [str(hold["decision_id"]) for hold in state.rows]
        wanted = [ids.index(state.selected)] if state.selected in ids else []
        if list(table.selection) != wanted:
            table.selection = wanted

    def rows_changed(event: param.parameterized.Event) -> None:
        table.value = _hold_rows(event.new)
        highlight()

    def picked(event: param.parameterized.Event) -> None:
        if event.new and table.value is not None and len(table.value) > event.new[0]:
            decision_id = str(table.value.iloc[event.new[0]]["decision_id"])
            if decision_id != state.selected or state.detail is None:
                state.open(decision_id)
        else:
            highlight()  # a click on the highlighted row unhighlights it: the hold shown stays open

    state.param.watch(rows_changed, "rows")
    state.param.watch(highlight, "selected")
    table.param.watch(picked, "selection")
    highlight()
    return table


def _filters(state: InboxState) -> pn.Row:
    queue = pn.widgets.Select.from_param(state.param.queue, name="Queue", options=["", *state.queues], width=180)
    state.param.watch(lambda event: setattr(queue, "options", ["", *event.new]), "queues")
    refresh = pn.widgets.Button(name="Refresh", css_classes=["inbox-refresh"])
    refresh.on_click(lambda _: state.reload())
    previous, following = pn.widgets.Button(name="◀ Previous"), pn.widgets.Button(name="Next ▶")
    previous.on_click(lambda _: state.previous_page())
    following.on_click(lambda _: state.next_page())
    open_id = pn.widgets.TextInput(name="Open hold (decision id)", placeholder="dec_…", width=260)
    open_button = pn.widgets.Button(name="Open hold", button_type="primary")
    open_button.on_click(lambda _: state.open(open_id.value or ""))
    return pn.Row(pn.widgets.Select.from_param(state.param.state, name="State", width=140), queue, refresh,
                  previous, following, open_id, open_button, align="end")


def _counts(counts: dict[str, int]) -> str:
    return " · ".join(f"{md_text(name)} {count}" for name, count in sorted(counts.items())) or "no holds yet"


def _steps(state: InboxState) -> pn.Column:
    """The steps on the open hold, shown while the session may take them and the hold is open.
    SECURITY: hiding is a courtesy; InboxState sends the session's permissions and the service
    refuses what they do not cover, whatever the browser sends."""
    # Not labelled "Reason…": the Releases page's "Reason" field shares the document (label lookups).
    reason = pn.widgets.TextInput(name="Resolution code", placeholder="a reason code: CHECKED_WITH_OWNER", width=240)
    text = pn.widgets.TextAreaInput(name="Note", placeholder="why (signed into the hold event)", width=380, height=70)
    target = pn.widgets.Select(name="Move to queue", options=[], width=160)
    buttons = {name: pn.widgets.Button(name=label, button_type=kind, css_classes=[f"inbox-{name}"])
               for name, label, kind in (("approve", "Approve", "success"), ("deny", "Deny", "danger"),
                                         ("claim", "Claim", "default"), ("release", "Release", "default"),
                                         ("reassign", "Reassign", "default"), ("escalate", "Escalate", "warning"))}
    buttons["approve"].on_click(lambda _: state.resolve("approve", reason.value or "", text.value or ""))
    buttons["deny"].on_click(lambda _: state.resolve("deny", reason.value or "", text.value or ""))
    buttons["claim"].on_click(lambda _: state.claim())
    buttons["release"].on_click(lambda _: state.release())
    buttons["reassign"].on_click(lambda _: state.reassign(target.value or "", text.value or ""))
    buttons["escalate"].on_click(lambda _: state.escalate())
    box = pn.Column(pn.Row(reason, text, align="end"), pn.Row(*buttons.values(), target, align="end"),
                    visible=False, css_classes=["inbox-steps"])

    def follow(*_: object) -> None:
        hold = (state.detail or {}).get("hold") or {}
        box.visible = state.may_act() and hold.get("state") == "open"
        target.options = [name for name in state.queues if name != hold.get("queue")]
        buttons["reassign"].visible = target.visible = bool(target.options)  # one queue: nowhere to move it

    state.param.watch(follow, ["detail", "scope", "queues"])
    follow()
    return box


def inbox_page(state: InboxState) -> pn.viewable.Viewable:
    similar = _table(similar_rows(state.detail), "inbox-similar", 200)
    events = _table(event_rows(state.detail), "inbox-events", 180)

    def detail_changed(event: param.parameterized.Event) -> None:
        similar.value, events.value = similar_rows(event.new), event_rows(event.new)

    state.param.watch(detail_changed, "detail")
    return pn.Column(
        _filters(state),
        pn.pane.Markdown(pn.bind(_counts, state.param.counts), css_classes=["inbox-counts"]),
        note(state.param.message),
        _hold_table(state),
        pn.Row(pn.pane.Markdown(pn.bind(summary_markdown, state.param.detail), css_classes=["inbox-hold"], width=620),
               pn.pane.Markdown(pn.bind(verification_markdown, state.param.detail), css_classes=["inbox-verification"],
                                sizing_mode="stretch_width")),
        _steps(state),
        confirmation_box(state.param.proposal, state.confirmation_text, state.confirm, state.cancel, "inbox"),
        pn.pane.Markdown(f"**Closed holds most like this one** (same policy and rule: the {NEAREST} nearest by "
                         f"the numeric facts of the newest {WINDOW:,})"),
        similar,
        pn.pane.Markdown("**Signed hold events** (the scope's hold chain; `gate verify --hold-history` checks it)"),
        events,
        name="Inbox",
    )
