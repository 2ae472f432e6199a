"""The signed record of the API keys that may act on production or governance (issue 52), pure.

Creating a key with `release`, `approve`, `resolve` or `admin` (gate.keys.apikeys.HOLDER_REQUIRED),
or enabling such a key again, is an event of the scope's key chain (`api_key_grant_event_v1`):
which key, for which holder, with which permissions, and the principal who did it (today the
local operator: keys are created on the ledger's host). Events are hashed, chained and signed
exactly like the release and governance chains (gate.chain.sealing), stored beside them under
the reserved id `KEY_GRANTS_ID`, and `gate keys history` serves them as a document `gate verify`
checks offline (`verify_key_grants`): a deleted, reordered, edited or unsigned grant fails.

A grant is also a governed change (issue 52, "Safeguard settings change through one path"): the
keys of a scope that act on production are one setting of the table of safeguards
(gate.governance.table, `api_keys`; its value is `KeyGrants`), so creating, enabling or widening
such a key is a change through the one governed-change service (gate.services.governance), and
while the scope requires approvals a grant that `weakenings` names is a request a second, distinct
holder approves before the key acts. The key chain records each grant once it is in force.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate.chain.event_check import EventChainCheck, EventChainCheckJSON, keys_given
from gate.chain.sealing import Seal, chain_problem, seal_of, sealed_members
from gate.errors import GateError
from gate.keys.anchors import TrustAnchors
from gate.keys.apikeys import HOLDER_REQUIRED, parse_permissions, permissions_text
from gate.keys.signing import ReceiptSigner
from gate.principals import Permissions, Principal, holder_id, parse_holder
from gate.strict_json import JsonValue

KEY_GRANTS_ID = "@api-keys"  # rulebook ids start with a letter: no release can take this id
KEY_GRANT_EVENT_VERSION = "api_key_grant_event_v1"
KEY_GRANTS_VERSION = "api_key_grants_v1"
GRANT_ACTIONS = ("key_created", "key_enabled", "key_widened")
# `api_key_id`: the API key granted (`key_id` is the signing key's, a signature member).
GRANT_MEMBERS = ("api_key_grant_event_version", "scope_hash", "seq", "previous_event_hash", "action", "api_key_id",
                 "holder", "permissions", "principal", "actor", "created_at")


class KeyGrantEventBody(TypedDict):
    """A key grant event's members before its seal (GRANT_MEMBERS)."""

    api_key_grant_event_version: str
    scope_hash: str
    seq: int
    previous_event_hash: str | None
    action: str
    api_key_id: str
    holder: str
    permissions: str
    principal: dict[str, str]
    actor: str
    created_at: str


class KeyGrantEvent(KeyGrantEventBody, Seal):
    """A sealed `api_key_grant_event_v1`, as `build_grant_event` makes it and the key chain stores it."""


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


class HeldGrant(TypedDict):
    """One key's grant in `KeyGrantsJSON`: its holder and its permissions as stored."""

    holder: str
    permissions: str


class KeyGrantsJSON(TypedDict):
    """`KeyGrants` as JSON: the grants by key id, in key id order."""

    keys: dict[str, HeldGrant]


