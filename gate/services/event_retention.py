"""The retention of events out (docs/events.md, "Retention"), the `event-retention` worker's pass.

Events older than `retention_days` (GATE_EVENTS_RETENTION_DAYS) that every active subscription
has settled are pruned, by sequence ranges in one statement per pass (and beyond a size bound,
GATE_EVENTS_RETENTION_BYTES, the oldest: settled first); reading, replaying or resuming from a
pruned range is refused with EVENTS_PRUNED (`EventRetention.refused`), never answered with the
events silently missing. The same pass prunes delivery attempts older than the retention, keeping
each subscription's newest `ATTEMPTS_KEPT` and counting the pruned ones in its totals, so what
`EventService.deliveries` reports does not change.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from datetime import timedelta

from gate.clock import Clock, iso_ms
from gate.errors import GateError
from gate.ledger.outbox import Outbox
from gate.ledger.outbox_retention import OutboxRetention

log = logging.getLogger("gate.events")

RETENTION_DAYS = 30  # GATE_EVENTS_RETENTION_DAYS; 0 keeps every event
RETENTION_INTERVAL = 60.0  # seconds between the `event-retention` worker's passes
PRUNE_BATCH = 500  # delivery attempts one pruning transaction deletes at most
PRUNE_BATCHES_PER_PASS = 20  # per subscription: an attempts pass never runs unbounded
# Each subscription's newest delivery attempts, kept however old: the window `deliveries` reads its
# latency and last failures from, so a prune never changes what it shows (docs/events.md, "Retention").
ATTEMPTS_KEPT = 200


class EventRetention:
    """The retention pass over one outbox, and the refusal of what it has pruned."""

    def __init__(self, outbox: Outbox, store: OutboxRetention, clock: Clock, *,
                 retention_days: int = RETENTION_DAYS, retention_bytes: int = 0) -> None:
        """Built by the composition root (`gate.services.root.compose_events`) over the event
        service's outbox and clock; `store` is the outbox's retention tables."""
        self.outbox = outbox
        self.store = store
        self.clock = clock
        self.retention_days = retention_days  # 0: events are kept for ever
        self.retention_bytes = retention_bytes  # GATE_EVENTS_RETENTION_BYTES; 0: no size bound

    def pruned(self, scope: str) -> tuple[int, str | None]:
        """(the last pruned seq, the newest pruned event's time) of the scope; (0, None) when none was."""
        return self.store.pruned(scope)

    def refused(self, scope_pruned: int, what: str) -> GateError:
        """EVENTS_PRUNED (410): `what` reaches events 1 to `scope_pruned` of its scope, which the
        retention has removed."""
        return GateError("EVENTS_PRUNED", f"{what} reaches events that were pruned: events 1 to {scope_pruned} of "
                         f"this scope were older than the retention ({self.retention_days} days) and delivered; the "
                         f"oldest kept is {scope_pruned + 1}", pruned_through=scope_pruned, oldest_kept=scope_pruned + 1)

    def prune(self, held_streams: Sequence[str] = ()) -> int:
        """One pass of the retention (the `event-retention` worker), in one transaction over every
        scope (`OutboxRetention.prune_pass`): the events older than `retention_days` that every active
        subscription (and each of `held_streams`, the stream cursors this gate publishes from) has
        settled, and, with `retention_bytes`, the oldest beyond the size bound (settled first;
        undelivered ones counted and logged), deleted by sequence ranges in one statement
        (PostgreSQL: whole day partitions dropped; SQLite: the freed pages returned to the file
        system); then the delivery attempts older than the retention (`prune_attempts`). Returns
        how many events were deleted."""
        if self.retention_days <= 0 and self.retention_bytes <= 0:
            return 0
        now = self.clock.now()
        cutoff = iso_ms(now - timedelta(days=self.retention_days)) if self.retention_days > 0 else ""
        done = self.store.prune_pass(cutoff, held_streams, self.retention_bytes, now.date())
        if done.events:
            self.store.return_space()
            log.info("event retention: %d event(s), %d bytes pruned (%d partition(s) dropped whole)", done.events,
                     done.bytes, done.partitions)
        for scope, (first, last) in done.dropped.items():
            log.warning("event retention: the outbox was over GATE_EVENTS_RETENTION_BYTES (%d): events %d to %d of "
                        "scope %s were dropped before every active subscription had them", self.retention_bytes,
                        first + 1, last, scope)
        if cutoff:
            self.prune_attempts(cutoff)
        return done.events

    def prune_attempts(self, cutoff: str) -> int:
        """Delete every subscription's delivery attempts made before `cutoff` (disabled ones' too),
        except its newest `ATTEMPTS_KEPT`, in transactions of at most `PRUNE_BATCH` attempts,
        `PRUNE_BATCHES_PER_PASS` per subscription; their counts stay in the subscription's totals,
        so `EventService.deliveries` reads the same after. Returns how many were deleted."""
        deleted = _in_batches(
            (row["subscription_id"] for row in self.outbox.subscriptions()),
            lambda sub: self.store.attempts_prunable(sub, cutoff, ATTEMPTS_KEPT),
            lambda sub, batch: self.store.prune_attempts_batch(sub, cutoff, ATTEMPTS_KEPT, batch))
        if deleted:
            log.info("event retention: %d delivery attempt(s) made before %s pruned", deleted, cutoff)
        return deleted


def _in_batches(keys: Iterable[str], prunable: Callable[[str], bool], prune: Callable[[str, int], int]) -> int:
    """One retention pass over `keys` (scopes, subscriptions): each that is `prunable` is pruned
    in transactions of at most `PRUNE_BATCH` rows (`prune(key, PRUNE_BATCH)` deletes them and says
    how many), at most `PRUNE_BATCHES_PER_PASS` per key, so a pass never runs unbounded; the rest
    waits for the next pass. Returns how many rows were deleted."""
    deleted = 0
    for key in keys:
        if not prunable(key):
            continue
        for _ in range(PRUNE_BATCHES_PER_PASS):
            done = prune(key, PRUNE_BATCH)
            deleted += done
            if done < PRUNE_BATCH:
                break
    return deleted
