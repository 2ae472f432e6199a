"""Removing decisions' inputs, the use case (issue 67, items 3 and 4; docs/privacy.md, "Retention").

`InputRemoval.remove(scope, decision_ids, cause)` is the one home of a removal: it takes the
request and the record body of the given decisions out of the ledger and the outbox
(`gate.ledger.removals.remove`), keeps every hash, chain link and checkpoint, and files by what
(`gate.privacy.removal.Cause`: retention here; a subject's erasure, later, names its event). Its
first caller is the facts' retention (`FactsRetention.run`, the `facts-retention` worker of the
dispatcher: `gate dispatch`, or `gate serve`'s own): each scope's decisions older than its
`privacy` setting's `retention.facts_days` (else GATE_FACTS_RETENTION_DAYS; 0: kept for ever) are
removed, oldest first, `BATCH` per transaction and at most `BATCHES_PER_PASS` per scope and pass.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta

from gate.clock import Clock, iso_ms
from gate.ledger import Ledger, stream
from gate.ledger import removals as store
from gate.privacy.removal import RETENTION, Cause
from gate.services.privacy import PrivacyService

log = logging.getLogger("gate.privacy")

BATCH = 200
BATCHES_PER_PASS = 10


class InputRemoval:
    """Removes decisions' inputs from the ledger and the outbox, and says by what."""

    def __init__(self, ledger: Ledger, clock: Clock) -> None:
        self.ledger, self.clock = ledger, clock

    def cause(self, cause: str, ref: str) -> Cause:
        return Cause(cause, ref, iso_ms(self.clock.now()))

    def remove(self, scope: str, decision_ids: Sequence[str], cause: Cause) -> list[str]:
        """Remove the inputs of the scope's `decision_ids` (already removed ones and another
        scope's are left as they are); returns the ids removed now."""
        done = store.remove(self.ledger, scope, decision_ids, cause)
        if done:
            log.info("inputs of %d decision(s) of scope %s removed by %s (%s)", len(done), scope, cause.cause,
                     cause.ref)
        return done


class FactsRetention:
    """The facts' retention: one pass over every scope (`run`), the dispatcher's worker step."""

    def __init__(self, removal: InputRemoval, privacy: PrivacyService, default_days: int) -> None:
        self.removal, self.privacy, self.default_days = removal, privacy, default_days

    def days(self, scope: str) -> int:
        """The scope's retention in days (its setting, else the gate's; 0: kept for ever)."""
        stated = self.privacy.settings(scope).facts_days
        return stated if stated is not None else self.default_days

    def run(self) -> int:
        """One pass; returns how many decisions had their inputs removed."""
        removed = 0
        for scope in stream.scopes(self.removal.ledger):
            days = self.days(scope)
            if days > 0:
                removed += self._scope(scope, days)
        return removed

    def _scope(self, scope: str, days: int) -> int:
        before = iso_ms(self.removal.clock.now() - timedelta(days=days))
        cause = self.removal.cause(RETENTION, f"{days} days")
        removed = 0
        for _ in range(BATCHES_PER_PASS):
            due = store.due(self.removal.ledger, scope, before, BATCH)
            removed += len(self.removal.remove(scope, due, cause))
            if len(due) < BATCH:
                break
        return removed
