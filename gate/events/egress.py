"""A scope's event settings, pure (docs/events.md, "Opt-in events"): whether every decision leaves
the gate with its full record (`decision_created`) and how often the scheduled anomaly report runs.

`decision_created` is a safeguard setting: turning it on sends records out of the gate, so it is a
weakening (gate.governance.table); the report's schedule sends only anomalies and never weakens.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gate.errors import GateError

ANOMALY_EVERY_RANGE = (300, 7 * 86_400)
MEMBERS = ("decision_created", "anomaly_every_seconds")


def _invalid(message: str) -> GateError:
    return GateError("EVENT_SETTINGS_INVALID", message)


@dataclass(frozen=True, slots=True)
class EventSettings:
    """`{decision_created: bool, anomaly_every_seconds: int | null}` (both stated on a PUT)."""

    decision_created: bool = False
    anomaly_every_seconds: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"decision_created": self.decision_created, "anomaly_every_seconds": self.anomaly_every_seconds}

    @classmethod
    def from_json(cls, body: Any) -> EventSettings:
        if not isinstance(body, Mapping) or set(map(str, body)) != set(MEMBERS):
            raise _invalid("the body states exactly decision_created (true or false) and anomaly_every_seconds "
                           "(null, or seconds between runs)")
        if not isinstance(body["decision_created"], bool):
            raise _invalid("decision_created must be true or false")
        every = body["anomaly_every_seconds"]
        low, high = ANOMALY_EVERY_RANGE
        if every is not None and (type(every) is not int or not low <= every <= high):
            raise _invalid(f"anomaly_every_seconds must be null or a whole number from {low} to {high}")
        return cls(body["decision_created"], every)


def weakenings(before: EventSettings, after: EventSettings) -> tuple[str, ...]:
    """`decision_created` turned on: every record of the scope then leaves the gate."""
    return ("decision_created",) if after.decision_created and not before.decision_created else ()
