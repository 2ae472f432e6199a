"""Per-client rate limits of the unauthenticated routes (policy checks, workflow routes, pilot
intake, and the public routes of `api.public_limits`).

These routes have no API key to count against, so they count against the calling client's
address, in the same fixed one-minute windows and the same limiter (memory or Redis) as keyed
requests: `GATE_POLICYCHECK_RATE_LIMIT` per kind unless the caller passes its own limit.

The address is the TCP peer's. Behind a reverse proxy every client would share the proxy's
address, so an operator may name the header the proxy writes (`GATE_CLIENT_ADDRESS_HEADER`,
e.g. `X-Forwarded-For`) and the proxies trusted to write it (`GATE_TRUSTED_PROXIES`, addresses
or networks). The header is read only when the peer is one of those proxies, and then only its
last entry (the one the trusted proxy appended itself): a client cannot choose its own bucket by
sending the header, directly or through the proxy.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from flask import request

from api.errors import carry_headers
from api.limits import RateState
from api.runtime import runtime
from gate.errors import GateError


def _is_trusted_proxy(peer: str, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    try:
        address = ipaddress.ip_address(peer)
    except ValueError:
        return False
    return any(address in network for network in networks)


def client_address() -> str:
    """The calling client's address: the peer's, or a trusted proxy's header's last entry."""
    settings = runtime().settings
    peer = request.remote_addr or "unknown"
    header = settings.client_address_header
    if header is None or not _is_trusted_proxy(peer, settings.trusted_proxies):
        return peer
    forwarded = request.headers.get(header, "").split(",")[-1].strip()
    try:
        return str(ipaddress.ip_address(forwarded))
    except ValueError:
        return peer  # absent or malformed: the proxy's own bucket, never one the client names


def client_key(kind: str) -> str:
    """The rate-limit key of the calling client for one kind of route."""
    return f"{kind}:{client_address()}"


def hit_client_limit(kind: str, limit: int | None = None) -> RateState:
    """Count this request in the client's window; GateError (503) when the limiter is unavailable."""
    rt = runtime()
    return rt.limiter.hit(client_key(kind), limit or rt.settings.policycheck_rate_limit, rt.now_ms())


def client_limit(kind: str, limit: int | None = None) -> dict[str, str]:
    """Count this request: the rate headers to send when it is allowed, else raise the refusal
    (429 `SVC_API_RATE_LIMITED` with the rate headers and `Retry-After`, carried to the answer;
    503 when the limiter is down)."""
    rate = hit_client_limit(kind, limit)
    headers = rate.headers()
    if not rate.allowed:
        carry_headers(headers)
        raise GateError("SVC_API_RATE_LIMITED", f"rate limit of {rate.limit} requests per minute exceeded",
                        retry_after=rate.retry_after)
    return headers


__all__ = ["client_address", "client_key", "client_limit", "hit_client_limit"]
