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


def ordered_token(prefix: str) -> str:
    """An unguessable ledger key that sorts after those made before it: `prefix`, the milliseconds
    of its making (12 hex digits, the Unix epoch's, real time), then 96 random bits (24 hex digits).
    Each new key lands at the end of its table's index instead of on a random page of it, which a
    large ledger no longer holds in memory (docs/notes.md, "Decision ids in time order"); the random
    bits keep it as unguessable as the keys of 24 random hex digits made before, which still read."""
    return f"{prefix}{time.time_ns() // 1_000_000:012x}{secrets.token_hex(12)}"


class RandomIds:
    """Unguessable ids: decisions' in time order (`ordered_token`: the time they show is the
    record's `created_at`), 64 random bits for request handles."""

    def decision_id(self) -> str:
        return ordered_token("dec_")

    def request_id(self) -> str:
        return "req_" + secrets.token_hex(8)
