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
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from gate.events.targets import Target

TIMEOUT_SECONDS = 5.0
MAX_RESPONSE_BYTES = 64 * 1024
EXCERPT_CHARS = 300
MAX_RETRY_AFTER_SECONDS = 3600.0  # a receiver asks for a pause of at most an hour (the backoff's cap)


@dataclass(frozen=True, slots=True)
class Delivery:
    ok: bool
    status_code: int | None
    latency_ms: int
    excerpt: str
    retry_after: float | None = None  # seconds the receiver asked us to wait (`Retry-After`), if it did


class _PinnedHTTPS(http.client.HTTPSConnection):
    """HTTPS to a fixed address, verifying the certificate for the URL's host name."""

    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self) -> None:
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


class _PinnedHTTP(http.client.HTTPConnection):
    def __init__(self, host: str, address: str, port: int, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


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


def post(target: Target, headers: Mapping[str, str], body: bytes, timeout: float = TIMEOUT_SECONDS) -> Delivery:
    """POST `body`; ok on any 2xx answered within `timeout`."""
    kind = _PinnedHTTPS if target.scheme == "https" else _PinnedHTTP
    started = time.monotonic()
    connection = kind(target.host, target.address, target.port, timeout)
    try:
        connection.request("POST", target.path, body=body, headers=dict(headers))
        response = connection.getresponse()
        status = response.status
        wait = retry_after_seconds(response.getheader("retry-after"))
        raw = _read_bounded(response, started + timeout)
    except (OSError, http.client.HTTPException) as exc:
        latency = int((time.monotonic() - started) * 1000)
        return Delivery(False, None, latency, _excerpt(f"{type(exc).__name__}: {exc}".encode()))
    finally:
        connection.close()
    latency = int((time.monotonic() - started) * 1000)
    return Delivery(200 <= status < 300, status, latency, _excerpt(raw), wait)
