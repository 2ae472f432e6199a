"""The composition root of the core's services: the signing setup from the settings, and the
decision service with its releases wired in.

Nothing else builds them. The API, the CLI, the workbench and the notebooks come here through
`workbench.services.root` (which adds the analytics services) or, for a command that needs only
the core, directly; the demo seeder and the golden corpus build come here directly with their
fixed clock and ids. Where a caller's wiring differs on purpose, the difference is a parameter
here: the serving process passes its `settings` (schema URL, adapters, confidence, advisory
modes) and its guardrail hook; the golden build and the demo seed pass their clock, ids and no
releases.

This module loads no ledger when imported: `gate_cli.main` reads the signing setup at start.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate import vocabulary as C
from gate.keys.config import LiveSigning, SigningSetup
from gate.settings import Settings

if TYPE_CHECKING:  # the services bring the ledger (SQLAlchemy): loaded when they are built
    from gate.adapters import AdapterRegistry
    from gate.clock import Clock, IdSource
    from gate.ledger import Ledger
    from gate.services.advisory import AdvisoryService
    from gate.services.decide import DecisionService
    from gate.services.holds import HoldOpener
    from gate.services.releases import ReleaseService

__all__ = ["DecisionServices", "advisory_service", "decision_services", "live_signing", "signing_setup"]


def signing_setup(settings: Settings) -> SigningSetup:
    """The gate's keys as the settings name them (GATE_SIGNING_KEY_FILE, GATE_RECEIPT_HMAC_SECRET,
    GATE_REQUIRE_SIGNING), read once: what every command, the workbench and the notebooks sign
    and verify with."""
    return SigningSetup.load(settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id,
                             settings.require_signing)


def live_signing(settings: Settings) -> LiveSigning:
    """The serving process's keys: `signing_setup`'s, following the keyring file while it runs
    (`gate keys signing-init` / `signing-rotate` need no restart)."""
    return LiveSigning(settings.signing_key_file, settings.hmac_secret, settings.hmac_key_id, settings.require_signing,
                       check_interval=settings.signing_key_check_ms / 1000)


def advisory_service(settings: Settings) -> AdvisoryService | None:
    """The advisory legacy modes' service (gate/advisory/), or None when GATE_ADVISORY_MODES is off."""
    if not settings.advisory_modes:
        return None
    from gate.advisory.http import HttpLLMAdvisor
    from gate.services.advisory import AdvisoryService

    base_url = settings.advisor_base_url  # the settings give models only with a base URL
    http = [HttpLLMAdvisor(base_url, model, api_key=settings.advisor_api_key, timeout=settings.advisor_timeout)
            for model in settings.advisor_models] if base_url is not None else []
    return AdvisoryService(http)


@dataclass(frozen=True)
class DecisionServices:
    """The decision service and, when wired, the one release service that routes its decides."""

    decisions: DecisionService
    releases: ReleaseService | None

    def release_service(self) -> ReleaseService:
        """The release service; composed without one (`releases=False`) is a programming error."""
        if self.releases is None:
            raise LookupError("the decision services were composed without releases")
        return self.releases


def decision_services(ledger: Ledger, signing: SigningSetup | LiveSigning, *, settings: Settings | None = None,
                      clock: Clock | None = None, ids: IdSource | None = None,
                      adapters: AdapterRegistry | None = None, confidence: bool | None = None,
                      releases: bool = True, on_trip: Callable[..., Any] | None = None,
                      checkpoint_log: Path | None = None, hold_opener: HoldOpener | None = None) -> DecisionServices:
    """The decision service over `ledger`, signing with `signing`.

    `settings`: the serving process's decide configuration (the rulebook schema URL, the adapter
    registry and its limits, decide-time confidence, the advisory modes); without, the service's
    defaults (the commands and the workbench register and read rulebooks, they do not serve
    decides). `adapters` replaces the registry, `confidence` the confidence setting. `releases`:
    build the release service the decides route through (decide by reference, shadows, canaries),
    with `on_trip` called when a guardrail trips; False leaves decides inline only (the golden
    corpus, the demo seed). `clock`, `ids`: the system's when None. `checkpoint_log`: the witnessed
    log of the release and governance chains (default: the settings' `GATE_CHECKPOINT_LOG`).
    `hold_opener`: how a held record opens its hold (the demo seed's `DeferredOpener` writes each
    hold whole when it closes); default, in the decide's own transaction."""
    from gate.clock import SystemClock
    from gate.services.decide import DecisionService
    from gate.services.releases import ReleaseService
    from gate.services.snapshots import RulebookSnapshots

    schema_url, advisory = C.RULEBOOK_SCHEMA_PATH, None
    if settings is not None:
        from gate.adapters import default_registry

        adapters = adapters or default_registry(pool_size=settings.adapter_pool_size,
                                                memory_mb=settings.adapter_memory_mb,
                                                plugins=settings.adapter_plugins)
        schema_url = settings.schema_url
        advisory = advisory_service(settings)
        confidence = settings.decide_confidence if confidence is None else confidence
    if settings is not None and checkpoint_log is None:
        checkpoint_log = settings.checkpoint_log
    # Built in their order, nothing set after: the snapshots, the releases that read them (never
    # the decision service), then the decision service that routes its decides through both.
    clock = clock or SystemClock()
    snapshots = RulebookSnapshots(ledger, signing, clock)
    release_service = (ReleaseService(ledger, signing, snapshots=snapshots, clock=clock, on_trip=on_trip,
                                      checkpoint_log=checkpoint_log) if releases else None)
    service = DecisionService(ledger, signing, schema_url=schema_url, clock=clock, ids=ids, adapters=adapters,
                              confidence=True if confidence is None else confidence, advisory=advisory,
                              inbox_base=settings.workbench_url if settings is not None else None,
                              hold_opener=hold_opener, snapshots=snapshots, releases=release_service)
    return DecisionServices(service, release_service)
