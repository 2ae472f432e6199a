"""Per-scope events beyond the fixed types (docs/events.md, "Opt-in events").

* `decision.created`, opt-in per scope: every decision of the scope is announced with its full
  record, in the decide's own transaction (the group-commit writer's batch), for those who mirror
  the ledger elsewhere. The decide path reads the scope's choice from `MirrorFlags`, refreshed at
  most every `ttl` seconds, so an opt-in or opt-out takes effect within that time.
* Scheduled anomaly reports: a scope may ask for its anomaly report every N seconds (300 to
  604,800). Each run is taken by one serving process (a conditional update of the next run time);
  each anomaly found is announced once (`anomaly.detected`) and, when a later run no longer finds
  it, cleared once (`anomaly.cleared`).

Changing the settings needs `admin` and goes through the one governed-change service
(gate.services.governance): a signed governance event each, and turning `decision_created` on
while the scope requires approvals is a request a second, distinct principal approves. The row
here is written once a change applies; the principal who made it is stored beside it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, TypedDict

from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.events.egress import EventSettings
from gate.governance.table import EVENT_SETTINGS
from gate.ledger import Ledger
from gate.ledger.event_settings import EventSettingsLedger, EventSettingsRow
from gate.principals import Permissions, Principal
from gate.releases.governance import GovernanceEvent, PolicyRequestJSON
from gate.services.governance import GovernanceService
from gate.services.operations import PolicyAlert

log = logging.getLogger("gate.events")

AlertSource = Callable[[str], list[PolicyAlert]]  # scope -> the policy alerts (the anomaly report's among them)


class SettingsView(TypedDict):
    """A scope's event settings in force (the defaults before its first change)."""

    scope: str
    decision_created: bool
    anomaly_every_seconds: int | None
    anomaly_next_at: str | None
    updated_at: str | None
    updated_by: str | None


class SettingsAnswer(TypedDict):
    """What a settings change answers: the settings in force, the pending requests, the change."""

    settings: SettingsView
    pending: list[PolicyRequestJSON]
    governance_seq: int
    requested: bool
    event: GovernanceEvent | None


def parse_settings(body: Any) -> tuple[bool, int | None]:
    """`{decision_created: bool, anomaly_every_seconds: int | null}`, both stated."""
    settings = EventSettings.from_json(body)
    return settings.decision_created, settings.anomaly_every_seconds


def _view(scope: str, row: EventSettingsRow | None) -> SettingsView:
    if row is None:
        return {"scope": scope, "decision_created": False, "anomaly_every_seconds": None, "anomaly_next_at": None,
                "updated_at": None, "updated_by": None}
    return {"scope": scope, "decision_created": bool(row["decision_created"]),
            "anomaly_every_seconds": row["anomaly_every_seconds"], "anomaly_next_at": row["anomaly_next_at"],
            "updated_at": row["updated_at"], "updated_by": row["updated_by"]}


class ScopeEventService:
    def __init__(self, ledger: Ledger, clock: Clock | None = None, alerts: AlertSource | None = None,
                 governance: GovernanceService | None = None) -> None:
        """`governance`: the composition root's one governed-change service (the settings change
        through it, on its clock); None: the settings are read only (SIGNING_UNAVAILABLE on a change)."""
        self.settings_ledger = EventSettingsLedger(ledger)
        self.alerts = alerts
        self.clock = clock or SystemClock()  # the schedule's clock
        self.governance = governance

    def settings(self, scope: str) -> SettingsView:
        return _view(scope, self.settings_ledger.get(scope))

    def _governance(self) -> GovernanceService:
        if self.governance is None:
            raise SigningUnavailable()  # SECURITY: no change of a safeguard setting without its signed event
        return self.governance

    def put_settings(self, scope: str, principal: Principal, permissions: Permissions, body: Any) -> SettingsAnswer:
        """State both settings (admin): one signed governance event; a weakening (turning
        `decision_created` on) while the scope requires approvals is a pending request."""
        event, _state = self._governance().change(scope, EVENT_SETTINGS, principal, permissions,
                                                  lambda _before: EventSettings.from_json(body))
        return self._answer(scope, event)

    def approve_settings(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                         reason: str | None = None) -> SettingsAnswer:
        """A second, distinct principal (`approve`) applies a pending event-settings request."""
        event, _state = self._governance().approve(scope, EVENT_SETTINGS, principal, permissions, request_seq,
                                                   reason)
        return self._answer(scope, event)

    def _answer(self, scope: str, event: GovernanceEvent | None) -> SettingsAnswer:
        """The settings in force (as the decide path reads them), the pending requests, the change."""
        document = self._governance().document(scope, EVENT_SETTINGS)
        return {"settings": self.settings(scope), "pending": document["pending"],
                "governance_seq": document["governance_seq"],
                "requested": event is not None and event["action"] == "policy_request", "event": event}

    def run_due(self, limit: int = 5) -> int:
        """Run the scheduled anomaly reports that are due and this process wins; their count."""
        alerts = self.alerts
        if alerts is None:
            return 0
        now = self.clock.now()
        ran = 0
        for row in self.settings_ledger.due(iso_ms(now), limit):
            next_at = iso_ms(now + timedelta(seconds=row["anomaly_every_seconds"]))
            if self.settings_ledger.claim(row["scope"], row["anomaly_next_at"], next_at):
                self._report(alerts, row["scope"], iso_ms(now))
                ran += 1
        return ran

    def _report(self, alerts: AlertSource, scope: str, now: str) -> None:
        found = {a["alert_id"]: a for a in alerts(scope) if a.get("source") == "anomaly_engine"}
        announced = self.settings_ledger.announced(scope)
        new = [alert for key, alert in sorted(found.items()) if key not in announced]
        cleared = [row for key, row in sorted(announced.items()) if key not in found]
        seen = sorted(set(found) & set(announced))
        self.settings_ledger.record_findings(scope, now, new, seen, cleared)


class MirrorFlags:
    """Which scopes opted in to `decision.created`, read again at most every `ttl` seconds (one
    query for all scopes), so a decide pays a dictionary lookup."""

    def __init__(self, ledger: Ledger, ttl: float = 2.0) -> None:
        self.settings_ledger = EventSettingsLedger(ledger)
        self.ttl = ttl
        self._scopes: frozenset[str] = frozenset()
        self._read_at = float("-inf")
        self._lock = threading.Lock()

    def mirrored(self, scope: str) -> bool:
        if time.monotonic() - self._read_at > self.ttl:
            with self._lock:
                if time.monotonic() - self._read_at > self.ttl:
                    try:
                        self._scopes = frozenset(self.settings_ledger.mirrored_scopes())
                    except GateError:
                        log.warning("event settings could not be read; keeping the last known ones")
                    self._read_at = time.monotonic()
        return scope in self._scopes
