"""Time and identifiers, passed into the core so tests and replays are deterministic."""

from __future__ import annotations

import math
import secrets
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


def iso_ms(moment: datetime) -> str:
    """ISO 8601 UTC with milliseconds and `Z`, as JavaScript's toISOString writes it."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def seconds_to_next_month(at: str) -> int:
    """Whole seconds (at least 1) from the ISO time `at` to the first instant of the next UTC
    month: when a monthly cap resets."""
    moment = datetime.fromisoformat(at).astimezone(UTC)
    year, month = (moment.year + 1, 1) if moment.month == 12 else (moment.year, moment.month + 1)
    return max(1, math.ceil((datetime(year, month, 1, tzinfo=UTC) - moment).total_seconds()))


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class FixedClock:
    """A clock that returns `start` and then moves forward by `step_ms` on every call."""

    def __init__(self, start: datetime, step_ms: int = 0) -> None:
        self._current = start
        self._step_ms = step_ms

    def now(self) -> datetime:
        current = self._current
        self._current = current + timedelta(milliseconds=self._step_ms)
        return current


class IdSource(Protocol):
    def decision_id(self) -> str: ...

    def request_id(self) -> str: ...


class RandomIds:
    """Unguessable ids: 96 random bits for decisions, 64 bits for request handles.

    A decision's id begins with the milliseconds of its making (12 hex digits, the Unix epoch's,
    real time: `dec_` + 12 + 24 hex digits), so new ids come in key order and each lands at the end
    of the ledger's index on `decision_id` instead of on a random page of it, which a large ledger
    no longer holds in memory (docs/notes.md, "Decision ids in time order"). The 96 random bits
    after it keep an id as unguessable as before; the time it shows is the record's `created_at`."""

    def decision_id(self) -> str:
        return f"dec_{time.time_ns() // 1_000_000:012x}{secrets.token_hex(12)}"

    def request_id(self) -> str:
        return "req_" + secrets.token_hex(8)
