"""The Events page: each webhook subscription of the scope with its deliveries (success rate over
its life, latency, lag, pending replays, the last failures with the receiver's status and answer)
and its actions (replay one event, enable, disable). Every value a receiver or a tenant wrote
(the URL, an answer's excerpt) is text (`md_text`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import panel as pn

from workbench.app.pages.common import note
from workbench.app.state.events import EventsState
from workbench.reports.deliveries import delivery_lines
from workbench.reports.textsafe import md_text


def _subscription(state: EventsState, report: dict[str, Any]) -> pn.viewable.Viewable:
    sid = report["subscription"]["subscription_id"]
    seq = pn.widgets.IntInput(name="Event seq", value=1, start=1, width=120)
    replay = pn.widgets.Button(name="Replay event", button_type="primary", css_classes=["events-replay"])
    replay.on_click(lambda _e: state.replay(sid, int(seq.value or 1)))
    active = report["subscription"]["status"] == "active"
    toggle = pn.widgets.Button(name="Disable" if active else "Enable", css_classes=["events-toggle"])
    toggle.on_click(partial(lambda status, _e: state.set_status(sid, status), "disabled" if active else "active"))
    return pn.Column(pn.pane.Markdown("\n".join(delivery_lines(report, md_text)), css_classes=["events-subscription"]),
                     pn.Row(seq, replay, toggle, align="end"), sizing_mode="stretch_width")


def events_page(state: EventsState) -> pn.viewable.Viewable:
    refresh = pn.widgets.Button(name="Refresh", css_classes=["events-refresh"])
    refresh.on_click(lambda _e: state.refresh())

    def body(subscriptions: list[dict[str, Any]], _scope: str) -> pn.viewable.Viewable:
        if not state.may_manage():
            return pn.pane.Markdown("Webhook subscriptions are managed by the scope's admins (role admin).")
        if not subscriptions:
            return pn.pane.Markdown("No webhook subscriptions in this scope: make one with "
                                    "`POST /api/events/subscriptions` or `gate events subscribe` (docs/events.md).")
        return pn.Column(*(_subscription(state, report) for report in subscriptions), sizing_mode="stretch_width")

    return pn.Column(pn.Row(refresh), note(state.param.message),
                     pn.bind(body, state.param.subscriptions, state.param.scope),
                     sizing_mode="stretch_width", name="Events")
