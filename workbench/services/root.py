"""The composition root: the services every shell uses, built in one place.

`compose(signing, ledger, …)` gives the core's services (through the core's root,
`gate.services.root`: the decision service with its releases wired in, the held actions, the
receipts, the audit chains, the events out, and with the serving settings the serving process's
services and background workers) and the analytics services over the same ledger and clock:
export, reports, dry-run, sweep and live impact. The API (`api/app.py`), the commands
(`gate_cli/`), the workbench's store and the notebooks build what they use here, and the signing
setup they sign and verify with comes from `signing_setup(settings)` (the serving process's from
`live_signing`). A caller whose wiring differs on purpose says so in the parameters: the API
passes its settings, adapters, guardrail and webhook hooks; the workbench's store its checkpoint
log and the hosts webhooks may reach; a command with no live ledger (a dataset run) passes none.
Nothing is set on a service after it is built.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.clock import Clock, SystemClock
from gate.keys.config import LiveSigning, SigningSetup
from gate.services.root import (
    AttemptHook,
    DecisionServices,
    ServingServices,
    decision_services,
    live_signing,
    serving_services,
    signing_setup,
)
from workbench.reports.live import anomaly_report
from workbench.services.dry_runs import DryRunService
from workbench.services.exports import ExportService
from workbench.services.impact import LiveImpactService
from workbench.services.reports import ReportService
from workbench.services.sweeps import SweepService

if TYPE_CHECKING:
    from gate.adapters import AdapterRegistry
    from gate.clock import IdSource
    from gate.ledger import Ledger
    from gate.settings import Settings

__all__ = ["Services", "compose", "live_signing", "signing_setup"]


@dataclass(frozen=True)
class Services:
    """What a shell calls. `core` is None without a live ledger, `serving` without the serving
    settings (only the serving process, api.app, composes with them)."""

    signing: SigningSetup | LiveSigning
    clock: Clock
    core: DecisionServices | None
    serving: ServingServices | None
    exports: ExportService
    reports: ReportService
    dry_runs: DryRunService
    sweeps: SweepService
    impact: LiveImpactService

    def live(self) -> DecisionServices:
        """The core's services, with the release service (composed over a live ledger)."""
        if self.core is None or self.core.releases is None:
            raise LookupError("the services were composed without a live ledger")
        return self.core

    def served(self) -> tuple[DecisionServices, ServingServices]:
        """The core's services and the serving process's (composed with the serving settings)."""
        if self.serving is None:
            raise LookupError("the services were composed without the serving settings")
        return self.live(), self.serving


def compose(signing: SigningSetup | LiveSigning, ledger: Ledger | None = None, *, settings: Settings | None = None,
            clock: Clock | None = None, ids: IdSource | None = None, adapters: AdapterRegistry | None = None,
            on_trip: Callable[..., Any] | None = None, on_attempt: AttemptHook | None = None,
            checkpoint_log: Path | None = None, allow_hosts: Collection[str] = ()) -> Services:
    """The services over `ledger` (None: a dataset-only run), signing with `signing`. `settings`,
    `adapters`, `ids`, `on_trip`, `on_attempt`: the serving process's configuration, adapter
    registry, id source, guardrail and webhook-attempt hooks (`gate.services.root`); with
    `settings` and a ledger, the serving process's services and workers are composed too.
    `clock`: the system's when None. `checkpoint_log`: the witnessed log the release, governance,
    hold and audit chains checkpoint into (the settings' `GATE_CHECKPOINT_LOG` when None and
    `settings` are given; a shell without settings, the workbench's store, names it here so its
    actions are witnessed as the API's are); `allow_hosts`: the hosts its webhooks may reach."""
    core = (decision_services(ledger, signing, settings=settings, clock=clock, ids=ids, adapters=adapters,
                              on_trip=on_trip, checkpoint_log=checkpoint_log, allow_hosts=allow_hosts,
                              on_attempt=on_attempt) if ledger is not None else None)
    serving = (serving_services(core, ledger, signing, settings, anomalies=anomaly_report)
               if core is not None and ledger is not None and settings is not None else None)
    clock = core.decisions.clock if core is not None else clock or SystemClock()
    releases = core.releases if core is not None else None
    dry_runs = DryRunService(signing, clock, ledger, releases)
    return Services(signing=signing, clock=clock, core=core, serving=serving, exports=ExportService(signing),
                    reports=ReportService(ledger), dry_runs=dry_runs, sweeps=SweepService(ledger),
                    impact=LiveImpactService(dry_runs))
