"""The composition root of the core's services: the signing setup from the settings, the
decision service with its releases wired in and the services beside it over the same ledger,
signing and clock (holds, receipts, the audit chains, events out), and the serving process's
services and background workers (`serving_services`).

Nothing else builds them, and nothing is set on them after they are built. The API, the CLI, the workbench and the notebooks come here through
`workbench.services.root` (which adds the analytics services) or, for a command that needs only
the core, directly; the demo seeder and the golden corpus build come here directly with their
fixed clock and ids. Where a caller's wiring differs on purpose, the difference is a parameter
here: the serving process passes its `settings` (schema URL, adapters, confidence, advisory
modes), its guardrail and webhook hooks; the golden build and the demo seed pass their clock, ids
and no releases; the workbench's store passes its checkpoint log and the hosts webhooks may reach.

This module loads no ledger when imported: `gate_cli.main` reads the signing setup at start.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
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
    from gate.services.chains import AuditChainService, EventChainWitness
    from gate.services.decide import DecisionService
    from gate.services.erasure import ErasureService
    from gate.services.events import Dispatcher, EventService
    from gate.services.governance import GovernanceService, SafeguardSettings
    from gate.services.holds import HoldOpener, HoldService
    from gate.services.keys import KeyService
    from gate.services.lifecycle import LifecycleService
    from gate.services.operations import AnomalySource, PilotService, PolicyAlertService, ProofMetricsService
    from gate.services.periodic import PeriodicWorker
    from gate.services.policychecks import PolicyCheckService
    from gate.services.privacy import PrivacyService
    from gate.services.release_reads import Snapshots
    from gate.services.releases import ReleaseService
    from gate.services.replay import ReplayService
    from gate.services.scope_events import ScopeEventService
    from gate.services.subjects import SubjectService
    from gate.services.workflows import WorkflowService

__all__ = ["DecisionServices", "ServingServices", "advisory_service", "compose_events", "decision_services",
           "erasure_service", "event_service", "hold_service", "key_service", "ledger_of", "live_signing",
           "policy_check_services", "release_service", "serving_services", "signing_setup", "subject_service"]

# A webhook delivery attempted: (delivered, retried), the serving process's metrics (api.metrics).
AttemptHook = Callable[[bool, bool], None]


def ledger_of(settings: Settings) -> Ledger:
    """The ledger the settings name (GATE_DATABASE_URL), with their pool size and group commit:
    the one place a shell opens it (the API at start, every command through
    `gate_cli.context.open_ledger`), not migrated here."""
    from gate.ledger import Ledger

    return Ledger(settings.database_url, pool_size=settings.ledger_pool_size, group_commit=settings.ledger_group_commit)


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
    """The decision service and, when wired, the one release service that routes its decides; and
    over the same ledger, signing and clock: the held actions, the receipts (whose outcomes feed
    the release guardrails when releases are wired), the audit chains and the events out."""

    decisions: DecisionService
    releases: ReleaseService | None
    holds: HoldService
    lifecycle: LifecycleService
    audit: AuditChainService
    events: EventService
    # Built once and shared (issue 66, item 5): the one governed-change service every safeguard
    # setting changes through, and the one opener every held decide opens its hold with.
    governance: GovernanceService
    opener: HoldOpener
    privacy: PrivacyService | None  # the data map and masking rules (with the settings' privacy key)

    def release_service(self) -> ReleaseService:
        """The release service; composed without one (`releases=False`) is a programming error."""
        if self.releases is None:
            raise LookupError("the decision services were composed without releases")
        return self.releases


def decision_services(ledger: Ledger, signing: SigningSetup | LiveSigning, *, settings: Settings | None = None,
                      clock: Clock | None = None, ids: IdSource | None = None,
                      adapters: AdapterRegistry | None = None, confidence: bool | None = None,
                      releases: bool = True, on_trip: Callable[..., Any] | None = None,
                      checkpoint_log: Path | None = None, deferred_holds: bool = False,
                      allow_hosts: Collection[str] = (), on_attempt: AttemptHook | None = None) -> DecisionServices:
    """The decision service over `ledger`, signing with `signing`, and the services beside it.

    `settings`: the serving process's configuration (the rulebook schema URL, the adapter
    registry and its limits, decide-time confidence, the advisory modes, the Inbox's address,
    the webhooks' allowed hosts, lease and retention); without, the services' defaults (the
    commands and the workbench register and read rulebooks, they do not serve decides).
    `adapters` replaces the registry, `confidence` the confidence setting. `releases`: build the
    release service the decides route through (decide by reference, shadows, canaries), with
    `on_trip` called when a guardrail trips; False leaves decides inline only (the golden corpus,
    the demo seed). `clock`, `ids`: the system's when None. `checkpoint_log`: the witnessed log
    of the release, governance, hold and audit chains (default: the settings' `GATE_CHECKPOINT_LOG`).
    `deferred_holds`: a held record's hold waits in the opener (`DeferredOpener`, the demo seed
    writes each hold whole when it closes); default, it opens in the decide's own transaction.
    The governed-change service, the chains' witness and the hold opener are built once here and
    shared by every service that uses them. `allow_hosts`: the
    hosts webhooks may reach without settings (with them, `GATE_WEBHOOK_ALLOW_HOSTS`);
    `on_attempt(delivered, retried)`: called after each webhook delivery attempt."""
    from gate.clock import SystemClock
    from gate.services.chains import EventChainWitness
    from gate.services.decide import DecisionService
    from gate.services.governance import GovernanceService
    from gate.services.holds import DeferredOpener, HoldOpener
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
    witness = EventChainWitness(signing, clock, checkpoint_log)
    governance = GovernanceService(ledger, signing, clock, witness=witness)
    inbox_base = settings.workbench_url if settings is not None else None
    opener = (DeferredOpener if deferred_holds else HoldOpener)(ledger, governance, inbox_base)
    releasing = (release_service(ledger, signing, snapshots=snapshots, clock=clock, witness=witness,
                                 governance=governance, on_trip=on_trip) if releases else None)
    service = DecisionService(ledger, signing, schema_url=schema_url, clock=clock, ids=ids, adapters=adapters,
                              confidence=True if confidence is None else confidence, advisory=advisory,
                              hold_opener=opener, snapshots=snapshots,
                              releases=releasing.router if releasing is not None else None)
    return _beside(service, releasing, Shared(ledger, signing, witness, governance, opener), settings,
                   allow_hosts, on_attempt)


def release_service(ledger: Ledger, signing: SigningSetup | LiveSigning, *, snapshots: Snapshots, clock: Clock,
                    witness: EventChainWitness, governance: GovernanceService, cache_seconds: float | None = None,
                    on_trip: Callable[..., Any] | None = None) -> ReleaseService:
    """The release service and its parts, each built once here over the shared `snapshots`,
    `witness` and `governance`: the reader (its states cached for `cache_seconds`, default
    `gate.services.release_reads.CACHE_SECONDS`; a test passes another worker's), the moves, the
    guardrails (`on_trip` called when one halts a canary) and the decide path's router.
    `decision_services` builds it; the release tests build it alone, as another worker would."""
    from gate.services.release_guards import ReleaseGuardrails
    from gate.services.release_moves import ReleaseMoves
    from gate.services.release_reads import CACHE_SECONDS, ReleaseReader
    from gate.services.release_routing import ReleaseRouter
    from gate.services.releases import ReleaseService

    reader = ReleaseReader(ledger, snapshots, witness, governance,
                           CACHE_SECONDS if cache_seconds is None else cache_seconds)
    moves = ReleaseMoves(reader, signing, clock)
    guardrails = ReleaseGuardrails(reader, moves, on_trip)
    return ReleaseService(reader, moves, guardrails, ReleaseRouter(reader, guardrails), snapshots=snapshots,
                          safeguards=governance)


@dataclass(frozen=True)
class Shared:
    """What `decision_services` builds once and hands to every service that uses it."""

    ledger: Ledger
    signing: SigningSetup | LiveSigning
    witness: EventChainWitness
    governance: GovernanceService
    opener: HoldOpener


def _beside(service: DecisionService, release_service: ReleaseService | None, shared: Shared,
            settings: Settings | None, allow_hosts: Collection[str], on_attempt: AttemptHook | None) -> DecisionServices:
    """`decision_services`' services beside the decision service, on its clock."""
    from gate.services.chains import AuditChainService
    from gate.services.lifecycle import LifecycleService

    ledger, signing, clock = shared.ledger, shared.signing, service.clock
    holds = _hold_service(ledger, signing, clock, shared.witness, shared.governance, shared.opener)
    lifecycle = LifecycleService(ledger, clock, signing, after_outcome=release_service.guardrails.after_outcome
                                 if release_service is not None else None)
    privacy = privacy_service(ledger, shared.governance, settings) if settings is not None else None
    events = event_service(ledger, signing, clock, settings=settings, allow_hosts=allow_hosts, on_attempt=on_attempt,
                           governance=shared.governance, privacy=privacy)
    return DecisionServices(service, release_service, holds=holds, lifecycle=lifecycle,
                            audit=AuditChainService(ledger, signing, clock,
                                                    checkpoint_log=shared.witness.checkpoint_log),
                            events=events, governance=shared.governance, opener=shared.opener, privacy=privacy)


def hold_service(ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock | None = None, *,
                 settings: Settings | None = None, checkpoint_log: Path | None = None) -> HoldService:
    """The held actions' service alone (`gate holds`, the tests' desks): its events link to the
    Inbox (the settings' GATE_WORKBENCH_URL) and its chains are witnessed in `checkpoint_log`
    (default: the settings' GATE_CHECKPOINT_LOG); `decision_services` builds it with the rest."""
    from gate.clock import SystemClock
    from gate.services.chains import EventChainWitness
    from gate.services.governance import GovernanceService
    from gate.services.holds import HoldOpener

    if settings is not None and checkpoint_log is None:
        checkpoint_log = settings.checkpoint_log
    clock = clock or SystemClock()
    witness = EventChainWitness(signing, clock, checkpoint_log)
    governance = GovernanceService(ledger, signing, clock, witness=witness)
    opener = HoldOpener(ledger, governance, settings.workbench_url if settings is not None else None)
    return _hold_service(ledger, signing, clock, witness, governance, opener)


def _hold_service(ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, witness: EventChainWitness,
                  governance: GovernanceService, opener: HoldOpener) -> HoldService:
    """The held actions' service and its parts, each built once: the reads over the one
    `HoldLedger` they all use, who may act (under the opener's hold policy), the wake-ups of
    whoever waits, and the writer of each step (its events link to the opener's Inbox)."""
    from gate.services.hold_reads import HoldReads
    from gate.services.hold_rules import HoldRules
    from gate.services.hold_writes import HoldNotices, HoldWriter
    from gate.services.holds import HoldService

    reads = HoldReads(ledger, signing, clock, witness=witness)
    rules = HoldRules(opener.policy, clock)
    writer = HoldWriter(reads, rules, signing, clock, witness=witness, notices=HoldNotices(),
                        inbox_base=opener.inbox_base)
    return HoldService(reads, rules, writer, governance=governance, opener=opener)


def event_service(ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock | None = None, *,
                  settings: Settings | None = None, allow_hosts: Collection[str] = (),
                  on_attempt: AttemptHook | None = None, governance: GovernanceService | None = None,
                  privacy: PrivacyService | None = None) -> EventService:
    """The events out: the settings' allowed hosts, lease and retention (without settings,
    `allow_hosts` and the defaults); `on_attempt(delivered, retried)` after each webhook attempt;
    `governance`: the service a new subscription is a governed change through (the serving
    process's; None: subscriptions change directly); `privacy`: the masking of every delivery
    (with settings and none given, the settings' privacy key over the scope's data map, read
    directly). `decision_services` builds it; `gate events` builds only it."""
    from gate.services.governance import SafeguardSettings

    safeguards = governance or SafeguardSettings(ledger, cache_seconds=0)
    if settings is None:
        return compose_events(ledger, clock, allow_hosts=allow_hosts, signing=signing, on_attempt=on_attempt,
                              safeguards=safeguards, governance=governance, privacy=privacy)
    return compose_events(ledger, clock, allow_hosts=settings.webhook_allow_hosts, signing=signing,
                          lease_seconds=settings.events_lease_seconds, on_attempt=on_attempt,
                          retention_days=settings.events_retention_days,
                          retention_bytes=settings.events_retention_bytes, safeguards=safeguards,
                          governance=governance, privacy=privacy or privacy_service(ledger, safeguards, settings))


def compose_events(ledger: Ledger, clock: Clock | None = None, *, safeguards: SafeguardSettings,
                   allow_hosts: Collection[str] = (), signing: Any = None,
                   resolve: Callable[[str, int], list[str]] | None = None, lease_seconds: int | None = None,
                   on_attempt: AttemptHook | None = None, retention_days: int | None = None,
                   retention_bytes: int = 0, governance: GovernanceService | None = None,
                   privacy: PrivacyService | None = None) -> EventService:
    """The event service and its parts, each built once over one outbox and one clock: the
    delivery turns (allowed hosts, `resolve` standing in for DNS in tests, the signing keys, the
    lease, the attempts' hook, the masking) and the retention (days, bytes; None: the modules'
    defaults). `event_service` builds it from the settings; a test that needs a part's knob the
    settings do not give builds it here."""
    from gate.clock import SystemClock
    from gate.ledger.outbox import Outbox
    from gate.ledger.outbox_retention import OutboxRetention
    from gate.services.event_delivery import LEASE_SECONDS, WebhookDelivery
    from gate.services.event_retention import RETENTION_DAYS, EventRetention
    from gate.services.events import EventService

    clock = clock or SystemClock()
    outbox = Outbox(ledger)
    delivery = WebhookDelivery(outbox, clock, allow_hosts=allow_hosts, resolve=resolve, signing=signing,
                               lease_seconds=LEASE_SECONDS if lease_seconds is None else lease_seconds,
                               on_attempt=on_attempt, privacy=privacy)
    retention = EventRetention(outbox, OutboxRetention(ledger), clock,
                               retention_days=RETENTION_DAYS if retention_days is None else retention_days,
                               retention_bytes=retention_bytes)
    return EventService(outbox, delivery, retention, clock, safeguards=safeguards, governance=governance)


def privacy_service(ledger: Ledger, safeguards: SafeguardSettings, settings: Settings) -> PrivacyService:
    """A scope's data map and masking rules (read through `safeguards`; changed through them when
    they are the governed-change service), with the gate's privacy key (GATE_PRIVACY_KEY or its file)."""
    from gate.services.privacy import PrivacyService, load_key

    key_file = settings.privacy_key_file or settings.home / "privacy.key"
    return PrivacyService(ledger, safeguards, lambda: load_key(settings.privacy_key, key_file))


def subject_service(ledger: Ledger, settings: Settings) -> SubjectService:
    """A data subject's decisions, holds and events, through the scope's data map and the
    settings' privacy key (`gate subject export`; the serving process's is `ServingServices.subjects`)."""
    from gate.services.governance import SafeguardSettings
    from gate.services.subjects import SubjectService

    return SubjectService(ledger, privacy_service(ledger, SafeguardSettings(ledger), settings))


def erasure_service(ledger: Ledger, settings: Settings, clock: Clock | None = None) -> ErasureService:
    """A data subject's erasure (`gate subject erase`; the serving process's is
    `ServingServices.erasures`): the subject export's search, a governed-change service witnessed
    in the settings' GATE_CHECKPOINT_LOG, and the one removal home."""
    from gate.clock import SystemClock
    from gate.services.chains import EventChainWitness
    from gate.services.erasure import ErasureService
    from gate.services.governance import GovernanceService
    from gate.services.removal import InputRemoval
    from gate.services.subjects import SubjectService

    clock = clock or SystemClock()
    signing = signing_setup(settings)
    governance = GovernanceService(ledger, signing, clock,
                                   witness=EventChainWitness(signing, clock, settings.checkpoint_log))
    subjects = SubjectService(ledger, privacy_service(ledger, governance, settings))
    return ErasureService(subjects, governance, InputRemoval(ledger, clock))


def key_service(ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock | None = None, *,
                governance: GovernanceService | None = None, checkpoint_log: Path | None = None) -> KeyService:
    """The keys that act on production, their grants governed through `governance` (the serving
    process passes its release service's safeguards); without one, a governed-change service of
    its own, witnessed in `checkpoint_log` (`gate keys`: GATE_CHECKPOINT_LOG)."""
    from gate.clock import SystemClock
    from gate.services.chains import EventChainWitness
    from gate.services.governance import GovernanceService
    from gate.services.keys import KeyService

    clock = clock or SystemClock()
    if governance is None:
        governance = GovernanceService(ledger, signing, clock,
                                       witness=EventChainWitness(signing, clock, checkpoint_log))
    return KeyService(ledger, signing, clock, governance)


@dataclass(frozen=True)
class ServingServices:
    """The serving process's services beyond `DecisionServices` (`gate serve`, api.app), and its
    background workers: None when GATE_EVENTS_DISPATCH is off (each serving process starts its own)."""

    scope_events: ScopeEventService
    keys: KeyService
    replays: ReplayService
    pilots: PilotService
    proof_metrics: ProofMetricsService
    policy_alerts: PolicyAlertService
    privacy: PrivacyService
    subjects: SubjectService  # a data subject's decisions, holds and events (issue 67, item 5)
    erasures: ErasureService  # a data subject erased, governed by two holders (issue 67, item 4)
    dispatcher: Dispatcher | None
    hold_sweeper: PeriodicWorker | None


def serving_services(core: DecisionServices, ledger: Ledger, signing: SigningSetup | LiveSigning,
                     settings: Settings, *, anomalies: AnomalySource) -> ServingServices:
    """What the serving process adds over `core` (composed with releases), on its clock:
    `anomalies` is the anomaly report the policy alerts read (the shell's report engine: the core
    imports no Polars); the dispatcher runs the events out, the scheduled reports and the
    reviewers' channels; the hold sweeper expires and escalates held actions on time."""
    from gate.services.erasure import ErasureService
    from gate.services.holds import hold_sweeper
    from gate.services.operations import PilotService, PolicyAlertService, ProofMetricsService
    from gate.services.removal import InputRemoval
    from gate.services.replay import ReplayService
    from gate.services.scope_events import ScopeEventService
    from gate.services.subjects import SubjectService

    releases, clock = core.release_service(), core.decisions.clock
    policy_alerts = PolicyAlertService(ledger, clock, anomalies, max_age_days=settings.policy_source_max_age_days,
                                       release_alerts=releases.guardrails.guardrail_alerts)
    scope_events = ScopeEventService(ledger, clock, alerts=lambda scope: policy_alerts.alerts(scope, None)["alerts"],
                                     governance=core.governance if signing else None)
    privacy = core.privacy  # the core's, built with the settings (a loosened rule is governed, issue 67)
    if privacy is None:
        raise LookupError("the serving services need the core composed with the settings")
    dispatch = settings.events_dispatch
    subjects = SubjectService(ledger, privacy)
    return ServingServices(privacy=privacy, subjects=subjects,
        erasures=ErasureService(subjects, core.governance, InputRemoval(ledger, clock)),
        scope_events=scope_events, keys=key_service(ledger, signing, clock, governance=core.governance),
        replays=ReplayService(core.decisions), pilots=PilotService(ledger, clock),
        proof_metrics=ProofMetricsService(ledger), policy_alerts=policy_alerts,
        dispatcher=_dispatcher(core.events, scope_events, ledger, settings, core.governance, privacy)
        if dispatch else None,
        hold_sweeper=hold_sweeper(core.holds, settings.hold_sweep_ms / 1000) if dispatch else None)


def policy_check_services(ledger: Ledger, clock: Clock, policychecks: PolicyCheckService | None = None,
                          ) -> tuple[PolicyCheckService, WorkflowService]:
    """The API's policy checks and the helpdesks' workflows over them, on the gate's clock.
    `policychecks` replaces the shipped checks (tests); None loads their tables and rulebooks now
    (about 0.3 s), so a bad file stops the app before it serves. Only the API serves them: the
    other shells (the workbench, `gate dispatch`) never pay for the load."""
    from gate.services.policychecks import PolicyCheckService
    from gate.services.workflows import WorkflowService

    checks = policychecks or PolicyCheckService(clock=clock)
    return checks, WorkflowService(ledger, checks)


def _dispatcher(events: EventService, scope_events: ScopeEventService, ledger: Ledger,
                settings: Settings, governance: SafeguardSettings, privacy: PrivacyService) -> Dispatcher:
    """The events out (and their NATS JetStream mirror when GATE_NATS_URL is set), the scheduled
    reports and the reviewers' channels' passes (gate.services.notify), one worker per task, and
    the facts' retention (gate.services.removal) beside the outbox's."""
    from gate.events.stream import JetStreamPublisher
    from gate.services.events import Dispatcher
    from gate.services.notify import notifier_from_settings
    from gate.services.removal import FactsRetention, InputRemoval

    notifier = notifier_from_settings(ledger, settings, governance, events.clock, events.delivery.privacy)
    tasks: dict[str, Callable[[], Any]] = {"scheduled-reports": scope_events.run_due,
                                           **(dict(notifier.tasks()) if notifier is not None else {})}
    stream = (JetStreamPublisher(events.outbox, settings.nats_url, settings.nats_stream,
                                 body_of=events.delivery.body_of)
              if settings.nats_url else None)
    retention = FactsRetention(InputRemoval(ledger, events.clock), privacy, settings.facts_retention_days)
    return Dispatcher(events, settings.events_interval_ms / 1000, stream=stream, tasks=tasks,
                      concurrency=settings.events_concurrency, slow_tasks={"facts-retention": retention.run})
