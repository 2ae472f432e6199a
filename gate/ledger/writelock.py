"""A fair queue in front of SQLite's write lock, across the processes and threads of one host.

SQLite's own lock is what keeps writes correct, and it still does. But a writer that finds it
taken sleeps in its busy handler in growing steps (1, 2, 5, 10 … 100 ms) and retries, while the
writer that held it can take it again at once: under load a worker process waited hundreds of
milliseconds, sometimes seconds, for a lock that was free most of the time. Here every write
transaction first passes two `flock`s on files beside the database, a turnstile and the write
lock (take the turnstile, take the write lock, release the turnstile, write, release the write
lock): the kernel wakes a waiter the moment the lock is released, and a writer that just
finished cannot overtake one already waiting, because that one holds the turnstile. So SQLite's
`BEGIN IMMEDIATE` then finds its lock free, writers alternate, and no one sleeps in steps.

The locks order waiters only; correctness never depends on them. A database whose folder does not
take the lock files (read-only, `:memory:`) writes without them, as before.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager


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
                fcntl.flock(turnstile, fcntl.LOCK_EX)
                fcntl.flock(lock, fcntl.LOCK_EX)
            finally:
                os.close(turnstile)  # closing releases the turnstile
            yield
        finally:
            os.close(lock)  # releases the write lock (after the transaction ended)


def for_url(database: str | None) -> WriteQueue | None:
    """The queue of an SQLite file database; None for `:memory:` and no file."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return WriteQueue(os.path.abspath(database))
