"""The Events page: each webhook subscription of the scope with its deliveries (success rate over
its life, latency, lag, pending replays, the last failures with the receiver's status and answer)
and its actions (replay one event, enable, disable). Every value a receiver or a tenant wrote
(the URL, an answer's excerpt) is text (`md_text`)."""

from __future__ import annotations

from functools import partial
from typing import Any

import panel as pn

from gate.events.cloudevent import EVENT_TYPES
from gate.strict_json import JsonValue
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


def _secret_text(secret: str) -> str:
    return f"secret (shown once): `{md_text(secret)}`" if secret else ""


def _subscribe_form(state: EventsState) -> pn.viewable.Viewable:
    url = pn.widgets.TextInput(name="Receiver URL", placeholder="https://hooks.example.com/gate", width=360)
    types = pn.widgets.MultiChoice(name="Event types (none: every type)", options=sorted(EVENT_TYPES), width=420)
    subscribe = pn.widgets.Button(name="Subscribe", button_type="primary", css_classes=["events-subscribe"])
    subscribe.on_click(lambda _e: state.subscribe(url.value or "", list(types.value or [])))
    secret = pn.pane.Markdown(pn.bind(_secret_text, state.param.secret), css_classes=["events-secret"])
    return pn.Column(pn.Row(url, types, subscribe, align="end"), secret, visible=state.may_manage())


def _form_for_scope(state: EventsState, _scope: str) -> pn.viewable.Viewable:
    return _subscribe_form(state)  # built again per scope: shown only to the scope's admins


def events_page(state: EventsState) -> pn.viewable.Viewable:
    refresh = pn.widgets.Button(name="Refresh", css_classes=["events-refresh"])
    refresh.on_click(lambda _e: state.refresh())

    def body(subscriptions: list[dict[str, JsonValue]], _scope: str) -> pn.viewable.Viewable:
        if not state.may_manage():
            return pn.pane.Markdown("Webhook subscriptions are managed by the scope's admins (role admin).")
        if not subscriptions:
            return pn.pane.Markdown("No webhook subscriptions in this scope: make one with "
                                    "`POST /api/events/subscriptions` or `gate events subscribe` (docs/events.md).")
        return pn.Column(*(_subscription(state, report) for report in subscriptions), sizing_mode="stretch_width")

    form = pn.bind(partial(_form_for_scope, state), state.param.scope)
    return pn.Column(pn.Row(refresh), form, note(state.param.message),
                     pn.bind(body, state.param.subscriptions, state.param.scope),
                     sizing_mode="stretch_width", name="Events")
