"""A circuit breaker per scope and webhook endpoint (scheme, host, port), in one dispatcher's memory.

An endpoint that fails `FAILURES_TO_OPEN` times in a row (no answer within the time limit, a
refused connection, a 5xx or a 429) is left alone for `OPEN_SECONDS`, doubled at each failed trial
up to `MAX_OPEN_SECONDS`; then one delivery tries it (half open): its success closes the breaker,
its failure opens it again. A receiver's `Retry-After` on 429, 502, 503 or 504 opens it at once
for that long (Standard Webhooks: throttle that endpoint). While open, no subscription to the
endpoint is attempted, so its hanging receiver costs the other subscriptions nothing; nothing is
lost either, its events wait behind its cursor in the ledger.

A breaker is keyed by the scope as well (issue 64): tenants of one shared receiver host (a hosted
webhook service) each have their own, so one tenant's hanging or failing subscriptions never keep
another tenant's deliveries to that host waiting.

Each dispatcher keeps its own breakers (they are advice, not state: the ledger's cursor and
`next_attempt_at` stay the truth, and a restarted dispatcher simply learns them again).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import urlsplit

FAILURES_TO_OPEN = 3
OPEN_SECONDS = 30.0
MAX_OPEN_SECONDS = 300.0
TRIAL_SECONDS = 10.0  # a half-open trial that never reports back frees its slot after this long
THROTTLE_STATUSES = frozenset({429, 502, 503, 504})
GONE = 410

Endpoint = tuple[str, str, int]
Key = tuple[str, Endpoint]  # (scope, endpoint)


@lru_cache(maxsize=4096)  # a dispatcher asks for the same few URLs at every attempt
def endpoint_of(url: str) -> Endpoint:
    """The endpoint a subscription's URL names (no DNS: the host as written)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    return scheme, (parts.hostname or "").lower(), port or (443 if scheme == "https" else 80)


def is_failure(ok: bool, status_code: int | None) -> bool:
    """Whether an answer counts against the endpoint: no answer, a 5xx or a 429. A 4xx other than
    429 says the receiver is up but refuses this subscription (a wrong secret): its own backoff."""
    return not ok and (status_code is None or status_code >= 500 or status_code == 429)


@dataclass
class _State:
    failures: int = 0
    opened: int = 0  # how many times in a row it opened (the open time doubles with each)
    open_until: float = 0.0
    trial_until: float = 0.0


class Breakers:
    """The breakers of one dispatcher, keyed by scope and endpoint; `now` gives seconds (the service
    clock). A caller that states no scope (`""`) shares one breaker per endpoint."""

    def __init__(self, now: Callable[[], float]) -> None:
        self._now = now
        self._states: dict[Key, _State] = {}
        self._lock = threading.Lock()

    def allows(self, url: str, scope: str = "") -> bool:
        """May a delivery of `scope` to this URL's endpoint start now? Closed: yes. Open: no, until
        its time is up; then yes for one trial at a time."""
        with self._lock:
            state = self._states.get((scope, endpoint_of(url)))
            if state is None or state.open_until == 0.0:
                return True
            now = self._now()
            if now < state.open_until or now < state.trial_until:
                return False
            state.trial_until = now + TRIAL_SECONDS
            return True

    def record(self, url: str, ok: bool, status_code: int | None, retry_after: float | None,
               scope: str = "") -> None:
        """An attempt's result: an answer that is not a failure (a 2xx, a 4xx but 429) closes the
        endpoint's breaker, a failure counts toward opening it (a failed trial opens it again for
        twice as long), and a throttling answer with `Retry-After` opens it for that long."""
        key = (scope, endpoint_of(url))
        with self._lock:
            now = self._now()
            if status_code in THROTTLE_STATUSES and retry_after is not None:
                state = self._states.setdefault(key, _State())
                state.open_until, state.trial_until = now + retry_after, 0.0
                return
            if not is_failure(ok, status_code):  # it answered: whatever it thinks of this delivery, it is up
                self._states.pop(key, None)
                return
            state = self._states.setdefault(key, _State())
            state.failures += 1
            if state.failures >= FAILURES_TO_OPEN or state.open_until:
                state.opened += 1
                state.open_until = now + min(MAX_OPEN_SECONDS, OPEN_SECONDS * 2.0 ** min(state.opened - 1, 10))
                state.trial_until = 0.0

    def open_endpoints(self) -> int:
        """How many endpoints are open or throttled now."""
        now = self._now()
        with self._lock:
            return sum(1 for s in self._states.values() if s.open_until > now)
