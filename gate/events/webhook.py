"""One webhook delivery over HTTP/1.1 (`gate.events.http11`), bounded in time and in what it reads.

The connection goes to the address `targets.check` approved (TLS still verifies the host name);
no redirect is followed (a 3xx is a failure: a receiver moves by changing its subscription); the
answer is read up to `MAX_RESPONSE_BYTES` and its first bytes kept as an excerpt for the
deliveries view, where they are shown as text. A `Retry-After` header (seconds or an HTTP date)
is read as the receiver's request to wait, bounded by `MAX_RETRY_AFTER_SECONDS`.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from gate.events.http11 import host_field, open_socket, read_answer, request_bytes
from gate.events.targets import Target

TIMEOUT_SECONDS = 5.0
MAX_RESPONSE_BYTES = 64 * 1024
EXCERPT_CHARS = 300
MAX_KEPT = 16  # kept connections per delivery thread
IDLE_SECONDS = 15.0  # a kept connection unused for this long is closed, not reused (receivers close idle ones)
# A kept connection the receiver closed meanwhile fails so before any answer: sent again on a new one.
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
MAX_RETRY_AFTER_SECONDS = 3600.0  # a receiver asks for a pause of at most an hour (the backoff's cap)


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    status_code: int | None
    latency_ms: int
    excerpt: str
    retry_after: float | None = None  # seconds the receiver asked us to wait (`Retry-After`), if it did


def _excerpt(raw: bytes) -> str:
    text = raw[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    return "".join(ch if ch.isprintable() else " " for ch in text)[:EXCERPT_CHARS]


def retry_after_seconds(value: str | None, now: datetime | None = None) -> float | None:
    """`Retry-After` as seconds from now: a whole number of seconds or an HTTP date, clamped to
    [0, MAX_RETRY_AFTER_SECONDS]; None when absent or unreadable (then the backoff alone decides)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.isdigit():
        return min(float(text), MAX_RETRY_AFTER_SECONDS)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    seconds = (when - (now or datetime.now(UTC))).total_seconds()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_SECONDS)


class Connections:
    """Kept-alive connections, one per delivery thread and endpoint address, so a thread's next
    post to an endpoint needs no new TCP (and TLS) handshake. A connection is kept only when the
    answer was read to its end and the receiver did not ask to close it (HTTP/1.1 keep-alive), and
    one idle for `IDLE_SECONDS` is closed rather than reused. Keyed by the address `targets.check`
    approved for this delivery: a host that now resolves elsewhere gets a new connection there."""

    def __init__(self) -> None:
        self._local = threading.local()

    def _cache(self) -> dict[tuple[str, str, str, int], tuple[socket.socket, float]]:
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = {}
        return cache

    def take(self, target: Target) -> socket.socket | None:
        """This thread's kept connection to the target's address, if it has one not idle too long."""
        kept = self._cache().pop(_key(target), None)
        if kept is not None:
            connection, since = kept
            if time.monotonic() - since < IDLE_SECONDS:
                return connection
            connection.close()
        return None

    def keep(self, target: Target, connection: socket.socket) -> None:
        cache = self._cache()
        cache[_key(target)] = (connection, time.monotonic())
        while len(cache) > MAX_KEPT:  # a thread keeps its most recently used endpoints only
            oldest = min(cache, key=lambda key: cache[key][1])
            cache.pop(oldest)[0].close()


def _key(target: Target) -> tuple[str, str, str, int]:
    return target.scheme, target.host, target.address, target.port


def post(target: Target, headers: Mapping[str, str], body: bytes, timeout: float = TIMEOUT_SECONDS,
         connections: Connections | None = None) -> Delivery:
    """POST `body`; ok on any 2xx answered within `timeout`. With `connections`, over this
    thread's kept connection to the endpoint when there is one; a kept connection the receiver
    has closed meanwhile (reset, or closed before answering) is replaced and the post sent once
    more on a new one (receivers deduplicate by `webhook-id`: at least once)."""
    started = time.monotonic()
    kept = connections.take(target) if connections is not None else None
    connection = kept
    try:
        request = request_bytes("POST", host_field(target), target.path, headers, body)
        if connection is None:
            connection = open_socket(target, timeout)
        else:  # a kept connection still has the timeout of its last read: this post's own, now
            connection.settimeout(max(0.001, started + timeout - time.monotonic()))
        connection.sendall(request)
        answer = read_answer(connection, started + timeout, MAX_RESPONSE_BYTES)
    except (OSError, http.client.HTTPException) as exc:
        if connection is not None:
            connection.close()
        if kept is not None and isinstance(exc, _STALE):
            return post(target, headers, body, max(0.1, timeout - (time.monotonic() - started)), None)
        latency = int((time.monotonic() - started) * 1000)
        return Delivery(False, None, latency, _excerpt(f"{type(exc).__name__}: {exc}".encode()))
    if connections is not None and answer.reusable:
        connections.keep(target, connection)
    else:
        connection.close()
    latency = int((time.monotonic() - started) * 1000)
    return Delivery(200 <= answer.status < 300, answer.status, latency, _excerpt(answer.body),
                    retry_after_seconds(answer.headers.get("retry-after")))
