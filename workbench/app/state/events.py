"""Events: the scope's webhook subscriptions and how their deliveries go (docs/events.md), through
the same EventService as the API. Only a session holding `admin` in the scope reads or changes
them (the store refuses anyone else, whatever the page sends); a replay is queued here and sent
by the gate's dispatchers with the event's original id."""

from __future__ import annotations

from typing import Any

import param

from gate.errors import GateError
from gate.strict_json import JsonValue
from workbench.app.access import Rights
from workbench.app.store import WorkbenchStore


class EventsState(param.Parameterized):
    scope = param.String(default="")
    subscriptions = param.List(default=[], doc="EventService.deliveries of each subscription")
    message = param.String(default="")
    secret = param.String(default="", doc="a new subscription's secret, shown once, until the next action")

    def __init__(self, store: WorkbenchStore, rights: Rights, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.rights = rights

    def may_manage(self) -> bool:
        return self.rights.may(self.scope, "admin")

    def refresh(self) -> None:
        if not self.scope:
            self.subscriptions = []
            return
        try:
            self.subscriptions = self.store.event_deliveries(self.scope, self.rights.permissions_in(self.scope))
        except GateError as exc:
            self.subscriptions, self.message = [], f"refused ({exc.code}): {exc}"

    def subscribe(self, url: str, event_types: list[str]) -> None:
        """Subscribe `url` to `event_types` (every type when empty); the secret is shown once."""
        body: dict[str, JsonValue] = {"url": url}
        if event_types:
            body["event_types"] = list(event_types)
        try:
            view, secret = self.store.event_subscribe(self.scope, self.rights.principal,
                                                      self.rights.permissions_in(self.scope), body)
        except GateError as exc:
            self.secret, self.message = "", f"subscription refused ({exc.code}): {exc}"
            return
        self.secret = secret
        self.message = (f"subscribed {view['subscription_id']}: copy its secret now, it is not shown again "
                        "(verify deliveries with any Standard Webhooks library)")
        self.refresh()

    def replay(self, subscription_id: str, seq: int) -> None:
        try:
            queued = self.store.event_replay(self.scope, self.rights.permissions_in(self.scope), subscription_id, seq)
        except GateError as exc:
            self.message = f"replay refused ({exc.code}): {exc}"
            return
        self.message = f"event {seq} queued again for {subscription_id} ({queued} new)"
        self.refresh()

    def set_status(self, subscription_id: str, status: str) -> None:
        try:
            self.store.event_subscription_status(self.scope, self.rights.permissions_in(self.scope), subscription_id,
                                                 status)
        except GateError as exc:
            self.message = f"refused ({exc.code}): {exc}"
            return
        self.message = f"{subscription_id} is {status}"
        self.refresh()
