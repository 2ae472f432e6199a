"""Reading a request body under a byte limit and a time limit, while it streams in.

The limit is checked as the bytes arrive, for a `Content-Length` body and a chunked one alike:
a body is never held in memory beyond `max_bytes + 64 KiB`, whatever its declared or real size
(reading it whole first and measuring afterwards let a 400 MB chunked POST grow a worker by as
much before the 413).

The time limit belongs to the server: `api.serving` gives every client socket one deadline per
request, and a read past it raises `ClientTooSlow`, answered here with 408 `REQUEST_TIMEOUT`.
"""

from __future__ import annotations

from flask import Request

from gate.errors import GateError, Signal

CHUNK_BYTES = 65_536


class ClientTooSlow(Signal):
    """The client did not send its request (head and body) within the server's read deadline:
    answered REQUEST_TIMEOUT by `read_body` (the body) or by `api.serving` (the head).

    Deliberately not an `OSError`: Werkzeug turns those into a silent disconnect, and gunicorn
    logs them as socket errors; this one must reach the error body writer.
    """


def too_large(max_bytes: int) -> GateError:
    return GateError("REQUEST_TOO_LARGE", f"request body exceeds {max_bytes} bytes", max_bytes=max_bytes)


def read_body(request: Request, max_bytes: int) -> bytes:
    """The whole body, refused with 413 as soon as it exceeds `max_bytes` (and before, when declared)."""
    length = request.content_length
    if length is not None and length > max_bytes:
        raise too_large(max_bytes)  # SECURITY: refused before a byte of the body is read
    stream = request.stream  # bounded by Content-Length when there is one; raw when chunked
    parts: list[bytes] = []
    total = 0
    try:
        while True:
            chunk = stream.read(min(CHUNK_BYTES, max_bytes + 1 - total))
            if not chunk:
                break
            total += len(chunk)
            if total > max_bytes:
                # SECURITY: stop reading; the rest of a chunked body is never buffered.
                raise too_large(max_bytes)
            parts.append(chunk)
    except ClientTooSlow as exc:
        raise GateError("REQUEST_TIMEOUT", "the request body did not arrive in time") from exc
    return b"".join(parts)
