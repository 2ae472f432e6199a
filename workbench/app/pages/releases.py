"""Releases page: the state of a rulebook's release, the live shadow comparison, the canary's arms
with intervals and guardrail status, the signed history, and the moves. Every figure comes from
the ReleaseService (gate/releases/figures.py); caller text is escaped (workbench.reports.textsafe)."""

from __future__ import annotations

from functools import partial
from typing import Any

import pandas as pd
import panel as pn

from gate.releases.events import ReleaseEvent
from gate.releases.figures import ArmFigures, Rate, arm_figures
from gate.releases.guardrails import ArmCounts, GuardrailReportJSON
from gate.strict_json import JsonValue
from workbench.app.pages.common import confirmation_box, note
from workbench.app.state.releases import Move, ReleasesState
from workbench.reports.textsafe import md_text


def _interval(rate: Rate) -> str:
    interval = rate.get("interval_95")
    value = "–" if rate.get("rate") is None else f"{rate['rate']:.1%}"
    return f"{value} (95% {interval[0]:.1%}–{interval[1]:.1%}, n={rate['n']})" if interval else f"{value} (n=0)"


def _state_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    if not status:
        return pn.pane.Markdown("*No release yet: publish a version (Migration page or `gate release publish`).*")
    state = status["state"]
    lines = [f"**Release of {md_text(status['rulebook_id'])}** · event {state['seq']}",
             f"- active: **{md_text(state['active']['version']) if state['active'] else 'none'}**"
             + ("" if state["active"] else " (decide by reference answers 409 until a version is active)")]
    if state.get("shadow"):
        lines.append(f"- shadow: **{md_text(state['shadow']['version'])}**")
    if state.get("canary"):
        canary = state["canary"]
        # The subject as text (inside a code span its escapes showed: context\.source\_record\_id).
        lines.append(f"- canary: **{md_text(canary['version'])}** at {canary['percent']}% of subjects "
                     f"by subject {md_text(canary['subject'])}")
    # Pending requests are listed once, as rows with their Approve buttons (`_pending_rows`).
    halts = [e for e in status["history"] if e["action"] == "halt" and e["actor"] == "guardrail"]
    if halts:
        evidence = halts[-1].get("evidence") or {}
        failure = evidence.get("failure_rate") or {}
        interval = failure.get("interval")
        trigger = evidence.get("trigger") or {}
        lines.append(f"- last guardrail halt (event {halts[-1]['seq']}): canary "
                     f"{md_text(evidence.get('canary_version'))} stopped, "
                     f"{md_text(', '.join(evidence.get('tripped', [])))} tripped"
                     + (f"; failure difference canary − active {failure['difference']:+.1%}, always-valid "
                        f"interval {interval[0]:+.1%} to {interval[1]:+.1%}" if interval else "")
                     + (f"; outcome {md_text(trigger.get('outcome_id'))} reported by key "
                        f"{md_text(trigger['reported_by'])}" if trigger.get("reported_by") else ""))
    policy = status["policy"]
    lines.append(f"- policy: approvals {'required' if policy['require_approval'] else 'not required'}; "
                 f"superseded inline decides {'refused' if policy['refuse_superseded_inline'] else 'flagged'}")
    return pn.pane.Markdown("\n".join(lines), css_classes=["release-state"])


def _shadow_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    shadow = (status or {}).get("comparison", {}).get("shadow")
    if not shadow:
        return pn.Spacer()
    head = (f"**Shadow {md_text(shadow['version'])}** on {shadow['decisions']} live decisions · agreement "
            f"{_interval(shadow['agreement'])}")
    if not shadow["transitions"]:  # no live decision compared yet: a note, not a table with one empty n=0 row
        return pn.Column(pn.pane.Markdown(head, css_classes=["shadow-head"]),
                         pn.pane.Markdown("*No live decisions compared yet: the shadow is decided beside each live "
                                          "decision from now on.*", css_classes=["shadow-empty"]))
    transitions = pd.DataFrame(shadow["transitions"])
    flips = pd.DataFrame([{"live → shadow": f"{f['live']} → {f['shadow']}", "n": f["n"], "failed": f["failed"],
                           "succeeded": f["succeeded"], "too young": f["open_or_unreported"],
                           "failure rate": _interval(f["failure_rate"])} for f in shadow["flips"]])
    return pn.Column(pn.pane.Markdown(head, css_classes=["shadow-head"]),
                     pn.widgets.Tabulator(transitions, disabled=True, show_index=False, height=140),
                     pn.widgets.Tabulator(flips, disabled=True, show_index=False, height=140) if len(flips)
                     else pn.pane.Markdown("*No flips yet.*"))


