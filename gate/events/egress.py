"""A scope's event settings, pure (docs/events.md, "Opt-in events"): whether every decision leaves
the gate with its full record (`decision_created`) and how often the scheduled anomaly report runs.

`decision_created` is a safeguard setting: turning it on sends records out of the gate, so it is a
weakening (gate.governance.table); the report's schedule sends only anomalies and never weakens.
A scope's webhook subscriptions are another (`event_subscriptions`, issue 64): a URL that receives
an event type it did not receive before is a weakening.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate import bodies
from gate.errors import GateError

SCHEMA = "event-settings"  # gate/bodies/event-settings.schema.json
_EVERY = bodies.schema(SCHEMA)["properties"]["anomaly_every_seconds"]
ANOMALY_EVERY_RANGE: tuple[int, int] = (_EVERY["minimum"], _EVERY["maximum"])
MEMBERS: tuple[str, ...] = tuple(bodies.schema(SCHEMA)["required"])


class EventSettingsJSON(TypedDict):
    """`EventSettings` as JSON (gate/bodies/event-settings.schema.json)."""

    decision_created: bool
    anomaly_every_seconds: int | None


@dataclass(frozen=True, slots=True)
class EventSettings:
    """`{decision_created: bool, anomaly_every_seconds: int | null}` (both stated on a PUT)."""

    decision_created: bool = False
    anomaly_every_seconds: int | None = None

    def to_json(self) -> EventSettingsJSON:
        return {"decision_created": self.decision_created, "anomaly_every_seconds": self.anomaly_every_seconds}

    @classmethod
    def from_json(cls, body: Any) -> EventSettings:
        """Both members stated (gate/bodies/event-settings.schema.json) or EVENT_SETTINGS_INVALID."""
        bodies.check(SCHEMA, body, "EVENT_SETTINGS_INVALID")
        every = body["anomaly_every_seconds"]
        return cls(body["decision_created"], every)


def weakenings(before: EventSettings, after: EventSettings) -> tuple[str, ...]:
    """`decision_created` turned on: every record of the scope then leaves the gate."""
    return ("decision_created",) if after.decision_created and not before.decision_created else ()


EVENT_SUBSCRIPTIONS = "event_subscriptions"
_WILDCARD = "*"


class SubscriptionJSON(TypedDict):
    """One webhook subscription in `EventSubscriptionsJSON`: where it posts and what it wants."""

    url: str
    event_types: list[str]


class EventSubscriptionsJSON(TypedDict):
    """`EventSubscriptions` as JSON: the subscriptions by id, in id order."""

    subscriptions: dict[str, SubscriptionJSON]


@dataclass(frozen=True, slots=True)
class EventSubscriptions:
    """The value of the `event_subscriptions` safeguard (issue 64): each webhook subscription of a
    scope in force (active or disabled; not one waiting for approval), by id, as (its URL, the
    event types it wants: names, or `*`). Its rows in the ledger are the value in force."""

    subscriptions: Mapping[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    def to_json(self) -> EventSubscriptionsJSON:
        return {"subscriptions": {sid: {"url": url, "event_types": list(types)}
                                  for sid, (url, types) in sorted(self.subscriptions.items())}}

    @classmethod
    def from_json(cls, body: Any) -> EventSubscriptions:
        """The value a change or a stored event states; GOVERNANCE_REQUEST_INVALID when malformed."""
        subs = body.get("subscriptions") if isinstance(body, Mapping) and set(body) == {"subscriptions"} else None
        if not isinstance(subs, Mapping):
            raise GateError("GOVERNANCE_REQUEST_INVALID",
                            "event_subscriptions is {\"subscriptions\": {id: {url, event_types}}}")
        out: dict[str, tuple[str, tuple[str, ...]]] = {}
        for sid, sub in subs.items():
            types = sub.get("event_types") if isinstance(sub, Mapping) and set(sub) == {"url", "event_types"} else None
            if not isinstance(types, list) or not isinstance(sub["url"], str) \
                    or not all(isinstance(t, str) for t in types):
                raise GateError("GOVERNANCE_REQUEST_INVALID", "each subscription states its url and event_types")
            out[str(sid)] = (sub["url"], tuple(sorted(set(types))))
        return cls(out)

    def with_subscription(self, subscription_id: str, url: str, event_types: Sequence[str]) -> EventSubscriptions:
        return EventSubscriptions({**self.subscriptions, subscription_id: (url, tuple(sorted(set(event_types))))})

    def reached(self) -> dict[str, frozenset[str]]:
        """Every URL these subscriptions post to, with the event types it receives."""
        out: dict[str, frozenset[str]] = {}
        for url, types in self.subscriptions.values():
            out[url] = out.get(url, frozenset()) | frozenset(types)
        return out


def subscription_weakenings(before: EventSubscriptions, after: EventSubscriptions) -> tuple[str, ...]:
    """What a change of a scope's webhook subscriptions lets out that was not let out before: each
    URL that receives an event type it did not (a new endpoint, a changed URL, wider event types;
    `*` is every type), as `<url>: <types>`. Every event carries the scope's records (a decision's,
    a hold's facts, a release's), so any type counts."""
    was = before.reached()
    out = []
    for url, types in sorted(after.reached().items()):
        kept = was.get(url, frozenset())
        if _WILDCARD in kept:
            continue
        gained = types - kept
        if gained:
            out.append(f"{url}: {', '.join(sorted(gained))}")
    return tuple(out)
