"""Per-key request rate limits: a fixed one-minute window (reference facts §7).

Two backends with one contract:
- `MemoryRateLimiter` for the single-process embedded default;
- `RedisRateLimiter` (from `GATE_REDIS_URL`) whenever more than one process serves: the count
  is an atomic INCR in Redis, so all workers and hosts share one window.
A backend failure is an error (503), never a pass: SECURITY, fail closed.

Monthly caps are not here: they are charged in the ledger transaction that stores the record.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from gate.errors import GateError

WINDOW_MS = 60_000


@dataclass(frozen=True, slots=True)
class RateState:
    allowed: bool
    limit: int
    remaining: int
    reset_ms: int  # epoch milliseconds when the window ends
    retry_after: int  # whole seconds, rounded up (0 when allowed)

    def headers(self) -> dict[str, str]:
        headers = {
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(self.remaining),
            "X-RateLimit-Reset": str(self.reset_ms),
        }
        if not self.allowed:
            headers["Retry-After"] = str(self.retry_after)
        return headers


def _state(count: int, limit: int, window: int, now_ms: int) -> RateState:
    reset_ms = (window + 1) * WINDOW_MS
    allowed = count <= limit
    return RateState(
        allowed=allowed,
        limit=limit,
        remaining=max(0, limit - count),
        reset_ms=reset_ms,
        retry_after=0 if allowed else max(1, math.ceil((reset_ms - now_ms) / 1000)),
    )


class MemoryRateLimiter:
    """Process-local fixed windows. Correct only when one process serves."""

    backend = "memory"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, tuple[int, int]] = {}

    def hit(self, key_id: str, limit: int, now_ms: int) -> RateState:
        window = now_ms // WINDOW_MS
        with self._lock:
            current_window, count = self._counts.get(key_id, (window, 0))
            if current_window != window:
                count = 0
            count += 1
            self._counts[key_id] = (window, count)
            if len(self._counts) > 100_000:  # drop stale windows
                self._counts = {k: v for k, v in self._counts.items() if v[0] == window}
        return _state(count, limit, window, now_ms)

    def ping(self) -> bool:
        return True


class RedisRateLimiter:
    """Shared fixed windows in Redis: INCR + PEXPIRE in one MULTI/EXEC."""

    backend = "redis"

    def __init__(self, url: str, *, prefix: str = "gate:rl:") -> None:
        import redis

        self._redis = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        self._prefix = prefix
        self._errors = (redis.RedisError, OSError)

    def hit(self, key_id: str, limit: int, now_ms: int) -> RateState:
        window = now_ms // WINDOW_MS
        name = f"{self._prefix}{key_id}:{window}"
        try:
            pipe = self._redis.pipeline(transaction=True)
            pipe.incr(name)
            pipe.pexpire(name, WINDOW_MS * 2)
            count, _ = pipe.execute()
        except self._errors as exc:
            raise GateError(
                "RATE_LIMITER_UNAVAILABLE",
                "the rate limiter backend is unavailable; nothing was decided",
            ) from exc
        return _state(int(count), limit, window, now_ms)

    def ping(self) -> bool:
        try:
            return bool(self._redis.ping())
        except self._errors:
            return False


def make_rate_limiter(redis_url: str | None):
    return RedisRateLimiter(redis_url) if redis_url else MemoryRateLimiter()
