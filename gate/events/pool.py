"""Concurrent deliveries with a bound and fairness: a fixed set of threads runs jobs, each job
one subscription's turn, grouped by scope.

- A key (a subscription) is queued or running at most once at a time, so its deliveries stay in
  order; offering it again while it is queued or running does nothing.
- At most `workers` jobs run at once, and at most `per_group` of one group (scope): a tenant whose
  receivers all hang holds `per_group` threads, never all of them.
- Groups take turns: the next free thread takes the oldest job of the next group in rotation
  that may run, so a scope with a long queue does not starve one with a single job.
- A job may name its place (a subscription's endpoint: scheme, host, port). At most `per_place`
  jobs run at one place at once (the host-wide bound, shared by every group), and one group at
  most its fair share of it: `per_place` divided by the groups with jobs at that place, counting
  at least two, so a group alone at a host never takes the share of a second one that comes
  (issue 64: tenants of one shared receiver host stay isolated).

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
                 name: str = "gate-deliveries", per_place: int | None = None) -> None:
        if workers < 1:
            raise ValueError("a pool needs at least one worker")
        self._run = run
        self.workers = workers
        self.per_group = max(1, per_group if per_group is not None else workers // 2)
        self.per_place = max(1, per_place if per_place is not None else workers)
        self._name = name
        self._queues: dict[Hashable, deque[tuple[Hashable, T, Hashable]]] = {}
        self._turns: deque[Hashable] = deque()  # groups in the order they get their next turn
        self._running: dict[Hashable, int] = {}
        self._at_place: dict[Hashable, int] = {}  # jobs running at a place
        self._group_at_place: dict[tuple[Hashable, Hashable], int] = {}  # jobs queued or running, by (group, place)
        self._running_at: dict[tuple[Hashable, Hashable], int] = {}  # jobs running, by (group, place)
        self._held: set[Hashable] = set()  # keys queued or running
        self._cond = threading.Condition()
        self._stopping = False
        self._threads: list[threading.Thread] = []

    def offer(self, group: Hashable, key: Hashable, item: T, place: Hashable = None) -> bool:
        """Queue `item` (at `place`, None: no place's bound) unless its key is already queued or
        running; True when queued."""
        with self._cond:
            if self._stopping or key in self._held:
                return False
            self._held.add(key)
            self._group_at_place[(group, place)] = self._group_at_place.get((group, place), 0) + 1
            self._enqueue(group, key, item, place)
            self._start_threads()
            self._cond.notify()
        return True

    def _enqueue(self, group: Hashable, key: Hashable, item: T, place: Hashable) -> None:
        if group not in self._queues:
            self._queues[group] = deque()
            self._turns.append(group)
        self._queues[group].append((key, item, place))

    def _place_allows(self, group: Hashable, place: Hashable) -> bool:
        """Whether one more job of `group` may run at `place`: under the host-wide bound and under
        the group's fair share of it."""
        if place is None:
            return True
        if self._at_place.get(place, 0) >= self.per_place:
            return False
        groups = sum(1 for (g, p), n in self._group_at_place.items() if p == place and n)
        share = max(1, self.per_place // max(2, groups))
        return self._running_at.get((group, place), 0) < share

    def _start_threads(self) -> None:
        while len(self._threads) < self.workers:
            thread = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _next(self) -> tuple[Hashable, Hashable, T, Hashable] | None:
        """The oldest job of the first group in turn that has one under its bounds (its own and
        its place's)."""
        for _ in range(len(self._turns)):
            group = self._turns[0]
            self._turns.rotate(-1)
            queue = self._queues[group]
            if not queue or self._running.get(group, 0) >= self.per_group:
                continue
            for index, (key, item, place) in enumerate(queue):
                if self._place_allows(group, place):
                    del queue[index]
                    return group, key, item, place
        return None

    def _started(self, group: Hashable, place: Hashable, change: int) -> None:
        """Count a job of `group` at `place` as started (1) or ended (-1)."""
        self._running[group] = self._running.get(group, 0) + change
        if place is not None:
            self._at_place[place] = self._at_place.get(place, 0) + change
            self._running_at[(group, place)] = self._running_at.get((group, place), 0) + change
            if not self._at_place[place]:
                del self._at_place[place]
            if not self._running_at[(group, place)]:
                del self._running_at[(group, place)]

    def _settled(self, group: Hashable, place: Hashable) -> None:
        """A job of `group` at `place` is neither queued nor running any more."""
        left = self._group_at_place[(group, place)] - 1
        if left:
            self._group_at_place[(group, place)] = left
        else:
            del self._group_at_place[(group, place)]

    def _work(self) -> None:
        while True:
            with self._cond:
                job = self._next()
                while job is None and not self._stopping:
                    self._cond.wait()
                    job = self._next()
                if job is None:
                    return
                group, key, item, place = job
                self._started(group, place, 1)
            again = self._run_one(item)
            with self._cond:
                self._started(group, place, -1)
                if again and not self._stopping:
                    self._enqueue(group, key, item, place)
                else:
                    self._held.discard(key)
                    self._settled(group, place)
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
            for group, queue in self._queues.items():
                for key, _, place in queue:
                    self._held.discard(key)
                    self._settled(group, place)
                queue.clear()
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)
