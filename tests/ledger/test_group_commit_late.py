"""Group commit closes a batch only once its transaction holds the write lock.

`GroupWriter` over a stand-in transaction that blocks as a taken write lock does: the writes
that queue while the writer waits for it join that batch, in arrival order; a refusal reruns
them with the others, and a fault answers them 503 like the others. Over a real ledger,
`tests/ledger/test_group_commit.py` covers the batches themselves on both backends.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import pytest
from sqlalchemy.exc import IntegrityError

from gate.errors import DuplicateIdempotencyKey, LedgerUnavailable
from gate.ledger.groupcommit import GroupWriter


class Ran(list):
    """The stand-in connection: what ran in its transaction, and the `info` a batch keeps its memo in."""

    def __init__(self) -> None:
        super().__init__()
        self.info: dict = {}


class Lock:
    """A write lock the test holds: `transaction()` waits for it, as `Ledger.write` waits in the
    SQLite write queue, then counts the transaction and what ran in it."""

    def __init__(self) -> None:
        self.free = threading.Event()
        self.waiting = threading.Event()  # the writer is inside transaction(), waiting for the lock
        self.transactions: list[list[str]] = []
        self.fail_commit = False

    @contextmanager
    def transaction(self):
        self.waiting.set()
        assert self.free.wait(30)
        ran = Ran()
        self.transactions.append(ran)
        yield ran
        if self.fail_commit:
            raise RuntimeError("commit failed")


def _refusal(exc: IntegrityError) -> Exception:
    return DuplicateIdempotencyKey()


def _submit_all(writer: GroupWriter, names: list[str], store=None,
                queued=True) -> tuple[dict[str, object], list[threading.Thread]]:
    """Submit one write per name from its own thread, in order, each queued before the next
    starts (unless `queued` is False: the writer takes it from the queue at once)."""
    answers: dict[str, object] = {}

    def call(name: str) -> None:
        def write(connection):
            connection.append(name)
            return len(connection)

        try:
            answers[name] = writer.submit(store(name) if store else write, _refusal)
        except Exception as exc:  # noqa: BLE001 - the answer under test
            answers[name] = exc

    threads = []
    for name in names:
        before = writer.waiting()
        thread = threading.Thread(target=call, args=(name,))
        thread.start()
        threads.append(thread)
        deadline = time.monotonic() + 10
        while queued and writer.waiting() == before and time.monotonic() < deadline:
            time.sleep(0.001)
    return answers, threads


def _first_then_late(lock: Lock, writer: GroupWriter, late: list[str], store=None):
    """'first' is taken by the writer, which then waits for the lock; `late` queue meanwhile."""
    answers, threads = _submit_all(writer, ["first"], store, queued=False)
    assert lock.waiting.wait(10)  # the writer has closed nothing yet: it waits for the lock
    more, more_threads = _submit_all(writer, late, store)
    assert writer.waiting() == len(late)
    lock.free.set()
    for thread in threads + more_threads:
        thread.join(30)
    return {**answers, **more}


def test_writes_queued_while_the_writer_waits_for_the_lock_join_its_batch():
    lock = Lock()
    writer = GroupWriter(lock.transaction)
    answers = _first_then_late(lock, writer, ["a", "b", "c"])
    assert lock.transactions == [["first", "a", "b", "c"]]  # one transaction, arrival order
    assert answers == {"first": 1, "a": 2, "b": 3, "c": 4}  # each answered after that one commit


def test_a_batch_never_grows_past_its_bound():
    lock = Lock()
    writer = GroupWriter(lock.transaction, max_batch=3)
    answers = _first_then_late(lock, writer, ["a", "b", "c", "d"])
    assert lock.transactions == [["first", "a", "b"], ["c", "d"]]
    assert set(answers) == {"first", "a", "b", "c", "d"}


def test_a_refusal_reruns_the_late_members_with_the_others(monkeypatch):
    @contextmanager
    def savepoint(connection):  # the stand-in transaction has no SQL: a member's rollback is not under test here
        yield

    monkeypatch.setattr("gate.ledger.groupcommit.Savepoint", savepoint)
    lock = Lock()
    writer = GroupWriter(lock.transaction)

    def store(name):
        def write(connection):
            if name == "b" and len(lock.transactions) == 1:
                raise DuplicateIdempotencyKey()  # refused in the first, all-at-once run
            connection.append(name)
            return name

        return write

    answers = _first_then_late(lock, writer, ["a", "b", "c"], store)
    # the first run stopped at "b" and rolled back; the rerun, member by member, holds every
    # member, the late ones included, in arrival order
    assert lock.transactions == [["first", "a"], ["first", "a", "b", "c"]]
    assert answers == {"first": "first", "a": "a", "b": "b", "c": "c"}


@pytest.mark.parametrize("where", ["member", "commit"])
def test_a_fault_answers_the_late_members_closed_too(where):
    lock = Lock()
    writer = GroupWriter(lock.transaction)
    lock.fail_commit = where == "commit"

    def store(name):
        def write(connection):
            if where == "member" and name == "c":
                raise RuntimeError("driver fault")
            connection.append(name)
            return name

        return write

    answers = _first_then_late(lock, writer, ["a", "b", "c"], store)
    assert set(answers) == {"first", "a", "b", "c"}
    assert all(isinstance(answer, LedgerUnavailable) for answer in answers.values())


def test_writes_queued_while_the_first_member_waits_for_the_chain_head_join_its_batch():
    """PostgreSQL: the transaction begins at once and the first member's `SELECT … FOR UPDATE`
    waits for the head's row lock; what queues meanwhile joins the batch."""
    head = Lock()
    head.free.set()  # the transaction itself does not wait
    row_lock = threading.Event()
    waiting_for_row = threading.Event()

    def store(name):
        def write(connection):
            if name == "first":
                waiting_for_row.set()
                assert row_lock.wait(30)
            connection.append(name)
            return name

        return write

    writer = GroupWriter(head.transaction)
    answers, threads = _submit_all(writer, ["first"], store, queued=False)
    assert waiting_for_row.wait(10)
    more, more_threads = _submit_all(writer, ["a", "b"], store)
    row_lock.set()
    for thread in threads + more_threads:
        thread.join(30)
    assert head.transactions == [["first", "a", "b"]]
    assert {**answers, **more} == {"first": "first", "a": "a", "b": "b"}
