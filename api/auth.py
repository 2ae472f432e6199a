"""API key authentication and scope resolution.

The key comes in `x-api-key` or `Authorization: Bearer <key>`. Only its sha256 is looked up;
the final comparison is constant-time (`gate.keys.apikeys.hashes_match`). Missing or unknown keys
answer 401 with `WWW-Authenticate`; a disabled key answers 403. Both carry the family's
`*_UNAUTHORIZED` code and never an approval. SECURITY: keys are never logged or echoed.

A bearer shaped like a signed JWT (three dot-separated parts; API keys have none) is a CI
principal's workload-identity token when a CI issuer is configured: `api.ci` checks it, on the
routes that take one (`keyed(ci=True)`); any other route answers it 403.

Bounded staleness (`GATE_API_KEY_CACHE_MS`, default 1000): an *active* key's resolved caller is
kept in process memory, under the key's sha256 only, for at most that long after the read that
found it began. So a key disabled (or re-planned) in the ledger is refused by every worker within
the bound. Nothing else is cached: a key the process has not read within the bound, an unknown
key and a disabled key are read from the ledger on every request, so no key is ever accepted
without a ledger read at most the bound old, and re-enabling a key takes effect at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from flask import Request

from gate.errors import Signal
from gate.keys.apikeys import DEFAULT_PERMISSIONS, hash_api_key, hashes_match, parse_permissions
from gate.ledger import ApiKeyRow, Ledger
from gate.principals import Permissions
from gate.services.decide import Caller

REALM = 'Bearer realm="decision-gate"'
SCOPE_HEADER = "x-gate-scope"  # the scope a CI principal acts in (api.ci)


@dataclass(frozen=True, slots=True)
class AuthFailure(Signal):
    """No usable key: `runtime.keyed` answers it with the route's own *_UNAUTHORIZED code, 401
    (missing or invalid key) or 403 (a disabled key) as `status` says."""

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


# Entries kept at most; a full cache is emptied (every key is then read again once).
CACHE_ENTRIES = 10_000


class WorkloadCallers(Protocol):
    """What resolves a CI token to its caller (api.ci.CIPrincipals)."""

    def caller(self, token: str, scope_header: str | None) -> Caller: ...


def is_token(value: str) -> bool:
    """A presented credential shaped like a signed JWT, header.payload.signature (API keys have no dots)."""
    return value.count(".") == 2


class Authenticator:
    def __init__(self, ledger: Ledger, plans: dict[str, dict[str, int]], *, cache_ms: int = 0,
                 clock: Callable[[], float] = time.monotonic, ci: WorkloadCallers | None = None) -> None:
        self.ledger = ledger
        self.plans = plans
        self.cache_seconds = cache_ms / 1000
        self.clock = clock
        self.ci = ci  # the CI issuer's principals (api.ci); None: no CI token is accepted
        # sha256(key) -> (monotonic time the ledger read began, the caller it resolved to)
        self._active: dict[str, tuple[float, Caller]] = {}

    def authenticate(self, request: Request, *, ci: bool = False) -> Caller:
        """The caller the request's API key (or, where `ci` and a CI issuer is configured, CI
        token) resolves to; AuthFailure otherwise."""
        key = presented_key(request)
        if not key:
            raise AuthFailure(401, "an API key is required in x-api-key or Authorization: Bearer")
        if self.ci is not None and is_token(key):
            if not ci:
                raise AuthFailure(403, "a CI token acts only on publishing and releases (docs/ci-principal.md)")
            return self.ci.caller(key, request.headers.get(SCOPE_HEADER))
        if len(key) > 200:
            raise AuthFailure(401, "the API key is not valid")
        key_hash = hash_api_key(key)
        cached = self._active.get(key_hash)
        if cached is not None and self.clock() - cached[0] < self.cache_seconds:
            return cached[1]
        read_at = self.clock()  # staleness counts from before the read
        caller = self._resolve(self.ledger.api_key_by_hash(key_hash), key)
        if self.cache_seconds > 0:
            if len(self._active) >= CACHE_ENTRIES:
                self._active.clear()
            self._active[key_hash] = (read_at, caller)
        return caller

    def _resolve(self, row: ApiKeyRow | None, key: str) -> Caller:
        """The caller an API key row grants; 401 for no row, 403 for a key that is not active
        (neither is cached: only a resolved caller is; an expired entry is never read again)."""
        if row is None or not hashes_match(row["key_hash"], key):
            raise AuthFailure(401, "the API key is not valid")
        if row["status"] == "pending":
            raise AuthFailure(403, "the API key's grant waits for a second holder's approval "
                                   "(POST /api/keys/grants/approvals)")
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
            holder=row.get("holder"),
        )


def _permissions(stored: str | None) -> Permissions:
    """The key's permissions; a stored list this build does not know grants only decide (fail closed)."""
    try:
        return parse_permissions(stored)
    except ValueError:
        return DEFAULT_PERMISSIONS
