"""A release service built directly on a SQLite ledger, as `gate.services.root` builds it for the API,
the CLI and the workbench, for tests that call `ReleaseService` itself (no HTTP): a movable
clock, a signing keyring, a decision service for the snapshots and the decides, and the rows
the guardrails read written straight into the ledger's tables."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import insert, select

from gate.clock import Clock as AnyClock
from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger
from gate.ledger.tables import event_outbox, outcome_latest, release_decisions, release_policies
from gate.principals import Principal
from gate.services.chains import EventChainWitness
from gate.services.decide import Caller, DecisionService
from gate.services.governance import GovernanceService
from gate.services.holds import HoldOpener
from gate.services.release_reads import CACHE_SECONDS
from gate.services.releases import ReleaseService
from gate.services.root import release_service as composed_release_service
from gate.services.snapshots import RulebookSnapshots
from tests.releases.support import version

SCOPE = "acme"
RULEBOOK_ID = "pricing_exception"
EVERY_RIGHT = frozenset({"decide", "publish", "release", "approve", "admin"})
KEY_A, KEY_B = Principal.api_key("key_a"), Principal.api_key("key_b")
START = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


class Clock:
    """A clock that stays where it is put."""

    def __init__(self, moment: datetime = START) -> None:
        self.moment = moment

    def now(self) -> datetime:
        return self.moment


@dataclass
class World:
    """One ledger, its decision service and the release service wired into it."""

    ledger: Ledger
    signing: SigningSetup
    clock: Clock
    decisions: DecisionService
    releases: ReleaseService
    trips: list[tuple[Any, ...]] = field(default_factory=list)

    def caller(self, permissions: frozenset[str] = EVERY_RIGHT, scope: str = SCOPE) -> Caller:
        return Caller("key_a", scope, "starter", 1_000_000, 1_000_000_000, permissions)

    def publish(self, *rulebooks: dict[str, Any], scope: str = SCOPE) -> dict[str, str]:
        """Publish each rulebook; returns version -> rulebook_hash."""
        hashes = {}
        for rulebook in rulebooks:
            registry, _created = self.releases.publish(self.caller(scope=scope), rulebook)
            hashes[rulebook["version"]] = registry["hash"]
        return hashes

    def act(self, action: str, principal: Principal = KEY_A, permissions: frozenset[str] = EVERY_RIGHT,
            key: str | None = None, rulebook_id: str = RULEBOOK_ID, scope: str = SCOPE,
            **body: Any) -> dict[str, Any]:
        event, _created = self.releases.act(scope, principal, permissions, rulebook_id, {"action": action, **body},
                                            idempotency_key=key)
        return event

    def another_worker(self, cache_seconds: float = 60.0) -> ReleaseService:
        """A second release service on the same ledger (another API worker)."""
        return release_service(self.ledger, self.signing, self.decisions.snapshots, self.clock,
                               cache_seconds=cache_seconds)

    def store_policy(self, policy: dict[str, Any], scope: str = SCOPE) -> None:
        """A policy as a scope stored it before its governance chain (issue 42)."""
        with self.ledger.write() as connection:
            connection.execute(insert(release_policies).values(scope=scope, policy_json=json.dumps(policy),
                                                               updated_at="2026-01-01T00:00:00.000Z"))

    def add_rows(self, arm: str, verdicts: Iterable[str], *, release_seq: int, effects: Iterable[str | None] = (),
                 prefix: str = "", shadow: tuple[str, str] | None = None, scope: str = SCOPE) -> list[str]:
        """Release rows of decisions in one arm (and their latest outcome effects), as decides and
        outcomes would have left them; returns their decision ids."""
        effects = list(effects)
        ids = []
        with self.ledger.write() as connection:
            for index, verdict in enumerate(verdicts):
                decision_id = f"dec_{prefix}{arm}_{release_seq}_{index}"
                ids.append(decision_id)
                connection.execute(insert(release_decisions).values(
                    decision_id=decision_id, scope=scope, rulebook_id=RULEBOOK_ID, release_seq=release_seq, arm=arm,
                    version="v?", verdict=verdict, created_at=f"2026-11-26T12:00:{index % 60:02d}.000Z",
                    shadow_version=shadow[0] if shadow else None, shadow_verdict=shadow[1] if shadow else None))
                effect = effects[index] if index < len(effects) else None
                if effect is not None:
                    connection.execute(insert(outcome_latest).values(
                        decision_id=decision_id, scope=scope, reported_at="2026-11-26T13:00:00.000Z",
                        receipt_id=f"out_{decision_id}", effect=effect))
        return ids

    def outbox(self, scope: str = SCOPE) -> list[dict[str, Any]]:
        """The scope's announced events, oldest first (type and data)."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(event_outbox.c.event_json).where(event_outbox.c.scope == scope)
                                      .order_by(event_outbox.c.seq)).all()
        return [json.loads(row[0]) for row in rows]


def build_world(database_url: str, home: Path, *, signing: SigningSetup | None = None,
                cache_seconds: float = 60.0) -> World:
    keyring = home / "signing-keys.json"
    if signing is None:
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        signing = SigningSetup.load(keyring, None, "hmac")
    ledger = Ledger(database_url)
    clock = Clock()
    trips: list[tuple[Any, ...]] = []
    snapshots = RulebookSnapshots(ledger, signing, clock)  # in their order, as gate.services.root builds them
    releases = release_service(ledger, signing, snapshots, clock, cache_seconds=cache_seconds,
                               on_trip=lambda *args: trips.append(args))
    decisions = DecisionService(ledger, signing, clock=clock, snapshots=snapshots, releases=releases.router,
                                hold_opener=HoldOpener(ledger, releases.safeguards))

    return World(ledger, signing, clock, decisions, releases, trips)


def release_service(ledger: Ledger, signing: SigningSetup, snapshots: RulebookSnapshots, clock: AnyClock, *,
                    cache_seconds: float = CACHE_SECONDS, on_trip: Any = None,
                    checkpoint_log: Path | None = None) -> ReleaseService:
    """A release service built by `gate.services.root.release_service` (its witness and
    governed-change service built beside it), here with the test's cache bound: another worker's."""
    witness = EventChainWitness(signing, clock, checkpoint_log)
    governance = GovernanceService(ledger, signing, clock, cache_seconds, witness)
    return composed_release_service(ledger, signing, snapshots=snapshots, clock=clock, witness=witness,
                                    governance=governance, cache_seconds=cache_seconds, on_trip=on_trip)


def two_versions(world: World) -> dict[str, str]:
    """v1 (the sample: yes for its 15% discount) and v2 (approves up to 10%: review), published."""
    return world.publish(version("v1"), version("v2", approve_limit=10))
