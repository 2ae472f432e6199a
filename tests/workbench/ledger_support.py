"""A small ledger written through the real services (signed, chained), with an injected clock.

`LedgerWriter(url)` decides pricing-exception requests in a scope at a given instant and
records lifecycle receipts for them, exactly as the API would.
"""

from __future__ import annotations

import copy
import json
from datetime import UTC, datetime
from pathlib import Path

from gate.clock import FixedClock
from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.ledger import Ledger
from gate.services.decide import Caller
from gate.services.lifecycle import KINDS, LifecycleService
from gate.services.root import decision_services

ROOT = Path(__file__).resolve().parents[2]
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())


class MovableClock(FixedClock):
    def set(self, moment: datetime) -> None:
        self._current = moment


class LedgerWriter:
    def __init__(self, url: str, keyring_path: Path) -> None:
        if not keyring_path.exists():
            generate_keyring(keyring_path, "2026-01-01T00:00:00.000Z")
        self.ledger = Ledger(url)
        self.ledger.upgrade()
        self.clock = MovableClock(datetime(2026, 1, 1, tzinfo=UTC))
        signing = SigningSetup.load(keyring_path, None, "hmac")
        self.service = decision_services(self.ledger, signing, clock=self.clock, releases=False).decisions
        self.lifecycle = LifecycleService(self.ledger, self.clock, signing)

    def decide(self, scope: str, at: datetime, *, discount: float = 15, margin: float = 31,
               rulebook_id: str | None = None) -> dict:
        self.clock.set(at)
        body = copy.deepcopy(REQUEST)
        body["context"]["inputs"].update(discount_percent=discount, margin_percent=margin)
        if rulebook_id:
            body["rulebook"]["rulebook_id"] = rulebook_id
        caller = Caller("key_test", scope, "starter", 1000, 10_000_000)
        return self.service.decide(caller, body).record

    def receipt(self, kind: str, scope: str, record: dict, at: datetime, status: str) -> dict:
        self.clock.set(at)
        bodies = {
            "execution": {"execution_status": status, "action_taken": record["action"],
                          "decision_record_hash": record["record_hash"],
                          "decision_receipt_hash": record["receipt_hash"],
                          "target_system": "billing", "target_object_id": "sub_1",
                          "mutation": "discount.create",
                          "executor": {"type": "worker", "id": "w1"}},
            "outcome": {"outcome_status": status, "action_executed": True,
                        "decision_record_hash": record["record_hash"]},
            "crm_sync": {"sync_status": status, "sync_direction": "writeback", "crm_provider": "hubspot",
                         "crm_object_type": "deal", "crm_object_id": "deal_1",
                         "field_mapping": {"verdict": "gate_verdict__c"}},
        }
        result = self.lifecycle.record(KINDS[kind], scope=scope, decision_id=record["decision_id"],
                                       record=record, body=bodies[kind], idempotency_key=None)
        return result.receipt

    def close(self) -> None:
        self.ledger.dispose()


def at(month: int, day: int, hour: int = 12, minute: int = 0, ms: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, 0, ms * 1000, tzinfo=UTC)
