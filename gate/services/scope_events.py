"""Per-scope events beyond the fixed types (docs/events.md, "Opt-in events").

* `decision.created`, opt-in per scope: every decision of the scope is announced with its full
  record, in the decide's own transaction (the group-commit writer's batch), for those who mirror
  the ledger elsewhere. The decide path reads the scope's choice from `MirrorFlags`, refreshed at
  most every `ttl` seconds, so an opt-in or opt-out takes effect within that time.
* Scheduled anomaly reports: a scope may ask for its anomaly report every N seconds (300 to
  604,800). Each run is taken by one serving process (a conditional update of the next run time);
  each anomaly found is announced once (`anomaly.detected`) and, when a later run no longer finds
  it, cleared once (`anomaly.cleared`).

Changing the settings needs `admin`; the principal who changed them is stored beside them.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any

from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import GateError
from gate.ledger import Ledger
from gate.ledger.event_settings import EventSettingsLedger
from gate.ledger.outbox_write import append_event
from gate.principals import Principal

ANOMALY_EVERY_RANGE = (300, 7 * 86_400)
_MEMBERS = frozenset({"decision_created", "anomaly_every_seconds"})
log = logging.getLogger("gate.events")

AlertSource = Callable[[str], list[dict[str, Any]]]  # scope -> the anomaly report's alerts


def _invalid(message: str) -> GateError:
    return GateError("EVENT_SETTINGS_INVALID", message)


def parse_settings(body: Any) -> tuple[bool, int | None]:
    """`{decision_created: bool, anomaly_every_seconds: int | null}`, both stated."""
    if not isinstance(body, Mapping) or set(map(str, body)) != _MEMBERS:
        raise _invalid("the body states exactly decision_created (true or false) and anomaly_every_seconds "
                       "(null, or seconds between runs)")
    if not isinstance(body["decision_created"], bool):
        raise _invalid("decision_created must be true or false")
    every = body["anomaly_every_seconds"]
    low, high = ANOMALY_EVERY_RANGE
    if every is not None and (type(every) is not int or not low <= every <= high):
        raise _invalid(f"anomaly_every_seconds must be null or a whole number from {low} to {high}")
    return body["decision_created"], every


def _view(scope: str, row: Mapping[str, Any] | None) -> dict[str, Any]:
    if row is None:
        return {"scope": scope, "decision_created": False, "anomaly_every_seconds": None, "anomaly_next_at": None,
                "updated_at": None, "updated_by": None}
    return {"scope": scope, "decision_created": bool(row["decision_created"]),
            "anomaly_every_seconds": row["anomaly_every_seconds"], "anomaly_next_at": row["anomaly_next_at"],
            "updated_at": row["updated_at"], "updated_by": row["updated_by"]}


class ScopeEventService:
    def __init__(self, ledger: Ledger, clock: Clock | None = None, alerts: AlertSource | None = None) -> None:
        self.settings_ledger = EventSettingsLedger(ledger)
        self.clock = clock or SystemClock()
        self.alerts = alerts

    def settings(self, scope: str) -> dict[str, Any]:
        return _view(scope, self.settings_ledger.get(scope))

    def put_settings(self, scope: str, principal: Principal, permissions: frozenset[str], body: Any) -> dict[str, Any]:
        if "admin" not in permissions:
            raise GateError("RELEASE_PERMISSION_DENIED", "this principal lacks the 'admin' permission",
                            permission="admin")
        mirror, every = parse_settings(body)
        now = self.clock.now()
        self.settings_ledger.put({
            "scope": scope, "decision_created": int(mirror), "anomaly_every_seconds": every,
            "anomaly_next_at": iso_ms(now) if every is not None else None,  # the first run comes at once
            "updated_at": iso_ms(now), "updated_by": principal.actor})
        return self.settings(scope)

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


def announce_decision(connection: Any, scope: str, record: Mapping[str, Any]) -> None:
    """`decision.created` with the record as stored (run by the ledger after the record's chain
    link is sealed into it, in the decision's transaction)."""
    append_event(connection, scope, "decision.created", record["decision_id"], record["created_at"], {
        "decision_id": record["decision_id"], "record_hash": record["record_hash"],
        "receipt_hash": record["receipt_hash"], "audit_chain": record.get("audit_chain"), "record": record})
