"""The cadence checkpoint's own thread: every `GATE_CHECKPOINT_EVERY`-th decision of a chain asks
for the chain's signed checkpoint to be appended to the gate's checkpoint log
(docs/verification.md §7.4), and a thread of the process appends it, off every request's path.

What a checkpoint costs (the chain's checks, a signature, the checkpoint's own write transaction,
on SQLite another turn of the file's write lock, and the log's fsync: a few milliseconds) was
first paid by the decide before its answer, then by the serving thread after it, where the next
request on the same keep-alive connection waited for it (issue 23). Here the serving thread only
notes the chain as due and goes on.

- **One pending checkpoint per chain.** A chain already due is not queued again: the checkpoint
  taken is of the chain's head when the thread gets to it, which covers every decision up to
  there, so a later cadence position it already passed has nothing left to witness.
- **Failures** are logged, as before, and never reach a decide; the thread goes on with the next.
- **A process that stops** with a checkpoint still due leaves it to the next one, which covers the
  chain to a later head (the log is a witness of heads, not of every cadence position).
- **Forked workers** start their own thread on first use, with an empty queue (the master of
  `gate serve` builds the app before forking and never decides).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

from gate.errors import GateError

LOG = logging.getLogger(__name__)


class CheckpointCadence:
    """Appends due chains' checkpoints with `publish(chain_id)` (`AuditChainService.publish_checkpoint`)
    from a daemon thread of this process."""

    def __init__(self, publish: Callable[[str], Any]) -> None:
        self._publish = publish
        self._started_in: int | None = None  # the pid whose thread serves the queue
        self._start_lock = threading.Lock()
        self._fresh()

    def _fresh(self) -> None:
        self._changed = threading.Condition()
        self._due: dict[str, int] = {}  # chain id -> the cadence position that made it due, in order
        self._running = False

    def due(self, chain_id: str, position: int) -> None:
        """Note that `chain_id` reached a cadence position; returns at once."""
        self._ensure_thread()
        with self._changed:
            self._due.setdefault(chain_id, position)
            self._changed.notify_all()

    def settle(self, timeout: float = 10.0) -> bool:
        """Wait until no checkpoint is due or being appended; False when `timeout` passed first.
        For a graceful stop and for tests; a decide never waits here."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._due or self._running:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    def _ensure_thread(self) -> None:
        pid = os.getpid()
        if self._started_in == pid:
            return
        with self._start_lock:
            if self._started_in != pid:
                if self._started_in is not None:
                    self._fresh()  # the parent's queue and lock are not ours
                threading.Thread(target=self._serve, name="gate-checkpoint-cadence", daemon=True).start()
                self._started_in = pid

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._due:
                    self._changed.wait()
                chain_id = next(iter(self._due))
                position = self._due.pop(chain_id)
                self._running = True
            try:
                self._append(chain_id, position)
            finally:
                with self._changed:
                    self._running = False
                    self._changed.notify_all()

    def _append(self, chain_id: str, position: int) -> None:
        try:
            self._publish(chain_id)
        except GateError as error:
            LOG.error("checkpoint of chain %s at %s not witnessed: %s %s", chain_id, position,
                      error.code, error.details.get("failed_checks", ""))
        except Exception:
            LOG.exception("checkpoint of chain %s at %s not witnessed", chain_id, position)
