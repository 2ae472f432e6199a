"""The signed record of the API keys that may act on production or governance (issue 52), pure.

Creating a key with `release`, `approve`, `resolve` or `admin` (gate.keys.apikeys.HOLDER_REQUIRED),
or enabling such a key again, is an event of the scope's key chain (`api_key_grant_event_v1`):
which key, for which holder, with which permissions, and the principal who did it (today the
local operator: keys are created on the ledger's host). Events are hashed, chained and signed
exactly like the release and governance chains (gate.releases.sealing), stored beside them under
the reserved id `KEY_GRANTS_ID`, and `gate keys history` serves them as a document `gate verify`
checks offline (`verify_key_grants`): a deleted, reordered, edited or unsigned grant fails.

Recording, not approval: a grant applies at once. A second holder's approval of a grant belongs to
the one governed-change service (issue 52, "Safeguard settings change through one path").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.principals import Principal, parse_holder
from gate.releases.sealing import SIGNATURE_MEMBERS, chain_problem, seal

KEY_GRANTS_ID = "@api-keys"  # rulebook ids start with a letter: no release can take this id
KEY_GRANT_EVENT_VERSION = "api_key_grant_event_v1"
KEY_GRANTS_VERSION = "api_key_grants_v1"
GRANT_ACTIONS = ("key_created", "key_enabled")
# `api_key_id`: the API key granted (`key_id` is the signing key's, a signature member).
GRANT_MEMBERS = ("api_key_grant_event_version", "scope_hash", "seq", "previous_event_hash", "action", "api_key_id",
                 "holder", "permissions", "principal", "actor", "created_at")


@dataclass(frozen=True, slots=True)
class KeyGrant:
    """One grant: `key_id` of `holder` (its stated holder, or key:<key_id>) now holds `permissions`
    (the stored comma-separated list), by `principal` at `at`."""

    action: str
    key_id: str
    holder: str
    permissions: str
    principal: Principal
    at: str


def build_grant_event(grant: KeyGrant, *, scope_hash: str, seq: int, previous_event_hash: str | None,
                      signer: ReceiptSigner | None) -> dict[str, Any]:
    """The sealed event of `grant` at position `seq` of the scope's key chain."""
    if grant.action not in GRANT_ACTIONS:
        raise ValueError(f"unknown key grant action {grant.action!r}")
    event: dict[str, Any] = {
        "api_key_grant_event_version": KEY_GRANT_EVENT_VERSION, "scope_hash": scope_hash, "seq": seq,
        "previous_event_hash": previous_event_hash, "action": grant.action, "api_key_id": grant.key_id,
        "holder": grant.holder, "permissions": grant.permissions, "principal": grant.principal.to_json(),
        "actor": grant.principal.actor, "created_at": grant.at,
    }
    seal(event, signer)
    return event


def grants_document(scope_hash: str, events: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What `gate keys history` prints and `gate verify` reads."""
    return {"api_key_grants_version": KEY_GRANTS_VERSION, "scope_hash": scope_hash, "events": list(events)}


def _form_problem(event: Mapping[str, Any], where: str) -> str | None:
    """An event's members, version, action, holder and principal."""
    if set(map(str, event)) != set(GRANT_MEMBERS) | set(SIGNATURE_MEMBERS):
        return f"{where}: members differ from {KEY_GRANT_EVENT_VERSION}'s"
    if event.get("api_key_grant_event_version") != KEY_GRANT_EVENT_VERSION:
        return f"{where}: api_key_grant_event_version must be {KEY_GRANT_EVENT_VERSION}"
    if event.get("action") not in GRANT_ACTIONS:
        return f"{where}: unknown action {event.get('action')!r}"
    key_id = event.get("api_key_id")
    if not isinstance(key_id, str) or not isinstance(event.get("permissions"), str):
        return f"{where}: api_key_id and permissions must be text"
    try:
        if event.get("holder") != f"key:{key_id}":
            parse_holder(event.get("holder"))
        if Principal.from_json(event.get("principal")).actor != event.get("actor"):
            return f"{where}: actor is not its principal's"
    except ValueError as exc:
        return f"{where}: holder or principal is malformed ({exc})"
    return None


@dataclass(frozen=True, slots=True)
class GrantsCheck:
    """What `verify_key_grants` found: validity (integrity; authenticity too when keys were
    given), the first problem, and each grant as `gate verify` lists it."""

    valid: bool
    events: int
    problem: str | None
    grants: tuple[dict[str, Any], ...]

    def to_json(self) -> dict[str, Any]:
        return {"valid": self.valid, "events": self.events, "problems": [self.problem] if self.problem else [],
                "grants": list(self.grants)}


def verify_key_grants(document: Any, anchors: TrustAnchors | None) -> GrantsCheck:
    """Check a key chain document offline (anchors None: hashes and links only)."""
    if not isinstance(document, Mapping) or document.get("api_key_grants_version") != KEY_GRANTS_VERSION \
            or not isinstance(document.get("events"), list):
        return GrantsCheck(False, 0, f"not an {KEY_GRANTS_VERSION} document with an events array", ())
    events: list[Any] = document["events"]
    seq, head = 0, None
    grants: list[dict[str, Any]] = []
    for index, event in enumerate(events):
        where = f"grant event {index + 1}"
        if not isinstance(event, Mapping):
            return GrantsCheck(False, len(events), f"{where}: not a JSON object", tuple(grants))
        problem = _form_problem(event, where) or chain_problem(event, where, seq, head, document.get("scope_hash"),
                                                               anchors)
        if problem is not None:
            return GrantsCheck(False, len(events), problem, tuple(grants))
        seq, head = event["seq"], event["event_hash"]
        grants.append({name: event[name] for name in ("seq", "action", "api_key_id", "holder", "permissions", "actor",
                                                      "created_at")})
    return GrantsCheck(True, len(events), None, tuple(grants))
