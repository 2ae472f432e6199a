"""Storage of workflow route results for idempotent replays (table `workflow_runs`).

A workflow result is a pure function of its request and the published tables and rulebooks,
so it is computed first and stored once: `store_or_existing` inserts the row, and when the
(ticketing system, idempotency key) is already taken, by an earlier request or by a racing one,
it returns the stored row instead, so every caller of one key answers the same bytes.
"""

from __future__ import annotations

from typing import Any, TypedDict, cast

from sqlalchemy import and_, insert, select
from sqlalchemy.exc import IntegrityError

from gate.errors import LedgerUnavailable
from gate.ledger.store import Ledger
from gate.ledger.tables import workflow_runs

__all__ = ["WorkflowRunRow", "WorkflowStore"]


class WorkflowRunRow(TypedDict):
    """A `workflow_runs` row: the key a workflow result is stored under and the answer as sent."""

    ticketing_system: str
    idempotency_key: str
    request_id: str
    workflow: str
    ticket_id: str
    input_hash: str
    created_at: str
    response_json: str


class WorkflowStore:
    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def existing(self, ticketing_system: str, idempotency_key: str) -> WorkflowRunRow | None:
        with self.ledger.read() as connection:
            row = connection.execute(select(workflow_runs).where(and_(
                workflow_runs.c.ticketing_system == ticketing_system,
                workflow_runs.c.idempotency_key == idempotency_key,
            ))).mappings().first()
        return cast(WorkflowRunRow, dict(row)) if row is not None else None  # select(workflow_runs): its columns

    def store_or_existing(self, row: dict[str, Any]) -> WorkflowRunRow | None:
        """None when `row` was stored now; else the row already stored under its key."""
        try:
            with self.ledger.write() as connection:
                connection.execute(insert(workflow_runs), row)
            return None
        except IntegrityError as exc:
            existing = self.existing(row["ticketing_system"], row["idempotency_key"])
            if existing is None:  # not our key: a request_id collision (96 random bits)
                raise LedgerUnavailable("workflow result write failed: integrity error") from exc
            return existing
