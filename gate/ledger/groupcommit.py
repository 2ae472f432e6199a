"""Group commit: one writer thread per process stores many decisions in one transaction.

A decide's write is a short locked section (the chain head, the link, the tree nodes, the row,
the charge) followed by a commit that waits for the disk (SQLite `synchronous=FULL`: one fsync of
the WAL). Run one per request, concurrent decides queue on the database's write lock and each
pays its own fsync; SQLite's busy handler then sleeps in steps of up to 100 ms, which is where
the second-long tails came from. Here the requests of a process hand their writes to one
writer thread, which takes every write waiting (up to `MAX_BATCH`), runs them in one
transaction, commits once and only then answers each caller.

The batch is closed only once its first member holds the chain head: the writes that queued
while the writer waited for that lock join the batch instead of waiting for the next one. On
SQLite the lock is the file's, taken by `BEGIN IMMEDIATE` (another process's writer may hold it);
on PostgreSQL it is the head's row lock, taken by the first member's `SELECT … FOR UPDATE`. With
two worker processes that wait is about half of each writer's time: on SQLite a batch formed
before it held 3.6 decides on average and one closed after it 5.4, fewer lock turns and commits
per decide, and no decide waits a whole extra turn (docs/operating.md, "Sizing").

A batch is first run all at once: no SAVEPOINT per member, and what the members share read
once per transaction (`BATCH_MEMO`): each chain's head, then carried in memory from member to
member (its row stays locked until the commit, so no other writer can move it), and each
confidence bucket's counts (the counts as the batch's transaction first saw them). What every
member updates, its chain's head row and its key's monthly usage counter, is written once at the
end of the batch with its last value, and the members' links, tree nodes and decision rows are
inserted there too, one multi-row INSERT per table (`BATCH_FLUSH`), on both ledgers, with the
rows a decide adds (its hold, its release observation) and its outbox events, whose scope's
sequence is moved once per batch (`gate.ledger.outbox_write`): each
statement under the lock (SQLite's file lock, PostgreSQL's chain-head row lock) hands the GIL to
the request threads and waits to take it back, and on PostgreSQL is a round trip as well; a batch
of five runs ten statements where it ran 29 on SQLite, and a fixed handful of round trips where
PostgreSQL ran one per member. On PostgreSQL those end-of-batch writes, whose answers nobody reads,
go in one round trip (psycopg's pipeline mode, `gate.ledger.prepared.pipelined`). Only when a member meets an expected refusal is
that transaction rolled back and the batch run again member by member, each inside its own
SAVEPOINT reading everything afresh; a constraint one of the deferred rows violates (a key
claimed meanwhile) fails its INSERT without saying whose row it was, and reruns the batch so
too. A refusal is rare on the hot path (a replayed idempotency key is answered before the
writer), so most batches pay neither the savepoints nor the repeated reads: on PostgreSQL that
is four round trips fewer per decide.

Guarantees (each tested in `tests/ledger/test_group_commit.py`):
- A caller is answered only after the transaction holding its rows committed: a success is
  durable, whatever happens to the process afterwards.
- Members run in arrival order, each reading the chain head its predecessors left in the same
  transaction, so chain positions stay gap-free and in commit order.
- An expected refusal of one member (its idempotency key already claimed, the monthly cap
  reached, a snapshot race or version conflict) rolls back that member's SAVEPOINT only: the
  others are unaffected, and nothing of the refused member is stored.
- Any other fault (a driver error, a failed commit, a bug) fails the whole batch closed: the
  transaction is rolled back and every member is answered `LedgerUnavailable` (503), none a
  success; the faulty member gets its own error.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from gate.errors import DuplicateIdempotencyKey, GateError, LedgerUnavailable, Signal, SnapshotRace
from gate.ledger import waits
from gate.ledger.prepared import Prepared, Savepoint, pipelined

MAX_BATCH = 128
# `connection.info` key of what a batch run all at once reads once and shares between its
# members (`gate.ledger.store`: ("head", chain_id) → ChainHead, ("counts", bucket) → rows);
# present only during such a run.
BATCH_MEMO = "gate.batch_memo"
# The memo's key of the writes its members deferred to the end of the batch (`BATCH_FLUSH`:
# name → write(connection), in the order first deferred): a row every member of the batch
# updates (a chain head, a monthly usage counter) is written once, with its last value, before
# the commit instead of once per member. A deferred write that fails fails the batch closed.
BATCH_FLUSH = "flush"
# A caller waits this long for its batch at most; the writer answers every member well before
# (the write lock itself gives up after 30 s), so this only bounds a writer that died.
ANSWER_TIMEOUT_S = 90.0

Store = Callable[[Connection], Any]
T = TypeVar("T")


def _held_lock() -> threading.Lock:
    lock = threading.Lock()
    lock.acquire()
    return lock


@dataclass(slots=True)
class _Member:
    store: Store
    refusal: Callable[[IntegrityError], Exception]
    # Held until the member is answered: the writer releases it, the caller's acquire returns.
    # A plain lock is the cheapest one-shot signal between two threads (an Event is a
    # Condition in Python: a lock, a waiter list and a notify per member).
    done: threading.Lock = field(default_factory=_held_lock)
    result: Any = None
    error: BaseException | None = None


class GroupWriter:
    """The process's writer thread over `transaction()` (a `Ledger.write`)."""

    def __init__(self, transaction: Callable[[], AbstractContextManager[Connection]],
                 max_batch: int = MAX_BATCH) -> None:
        self.transaction = transaction
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Member] = queue.SimpleQueue()
        self._started_in: int | None = None  # the pid whose thread serves the queue
        self._start_lock = threading.Lock()
        self.busy = threading.Lock()  # held while a batch runs (tests hold it to gather a batch)

    def submit(self, store: Callable[[Connection], T], refusal: Callable[[IntegrityError], Exception]) -> T:
        """Run `store(connection)` in the next batch; returns its result once the batch committed,
        or raises its refusal, or `LedgerUnavailable` when the batch failed."""
        self._ensure_thread()
        member = _Member(store, refusal)
        asked = time.perf_counter()
        self._queue.put(member)
        if not member.done.acquire(timeout=ANSWER_TIMEOUT_S):
            raise LedgerUnavailable("ledger write failed: the writer did not answer")
        waits.waited(waits.WRITER, time.perf_counter() - asked)
        if member.error is not None:
            raise member.error
        result: T = member.result
        return result

    def waiting(self) -> int:
        return self._queue.qsize()

    def _ensure_thread(self) -> None:
        pid = os.getpid()
        if self._started_in == pid:
            return
        with self._start_lock:  # first use in this process (a forked worker starts its own)
            if self._started_in != pid:
                if self._started_in is not None:
                    self._queue = queue.SimpleQueue()  # the parent's queue is not ours
                threading.Thread(target=self._serve, name="gate-ledger-writer", daemon=True).start()
                self._started_in = pid

    def _serve(self) -> None:
        while True:
            first = self._queue.get()
            with self.busy:
                self._run([first, *self._drain(self.max_batch - 1)])

    def _drain(self, room: int) -> Iterator[_Member]:
        """Up to `room` queued members, in arrival order, without waiting."""
        for _ in range(room):
            try:
                yield self._queue.get_nowait()
            except queue.Empty:
                return

    def _run(self, batch: list[_Member]) -> None:
        """One transaction for the batch; every member is answered, whatever happens."""
        try:
            try:
                self._all_at_once(batch)
            except _Refused as refused:
                if len(batch) == 1 and refused.answer is not None:  # its transaction was only its own
                    batch[0].error = refused.answer
                else:
                    for member in batch:
                        member.result = None
                    with self.transaction() as connection:
                        for member in batch:
                            _run_member(connection, member)
        except BaseException as exc:  # noqa: BLE001 - every member must be answered, closed
            message = exc.message if isinstance(exc, LedgerUnavailable) else f"ledger write failed: {type(exc).__name__}"
            for member in batch:
                if member.error is None or not _is_fault(member.error):  # its own error object per caller
                    member.result, member.error = None, LedgerUnavailable(message)
                    member.error.__cause__ = exc
        finally:
            for member in batch:
                member.done.release()

    def _all_at_once(self, batch: list[_Member]) -> None:
        """Every member in one transaction without savepoints, shared reads made once (`BATCH_MEMO`).
        Raises `_Refused` (the transaction rolled back) at a member's expected refusal; a fault
        is recorded on its member and raised, as in `_run_member`."""
        with self.transaction() as connection:
            connection.info[BATCH_MEMO] = {}
            try:
                for position, member in enumerate(batch):
                    try:
                        member.result = member.store(connection)
                    except BaseException as exc:
                        raise _Refused(_refusal_or_raise(member, exc)) from exc
                    if position == 0:
                        # The first member holds the chain head now (and on SQLite the file's
                        # write lock): what queued meanwhile joins this batch, after the members
                        # already in it (arrival order), rather than wait for the next turn of
                        # the lock. `batch` is the caller's list: a rerun or a failure answers
                        # these members too; the loop goes on over them.
                        batch.extend(self._drain(self.max_batch - len(batch)))
                deferred = connection.info[BATCH_MEMO].get(BATCH_FLUSH)
                if deferred:  # nothing deferred: no pipeline to open
                    try:
                        with pipelined(connection):  # PostgreSQL: every deferred write in one round trip
                            for write in deferred.values():
                                write(connection)
                    except IntegrityError as exc:  # a deferred row's constraint: whose, the rerun says
                        raise _Refused(None) from exc
            finally:
                connection.info.pop(BATCH_MEMO, None)