def halted_arms(evidence: GuardrailReportJSON) -> list[ArmFigures]:
    """A canary's arms when its guardrails halted it, from the halt event's evidence (the counts
    the guardrails judged), as the same figures a running canary shows (`arm_figures`)."""
    mix = {comparison["name"].split(".", 1)[1]: comparison for comparison in evidence.get("verdict_mix", [])}
    failure = evidence["failure_rate"]
    return [arm_figures(arm, ArmCounts({verdict: mix[verdict][arm]["events"] for verdict in mix},
                                       failure[arm]["events"], failure[arm]["n"] - failure[arm]["events"]))
            for arm in ("active", "canary")]


def _guardrails(guard: GuardrailReportJSON) -> str:
    """The guardrails' verdict and the failure-rate comparison behind it."""
    failure = guard["failure_rate"]
    verdict = ("TRIPPED: " + ", ".join(guard["tripped"])) if guard["tripped"] else \
        ("holding" if failure["judged"] else f"too young to judge (each arm needs {guard['settings']['min_count']})")
    interval = failure["interval"]
    detail = (f" · failure difference canary − active {failure['difference']:+.1%}, always-valid interval "
              f"{interval[0]:+.1%} to {interval[1]:+.1%}" if interval else "")
    return f"**{verdict}**{detail} (false-alarm rate at most {guard['settings']['alpha']})"


def _canary_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    """The running canary's arms and guardrails; with none running, those of the last canary its
    guardrails halted (the arms as the halt's evidence holds them), so the halt keeps its why."""
    canary = (status or {}).get("comparison", {}).get("canary")
    halts = [e for e in (status or {}).get("history", []) if e["action"] == "halt" and e["actor"] == "guardrail"
             and e.get("evidence")]
    if canary:
        head = f"**Canary {md_text(canary['version'])}** at {canary['percent']}% · guardrails: " + \
            _guardrails(canary["guardrails"])
        arms = canary["arms"]
    elif halts:
        evidence = halts[-1]["evidence"]
        head = (f"**Canary {md_text(evidence.get('canary_version'))} halted by its guardrails** (event "
                f"{halts[-1]['seq']}, {md_text(halts[-1]['created_at'])}) · {_guardrails(evidence)} · "
                "its arms when it stopped:")
        arms = halted_arms(evidence)
    else:
        return pn.Spacer()
    rows = [{"arm": arm["arm"], "decisions": arm["decisions"], "yes share": _interval(arm["verdict_mix"]["yes"]),
             "failure rate": _interval(arm["failure_rate"]), "resolved": arm["resolved_outcomes"]} for arm in arms]
    return pn.Column(pn.pane.Markdown(head, css_classes=["canary-head"]),
                     pn.widgets.Tabulator(pd.DataFrame(rows), disabled=True, show_index=False, height=110,
                                          sizing_mode="stretch_width", css_classes=["canary-arms"]))


def _history_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    history = (status or {}).get("history") or []
    if not history:
        return pn.Spacer()
    rows = [{"#": e["seq"], "at": e["created_at"], "action": e["action"], "version": e.get("version") or "",
             "by": _by(e), "why": e.get("reason") or "", "event hash": e["event_hash"][:16]}
            for e in reversed(history)]
    return pn.widgets.Tabulator(pd.DataFrame(rows), disabled=True, show_index=False, height=220,
                                sizing_mode="stretch_width")


def _by(event: ReleaseEvent) -> str:
    """Who made an event: the principal's display name and id when the event names one."""
    principal = event.get("principal") or {}
    name = principal.get("display_name")
    return f"{name} ({principal['id']})" if name and principal.get("id") else event["actor"]


