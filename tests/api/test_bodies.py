"""Body limits hold while the body streams in (issue 6, defect 3), through the Flask app.

The stream below counts what the application pulls from it: a chunked body of any size is
refused after at most the limit plus one read, and a declared oversized body before any read.
"""

from __future__ import annotations

import io
import json

import pytest
from werkzeug.test import EnvironBuilder, run_wsgi_app


class CountingStream(io.RawIOBase):
    """`size` bytes of JSON-ish filler, produced on demand, counting what was read."""

    def __init__(self, size: int) -> None:
        self.size, self.taken = size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.taken)
        buffer[:n] = b" " * n
        self.taken += n
        return n


def post_stream(app, path: str, stream, content_length: int | None = None):
    """POST `stream` to the app as gunicorn hands over a body: chunked unless a length is given."""
    environ = EnvironBuilder(path=path, method="POST", content_type="application/json").get_environ()
    environ["wsgi.input"] = stream
    environ.pop("CONTENT_LENGTH", None)
    if content_length is None:
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = str(content_length)
    body, status, _ = run_wsgi_app(app, environ, buffered=True)
    return int(status.split()[0]), json.loads(b"".join(body))


@pytest.mark.parametrize("path, limit_name", [
    ("/api/decision/verify", "GATE_MAX_BODY_BYTES"),
    ("/api/decision/packet/verify", "GATE_MAX_PACKET_BYTES"),
])
def test_a_chunked_body_is_refused_after_at_most_the_limit(make_app, path, limit_name):
    stream = CountingStream(400_000_000)
    status, body = post_stream(make_app({limit_name: "100000"}), path, stream)
    assert status == 413
    assert body["error"] == "REQUEST_TOO_LARGE" and body["max_bytes"] == 100_000
    assert stream.taken <= 100_000 + 65_536  # SECURITY: never the whole 400 MB


def test_a_declared_oversized_body_is_refused_before_reading(make_app):
    stream = CountingStream(5000)
    status, body = post_stream(make_app({"GATE_MAX_BODY_BYTES": "1000"}), "/api/decision/verify", stream, 5000)
    assert status == 413 and body["error"] == "REQUEST_TOO_LARGE" and stream.taken == 0


def test_a_chunked_body_within_the_limit_is_read_whole(app, client, api_key, sample_request):
    record = client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).json
    payload = json.dumps({"record": record, "input": sample_request}).encode()
    status, body = post_stream(app, "/api/decision/verify", io.BytesIO(payload))
    assert status == 200 and body["verified"] is True