def defer(connection: Connection, name: Any, write: Callable[[Connection], Any]) -> None:
    """Run `write` once at the end of this batch, in place of the one an earlier member deferred
    under the same `name` (the row's last value is the one written; `BATCH_FLUSH`). Only inside
    a batch run all at once (`BATCH_MEMO` in `connection.info`)."""
    flush = connection.info[BATCH_MEMO].setdefault(BATCH_FLUSH, {})
    flush.pop(name, None)  # the latest value, in the order the rows were first deferred
    flush[name] = write


def defer_row(connection: Connection, name: Any, prepared: Prepared, row: Mapping[str, Any]) -> None:
    """Insert `row` with the batch's other rows of `prepared` (an INSERT) in one multi-row
    INSERT at the end of this batch (`BATCH_FLUSH`), in the order the members gave them. A
    constraint one of them violates fails that INSERT, and the batch is run again member by
    member, each inserting its own rows at once in its SAVEPOINT."""
    memo = connection.info[BATCH_MEMO]
    pending: list[Mapping[str, Any]] | None = memo.get(("rows", name))
    if pending is None:
        pending = memo["rows", name] = []
        rows: list[Mapping[str, Any]] = pending
        defer(connection, ("rows", name), lambda connection: prepared.insert_rows(connection, rows))
    pending.append(row)


