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
