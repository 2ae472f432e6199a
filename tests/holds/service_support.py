"""A hold service built directly on a ledger, as the API, the CLI and the workbench wire it, for
tests that call `HoldService` itself (no HTTP): a clock the test moves, a signing keyring, and a
decision service whose `review` verdicts open the holds in their own transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select

from gate.keys.anchors import TrustAnchors
from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger
from gate.ledger.tables import event_outbox
from gate.principals import Principal
from gate.services.decide import Caller, DecisionService
from gate.services.holds import HoldService
from gate.services.root import decision_services
from tests.holds.support import MovingClock, held_request

SCOPE = "acme"
REQUESTER = "key_caller"  # the API key whose decide held the action
START = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)
REVIEWER = Principal.api_key("key_rev")
SECOND = Principal.person("https://id.example", "rita", "Rita Reviewer")
THIRD = Principal.person("https://id.example", "tom")
ADMIN = Principal.operator("ops")
RESOLVE = frozenset({"read", "resolve"})
ADMIN_RIGHTS = frozenset({"read", "admin"})


@dataclass
class Desk:
    """One ledger, the decide that opens holds on it, and the hold service over it."""

    ledger: Ledger
    signing: SigningSetup
    clock: MovingClock
    decisions: DecisionService
    service: HoldService

    def held(self, margin: float = 12, scope: str = SCOPE, requester: str = REQUESTER,
             holder: str | None = None) -> dict[str, Any]:
        """Decide the sample pricing request with a thin margin (a `review`): its record (asked
        for by the key `requester`, of `holder` when one is stated)."""
        caller = Caller(requester, scope, "starter", 1_000_000, 1_000_000_000, holder=holder)
        record = dict(self.decisions.decide(caller, held_request(margin)).record)
        assert record["verdict"] == "review"
        return record

    def row(self, decision_id: str, scope: str = SCOPE) -> dict[str, Any]:
        row = self.service.holds.hold(scope, decision_id)
        assert row is not None
        return row

    def set_policy(self, policy: dict[str, Any], scope: str = SCOPE) -> dict[str, Any]:
        return self.service.set_policy(scope, ADMIN, ADMIN_RIGHTS, policy)

    def announced(self, scope: str = SCOPE) -> list[dict[str, Any]]:
        """The scope's hold announcements in the outbox, oldest first (CloudEvents)."""
        with self.ledger.read() as connection:
            rows = connection.execute(select(event_outbox.c.event_json).where(event_outbox.c.scope == scope)
                                      .order_by(event_outbox.c.seq)).all()
        events = [json.loads(row[0]) for row in rows]
        return [event for event in events if ".hold." in event["type"]]

    @property
    def anchors(self) -> TrustAnchors:
        return self.signing.anchors


def build_desk(database_url: str, home: Path) -> Desk:
    keyring = home / "signing-keys.json"
    generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
    signing = SigningSetup.load(keyring, None, "hmac")
    ledger = Ledger(database_url)
    clock = MovingClock(START)
    core = decision_services(ledger, signing, clock=clock, releases=False)  # one opener and governance, as served
    return Desk(ledger, signing, clock, core.decisions, core.holds)