@dataclass(frozen=True, slots=True)
class KeyGrants:
    """The value of the `api_keys` safeguard: each active key of a scope that acts on production,
    by key id, as (its holder, its permissions as stored: `permissions_text`)."""

    keys: Mapping[str, tuple[str, str]] = field(default_factory=dict)

    def to_json(self) -> KeyGrantsJSON:
        return {"keys": {key_id: {"holder": holder, "permissions": permissions}
                         for key_id, (holder, permissions) in sorted(self.keys.items())}}

    @classmethod
    def from_json(cls, body: Any) -> KeyGrants:
        """The value a change or a stored event states; GOVERNANCE_REQUEST_INVALID when malformed."""
        keys = body.get("keys") if isinstance(body, Mapping) and set(body) == {"keys"} else None
        if not isinstance(keys, Mapping):
            raise GateError("GOVERNANCE_REQUEST_INVALID", "api_keys is {\"keys\": {key_id: {holder, permissions}}}")
        out: dict[str, tuple[str, str]] = {}
        for key_id, grant in keys.items():
            if not isinstance(grant, Mapping) or set(grant) != {"holder", "permissions"}:
                raise GateError("GOVERNANCE_REQUEST_INVALID", "each api_keys grant states holder and permissions")
            out[str(key_id)] = _grant(str(key_id), grant["holder"], grant["permissions"])
        return cls(out)

    def with_key(self, key_id: str, holder: str | None, permissions: str | None) -> KeyGrants:
        """These grants with `key_id` granted `permissions` for `holder` (its stated one, or none)."""
        return KeyGrants({**self.keys, key_id: (holder_id(key_id, holder),
                                                permissions_text(parse_permissions(permissions)))})

    def without(self, key_id: str) -> KeyGrants:
        return KeyGrants({k: v for k, v in self.keys.items() if k != key_id})


def _grant(key_id: str, holder: Any, permissions: Any) -> tuple[str, str]:
    """One checked grant: a holder as `parse_holder` reads it (or the key's own, key:<id>) and a
    permission list that acts on production, in its stored form."""
    try:
        if holder != f"key:{key_id}":
            parse_holder(holder)
        granted = parse_permissions(permissions) if isinstance(permissions, str) else None
    except ValueError as exc:
        raise GateError("GOVERNANCE_REQUEST_INVALID", f"api_keys grant of {key_id}: {exc}") from None
    if granted is None or not granted & HOLDER_REQUIRED or permissions != permissions_text(granted):
        raise GateError("GOVERNANCE_REQUEST_INVALID", f"api_keys grant of {key_id}: permissions must be the stored "
                        "list of a key that acts on production")
    return str(holder), permissions


def _gains(before: KeyGrants, after: KeyGrants) -> list[tuple[str, str, Permissions]]:
    """Each key of `after` that gains `release`, `approve`, `resolve` or `admin` over `before`
    (a new or enabled key, a widened one, or one whose holder changed: all it holds), as (key id,
    its holder, the rights gained)."""
    out = []
    for key_id, (holder, permissions) in sorted(after.keys.items()):
        was = before.keys.get(key_id)
        kept = parse_permissions(was[1]) if was is not None and was[0] == holder else frozenset()
        gained = (parse_permissions(permissions) & HOLDER_REQUIRED) - kept
        if gained:
            out.append((key_id, holder, frozenset(gained)))
    return out


def grant_weakenings(before: KeyGrants, after: KeyGrants) -> tuple[str, ...]:
    """What a change of a scope's production keys weakens: each key that gains `release`,
    `approve`, `resolve` or `admin` (a new or enabled key, a widened one, or one whose holder
    changed: all it holds), as `<key id>: <rights>`. None while no key of the scope acts on
    production: the scope's first such key is its bootstrap (docs/releases.md, "Keys")."""
    if not before.keys:
        return ()
    return tuple(f"{key_id}: {permissions_text(gained)}" for key_id, _holder, gained in _gains(before, after))


def grantees(before: KeyGrants, after: KeyGrants) -> frozenset[str]:
    """The holders a change of the scope's production keys gives rights to: none of them may
    approve it (issue 64), whichever of its keys it uses (gate.releases.governance)."""
    return frozenset(holder for _key_id, holder, _gained in _gains(before, after))


def key_grants_of(rows: Sequence[Mapping[str, Any]], scope: str) -> KeyGrants:
    """The scope's active keys that act on production, from the ledger's key rows (the value in
    force before the governance chain first records one)."""
    grants = KeyGrants()
    for row in rows:
        stored = row.get("permissions")
        if row["scope"] == scope and row["status"] == "active" and _acts(stored):
            grants = grants.with_key(row["key_id"], row.get("holder"), stored)
    return grants


