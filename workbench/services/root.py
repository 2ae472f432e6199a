"""The composition root: the services every shell uses, built in one place.

`compose(signing, ledger, …)` gives the decision service with its releases wired in (through the
core's root, `gate.services.root.decision_services`) and the analytics services over the same
ledger and clock: export, reports, dry-run, sweep and live impact. The API (`api/app.py`), the
commands (`gate_cli/`), the workbench's store and the notebooks build what they use here, and the
signing setup they sign and verify with comes from `signing_setup(settings)` (the serving
process's from `live_signing`). A caller whose wiring differs on purpose says so in the
parameters: the API passes its settings, adapters and guardrail hook; a command with no live
ledger (a dataset run) passes none.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.clock import Clock, SystemClock
from gate.keys.config import LiveSigning, SigningSetup
from gate.services.root import decision_services, live_signing, signing_setup
from workbench.services.dry_runs import DryRunService
from workbench.services.exports import ExportService
from workbench.services.impact import LiveImpactService
from workbench.services.reports import ReportService
from workbench.services.sweeps import SweepService

if TYPE_CHECKING:
    from gate.adapters import AdapterRegistry
    from gate.clock import IdSource
    from gate.ledger import Ledger
    from gate.services.decide import DecisionService
    from gate.services.releases import ReleaseService
    from gate.settings import Settings

__all__ = ["Services", "compose", "live_signing", "signing_setup"]


@dataclass(frozen=True)
class Services:
    """What a shell calls. `decisions` and `releases` are None without a live ledger."""

    signing: SigningSetup | LiveSigning
    clock: Clock
    decisions: DecisionService | None
    releases: ReleaseService | None
    exports: ExportService
    reports: ReportService
    dry_runs: DryRunService
    sweeps: SweepService
    impact: LiveImpactService

    def live(self) -> tuple[DecisionService, ReleaseService]:
        """The decision service and its release service (composed over a live ledger)."""
        if self.decisions is None or self.releases is None:
            raise LookupError("the services were composed without a live ledger")
        return self.decisions, self.releases


def compose(signing: SigningSetup | LiveSigning, ledger: Ledger | None = None, *, settings: Settings | None = None,
            clock: Clock | None = None, ids: IdSource | None = None, adapters: AdapterRegistry | None = None,
            on_trip: Callable[..., Any] | None = None, checkpoint_log: Path | None = None) -> Services:
    """The services over `ledger` (None: a dataset-only run), signing with `signing`. `settings`,
    `adapters`, `ids`, `on_trip`: the serving process's decide configuration, adapter registry, id
    source and guardrail hook (`gate.services.root.decision_services`); `clock`: the system's when None.
    `checkpoint_log`: the witnessed log the release and governance chains checkpoint into (the
    settings' `GATE_CHECKPOINT_LOG` when None and `settings` are given; a shell without settings,
    the workbench's store, names it here so its release actions are witnessed as the API's are)."""
    core = (decision_services(ledger, signing, settings=settings, clock=clock, ids=ids, adapters=adapters,
                              on_trip=on_trip, checkpoint_log=checkpoint_log) if ledger is not None else None)
    clock = core.decisions.clock if core is not None else clock or SystemClock()
    releases = core.releases if core is not None else None
    dry_runs = DryRunService(signing, clock, ledger, releases)
    return Services(signing=signing, clock=clock, decisions=core.decisions if core is not None else None,
                    releases=releases, exports=ExportService(signing), reports=ReportService(ledger),
                    dry_runs=dry_runs, sweeps=SweepService(ledger), impact=LiveImpactService(dry_runs))
