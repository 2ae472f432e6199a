"""API key authentication and scope resolution.

The key comes in `x-api-key` or `Authorization: Bearer <key>`. Only its sha256 is looked up;
the final comparison is constant-time (`gate.keys.apikeys.hashes_match`). Missing or unknown keys
answer 401 with `WWW-Authenticate`; a disabled key answers 403. Both carry the family's
`*_UNAUTHORIZED` code and never an approval. SECURITY: keys are never logged or echoed.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Request

from gate.keys.apikeys import DEFAULT_PERMISSIONS, hash_api_key, hashes_match, parse_permissions
from gate.ledger import Ledger
from gate.services.decide import Caller

REALM = 'Bearer realm="decision-gate"'


@dataclass(frozen=True, slots=True)
class AuthFailure(Exception):
    status: int
    message: str


def presented_key(request: Request) -> str | None:
    key = request.headers.get("x-api-key")
    if key:
        return key.strip()
    authorization = request.headers.get("Authorization", "")
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip()
    return None


class Authenticator:
    def __init__(self, ledger: Ledger, plans: dict[str, dict[str, int]]) -> None:
        self.ledger = ledger
        self.plans = plans

    def authenticate(self, request: Request) -> Caller:
        key = presented_key(request)
        if not key:
            raise AuthFailure(401, "an API key is required in x-api-key or Authorization: Bearer")
        if len(key) > 200:
            raise AuthFailure(401, "the API key is not valid")
        row = self.ledger.api_key_by_hash(hash_api_key(key))
        if row is None or not hashes_match(row["key_hash"], key):
            raise AuthFailure(401, "the API key is not valid")
        if row["status"] != "active":
            raise AuthFailure(403, "the API key is disabled")
        plan = self.plans.get(row["plan"]) or self.plans["starter"]
        return Caller(
            key_id=row["key_id"],
            scope=row["scope"],
            plan=row["plan"],
            rate_limit=row["rate_limit"] if row["rate_limit"] is not None else plan["rate_limit"],
            monthly_cap=row["monthly_cap"] if row["monthly_cap"] is not None else plan["monthly_cap"],
            permissions=_permissions(row.get("permissions")),
        )


def _permissions(stored: str | None) -> frozenset[str]:
    """The key's permissions; a stored list this build does not know grants only decide (fail closed)."""
    try:
        return parse_permissions(stored)
    except ValueError:
        return DEFAULT_PERMISSIONS
