"""A canary's guardrails (docs/releases.md): the sequential tests of its arm against the active
arm, run off the decide path (after an outcome of either arm, on a status read, and every
`GUARD_EVERY` canary decides in the `release-guard` background worker); a tripped one halts the
canary on its own through the release's moves, with its evidence, and is listed as a policy
alert.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping

from gate.errors import GateError
from gate.ledger.releases import ArmTally, halt_rows
from gate.principals import Principal
from gate.releases.guardrails import ArmCounts, GuardrailReport, evaluate
from gate.releases.model import Canary, ReleaseState
from gate.services.operations import GuardrailAlert
from gate.services.periodic import PeriodicWorker
from gate.services.release_moves import ReleaseMoves
from gate.services.release_reads import ReleaseReader
from gate.strict_json import JsonValue

GUARD_EVERY = 25  # canary decides between two background guardrail checks of a release
GUARD_INTERVAL_SECONDS = 1.0  # how soon checks left by a failed one run (an owed check wakes it at once)


class ReleaseGuardrails:
    """The guardrails of every running canary, and the worker that runs the checks owed."""

    def __init__(self, reader: ReleaseReader, moves: ReleaseMoves,
                 on_trip: Callable[[str, str, GuardrailReport], None] | None = None) -> None:
        """Built once by the composition root over the release's `reader` and `moves`; `on_trip`
        is called after a guardrail halted a canary (the serving process's alert hook)."""
        self.reader = reader
        self.moves = moves
        self.on_trip = on_trip
        self._lock = threading.Lock()
        self._canary_decides: dict[tuple[str, str], int] = {}
        # The releases whose guardrails are owed a check (oldest first), run by the `release-guard`
        # worker off the decide's path; it starts at the first one owed.
        self._guard_due: dict[tuple[str, str], None] = {}
        self.guard = PeriodicWorker("release-guard", self._run_due_guards, GUARD_INTERVAL_SECONDS,
                                    log=logging.getLogger("gate.releases"))

    def arm_counts(self, scope: str, state: ReleaseState) -> tuple[ArmCounts, ArmCounts]:
        """(canary, active) verdicts and outcome effects since the canary started (the release's
        head when none runs): what the guardrails and the status's comparison weigh."""
        since = state.canary.since_seq if state.canary else state.seq
        tallies = self.reader.store.arm_tallies(scope, state.rulebook_id, since)
        empty = ArmTally({}, 0, 0)

        def counts(tally: ArmTally) -> ArmCounts:
            return ArmCounts(tally.verdicts, tally.failed, tally.succeeded)

        return counts(tallies.get("canary", empty)), counts(tallies.get("active", empty))

    def check_guardrails(self, scope: str, rulebook_id: str,
                         trigger: Mapping[str, JsonValue] | None = None) -> GuardrailReport | None:
        """Run the guardrails of a running canary; a tripped one halts it with its evidence
        (`trigger`: the outcome whose report ran them, and the key that reported it)."""
        state = self.reader.state(scope, rulebook_id, fresh=True)
        if state.canary is None:
            return None
        canary_counts, active_counts = self.arm_counts(scope, state)
        report = evaluate(canary_counts, active_counts)
        if report.tripped:
            self._halt_for(scope, rulebook_id, state.canary, report, trigger)
        return report

    def _halt_for(self, scope: str, rulebook_id: str, canary: Canary, report: GuardrailReport,
                  trigger: Mapping[str, JsonValue] | None) -> None:
        body = {"action": "halt", "reason": f"guardrail tripped: {', '.join(report.tripped)}",
                "evidence": {"canary_version": canary.version.version, "canary_since_seq": canary.since_seq,
                             **report.to_json(), "trigger": dict(trigger) if trigger is not None else None}}
        try:
            self.moves.act(scope, Principal.guardrail(), frozenset({"release"}), rulebook_id, body,
                     idempotency_key=f"guardrail:{canary.since_seq}")
        except GateError as error:
            # Someone halted it first (a person, or another check of this canary, whose evidence
            # differs under the same key): nothing to do.
            if error.code not in ("RELEASE_NOTHING_TO_HALT", "RELEASE_IDEMPOTENCY_CONFLICT"):
                raise
        if self.on_trip is not None:
            self.on_trip(scope, rulebook_id, report)

    def after_outcome(self, scope: str, decision_id: str, outcome_id: str, reported_by: str | None) -> None:
        """Called after an Outcome Record is stored: a canary decision's outcome re-runs its guardrails.
        A halt it causes names this outcome, its arm and the API key that reported it (`trigger`)."""
        row = self.reader.store.release_row(scope, decision_id)
        if row is not None and row["arm"] in ("canary", "active"):
            state = self.reader.state(scope, row["rulebook_id"], fresh=True)
            if state.canary is not None:
                self.check_guardrails(scope, row["rulebook_id"], {
                    "outcome_id": outcome_id, "decision_id": decision_id, "arm": row["arm"],
                    "reported_by": reported_by})

    def count_canary_decide(self, scope: str, rulebook_id: str) -> None:
        """Count a decide the canary arm took; every `GUARD_EVERY`th owes its release a check,
        run by the `release-guard` worker off the decide's path."""
        key = (scope, rulebook_id)
        with self._lock:
            count = self._canary_decides.get(key, 0) + 1
            self._canary_decides[key] = count
            if count % GUARD_EVERY:
                return
            self._guard_due[key] = None
        self.guard.start()
        self.guard.wake()

    def _run_due_guards(self) -> None:
        """Every guardrail check owed, oldest first. One that raises ends the pass (the worker
        logs it with its traceback and counts it); the others wait for the next pass."""
        while True:
            with self._lock:
                if not self._guard_due:
                    return
                key = next(iter(self._guard_due))
                del self._guard_due[key]
            self.check_guardrails(*key)

    def guardrail_alerts(self, scope: str) -> list[GuardrailAlert]:
        """`/api/policy-alerts` entries: canaries a guardrail halted, with the evidence event."""
        alerts: list[GuardrailAlert] = []
        for row in halt_rows(self.reader.store, scope):
            event = json.loads(row["event_json"])
            if event.get("actor") != "guardrail":
                continue
            evidence = event.get("evidence") or {}
            alerts.append({
                "alert_id": "release:" + event["event_hash"][:24], "source": "release_guardrail",
                "kind": "canary_halted", "severity": "high", "policy_id": event["rulebook_id"],
                "canary_version": evidence.get("canary_version"), "guardrails": evidence.get("tripped", []),
                "release_seq": event["seq"], "event_hash": event["event_hash"], "halted_at": event["created_at"],
                "trigger": evidence.get("trigger"),
                "reasons": [(f"the canary of version {evidence.get('canary_version')} was halted on its own: "
                             f"{', '.join(evidence.get('tripped', []))} tripped (always-valid test, "
                             f"alpha {evidence.get('settings', {}).get('alpha')})")],
            })
        return alerts


