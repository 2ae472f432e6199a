"""API keys that may act on production or governance, recorded (issue 52).

`KeyService.create` stores a new key; when its permissions include `release`, `approve`,
`resolve` or `admin` (gate.keys.apikeys.HOLDER_REQUIRED) the key's row and its signed grant
event (gate.releases.key_grants) are written in one transaction, naming the principal who
created it; `enable` does the same when such a key is enabled again. The key chain is served by
`history_document` (`gate keys history`) and checked offline by `gate verify`.
"""

from __future__ import annotations

import json
from typing import Any

from gate.chain.links import scope_hash
from gate.clock import Clock, SystemClock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.keys.apikeys import HOLDER_REQUIRED, parse_permissions
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger
from gate.ledger.releases import ReleaseLedger, ReleaseRace
from gate.principals import Principal, holder_id
from gate.protocol.canonical import canonical_text
from gate.releases.key_grants import KEY_GRANTS_ID, KeyGrant, build_grant_event, grants_document

RETRIES = 8


def acts_on_production(permissions: str | None) -> bool:
    """Whether a stored permission list grants a right whose use is counted by holder."""
    return bool(parse_permissions(permissions) & HOLDER_REQUIRED)


class KeyService:
    """The key chain over one ledger, signing with the receipt key."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock | None = None) -> None:
        self.store = ReleaseLedger(ledger)
        self.ledger = ledger
        self.signing = signing
        self.clock = clock or SystemClock()

    def create(self, principal: Principal, row: dict[str, Any]) -> dict[str, Any] | None:
        """Store the key `row`; its grant event when it acts on production (else None)."""
        if not acts_on_production(row.get("permissions")):
            self.ledger.insert_api_key(row)
            return None
        return self._record(principal, row["scope"], "key_created", row, row)

    def enable(self, principal: Principal, key_id: str) -> tuple[bool, dict[str, Any] | None]:
        """Set a key active again: (whether the key exists, its grant event when it acts on production)."""
        row = self.ledger.api_key(key_id)
        if row is None:
            return False, None
        if not acts_on_production(row.get("permissions")):
            return self.ledger.set_api_key_status(key_id, "active", iso_ms(self.clock.now())), None
        event = self._record(principal, row["scope"], "key_enabled", row, None)
        return event is not None, event

    def _record(self, principal: Principal, scope: str, action: str, key: dict[str, Any],
                new_row: dict[str, Any] | None) -> dict[str, Any] | None:
        signer = self._signer()
        grant = KeyGrant(action, key["key_id"], holder_id(key["key_id"], key.get("holder")),
                         str(key.get("permissions")), principal, iso_ms(self.clock.now()))
        for _ in range(RETRIES):
            head = self.store.head(scope, KEY_GRANTS_ID)
            seq = head["seq"] + 1 if head is not None else 1
            event = build_grant_event(grant, scope_hash=scope_hash(scope), seq=seq,
                                      previous_event_hash=head["event_hash"] if head is not None else None, signer=signer)
            row = {"scope": scope, "rulebook_id": KEY_GRANTS_ID, "seq": seq, "action": action,
                   "event_hash": event["event_hash"], "idempotency_key": None, "request_hash": event["event_hash"],
                   "created_at": grant.at, "event_json": canonical_text(event)}
            try:
                written = self.store.append_key_grant(row, new_row, key["key_id"] if new_row is None else None)
            except ReleaseRace:
                continue
            return event if written else None
        raise GateError("LEDGER_UNAVAILABLE", "the scope's key chain is busy; retry")

    def _signer(self) -> ReceiptSigner | None:
        signer = self.signing.receipt_signer()
        if signer is None and self.signing.required:
            raise SigningUnavailable()  # SECURITY: no unsigned grant where signing is required
        return signer

    def history_document(self, scope: str) -> dict[str, Any]:
        """The scope's key chain as `gate verify` reads it."""
        events = [json.loads(row["event_json"]) for row in self.store.events(scope, KEY_GRANTS_ID, limit=100_000)]
        return grants_document(scope_hash(scope), events)
