"""Background work, one way (ARCHITECTURE.md, "Background work"): a `PeriodicWorker` runs one step
on a daemon thread every `interval` seconds, and at once when woken.

What it guarantees:
- A step that raises never stops the worker: the next pass runs at its time. The failure is logged
  with its traceback (the first of a run of failures, and every `LOG_EVERY`th after it; the ones
  between are one line each, so a ledger that is away for an hour does not fill the log).
- It counts what happened: passes, failures (in total and in a row), the time of the last success
  and of the last failure with its error (type and message). Work done by others on its behalf (the
  webhook delivery threads) reports into the same counts (`report`).
- Its health is a value: healthy unless its thread was started and is gone (stopped),
  `UNHEALTHY_AFTER` passes in a row failed, or a pass has run longer than `STUCK_AFTER` intervals
  (at least `STUCK_MIN_SECONDS`).
  `/api/decision/status` shows every worker's health and `/metrics` its figures (docs/operating.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypedDict

from gate.clock import iso_ms

LOG_EVERY = 60
UNHEALTHY_AFTER = 3
STUCK_AFTER = 10
STUCK_MIN_SECONDS = 60.0



class WorkerHealth(TypedDict):
    """What `/api/decision/status` (`workers.workers`) and `/metrics` show of one worker."""

    name: str
    healthy: bool
    running: bool
    stuck: bool
    interval_seconds: float
    passes: int
    failures: int
    failures_in_a_row: int
    last_success_at: str | None
    last_failure_at: str | None
    last_error: str | None


class PeriodicWorker:
    """`step` every `interval` seconds on a daemon thread named `gate-{name}`."""

    def __init__(self, name: str, step: Callable[[], Any], interval: float, *,
                 log: logging.Logger | None = None) -> None:
        self.name, self.step, self.interval = name, step, interval
        self.log = log or logging.getLogger("gate.workers")
        self.passes = self.failures = self.failures_in_a_row = 0
        self.last_success: float | None = None  # Unix seconds
        self.last_failure: float | None = None
        self.last_error: str | None = None
        self._running_since: float | None = None  # monotonic, while a pass runs
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the thread (once: a second start keeps the running one)."""
        with self._lock:
            if self._thread is None:
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name=f"gate-{self.name}", daemon=True)
                self._thread.start()

    def wake(self) -> None:
        """Run the next pass now (or right after the running one)."""
        self._wake.set()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._wake.clear()
            self.run_once()
            self._wake.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def run_once(self) -> bool:
        """One pass of the step, counted and logged; True when it succeeded."""
        self._running_since = time.monotonic()
        try:
            self.step()
        except Exception as error:  # noqa: BLE001 - every failure is counted and logged, the next pass runs
            self.report(error)
            return False
        else:
            self.report(None)
            return True
        finally:
            self._running_since = None

    def report(self, error: BaseException | None) -> None:
        """Count a pass (or a piece of work done for this worker): a success, or its failure."""
        with self._lock:
            self.passes += 1
            if error is None:
                self.failures_in_a_row, self.last_success = 0, time.time()
                return
            self.failures += 1
            self.failures_in_a_row += 1
            self.last_failure, self.last_error = time.time(), f"{type(error).__name__}: {error}"[:300]
            in_a_row = self.failures_in_a_row
        if in_a_row == 1 or in_a_row % LOG_EVERY == 0:
            self.log.error("background worker %s failed (%d in a row)", self.name, in_a_row, exc_info=error)
        else:
            self.log.warning("background worker %s failed again (%d in a row): %s", self.name, in_a_row,
                             self.last_error)

    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and not self._stop.is_set()

    def stuck(self) -> bool:
        """A pass has run for longer than it ever should."""
        since = self._running_since
        limit = max(STUCK_MIN_SECONDS, STUCK_AFTER * self.interval)
        return since is not None and time.monotonic() - since > limit

    def health(self) -> WorkerHealth:
        """What `/api/decision/status` shows of this worker."""
        with self._lock:
            in_a_row, failures, passes = self.failures_in_a_row, self.failures, self.passes
            success, failure, error = self.last_success, self.last_failure, self.last_error
        running, stuck, dead = self.running(), self.stuck(), self._thread is not None and not self.running()
        return {"name": self.name, "healthy": not dead and not stuck and in_a_row < UNHEALTHY_AFTER,
                "running": running, "stuck": stuck, "interval_seconds": self.interval, "passes": passes,
                "failures": failures, "failures_in_a_row": in_a_row, "last_success_at": _at(success),
                "last_failure_at": _at(failure), "last_error": error}


def _at(seconds: float | None) -> str | None:
    return iso_ms(datetime.fromtimestamp(seconds, UTC)) if seconds is not None else None