def _approve(state: ReleasesState, request_seq: int, _event: object) -> None:
    state.approve(request_seq)


def _pending_rows(state: ReleasesState) -> pn.viewable.Viewable:
    """One row per pending request, each with its own Approve button (shown to approvers)."""
    def rows(_status: dict[str, JsonValue] | None) -> pn.viewable.Viewable:
        pending = state.pending()
        if not pending:
            return pn.pane.Markdown("*No pending requests.*", css_classes=["pending-none"])
        items: list[pn.viewable.Viewable] = []
        for request in pending:
            approve = pn.widgets.Button(name=f"Approve request {request['request_seq']}", button_type="success",
                                        visible=state.may("approve"), css_classes=["release-approve"])
            approve.on_click(partial(_approve, state, request["request_seq"]))
            text = (f"request {request['request_seq']}: {md_text(request['action'])} "
                    f"{md_text(request['version'])} by {md_text(request['requested_by'])}, "
                    f"expires {md_text(request['expires_at'])}")
            items.append(pn.Row(pn.pane.Markdown(text, css_classes=["pending-request"]), approve, align="center"))
        return pn.Column(*items)

    return pn.Column(pn.pane.Markdown("**Pending requests**"), pn.bind(rows, state.param.status))


# The move buttons: (move, label, button kind), in the order the page shows them.
_MOVE_BUTTONS: tuple[tuple[Move, str, str], ...] = (
    ("shadow", "Start shadow", "default"), ("canary", "Start canary", "warning"), ("activate", "Activate", "danger"),
    ("halt", "Halt", "warning"), ("rollback", "Roll back", "danger"))


def releases_page(state: ReleasesState) -> pn.viewable.Viewable:
    version = pn.widgets.Select(name="Version", options=state.versions(), width=180)
    percent = pn.widgets.FloatInput(name="Canary %", value=10.0, start=0.01, end=99.99, step=1.0, width=110)
    reason = pn.widgets.TextInput(name="Reason", placeholder="why (recorded in the signed event)", width=300)
    moves: dict[Move, pn.widgets.Button] = {
        name: pn.widgets.Button(name=label, button_type=kind, css_classes=[f"release-{name}"])
        for name, label, kind in _MOVE_BUTTONS}
    refresh = pn.widgets.Button(name="Refresh")
    # SECURITY: hidden buttons are a courtesy; ReleasesState.act sends the session's permissions
    # and the service refuses what they do not cover, whatever the browser sends.
    moves["shadow"].on_click(lambda _: state.act("shadow", version=version.value, reason=reason.value))
    moves["canary"].on_click(lambda _: state.propose("canary", version=version.value, percent=percent.value,
                                                     reason=reason.value))
    moves["activate"].on_click(lambda _: state.propose("activate", version=version.value, reason=reason.value))
    moves["halt"].on_click(lambda _: state.act("halt", reason=reason.value))
    moves["rollback"].on_click(lambda _: state.act("rollback", reason=reason.value))

    def follow(*_: object) -> None:  # the pickers and the buttons follow the release and the scope
        version.options = state.versions()
        for name, button in moves.items():
            button.visible = state.may(name)
        percent.visible = version.visible = reason.visible = any(state.may(name) for name in moves)

    state.param.watch(follow, ["status", "scope"])
    follow()

    def reread(_: object) -> None:  # versions published elsewhere (API, CLI) appear in the picker
        state.refresh()
        follow()

    refresh.on_click(reread)
    return pn.Column(
        pn.Row(version, percent, reason, align="end"),
        pn.Row(*moves.values(), refresh),
        confirmation_box(state.param.proposal, state.confirmation_text, state.confirm, state.cancel, "release"),
        note(state.param.message),
        pn.bind(_state_view, state.param.status),
        _pending_rows(state),
        pn.Row(pn.Column(pn.bind(_shadow_view, state.param.status), sizing_mode="stretch_width"),
               pn.Column(pn.bind(_canary_view, state.param.status), sizing_mode="stretch_width")),
        pn.pane.Markdown("**History** (signed, chained; `gate verify` checks it offline)"),
        pn.bind(_history_view, state.param.status),
        name="Releases",
    )
