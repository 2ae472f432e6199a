"""Ledger reads and writes of per-scope event settings and the anomalies announced (tables
`event_settings` and `anomaly_alerts`, migration 0015; docs/events.md, "Opt-in events").

A scope's scheduled anomaly report is claimed by moving `anomaly_next_at` from the value read to
the next run, in one conditional UPDATE: of several serving processes one wins each run. The
report's findings are then compared with the anomalies announced before, and the new and the
cleared ones are written to the outbox in one transaction with the table's change."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from sqlalchemy import delete, insert, select, update

from gate.ledger.outbox_write import append_event
from gate.ledger.store import Ledger
from gate.ledger.tables import anomaly_alerts, event_settings


class EventSettingsRow(TypedDict):
    """A row of `event_settings`: the scope's opt-in events (`decision_created` 0 or 1) and the
    schedule of its anomaly report, as the last applied change set them."""

    scope: str
    decision_created: int
    anomaly_every_seconds: int | None
    anomaly_next_at: str | None
    updated_at: str
    updated_by: str


class DueReport(TypedDict):
    """A scope whose scheduled anomaly report is due."""

    scope: str
    anomaly_next_at: str
    anomaly_every_seconds: int


class AnomalyAlertRow(TypedDict):
    """An `anomaly_alerts` row: an anomaly announced to the scope (`anomaly.detected`), until it clears."""

    scope: str
    anomaly_key: str  # the alert's `alert_id`
    first_seen: str
    last_seen: str
    summary_json: str  # the alert as announced


class EventSettingsLedger:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def get(self, scope: str) -> EventSettingsRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(event_settings).where(event_settings.c.scope == scope)).mappings().first()
        return cast(EventSettingsRow, dict(row)) if row else None

    def put(self, row: EventSettingsRow) -> None:
        with self.ledger.write() as connection:
            changed = connection.execute(update(event_settings).where(event_settings.c.scope == row["scope"])
                                         .values(**row)).rowcount
            if not changed:
                connection.execute(insert(event_settings).values(**row))

    def mirrored_scopes(self) -> set[str]:
        """The scopes that opted in to `decision.created`."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(event_settings.c.scope).where(event_settings.c.decision_created == 1))
            return {r[0] for r in rows}

    def due(self, now: str, limit: int) -> list[DueReport]:
        query = (select(event_settings.c.scope, event_settings.c.anomaly_next_at,
                        event_settings.c.anomaly_every_seconds)
                 .where(event_settings.c.anomaly_every_seconds.is_not(None), event_settings.c.anomaly_next_at <= now)
                 .order_by(event_settings.c.anomaly_next_at).limit(limit))
        with self.ledger.read() as connection:
            return [cast(DueReport, dict(r)) for r in connection.execute(query).mappings().all()]

    def claim(self, scope: str, was: str, next_at: str) -> bool:
        """Take this run of the scope's report (False: another process took it)."""
        with self.ledger.write() as connection:
            return bool(connection.execute(
                update(event_settings).where(event_settings.c.scope == scope, event_settings.c.anomaly_next_at == was)
                .values(anomaly_next_at=next_at)).rowcount)

    def announced(self, scope: str) -> dict[str, AnomalyAlertRow]:
        with self.ledger.read() as connection:
            rows = connection.execute(select(anomaly_alerts).where(anomaly_alerts.c.scope == scope)).mappings().all()
        return {r["anomaly_key"]: cast(AnomalyAlertRow, dict(r)) for r in rows}  # select(anomaly_alerts): its columns

    def record_findings(self, scope: str, now: str, new: Sequence[Mapping[str, Any]], seen: Sequence[str],
                        cleared: Sequence[AnomalyAlertRow]) -> None:
        """One transaction: announce `new` (anomaly.detected), touch `seen`, clear `cleared`."""
        with self.ledger.write() as connection:
            for alert in new:
                connection.execute(insert(anomaly_alerts).values(
                    scope=scope, anomaly_key=alert["alert_id"], first_seen=now, last_seen=now,
                    summary_json=json.dumps(alert, sort_keys=True, default=str)))
                append_event(connection, scope, "anomaly.detected", alert["alert_id"], now, alert)
            if seen:
                connection.execute(update(anomaly_alerts).where(anomaly_alerts.c.scope == scope,
                                                                anomaly_alerts.c.anomaly_key.in_(list(seen)))
                                   .values(last_seen=now))
            for alert in cleared:
                connection.execute(delete(anomaly_alerts).where(anomaly_alerts.c.scope == scope,
                                                                anomaly_alerts.c.anomaly_key == alert["anomaly_key"]))
                append_event(connection, scope, "anomaly.cleared", alert["anomaly_key"], now,
                             {"alert_id": alert["anomaly_key"], "first_seen": alert["first_seen"],
                              "last_seen": alert["last_seen"], "cleared_at": now,
                              "anomaly": json.loads(alert["summary_json"])})
