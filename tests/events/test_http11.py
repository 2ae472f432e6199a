"""`gate.events.http11`: what every outbound request speaks, against a peer on a real socket that
answers bytes a test writes, the hostile ones included: framing by chunks, length or close,
interim answers, bounds on the head and the body, answers dripped past the deadline, and
requests that could be split refused before a byte is written."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import pytest

from gate.events.http11 import (
    MAX_FIELDS,
    MAX_HEAD_BYTES,
    MalformedAnswer,
    MalformedRequest,
    host_field,
    read_answer,
    request_bytes,
)
from gate.events.targets import Target
from gate.events.webhook import Connections, post
from tests.tls_support import tls_files

# What the peer writes for each request it reads: a list of (seconds to wait first, bytes).
Script = Sequence[Sequence[tuple[float, bytes]]]


class Peer:
    """A TCP server on loopback that reads whole requests and answers each with the next script,
    then closes its side; `requests` keeps what it read."""

    def __init__(self, script: Script, certificate: Path | None = None, pauses: Sequence[float] = ()) -> None:
        self.script, self.pauses = list(script), list(pauses)  # pauses: seconds before reading each request
        self.context: ssl.SSLContext | None = None
        if certificate is not None:  # a TLS peer: its handshake runs on the serving thread
            self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            self.context.load_cert_chain(certificate)
        self.requests: list[bytes] = []
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        connection, _ = self.server.accept()
        try:
            if self.context is not None:
                connection = self.context.wrap_socket(connection, server_side=True)
        except OSError:  # a handshake the client refused
            connection.close()
            return
        with connection:
            buffered = bytearray()
            for index, answer in enumerate(self.script):
                time.sleep(self.pauses[index] if index < len(self.pauses) else 0)
                while b"\r\n\r\n" not in buffered:
                    data = connection.recv(65536)
                    if not data:
                        return
                    buffered += data
                head, _, rest = bytes(buffered).partition(b"\r\n\r\n")
                buffered = bytearray(rest)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buffered) < length:
                    buffered += connection.recv(65536)
                self.requests.append(head + b"\r\n\r\n" + bytes(buffered[:length]))
                del buffered[:length]
                for wait, data in answer:
                    time.sleep(wait)
                    try:
                        connection.sendall(data)
                    except OSError:
                        return

    def connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self.port), 5)

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def peer() -> Iterator[Callable[..., Peer]]:
    made: list[Peer] = []

    def make(script: Script, certificate: Path | None = None, pauses: Sequence[float] = ()) -> Peer:
        made.append(Peer(script, certificate, pauses))
        return made[-1]

    yield make
    for each in made:
        each.close()


def _exchange(sock: socket.socket, max_bytes: int = 1000, seconds: float = 5.0, method: str = "POST"):
    sock.sendall(request_bytes(method, "127.0.0.1", "/hook", {"content-type": "application/json"}, b"{}"))
    return read_answer(sock, time.monotonic() + seconds, max_bytes, head_only=method == "HEAD")


def test_a_chunked_answer_is_read_whole_with_its_extensions_and_trailer_and_the_connection_kept(peer):
    chunked = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;name=value\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nX-Trailer: t\r\n\r\n")
    server = peer([[(0, chunked[:30]), (0.05, chunked[30:])], [(0, b"HTTP/1.1 204 No Content\r\n\r\n")]])
    with server.connect() as sock:
        first = _exchange(sock)
        assert (first.status, first.body, first.reusable) == (200, b"hello world", True)
        second = _exchange(sock)  # the same connection carries the next request
        assert (second.status, second.body, second.reusable) == (204, b"", True)
    assert len(server.requests) == 2 and server.requests[0].endswith(b"\r\n\r\n{}")


def test_interim_answers_are_skipped_and_fields_are_read_as_written(peer):
    answer = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"
              b"HTTP/1.1 429 Too Many\r\nRetry-After: 30\r\nX-Many: a\r\nx-many: b\r\nX-Folded: one\r\n two\r\n"
              b"Content-Length: 4\r\n\r\nbusy")
    with peer([[(0, answer)]]).connect() as sock:
        got = _exchange(sock)
    assert got.status == 429 and got.body == b"busy" and got.reusable
    assert got.headers["retry-after"] == "30" and got.headers["x-many"] == "a, b"
    assert got.headers["x-folded"] == "one two" and "link" not in got.headers


@pytest.mark.parametrize(("answer", "body", "reusable"), [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000, b"x" * 1000, False),  # longer than read
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n" + b"y" * 2000 + b"\r\n0\r\n\r\n",
     b"y" * 1000, False),
    (b"HTTP/1.1 200 OK\r\n\r\nuntil the close", b"until the close", False),  # no length: ends with the connection
    (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", b"ok", False),  # HTTP/1.0 closes unless kept alive
    (b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nok", b"ok", True),
    (b"HTTP/1.1 200 OK\r\nConnection: Close\r\nContent-Length: 2\r\n\r\nok", b"ok", False),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nzz", b"zz", False),  # not chunked last: until the close
    (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n", b"", True),  # no body whatever it says
    (b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort", b"short", False),  # closed short of its length
    (b"HTTP/1.1 200 OK\nContent-Length: 2\n\nok", b"ok", True),  # bare line feeds end lines too
    (b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
     b"ok", False),  # framed twice: read by its chunks, the connection not kept
], ids=["over-max", "chunked-over-max", "until-close", "http-1.0", "http-1.0-keep-alive", "close", "gzip-last",
        "304", "short", "bare-lf", "framed-twice"])
def test_the_body_is_framed_and_bounded_and_the_connection_kept_only_when_it_can_be(peer, answer, body, reusable):
    with peer([[(0, answer)]]).connect() as sock:
        got = _exchange(sock)
    assert (got.status, got.body, got.reusable) == (int(answer[9:12]), body, reusable)


def test_a_head_request_reads_no_body(peer):
    with peer([[(0, b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\n")]]).connect() as sock:
        got = _exchange(sock, method="HEAD")
    assert (got.status, got.body, got.reusable) == (200, b"", True)


@pytest.mark.parametrize("answer", [
    b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
    b"HTTP/2 200\r\n\r\n",
    b"HTTP/1.1 99 Low\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xd9\xa3\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Length: \xb2\r\n\r\nab",  # Latin-1's "²": str.isdigit says it is a digit
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + b"1" * 17 + b"\r\n",
    b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n;name=value\r\n",  # extensions, no size
    b"HTTP/1.1 200 OK\r\nX: " + b"v" * MAX_HEAD_BYTES + b"\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n" + b"X: v\r\n" * (MAX_FIELDS + 1) + b"\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\n" * 10 + b"HTTP/1.1 200 OK\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nContent-Le",  # closed inside the head
], ids=["not-http", "http-2", "status-99", "no-colon", "bad-name", "two-lengths", "negative-length",
        "non-ascii-digits", "latin-1-digit", "bad-chunk-size", "long-chunk-size", "no-chunk-size", "long-head", "many-fields", "many-interim",
        "closed-in-head"])
def test_an_answer_that_does_not_parse_within_its_bounds_is_refused(peer, answer):
    with peer([[(0, answer)]]).connect() as sock, pytest.raises(MalformedAnswer):
        _exchange(sock)


def test_a_trailer_past_the_heads_bound_is_refused_for_its_length(peer):
    """Refused for its length, not for the connection closing after it (the bound is what stops it)."""
    trailer = (b"X: " + b"v" * 1000 + b"\r\n") * 66  # 66,330 bytes, past MAX_HEAD_BYTES
    answer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + trailer + b"\r\n"
    with peer([[(0, answer)]]).connect() as sock, pytest.raises(MalformedAnswer, match="too long"):
        _exchange(sock)


def test_an_answer_that_never_starts_is_a_disconnection(peer):
    with peer([[]]).connect() as sock, pytest.raises(http.client.RemoteDisconnected):
        _exchange(sock)


def test_a_head_dripped_past_the_deadline_times_out_at_the_deadline(peer):
    drip = [(0.15, bytes([byte])) for byte in b"HTTP/1.1 200 OK\r\n\r\n"]
    with peer([drip]).connect() as sock:
        started = time.monotonic()
        with pytest.raises(TimeoutError):
            _exchange(sock, seconds=0.6)
        assert time.monotonic() - started < 2.0  # the drip alone takes 3 s or more


def test_a_body_dripped_past_the_deadline_keeps_its_status_and_what_came_but_not_the_connection(peer):
    answer = [(0, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nab")] + [(0.2, b"c")] * 20
    with peer([answer]).connect() as sock:
        started = time.monotonic()
        got = _exchange(sock, seconds=0.5)
        assert time.monotonic() - started < 2.0  # the drip alone takes 3 s or more
    assert got.status == 200 and got.body.startswith(b"ab") and len(got.body) < 100 and not got.reusable


@pytest.mark.parametrize(("path", "headers", "named"), [
    ("/hook\r\nX-Injected: 1", {}, None),
    ("/a b", {}, None),
    ("hook", {}, None),
    ("/hook", {"X-Header": "value\r\nX-Injected: 1"}, "X-Header"),
    ("/hook", {"X-Header": "nul\x00"}, "X-Header"),
    ("/hook", {"X-Header": "del\x7f"}, "X-Header"),
    ("/hook", {"Bad Name": "x"}, "Bad Name"),
    ("/hook", {"X-Header:": "x"}, "X-Header:"),
    ("/hook", {"": "x"}, ""),
    ("/hook", {"X-Good": "fine", "X-Also-Good": "ok", "X-Bad": "a\nb", "X-Last": "z"}, "X-Bad"),
], ids=["crlf-path", "space-path", "relative-path", "crlf-value", "nul-value", "del-value", "space-name", "colon-name",
        "empty-name", "one-bad-among-good"])
def test_a_request_that_could_be_split_is_refused_before_a_byte_is_written(path, headers, named):
    """Refused whole, and a refused field is named: the fields are checked together, and only a
    refusal looks for which one it was."""
    with pytest.raises(MalformedRequest) as refused:
        request_bytes("POST", "hooks.example", path, headers, b"{}")
    if named is not None:
        assert f"header {named!r} could split" in str(refused.value)


def test_a_request_is_one_head_with_the_host_the_length_and_the_callers_fields():
    written = request_bytes("POST", "hooks.example:8443", "/hook?a=1", {"Content-Type": "application/json"}, b"{}")
    assert written == (b"POST /hook?a=1 HTTP/1.1\r\nHost: hooks.example:8443\r\nAccept-Encoding: identity\r\n"
                       b"Content-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
    assert b"Content-Length: 0" in request_bytes("POST", "h", "/", {}, None)
    assert b"Content-Length" not in request_bytes("GET", "h", "/", {}, None)
    assert b"Host: other" in request_bytes("GET", "h", "/", {"host": "other"}, None).replace(b"host", b"Host")


def test_the_host_field_names_the_port_only_when_it_is_not_the_scheme_s():
    assert host_field(Target("https", "hooks.example", 443, "/", "203.0.113.9")) == "hooks.example"
    assert host_field(Target("http", "hooks.example", 443, "/", "203.0.113.9")) == "hooks.example:443"
    assert host_field(Target("http", "::1", 8080, "/", "::1")) == "[::1]:8080"


def test_a_delivery_over_tls_keeps_its_connection_and_verifies_the_certificate_for_the_host_name(
        peer, tmp_path, monkeypatch):
    files = tls_files(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(files / "ca.pem"))  # the test CA, as a deployment's CA bundle
    no_content = [(0.0, b"HTTP/1.1 204 No Content\r\n\r\n")]
    server = peer([no_content, no_content], files / "server.pem")
    connections = Connections()
    target = Target("https", "127.0.0.1", server.port, "/hook", "127.0.0.1")
    for _ in range(2):  # the peer serves one connection: the second post is on the kept one
        delivered = post(target, {"webhook-id": "msg_1"}, b"{}", connections=connections)
        assert (delivered.ok, delivered.status_code) == (True, 204), delivered
    assert len(server.requests) == 2 and server.requests[0].startswith(b"POST /hook HTTP/1.1\r\nHost: 127.0.0.1:")
    other = peer([no_content], files / "server.pem")  # the same certificate, asked for under another name
    refused = post(Target("https", "hooks.example", other.port, "/hook", "127.0.0.1"), {"webhook-id": "msg_2"}, b"{}")
    assert (refused.ok, refused.status_code) == (False, None) and "certificate" in refused.excerpt.lower()
    assert other.requests == []


def test_a_kept_connection_writes_the_next_post_within_that_post_s_own_time(peer):
    """The first answer's last byte comes late, so its last read left the socket a short timeout;
    the next post (larger than the socket buffers, to a peer that reads it only after a pause) is
    written within its own three seconds, not the half second the last read left."""
    late = [(0.0, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"), (2.5, b"o"), (0.05, b"k")]  # last read at 2.5 s
    server = peer([late, [(0.0, b"HTTP/1.1 204 No Content\r\n\r\n")]], pauses=[0.0, 0.8])
    connections = Connections()
    target = Target("http", "127.0.0.1", server.port, "/hook", "127.0.0.1")
    first = post(target, {"webhook-id": "msg_1"}, b"{}", timeout=3.0, connections=connections)
    assert (first.status_code, first.excerpt) == (200, "ok")
    second = post(target, {"webhook-id": "msg_2"}, b"x" * (16 << 20), timeout=3.0, connections=connections)
    assert (second.ok, second.status_code) == (True, 204), second
    assert len(server.requests) == 2  # both on the one connection the peer serves
