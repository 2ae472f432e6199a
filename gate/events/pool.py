"""Concurrent deliveries with a bound and fairness: a fixed set of threads runs jobs, each job
one subscription's turn, grouped by scope.

- A key (a subscription) is queued or running at most once at a time, so its deliveries stay in
  order; offering it again while it is queued or running does nothing.
- At most `workers` jobs run at once, and at most `per_group` of one group (scope): a tenant whose
  receivers all hang holds `per_group` threads, never all of them.
- Groups take turns: the next free thread takes the oldest job of the next group in rotation
  that may run, so a scope with a long queue does not starve one with a single job.

A job that returns True wants another turn at once (it had more to deliver than one turn's
budget); it is queued again at the back of its group.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

log = logging.getLogger("gate.events")

T = TypeVar("T")


class FairPool(Generic[T]):
    def __init__(self, run: Callable[[T], bool], workers: int, per_group: int | None = None,
                 name: str = "gate-deliveries") -> None:
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self._run = run
        self.workers = workers
        self.per_group = max(1, per_group if per_group is not None else workers // 2)
        self._name = name
        self._queues: dict[Hashable, deque[tuple[Hashable, T]]] = {}
        self._turns: deque[Hashable] = deque()  # groups in the order they get their next turn
        self._running: dict[Hashable, int] = {}
        self._held: set[Hashable] = set()  # keys queued or running
        self._cond = threading.Condition()
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def offer(self, group: Hashable, key: Hashable, item: T) -> bool:
        """Queue `item` unless its key is already queued or running; True when queued."""
        with self._cond:
            if self._stopping or key in self._held:
                return False
            self._held.add(key)
            self._enqueue(group, key, item)
            self._start_threads()
            self._cond.notify()
        return True

    def _enqueue(self, group: Hashable, key: Hashable, item: T) -> None:
        if group not in self._queues:
            self._queues[group] = deque()
            self._turns.append(group)
        self._queues[group].append((key, item))

    def _start_threads(self) -> None:
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _next(self) -> tuple[Hashable, Hashable, T] | None:
        """The oldest job of the first group in turn that has one and is under its bound."""
        for _ in range(len(self._turns)):
            group = self._turns[0]
            self._turns.rotate(-1)
            queue = self._queues[group]
            if queue and self._running.get(group, 0) < self.per_group:
                key, item = queue.popleft()
                return group, key, item
        return None

    def _work(self) -> None:
        while True:
            with self._cond:
                job = self._next()
                while job is None and not self._stopping:
                    self._cond.wait()
                    job = self._next()
                if job is None:
                    return
                group, key, item = job
                self._running[group] = self._running.get(group, 0) + 1
            again = self._run_one(item)
            with self._cond:
                self._running[group] -= 1
                if again and not self._stopping:
                    self._enqueue(group, key, item)
                else:
                    self._held.discard(key)
                self._drop_idle(group)
                self._cond.notify_all()

    def _run_one(self, item: T) -> bool:
        try:
            return self._run(item)
        except Exception:  # one subscription's fault is logged with its traceback; the others go on
            log.exception("a webhook delivery turn failed")
            return False

    def _drop_idle(self, group: Hashable) -> None:
        if not self._queues[group] and not self._running[group]:
            del self._queues[group], self._running[group]
            self._turns.remove(group)

    def busy(self) -> int:
        """Jobs queued or running now."""
        with self._cond:
            return len(self._held)

    def stop(self, timeout: float = 5.0) -> None:
        """Take no more jobs; wait up to `timeout` for the running ones (a hanging receiver's
        post ends at its time limit)."""
        with self._cond:
            self._stopping = True
            for queue in self._queues.values():
                for key, _ in queue:
                    self._held.discard(key)
                queue.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
