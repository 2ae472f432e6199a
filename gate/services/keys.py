"""API keys that may act on production or governance: recorded and governed (issue 52).

The keys of a scope that hold `release`, `approve`, `resolve` or `admin`
(gate.keys.apikeys.HOLDER_REQUIRED) are one setting of the table of safeguards (`api_keys`,
gate.governance.table; its value in force is the ledger's key rows). While the scope requires
approvals, creating, enabling or widening such a key is a change through the one governed-change
service (gate.services.governance), one signed governance event, and a grant the table says
weakens (a key gains one of those rights) is a pending request: the key's row is stored `pending`
(it authenticates nothing) until a second, distinct holder approves it (`approve`,
`POST /api/keys/grants/approvals`, `gate keys approve`). A scope's first such key is its bootstrap
and acts at once (docs/releases.md, "Keys"). While no approval is required a grant acts at once
with no governance event, as before; disabling a key never waits.

Once a grant is in force, the key's row and its signed grant event (gate.releases.key_grants) are
written in one transaction, naming the principal who made it take effect. The key chain is served
by `history_document` (`gate keys history`, with the scope's governance chain) and checked offline
by `gate verify`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import partial
from typing import Any

from gate.chain.links import scope_hash
from gate.clock import Clock, iso_ms
from gate.errors import GateError, SigningUnavailable
from gate.governance.table import API_KEYS
from gate.keys.apikeys import HOLDER_REQUIRED, parse_permissions, permissions_text
from gate.keys.config import LiveSigning, SigningSetup
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger
from gate.ledger.api_keys import ApiKeyRow
from gate.ledger.releases import EventRow, ReleaseLedger, ReleaseRace, witnessed_chain_id
from gate.principals import KEY_HOLDER_PREFIX, Permissions, Principal, holder_id
from gate.protocol.canonical import canonical_text
from gate.releases.governance import GOVERNANCE_ID, GovernanceEvent
from gate.releases.key_grants import (
    KEY_GRANTS_ID,
    KeyGrant,
    KeyGrantEvent,
    KeyGrants,
    build_grant_event,
    grants_document,
)
from gate.services.governance import HISTORY_LIMIT, GovernanceService

RETRIES = 8
PENDING = "pending"  # a key whose grant waits for a second holder's approval: it authenticates nothing


def acts_on_production(permissions: str | None) -> bool:
    """Whether a stored permission list grants a right whose use is counted by holder."""
    return bool(parse_permissions(permissions) & HOLDER_REQUIRED)


@dataclass(frozen=True, slots=True)
class KeyChange:
    """What a key change wrote: its signed grant events (the key chain's, once in force) and its
    signed governance event (None: the key acts on no production right, or nothing changed)."""

    grants: tuple[KeyGrantEvent, ...] = ()
    governance: GovernanceEvent | None = None

    @property
    def pending(self) -> bool:
        """Whether the change waits for a second holder's approval."""
        return self.governance is not None and self.governance["action"] == "policy_request"


class KeyService:
    """The scope's keys that act on production, through the one governed-change service, and
    the key chain over one ledger, signing with the receipt key."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock,
                 governance: GovernanceService) -> None:
        """Built by the composition root (`gate.services.root.key_service`) with its one
        governed-change service (the serving process's; `gate keys`: one witnessed in GATE_CHECKPOINT_LOG)."""
        self.ledger = ledger
        self.signing = signing
        self.clock = clock
        self.governance = governance
        # The key chain in the governance chain's witnessed checkpoint log (issue 64): a grant is
        # written only on a chain that extends its checkpoint, and checkpointed after.
        self.store = ReleaseLedger(ledger, self.governance.store.witness)

    def create(self, principal: Principal, permissions: Permissions, row: ApiKeyRow) -> KeyChange:
        """Store the key `row`: at once, or (a weakening grant while approvals are required) as a
        pending key a second holder's approval makes active."""
        if not acts_on_production(row.get("permissions")):
            self.ledger.insert_api_key(row)
            return KeyChange()
        event = self._govern(row["scope"], principal, permissions,
                             lambda grants: grants.with_key(row["key_id"], row.get("holder"), row["permissions"]))
        if event is not None and event["action"] == "policy_request":
            self.ledger.insert_api_key({**row, "status": PENDING})
            return KeyChange((), event)
        return KeyChange(_written(self._record(principal, row["scope"], "key_created", row, row)), event)

    def enable(self, principal: Principal, permissions: Permissions, key_id: str) -> KeyChange | None:
        """Set a key active again (None: no such key); a pending one's grant is asked for again."""
        row = self.ledger.api_key(key_id)
        if row is None:
            return None
        granted = row["permissions"]
        if granted is None or not acts_on_production(granted):
            self.ledger.set_api_key_status(key_id, "active", iso_ms(self.clock.now()))
            return KeyChange()
        return self._grant(principal, permissions, row, granted, row["holder"])

    def widen(self, principal: Principal, permissions: Permissions, key_id: str, added: str,
              holder: str | None) -> KeyChange | None:
        """Add the rights `added` to an active key (and state its holder): governed as a grant."""
        row = self.ledger.api_key(key_id)
        if row is None:
            return None
        if row["status"] != "active":
            raise GateError("GOVERNANCE_REQUEST_INVALID", f"{key_id} is {row['status']}: only an active key is "
                            "widened (enable it first)")
        wanted = permissions_text(parse_permissions(row.get("permissions")) | parse_permissions(added))
        stated = holder if holder is not None else row.get("holder")
        if not acts_on_production(wanted):
            self.ledger.set_api_key_grant(key_id, wanted, stated)
            return KeyChange()
        if stated is None:
            raise GateError("GOVERNANCE_REQUEST_INVALID", f"a key with {', '.join(sorted(HOLDER_REQUIRED))} names "
                            "its holder: state one (--holder)")
        return self._grant(principal, permissions, row, wanted, stated)

    def disable(self, key_id: str) -> KeyChange | None:
        """Disable a key (None: no such key). Never a weakening: it applies at once, and a grant
        request made before it is stale (the keys it was asked over changed)."""
        if not self.ledger.set_api_key_status(key_id, "disabled", iso_ms(self.clock.now())):
            return None
        return KeyChange()

    def approve(self, scope: str, principal: Principal, permissions: Permissions, request_seq: Any,
                reason: str | None = None) -> KeyChange:
        """A second, distinct holder (`approve`) applies a pending grant request: its keys act."""
        event, _state = self.governance.approve(scope, API_KEYS, principal, permissions, request_seq, reason)
        return KeyChange(self._apply(scope, principal, event), event)

    def document(self, scope: str) -> dict[str, Any]:
        """The scope's keys that act on production (`policy`), the live grant requests and the
        governance chain's seq (`GET /api/keys/grants`, `gate keys requests`)."""
        return {"ok": True, **self.governance.document(scope, API_KEYS)}

    def _grant(self, principal: Principal, permissions: Permissions, row: ApiKeyRow, wanted: str,
               holder: str | None) -> KeyChange:
        """Grant `row`'s key the rights `wanted` for `holder`: at once (its grant event), or a request."""
        event = self._govern(row["scope"], principal, permissions,
                             lambda grants: _as_read(grants, row).with_key(row["key_id"], holder, wanted))
        if event is not None and event["action"] == "policy_request":
            return KeyChange((), event)
        changed = row["status"] != "active" or (row.get("permissions"), row.get("holder")) != (wanted, holder)
        if not changed:  # the keys in force already hold it as read (`_as_read`): no governance event either
            return KeyChange()
        action = _grant_action(row)
        return KeyChange(_written(self._record(principal, row["scope"], action,
                                               {**row, "permissions": wanted, "holder": holder}, None)), event)

    def _govern(self, scope: str, principal: Principal, permissions: Permissions,
                make: Any) -> GovernanceEvent | None:
        """The governance event of a grant while the scope requires approvals (a request when it
        weakens, else a change in force); None while it does not: the grant acts at once, as
        before issue 52, recorded by its grant event alone."""
        if not self.governance.approvals_required(scope):
            return None
        event, _state = self.governance.change(scope, API_KEYS, principal, permissions, make)
        return event

    def _apply(self, scope: str, principal: Principal, event: GovernanceEvent) -> tuple[KeyGrantEvent, ...]:
        """Make the keys an approved request grants act: each as its grant states, with its event."""
        before, after = (KeyGrants.from_json(event[name]) for name in ("policy_before", "policy_after"))
        written: list[KeyGrantEvent | None] = []
        for key_id, (holder, wanted) in sorted(after.keys.items()):
            row = self.ledger.api_key(key_id)
            if before.keys.get(key_id) == (holder, wanted) or row is None:
                continue
            stated = None if holder == KEY_HOLDER_PREFIX + key_id else holder
            written.append(self._record(principal, scope, _grant_action(row),
                                        {**row, "permissions": wanted, "holder": stated}, None))
        return _written(*written)

    def _record(self, principal: Principal, scope: str, action: str, key: ApiKeyRow,
                new_row: ApiKeyRow | None) -> KeyGrantEvent | None:
        signer = self._signer()
        grant = KeyGrant(action, key["key_id"], holder_id(key["key_id"], key.get("holder")),
                         str(key.get("permissions")), principal, iso_ms(self.clock.now()))
        for _ in range(RETRIES):
            head = self.store.head(scope, KEY_GRANTS_ID)
            seq = head["seq"] + 1 if head is not None else 1
            event = build_grant_event(grant, scope_hash=scope_hash(scope), seq=seq,
                                      previous_event_hash=head["event_hash"] if head is not None else None, signer=signer)
            row: EventRow = {"scope": scope, "rulebook_id": KEY_GRANTS_ID, "seq": seq, "action": action,
                   "event_hash": event["event_hash"], "idempotency_key": None, "request_hash": event["event_hash"],
                   "created_at": grant.at, "event_json": canonical_text(event)}
            try:
                written = self.store.append_key_grant(
                    row, new_row, None if new_row is not None else
                    (key["key_id"], {"permissions": key.get("permissions"), "holder": key.get("holder")}))
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
        """The scope's key chain as `gate verify` reads it, with the scope's governance chain (who
        asked for and who approved each grant). `CHAIN_INTEGRITY_FAILED` when either chain does
        not extend its witnessed checkpoint."""
        witness = self.store.witness
        with self.ledger.one_snapshot():
            if witness is not None:
                for chain in (KEY_GRANTS_ID, GOVERNANCE_ID):
                    witness.check(witnessed_chain_id(scope, chain), partial(self.store.event_hashes, scope, chain))
            events = [json.loads(row["event_json"])
                      for row in self.store.events(scope, KEY_GRANTS_ID, limit=HISTORY_LIMIT)]
            return grants_document(scope_hash(scope), events, self.governance.history(scope))


def _as_read(grants: KeyGrants, row: ApiKeyRow) -> KeyGrants:
    """`grants` (the keys in force, read in the governance step) when they hold `row`'s key as the
    row was read (absent unless active and acting on production); GOVERNANCE_SETTING_CHANGED when
    the key changed in between, so a stale read never records a narrowing the ledger does not hold."""
    key_id = row["key_id"]
    read = (holder_id(key_id, row.get("holder")), permissions_text(parse_permissions(row.get("permissions")))) \
        if row["status"] == "active" and acts_on_production(row.get("permissions")) else None
    if grants.keys.get(key_id) != read:
        raise GateError("GOVERNANCE_SETTING_CHANGED", f"{key_id} changed while this grant was asked for: "
                        "ask again")
    return grants


def _grant_action(row: ApiKeyRow) -> str:
    """The grant event of a key's row taking effect: its creation (a pending key), its enabling
    (a disabled one) or its widening (an active one)."""
    return {PENDING: "key_created", "active": "key_widened"}.get(row["status"], "key_enabled")


def _written(*events: KeyGrantEvent | None) -> tuple[KeyGrantEvent, ...]:
    """The grant events written (None: the key was gone, nothing was)."""
    return tuple(event for event in events if event is not None)
