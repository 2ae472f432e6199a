"""Releases page: the state of a rulebook's release, the live shadow comparison, the canary's arms
with intervals and guardrail status, the signed history, and the moves. Every figure comes from
the ReleaseService (gate/releases/figures.py); caller text is escaped (workbench.reports.textsafe)."""

from __future__ import annotations

from typing import Any

import pandas as pd
import panel as pn

from workbench.app.pages.common import note
from workbench.app.state.releases import ReleasesState
from workbench.reports.textsafe import md_text


def _interval(rate: dict[str, Any]) -> str:
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
        lines.append(f"- canary: **{md_text(canary['version'])}** at {canary['percent']}% of subjects "
                     f"by `{md_text(canary['subject'])}`")
    for pending in state.get("pending", []):
        lines.append(f"- pending: {md_text(pending['action'])} {md_text(pending['version'])} "
                     f"(request {pending['request_seq']} by {md_text(pending['requested_by'])}, "
                     f"expires {md_text(pending['expires_at'])})")
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
    transitions = pd.DataFrame(shadow["transitions"] or [{"live": "", "shadow": "", "n": 0}])
    flips = pd.DataFrame([{"live → shadow": f"{f['live']} → {f['shadow']}", "n": f["n"], "failed": f["failed"],
                           "succeeded": f["succeeded"], "too young": f["open_or_unreported"],
                           "failure rate": _interval(f["failure_rate"])} for f in shadow["flips"]])
    return pn.Column(pn.pane.Markdown(head, css_classes=["shadow-head"]),
                     pn.widgets.Tabulator(transitions, disabled=True, show_index=False, height=140),
                     pn.widgets.Tabulator(flips, disabled=True, show_index=False, height=140) if len(flips)
                     else pn.pane.Markdown("*No flips yet.*"))


def _canary_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    canary = (status or {}).get("comparison", {}).get("canary")
    if not canary:
        return pn.Spacer()
    guard = canary["guardrails"]
    rows = [{"arm": arm["arm"], "decisions": arm["decisions"], "yes share": _interval(arm["verdict_mix"]["yes"]),
             "failure rate": _interval(arm["failure_rate"]), "resolved": arm["resolved_outcomes"]}
            for arm in canary["arms"]]
    failure = guard["failure_rate"]
    verdict = ("TRIPPED: " + ", ".join(guard["tripped"])) if guard["tripped"] else \
        ("holding" if failure["judged"] else f"too young to judge (each arm needs {guard['settings']['min_count']})")
    interval = failure["interval"]
    detail = (f" · failure difference canary − active {failure['difference']:+.1%}, always-valid interval "
              f"{interval[0]:+.1%} to {interval[1]:+.1%}" if interval else "")
    return pn.Column(
        pn.pane.Markdown(f"**Canary {md_text(canary['version'])}** at {canary['percent']}% · guardrails: "
                         f"**{verdict}**{detail} (false-alarm rate at most {guard['settings']['alpha']})",
                         css_classes=["canary-head"]),
        pn.widgets.Tabulator(pd.DataFrame(rows), disabled=True, show_index=False, height=110))


def _history_view(status: dict[str, Any] | None) -> pn.viewable.Viewable:
    history = (status or {}).get("history") or []
    if not history:
        return pn.Spacer()
    rows = [{"#": e["seq"], "at": e["created_at"], "action": e["action"], "version": e.get("version") or "",
             "by": e["actor"], "why": e.get("reason") or "", "event hash": e["event_hash"][:16]}
            for e in reversed(history)]
    return pn.widgets.Tabulator(pd.DataFrame(rows), disabled=True, show_index=False, height=220,
                                sizing_mode="stretch_width")


def releases_page(state: ReleasesState) -> pn.viewable.Viewable:
    version = pn.widgets.TextInput(name="Version", placeholder="a published version", width=180)
    percent = pn.widgets.FloatInput(name="Canary %", value=10.0, start=0.01, end=99.99, step=1.0, width=110)
    reason = pn.widgets.TextInput(name="Reason", placeholder="why (recorded in the signed event)", width=300)
    request = pn.widgets.IntInput(name="Request #", value=0, start=0, width=110)
    buttons = {name: pn.widgets.Button(name=label, button_type=kind) for name, label, kind in (
        ("shadow", "Start shadow", "default"), ("canary", "Start canary", "warning"),
        ("activate", "Activate", "danger"), ("halt", "Halt", "warning"), ("rollback", "Roll back", "danger"),
        ("approve", "Approve request", "success"), ("refresh", "Refresh", "default"))}
    buttons["shadow"].on_click(lambda _: state.act("shadow", version=version.value, reason=reason.value))
    buttons["canary"].on_click(lambda _: state.act("canary", version=version.value, percent=percent.value,
                                                   reason=reason.value))
    buttons["activate"].on_click(lambda _: state.act("activate", version=version.value, reason=reason.value))
    buttons["halt"].on_click(lambda _: state.act("halt", reason=reason.value))
    buttons["rollback"].on_click(lambda _: state.act("rollback", reason=reason.value))
    buttons["approve"].on_click(lambda _: state.approve(int(request.value or 0)))
    buttons["refresh"].on_click(lambda _: state.refresh())
    return pn.Column(
        pn.Row(version, percent, reason, request, align="end"),
        pn.Row(*buttons.values()),
        note(state.param.message),
        pn.bind(_state_view, state.param.status),
        pn.Row(pn.Column(pn.bind(_shadow_view, state.param.status), sizing_mode="stretch_width"),
               pn.Column(pn.bind(_canary_view, state.param.status), sizing_mode="stretch_width")),
        pn.pane.Markdown("**History** (signed, chained; `gate verify` checks it offline)"),
        pn.bind(_history_view, state.param.status),
        name="Releases",
    )
