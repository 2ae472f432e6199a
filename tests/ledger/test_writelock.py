"""The fair queue before SQLite's write lock (gate/ledger/writelock.py): a writer that just
finished cannot overtake one already waiting, a wait is bounded (503, never a hang), and a
folder that takes no lock files writes without them."""

from __future__ import annotations

import threading
import time

import pytest

from gate.errors import LedgerUnavailable
from gate.ledger import writelock
from gate.ledger.writelock import WriteQueue, for_url


def test_a_waiting_writer_goes_before_the_one_that_just_finished(tmp_path):
    path = str(tmp_path / "gate.db")
    order: list[str] = []
    first_in = threading.Event()
    release_first = threading.Event()

    def first() -> None:
        with WriteQueue(path).held():
            order.append("A1")
            first_in.set()
            release_first.wait(10)
        with WriteQueue(path).held():  # at once again: must queue behind B
            order.append("A2")

    def second() -> None:
        first_in.wait(10)
        with WriteQueue(path).held():
            order.append("B")

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    first_in.wait(10)
    time.sleep(0.1)  # B now holds the turnstile and waits for the write lock
    release_first.set()
    for thread in threads:
        thread.join(10)
    assert order == ["A1", "B", "A2"]


def test_a_wait_is_bounded(tmp_path, monkeypatch):
    monkeypatch.setattr(writelock, "WAIT_S", 0.2)
    path = str(tmp_path / "gate.db")
    with WriteQueue(path).held():
        started = time.monotonic()
        with pytest.raises(LedgerUnavailable), WriteQueue(path).held():
            pass  # pragma: no cover - never entered
        assert 0.2 <= time.monotonic() - started < 2


def test_no_lock_files_no_queue(tmp_path):
    assert for_url(None) is None and for_url(":memory:") is None
    missing = WriteQueue(str(tmp_path / "no-such-folder" / "gate.db"))
    with missing.held():  # the folder takes no lock files: SQLite's own lock alone
        pass
