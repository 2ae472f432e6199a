"""A scope's event settings, pure (docs/events.md, "Opt-in events"): whether every decision leaves
the gate with its full record (`decision_created`) and how often the scheduled anomaly report runs.

`decision_created` is a safeguard setting: turning it on sends records out of the gate, so it is a
weakening (gate.governance.table); the report's schedule sends only anomalies and never weakens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from gate import bodies

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