def _acts(stored: Any) -> bool:
    try:
        return bool(parse_permissions(stored) & HOLDER_REQUIRED)
    except ValueError:  # a list this build does not know grants only decide (api.auth)
        return False


def build_grant_event(grant: KeyGrant, *, scope_hash: str, seq: int, previous_event_hash: str | None,
                      signer: ReceiptSigner | None) -> KeyGrantEvent:
    """The sealed event of `grant` at position `seq` of the scope's key chain."""
    if grant.action not in GRANT_ACTIONS:
        raise ValueError(f"unknown key grant action {grant.action!r}")
    event: KeyGrantEventBody = {
        "api_key_grant_event_version": KEY_GRANT_EVENT_VERSION, "scope_hash": scope_hash, "seq": seq,
        "previous_event_hash": previous_event_hash, "action": grant.action, "api_key_id": grant.key_id,
        "holder": grant.holder, "permissions": grant.permissions, "principal": grant.principal.to_json(),
        "actor": grant.principal.actor, "created_at": grant.at,
    }
    return {**event, **seal_of(event, signer)}


def grants_document(scope_hash: str, events: Sequence[Mapping[str, Any]],
                    governance: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """What `gate keys history` prints and `gate verify` reads: the key chain and the scope's
    governance chain (each grant request and who approved it)."""
    return {"api_key_grants_version": KEY_GRANTS_VERSION, "scope_hash": scope_hash, "events": list(events),
            "governance": list(governance)}


_GRANT_BODY = frozenset(GRANT_MEMBERS)


def _form_problem(event: Mapping[str, JsonValue], where: str) -> str | None:
    """An event's members, version, action, holder and principal."""
    if not sealed_members(event, _GRANT_BODY):
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


class GrantLine(TypedDict):
    """A grant as `gate verify` lists it: members of its event, in this order."""

    seq: int
    action: str
    api_key_id: str
    holder: str
    permissions: str
    actor: str
    created_at: str


class GrantsCheckJSON(EventChainCheckJSON):
    """`GrantsCheck` as JSON: the chain check's members (`problems`: the first problem, or
    none), then each grant."""

    grants: list[GrantLine]


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantsCheck(EventChainCheck):
    """What `verify_key_grants` found: the chain check (validity: integrity, and authenticity
    too when keys were given; the first problem), and each grant as `gate verify` lists it (those
    before the first problem, when there is one)."""

    grants: tuple[GrantLine, ...] = ()

    def to_json(self) -> GrantsCheckJSON:
        return {**EventChainCheck.to_json(self), "grants": list(self.grants)}


def verify_key_grants(document: Any, anchors: TrustAnchors | None) -> GrantsCheck:
    """Check a key chain document offline (anchors None: hashes and links only)."""
    checked = keys_given(anchors)
    if not isinstance(document, Mapping) or document.get("api_key_grants_version") != KEY_GRANTS_VERSION \
            or not isinstance(document.get("events"), list):
        return GrantsCheck(valid=False, signatures_checked=checked, events=0,
                           problems=(f"not an {KEY_GRANTS_VERSION} document with an events array",))
    events: list[Any] = document["events"]
    seq, head = 0, None
    grants: list[GrantLine] = []
    for index, event in enumerate(events):
        where = f"grant event {index + 1}"
        problem = f"{where}: not a JSON object" if not isinstance(event, Mapping) else (
            _form_problem(event, where) or chain_problem(event, where, seq, head, document.get("scope_hash"), anchors))
        if problem is not None:
            return GrantsCheck(valid=False, signatures_checked=checked, events=len(events), problems=(problem,),
                               grants=tuple(grants))
        seq, head = event["seq"], event["event_hash"]
        grants.append({"seq": event["seq"], "action": event["action"], "api_key_id": event["api_key_id"],
                       "holder": event["holder"], "permissions": event["permissions"], "actor": event["actor"],
                       "created_at": event["created_at"]})
    return GrantsCheck(valid=True, signatures_checked=checked, events=len(events), grants=tuple(grants))
