"""One composition root (issue 54, item 3): `gate.services.root` builds every core service and
background worker, on one clock, and nothing is set on them after they are built.

The API, the workbench's store and the demo seed take what the root built; a shell that built a
service by hand would wire it with slightly different arguments (the workbench's receipts once
reached no release guardrail, the API's did).
"""

from __future__ import annotations

import ast
from datetime import UTC, datetime
from pathlib import Path

from gate.clock import FixedClock
from gate.keys.config import SigningSetup
from gate.ledger import Ledger

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("gate", "gate_client", "api", "gate_cli", "workbench")
SERVICES = frozenset({
    "DecisionService", "ReleaseService", "HoldService", "LifecycleService", "AuditChainService", "EventService",
    "ScopeEventService", "KeyService", "PilotService", "PolicyAlertService", "ProofMetricsService",
    "ReplayService", "Dispatcher", "hold_sweeper", "SubjectService", "PolicyCheckService", "WorkflowService",
})
HOME = "gate/services/root.py"
# Commands that still build the one service they run, each with its own arguments on purpose or
# not yet moved (listed so that a new one fails here; the list only shrinks).
LEFT = {
    ("gate_cli/checkpoint_cmd.py", "AuditChainService"),  # no checkpoint log: this command appends to it
    ("gate_cli/events_cmd.py", "Dispatcher"),  # `gate events dispatch`: its interval, no scheduled reports
}


def _constructions() -> set[tuple[str, str]]:
    """(file, service) for each call of a core service's constructor in product code."""
    found = set()
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if not isinstance(node, ast.Call):
                    continue
                func = node.func
                name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
                if name in SERVICES:
                    found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_only_the_root_builds_the_core_services():
    built = _constructions()
    elsewhere = {(file, name) for file, name in built if file != HOME} - LEFT
    assert not elsewhere, f"built outside {HOME}: {sorted(elsewhere)}"
    assert {name for file, name in built if file == HOME} == SERVICES  # the finder sees the root's own


# What the root builds once and hands to every service that uses it (issue 66, item 5): built
# anywhere else, two services would read a safeguard, open a hold or witness a chain differently
# (the holds' and the scope events' governed-change services once had no cache, the releases' had one).
SHARED = frozenset({"GovernanceService", "SafeguardSettings", "HoldOpener", "DeferredOpener", "EventChainWitness",
                    "PrivacyService", "RulebookSnapshots",
                    # the event service's parts (issue 66, item 6), over its one outbox and clock
                    "WebhookDelivery", "EventRetention"})
# Where a shared part is still built outside the root, and why (the list only shrinks).
SHARED_LEFT = {
    ("workbench/dataset/export.py", "PrivacyService"),  # the export's hashing key, per run (a dataset command)
    ("workbench/dataset/export.py", "SafeguardSettings"),
}


def _built(names: frozenset[str]) -> set[tuple[str, str]]:
    """(file, class) for each call of one of `names` in product code, outside the root."""
    found = set()
    for package in PRODUCT:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call):
                    func = node.func
                    name = (func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute)
                            else "")
                    if name in names and path.relative_to(ROOT).as_posix() != HOME:
                        found.add((path.relative_to(ROOT).as_posix(), name))
    return found


def test_no_service_builds_a_shared_part_or_another_service():
    assert _built(SHARED) == SHARED_LEFT
    # A ledger is opened with the settings' arguments by `ledger_of` in the root (the API, and every
    # command through gate_cli.context.open_ledger); only these two open their own, on purpose.
    assert _built(frozenset({"Ledger"})) == {
        ("gate_cli/golden_build.py", "Ledger"),  # the golden corpus: a fresh SQLite file of its own
        ("workbench/demo/seed.py", "Ledger"),  # the demo seed: over the engine it was given
    }


def test_the_api_services_share_one_governance_opener_and_witness(make_app):
    runtime = make_app().extensions["gate"]
    governance = runtime.releases.safeguards
    assert runtime.holds.governance is governance and runtime.keys.governance is governance
    assert runtime.scope_events.governance is governance and runtime.events.governance is governance
    assert runtime.events.safeguards is governance and runtime.privacy.safeguards is governance
    assert runtime.events.delivery.privacy is runtime.privacy
    assert runtime.service.pipeline.holds is runtime.holds.opener
    assert runtime.holds.opener.safeguards is governance
    assert runtime.holds.witness is runtime.releases.reader.witness is governance.store.witness


def test_the_api_services_read_the_one_clock_they_were_built_with(make_app):
    clock = FixedClock(datetime(2026, 3, 1, 12, tzinfo=UTC))
    runtime = make_app(clock=clock).extensions["gate"]
    readers = {"decisions": runtime.service, "holds": runtime.holds, "lifecycle": runtime.lifecycle,
               "events": runtime.events, "audit": runtime.audit, "scope_events": runtime.scope_events,
               "keys": runtime.keys, "pilots": runtime.pilots, "policy_alerts": runtime.policy_alerts}
    assert {name: service.clock for name, service in readers.items()} == dict.fromkeys(readers, clock)
    assert runtime.replays.decisions is runtime.service
    # An outcome reported through the API reaches the canary guardrails of the one release service.
    assert runtime.lifecycle.after_outcome == runtime.releases.guardrails.after_outcome


def test_the_api_workers_follow_the_dispatch_setting(make_app):
    serving = make_app({"GATE_EVENTS_DISPATCH": "true"}).extensions["gate"]
    assert serving.dispatcher is not None and serving.dispatcher.service is serving.events
    assert "scheduled-reports" in {worker.name for worker in serving.dispatcher.workers}
    assert serving.hold_sweeper is not None and serving.hold_sweeper.name == "hold-sweeper"
    quiet = make_app({"GATE_EVENTS_DISPATCH": "false"}).extensions["gate"]
    assert quiet.dispatcher is None and quiet.hold_sweeper is None


def test_the_workbench_store_is_wired_as_the_api_is(tmp_path):
    from workbench.app.store import WorkbenchStore

    ledger = Ledger(f"sqlite:///{tmp_path / 'gate.db'}")
    ledger.upgrade()
    clock = FixedClock(datetime(2026, 3, 1, tzinfo=UTC))
    log = tmp_path / "checkpoints.jsonl"
    try:
        store = WorkbenchStore(ledger, SigningSetup.load(None, None, "hmac"), tmp_path / "dataset", clock=clock,
                               webhook_allow_hosts=("hooks.example",), checkpoint_log=log)
        assert {store.service.clock, store.lifecycle.clock, store.holds.clock, store.events.clock,
                store.audit.clock} == {clock}
        assert store.lifecycle.after_outcome == store.releases.guardrails.after_outcome
        assert store.events.delivery.allow_hosts == frozenset({"hooks.example"})
        assert store.holds.witness.checkpoint_log == log and store.audit.checkpoint_log == log
    finally:
        ledger.dispose()
