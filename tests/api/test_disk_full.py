"""SQLite "database or disk is full" at the driver, where a real full filesystem cannot be mounted.

`tests/server/test_faults.py` fills a real tmpfs under a served SQLite ledger when the machine
allows mounting; this test makes the driver fail the same way (`sqlite3.OperationalError:
database or disk is full`) from the first INSERT of a decide or a receipt on, everywhere.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy import event, func, select

from gate.ledger.tables import chain_links, decisions, lifecycle_receipts


class FullDisk:
    """Every INSERT fails like SQLite on a full disk while `full` is set."""

    def __init__(self, engine) -> None:
        self.full = False
        event.listen(engine, "before_cursor_execute", self._check)

    def _check(self, connection, cursor, statement, parameters, context, executemany):
        if self.full and statement.lstrip().upper().startswith("INSERT"):
            raise sqlite3.OperationalError("database or disk is full")


def _counts(engine) -> tuple[int, int, int]:
    with engine.connect() as connection:
        return tuple(connection.execute(select(func.count()).select_from(t)).scalar()
                     for t in (decisions, chain_links, lifecycle_receipts))


def test_a_full_disk_fails_closed_writes_nothing_and_recovers(app, client, api_key, sample_request):
    engine = app.extensions["gate"].ledger.engine
    disk = FullDisk(engine)
    headers = {"x-api-key": api_key}
    first = client.post("/api/decide", json=sample_request, headers=headers).json
    before = _counts(engine)

    disk.full = True
    refused = client.post("/api/decide", json=sample_request, headers=headers)
    assert refused.status_code == 503 and refused.json["error"] == "LEDGER_UNAVAILABLE"
    assert refused.json["c"] == "unclear" and "verdict" not in refused.json
    receipt = client.post(f"/api/decision/{first['decision_id']}/outcome", json={"outcome_status": "succeeded"},
                          headers={**headers, "x-idempotency-key": "disk-full-1"})
    assert receipt.status_code == 503 and receipt.json["error"] == "SVC_OUTCOME_UNAVAILABLE"
    assert _counts(engine) == before  # nothing half-written

    disk.full = False  # space is back: the same app carries on, no restart
    again = client.post("/api/decide", json=sample_request, headers=headers)
    assert again.status_code == 200
    assert again.json["audit_chain"]["chain_position"] == first["audit_chain"]["chain_position"] + 1
    assert client.get(f"/api/decision/chains/{first['audit_chain']['chain_id']}",
                      headers=headers).json["verification"]["valid"] is True