class _Refused(Signal):
    """A member of a batch run all at once met an expected refusal (`answer`); None when a
    deferred write (`BATCH_FLUSH`) met one, so that which member it was is not known."""

    def __init__(self, answer: BaseException | None) -> None:
        super().__init__("refused")
        self.answer = answer


def _refusal_or_raise(member: _Member, exc: BaseException) -> BaseException:
    """The answer when `exc` is an expected refusal of this member; any other exception is a
    fault: recorded on the member and raised again, to end the batch."""
    if isinstance(exc, IntegrityError):
        return member.refusal(exc)
    if isinstance(exc, (GateError, DuplicateIdempotencyKey, SnapshotRace)) and not isinstance(exc, LedgerUnavailable):
        return exc
    member.error = _Fault(exc)
    raise exc


def _run_member(connection: Connection, member: _Member) -> None:
    """One member in its own SAVEPOINT: an expected refusal rolls back this member only; any
    other exception is recorded on it and ends the batch."""
    try:
        with Savepoint(connection):
            member.result = member.store(connection)
    except BaseException as exc:  # noqa: BLE001 - a fault is raised again by _refusal_or_raise
        # an expected refusal: this member's rows are rolled back, the batch goes on
        member.error = _refusal_or_raise(member, exc)


class _Fault(LedgerUnavailable):
    """The member whose fault failed its batch (answered 503 like the others)."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"ledger write failed: {type(cause).__name__}")
        self.__cause__ = cause


def _is_fault(error: BaseException) -> bool:
    return isinstance(error, _Fault)
