"""Per-client rate limits of the unauthenticated routes (policy checks, workflow routes, pilot intake).

These routes have no API key to count against, so they count against the calling client's
address (documented: behind a proxy, the proxy's), in the same fixed one-minute windows and the
same limiter (memory or Redis) as keyed requests, with `GATE_POLICYCHECK_RATE_LIMIT` per kind.
"""

from __future__ import annotations

from flask import Response, request

from api.errors import error_response
from api.limits import RateState
from api.runtime import runtime
from gate.errors import GateError


def client_key(kind: str) -> str:
    """The rate-limit key of the calling client for one kind of route."""
    return f"{kind}:{request.remote_addr or 'unknown'}"


def hit_client_limit(kind: str) -> RateState:
    """Count this request in the client's window; GateError (503) when the limiter is unavailable."""
    rt = runtime()
    return rt.limiter.hit(client_key(kind), rt.settings.policycheck_rate_limit, rt.now_ms())


def client_limit(kind: str) -> Response | dict[str, str]:
    """Count this request: the rate headers to send when it is allowed, else the refusal to
    return (429 `SVC_API_RATE_LIMITED` with `Retry-After`, or 503 when the limiter is down)."""
    try:
        rate = hit_client_limit(kind)
    except GateError as error:
        return error_response(error.code, error.message)
    headers = rate.headers()
    if not rate.allowed:
        return error_response("SVC_API_RATE_LIMITED", f"rate limit of {rate.limit} requests per minute exceeded",
                              headers=headers, retry_after=rate.retry_after)
    return headers


__all__ = ["client_key", "client_limit", "hit_client_limit"]
