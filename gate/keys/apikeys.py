"""API key material: generation and hashing. Only the hash is ever stored (SECURITY).

A key is `dg_` followed by 43 base64url characters (256 random bits). Its stored form is the
bare sha256 hex of the full key text; lookups go by that hash and the final comparison is
constant-time. Keys are never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

from gate.principals import KEY_PERMISSIONS, Permissions, is_permission

KEY_PREFIX = "dg_"
_KEY_SHAPE = re.compile(r"^dg_[A-Za-z0-9_-]{43}$")


@dataclass(frozen=True, slots=True)
class NewApiKey:
    key_id: str
    api_key: str  # shown once, never stored
    key_hash: str


def hash_api_key(api_key: str) -> str:
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def new_api_key() -> NewApiKey:
    api_key = KEY_PREFIX + secrets.token_urlsafe(32)
    return NewApiKey(key_id="key_" + secrets.token_hex(6), api_key=api_key, key_hash=hash_api_key(api_key))


def well_formed(api_key: str) -> bool:
    return bool(_KEY_SHAPE.fullmatch(api_key))


def hashes_match(stored_hash: str, presented_key: str) -> bool:
    """Constant-time comparison of a stored hash with the hash of a presented key."""
    return hmac.compare_digest(stored_hash.encode("ascii"), hash_api_key(presented_key).encode("ascii"))


# Release permissions (docs/releases.md). `decide` is every key's right; the others are granted
# explicitly (`gate keys create --permissions decide,publish,release,approve,admin`). Stored as a
# sorted, comma-separated list; a key without a stored list has today's rights: decide (and the
# reads). `admin` (issue 42) changes the scope's release policy and overrides a guardrail halt; a
# `release` key no longer does: one key must not switch the two-person rule off. `resolve` (issue 43)
# votes on the scope's held actions (docs/holds.md).
PERMISSIONS = KEY_PERMISSIONS  # gate.principals: the one vocabulary
DEFAULT_PERMISSIONS: Permissions = frozenset({"decide"})
# A key with any of these acts on production or governance: it is created for a stated holder
# (issue 52, gate.principals), since approvals, votes and four eyes count holders, not keys.
HOLDER_REQUIRED: Permissions = frozenset({"release", "approve", "resolve", "admin"})


def parse_permissions(text: str | None) -> Permissions:
    """The permissions a stored (or typed) list names; ValueError for an unknown one (and for a
    right only the workbench's roles grant: a key holds KEY_PERMISSIONS). The one door through
    which a key's text becomes `Permission`s."""
    if text is None or not text.strip():
        return DEFAULT_PERMISSIONS
    names = {part.strip() for part in text.split(",") if part.strip()}
    granted = {name for name in names if is_permission(name) and name in PERMISSIONS}
    unknown = sorted(names - set(granted))
    if unknown:
        raise ValueError(f"unknown permission(s) {', '.join(unknown)}; choose from {', '.join(PERMISSIONS)}")
    return frozenset(granted | DEFAULT_PERMISSIONS)


def permissions_text(permissions: Permissions) -> str:
    return ",".join(p for p in PERMISSIONS if p in permissions)
