"""One webhook delivery over HTTP (stdlib `http.client`), bounded in time and in what it reads.

The connection goes to the address `targets.check` approved (TLS still verifies the host name);
no redirect is followed (a 3xx is a failure: a receiver moves by changing its subscription); the
answer is read up to `MAX_RESPONSE_BYTES` and its first bytes kept as an excerpt for the
deliveries view, where they are shown as text. A `Retry-After` header (seconds or an HTTP date)
is read as the receiver's request to wait, bounded by `MAX_RETRY_AFTER_SECONDS`.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

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


def _no_delay(sock: socket.socket) -> socket.socket:
    """No Nagle: `http.client` sends a request's headers and body in two writes, and on a kept
    connection the body would wait for the receiver's delayed ACK of the headers (40 ms a post)."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _OneWrite(http.client.HTTPConnection):
    """A request's head and its body in one write: `http.client` writes them apart, so every
    delivery paid two system calls and two segments (with TCP_NODELAY, two packets the receiver
    wakes for), the larger part of a delivery's CPU on loopback (docs/events.md, "Throughput")."""

    def _send_output(self, message_body: Any = None, encode_chunked: bool = False) -> None:
        if not isinstance(message_body, bytes) or encode_chunked:
            super()._send_output(message_body, encode_chunked)  # type: ignore[misc]  # not in the stubs
            return
        self._buffer.extend((b"", message_body))  # type: ignore[attr-defined]  # http.client's request lines
        message = b"\r\n".join(self._buffer)  # type: ignore[attr-defined]
        del self._buffer[:]  # type: ignore[attr-defined]
        self.send(message)


class _PinnedHTTPS(_OneWrite, http.client.HTTPSConnection):
    """HTTPS to a fixed address, verifying the certificate for the URL's host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = _no_delay(socket.create_connection((self._address, self.port), self.timeout))
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTP(_OneWrite):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = _no_delay(socket.create_connection((self._address, self.port), self.timeout))


def _excerpt(raw: bytes) -> str:
    text = raw[: EXCERPT_CHARS * 4].decode("utf-8", errors="replace")
    return "".join(ch if ch.isprintable() else " " for ch in text)[:EXCERPT_CHARS]


def _read_bounded(response: http.client.HTTPResponse, deadline: float) -> bytes:
    """At most MAX_RESPONSE_BYTES of the answer, and nothing after the deadline (a receiver that
    drips its answer cannot hold the dispatcher)."""
    chunks: list[bytes] = []
    size = 0
    while size < MAX_RESPONSE_BYTES and time.monotonic() < deadline:
        chunk = response.read1(min(8192, MAX_RESPONSE_BYTES - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


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

    def _cache(self) -> dict[tuple[str, str, str, int], tuple[http.client.HTTPConnection, float]]:
        cache = getattr(self._local, "cache", None)
        if cache is None:
            cache = self._local.cache = {}
        return cache

    def take(self, target: Target, timeout: float) -> tuple[http.client.HTTPConnection, bool]:
        """(a connection to the target's address, whether it was used before)."""
        kept = self._cache().pop(_key(target), None)
        if kept is not None:
            connection, since = kept
            if time.monotonic() - since < IDLE_SECONDS:
                return connection, True
            connection.close()
        return _connection(target, timeout), False

    def keep(self, target: Target, connection: http.client.HTTPConnection) -> None:
        cache = self._cache()
        cache[_key(target)] = (connection, time.monotonic())
        while len(cache) > MAX_KEPT:  # a thread keeps its most recently used endpoints only
            oldest = min(cache, key=lambda key: cache[key][1])
            cache.pop(oldest)[0].close()


def _key(target: Target) -> tuple[str, str, str, int]:
    return target.scheme, target.host, target.address, target.port


def _connection(target: Target, timeout: float) -> http.client.HTTPConnection:
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    return kind(target.host, target.address, target.port, timeout)


def post(target: Target, headers: Mapping[str, str], body: bytes, timeout: float = TIMEOUT_SECONDS,
         connections: Connections | None = None) -> Delivery:
    """POST `body`; ok on any 2xx answered within `timeout`. With `connections`, over this
    thread's kept connection to the endpoint when there is one; a kept connection the receiver
    has closed meanwhile (reset, or closed before answering) is replaced and the post sent once
    more on a new one (receivers deduplicate by `webhook-id`: at least once)."""
    started = time.monotonic()
    connection, reused = connections.take(target, timeout) if connections is not None else (
        _connection(target, timeout), False)
    try:
        status, wait, raw, reusable = _exchange(connection, target, headers, body, started + timeout)
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        if reused and isinstance(exc, _STALE):
            return post(target, headers, body, max(0.1, timeout - (time.monotonic() - started)), None)
        latency = int((time.monotonic() - started) * 1000)
        return Delivery(False, None, latency, _excerpt(f"{type(exc).__name__}: {exc}".encode()))
    if connections is not None and reusable:
        connections.keep(target, connection)
    else:
        connection.close()
    latency = int((time.monotonic() - started) * 1000)
    return Delivery(200 <= status < 300, status, latency, _excerpt(raw), wait)


def _exchange(connection: http.client.HTTPConnection, target: Target, headers: Mapping[str, str], body: bytes,
              deadline: float) -> tuple[int, float | None, bytes, bool]:
    """(status, Retry-After seconds, the answer's first bytes, whether the connection can be reused)."""
    connection.request("POST", target.path, body=body, headers=dict(headers))
    response = connection.getresponse()
    wait = retry_after_seconds(response.getheader("retry-after"))
    raw = _read_bounded(response, deadline)
    if response.length == 0 and not response.chunked:
        response.close()  # read to its end (a 204 has nothing to read): the connection is free again
    return response.status, wait, raw, response.isclosed() and not response.will_close
