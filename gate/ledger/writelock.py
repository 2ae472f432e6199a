"""A fair queue in front of SQLite's write lock, across the processes and threads of one host.

SQLite's own lock is what keeps writes correct, and it still does. But a writer that finds it
taken sleeps in its busy handler in growing steps (1, 2, 5, 10 … 100 ms) and retries, while the
writer that held it can take it again at once: under load a worker process waited hundreds of
milliseconds, sometimes seconds, for a lock that was free most of the time. Here every write
transaction first passes two `flock`s on files beside the database, a turnstile and the write
lock (take the turnstile, take the write lock, release the turnstile, write, release the write
lock): a writer that just finished cannot overtake one already waiting, because that one holds
the turnstile, and the waiter looks again within `MAX_POLL_S` (a millisecond) instead of
SQLite's 100 ms steps. So SQLite's `BEGIN IMMEDIATE` then finds its lock free and writers
alternate. A wait is bounded like SQLite's own (`WAIT_S`, its busy timeout): a writer that
cannot get the locks in time fails with `LedgerUnavailable` (503, nothing written).

The locks order waiters only; correctness never depends on them. A database whose folder does not
take the lock files (read-only, `:memory:`) writes without them, as before.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gate.errors import LedgerUnavailable

WAIT_S = 30.0  # as long as SQLite's busy timeout (gate.ledger.engine)
MAX_POLL_S = 0.001


class WriteQueue:
    """The turnstile and the write lock of one SQLite database file."""

    def __init__(self, database_path: str) -> None:
        self.turnstile_path = database_path + "-turnstile.lock"
        self.lock_path = database_path + "-write.lock"

    @contextmanager
    def held(self) -> Iterator[None]:
        try:
            turnstile = os.open(self.turnstile_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            yield  # no lock files here: SQLite's own lock alone, as before
            return
        try:
            lock = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError:
            os.close(turnstile)
            yield
            return
        try:
            try:
                deadline = time.monotonic() + WAIT_S
                _take(turnstile, deadline)
                _take(lock, deadline)
            finally:
                os.close(turnstile)  # closing releases the turnstile
            yield
        finally:
            os.close(lock)  # releases the write lock (after the transaction ended)


def _take(fd: int, deadline: float) -> None:
    """flock(LOCK_EX) within the deadline: looked at again after 0.05, 0.1 … 1 ms."""
    pause = 0.00005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise LedgerUnavailable("ledger write failed: the write lock was not free in time") from None
            time.sleep(pause)
            pause = min(pause * 2, MAX_POLL_S)


def for_url(database: str | None) -> WriteQueue | None:
    """The queue of an SQLite file database; None for `:memory:` and no file."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return WriteQueue(os.path.abspath(database))
