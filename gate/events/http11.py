"""One HTTP/1.1 request and its answer on a connected socket (RFC 9112): how every outbound request
of the gate is spoken (`gate.events.webhook`: webhook deliveries; `gate.events.outbound`: Slack,
an interaction's `response_url`, OpenID Connect discovery and key sets). Where it connects, and
whether it may, is `gate.events.targets`' rule; this module only writes and reads the bytes.

Written on the socket rather than with `http.client`, which checked each header line with a
regular expression, wrote its head line by line and read every answer's header fields with the
e-mail package's parser: a webhook post on loopback cost 133 µs of CPU there and 17.5 µs written
here (issue 68, item 1: the dispatcher's CPU is taken from the cores the decides use).

Everything read is bounded (SECURITY: the other party is not trusted):
- every read waits at most until the caller's deadline, so an answer dripped a byte at a time
  cannot hold the caller past it (the head then fails with `TimeoutError`; a body is kept as far
  as it came, and the connection is not kept);
- the head (status line and header fields, interim 1xx answers included) is at most
  `MAX_HEAD_BYTES` and `MAX_FIELDS` fields, a chunk-size line at most `MAX_LINE_BYTES`;
- at most `max_bytes` of the body are read; a longer body is left unread and its connection closed.

An answer that does not parse raises `MalformedAnswer` (an `http.client.HTTPException`, which the
callers already treat as a failed exchange); an answer that never starts because the other party
closed the connection raises `http.client.RemoteDisconnected`, as `http.client` did, so a kept
connection the receiver closed meanwhile is told apart and the request sent again on a new one.
What is sent is checked too: a path or header that could split the request (a control
character, a space in the path, a name that is not a token) raises `MalformedRequest` before
anything is written.
"""

from __future__ import annotations

import http.client
import re
import socket
import ssl
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gate.events.targets import Target

MAX_HEAD_BYTES = 64 * 1024
MAX_FIELDS = 100
MAX_LINE_BYTES = 1024  # a chunk-size line, its extensions included
MAX_INTERIM = 8  # 1xx answers skipped before the final one
_RECV_BYTES = 65536
_TOKEN = re.compile(rb"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_FIELD_VALUE = re.compile(rb"[^\x00-\x08\x0a-\x1f\x7f]*")  # HTAB and visible characters, obs-text allowed
_PATH = re.compile(r"/[\x21-\x7e]*|\*")
_DIGITS = re.compile(r"[0-9]+")  # ASCII digits only: str.isdigit also takes "²" and other Latin-1 digits
_CHUNK_SIZE = re.compile(rb"[0-9A-Fa-f]{1,16}")
_STATUS = re.compile(rb"HTTP/1\.([01]) ([1-9][0-9][0-9])(?: [^\x00-\x08\x0a-\x1f\x7f]*)?")
_NO_BODY = {204, 304}
_DEFAULT_PORTS = {"http": 80, "https": 443}


class MalformedAnswer(http.client.HTTPException):
    """The other party's answer is not HTTP/1.1 this client reads (or not within its bounds)."""


class MalformedRequest(http.client.HTTPException):
    """A request this client would not write: its path or a header could split it."""


@dataclass(frozen=True, slots=True)
class Answer:
    """A final answer: its status, its header fields (names in lower case; repeated fields joined
    with ", "), at most `max_bytes` of its body, and whether the connection may carry another
    request (the body was read to its end and neither side asked to close)."""

    status: int
    headers: Mapping[str, str]
    body: bytes
    reusable: bool


def request_bytes(method: str, host: str, path: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
    """The request's head and body as one write. `host` is the Host field's value (the caller's
    header named `host` wins); `Content-Length` is written for a body (and for a POST, PUT or
    PATCH without one), `Accept-Encoding: identity` unless the caller names an encoding."""
    if _PATH.fullmatch(path) is None:
        raise MalformedRequest("the request's path holds a space or a control character")
    names = {name.lower() for name in headers}
    fields = [] if "host" in names else [("Host", host)]
    fields += [] if "accept-encoding" in names else [("Accept-Encoding", "identity")]
    fields += list(headers.items())
    if "content-length" not in names and (body is not None or method in ("POST", "PUT", "PATCH")):
        fields.append(("Content-Length", str(len(body or b""))))
    values = [str(value) for _, value in fields]
    # One check of every name and one of every value at once: names run together are one token
    # only when each is a non-empty token, values run together hold no CR, LF or other control
    # character only when none does. Only a refusal looks for the field to name.
    names_run = "".join(name for name, _ in fields).encode("latin-1")
    if (not all(name for name, _ in fields) or _TOKEN.fullmatch(names_run) is None
            or _FIELD_VALUE.fullmatch("".join(values).encode("latin-1")) is None):
        raise MalformedRequest(f"header {_splitting(fields)!r} could split the request")
    head = "".join(f"{name}: {value}\r\n" for (name, _), value in zip(fields, values, strict=True))
    return f"{method} {path} HTTP/1.1\r\n{head}\r\n".encode("latin-1") + (body or b"")


def _splitting(fields: list[tuple[str, str]]) -> str:
    """The first field whose name is not a token or whose value holds a control character."""
    return next(name for name, value in fields if _TOKEN.fullmatch(name.encode("latin-1")) is None
                or _FIELD_VALUE.fullmatch(str(value).encode("latin-1")) is None)


def open_socket(target: Target, timeout: float) -> socket.socket:
    """A connection to the address `targets.check` approved, for HTTPS wrapped in TLS that
    verifies the certificate for the URL's host name. No Nagle: a request goes in one write, and on
    a kept connection it would otherwise wait for the receiver's delayed ACK of the one before."""
    sock = socket.create_connection((target.address, target.port), timeout)
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if target.scheme == "https":
            return ssl.create_default_context().wrap_socket(sock, server_hostname=target.host)
    except BaseException:
        sock.close()
        raise
    return sock


def host_field(target: Target) -> str:
    """The Host field of a request to `target` (its port only when not the scheme's default)."""
    host = f"[{target.host}]" if ":" in target.host else target.host
    return host if _DEFAULT_PORTS.get(target.scheme) == target.port else f"{host}:{target.port}"


class _Reader:
    """The socket's bytes, buffered, each wait bounded by the deadline."""

    def __init__(self, sock: socket.socket, deadline: float, clock: Callable[[], float]) -> None:
        self.sock, self.deadline, self.clock = sock, deadline, clock
        self.buffer = bytearray()
        self.closed = False  # the other party closed its side

    def fill(self) -> bool:
        """Read what arrives next; False when the connection is closed."""
        left = self.deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the answer's time ran out")
        self.sock.settimeout(left)
        data = self.sock.recv(_RECV_BYTES)
        if not data:
            self.closed = True
            return False
        self.buffer += data
        return True

    def line(self, limit: int) -> bytes:
        """The next line without its end (CRLF or a bare LF); MalformedAnswer past `limit` bytes."""
        scanned = 0  # bytes already searched: an answer dripped a byte at a time is searched once
        while True:
            end = self.buffer.find(b"\n", scanned)
            if end >= 0:
                if end > limit:
                    raise MalformedAnswer("a line of the answer is too long")
                line = bytes(self.buffer[:end])
                del self.buffer[:end + 1]
                return line[:-1] if line.endswith(b"\r") else line
            if len(self.buffer) > limit:
                raise MalformedAnswer("a line of the answer is too long")
            scanned = len(self.buffer)
            if not self.fill():
                raise MalformedAnswer("the connection closed inside the answer's head")

    def take(self, size: int) -> bytes:
        """Up to `size` bytes: what is buffered, else what the next read brings (b"" at the end)."""
        if not self.buffer and not self.closed:
            self.fill()
        data = bytes(self.buffer[:size])
        del self.buffer[:size]
        return data


def read_answer(sock: socket.socket, deadline: float, max_bytes: int, *, head_only: bool = False,
                clock: Callable[[], float] = time.monotonic) -> Answer:
    """The final answer to the request just written on `sock` (interim 1xx answers skipped), with
    at most `max_bytes` of its body. `head_only`: the request was a HEAD (no body follows)."""
    reader = _Reader(sock, deadline, clock)
    if not reader.fill():
        raise http.client.RemoteDisconnected("the other party closed the connection without an answer")
    budget = MAX_HEAD_BYTES
    for _ in range(MAX_INTERIM + 1):
        status, version, headers, budget = _head(reader, budget)
        if not 100 <= status < 200 or status == 101:
            break
    else:
        raise MalformedAnswer("too many interim answers")
    body, complete = _body(reader, status, headers, max_bytes, head_only)
    tokens = {token.strip().lower() for token in headers.get("connection", "").split(",")}
    persistent = "close" not in tokens and (version == 1 or "keep-alive" in tokens)
    # Both framings in one answer: read by Transfer-Encoding, but the connection is not trusted again.
    framed_twice = "transfer-encoding" in headers and "content-length" in headers
    return Answer(status, headers, body, complete and persistent and status != 101 and not framed_twice)


def _head(reader: _Reader, budget: int) -> tuple[int, int, dict[str, str], int]:
    """(status, minor version, header fields, the head's bytes left) of the next answer."""
    line = reader.line(budget)
    budget -= len(line) + 2
    matched = _STATUS.fullmatch(line)
    if matched is None:
        raise MalformedAnswer(f"not an HTTP/1.x status line: {line[:40]!r}")
    headers: dict[str, str] = {}
    last = ""
    for _ in range(MAX_FIELDS + 1):
        line, budget = _field_line(reader, budget, "head")
        if not line:
            return int(matched.group(2)), int(matched.group(1)), headers, budget
        if line[:1] in (b" ", b"\t") and last:  # an obsolete line folding: its text joins the field
            headers[last] += " " + line.strip().decode("latin-1")
            continue
        name, colon, value = line.partition(b":")
        if not colon or _TOKEN.fullmatch(name) is None:
            raise MalformedAnswer(f"not a header field: {line[:40]!r}")
        last = name.decode("ascii").lower()
        text = value.strip(b" \t").decode("latin-1")
        headers[last] = f"{headers[last]}, {text}" if last in headers else text
    raise MalformedAnswer("the answer has too many header fields")


def _body(reader: _Reader, status: int, headers: Mapping[str, str], max_bytes: int,
          head_only: bool) -> tuple[bytes, bool]:
    """(at most `max_bytes` of the body, whether it was read to its end) by RFC 9112 §6.3."""
    if head_only or status in _NO_BODY or status < 200:
        return b"", True
    coding = headers.get("transfer-encoding")
    if coding is not None:
        if coding.rsplit(",", 1)[-1].strip().lower() != "chunked":
            return _until_close(reader, max_bytes), False  # not chunked last: the body ends with the connection
        return _chunked(reader, max_bytes)
    length = headers.get("content-length")
    if length is None:
        return _until_close(reader, max_bytes), False
    values = {value.strip() for value in length.split(",")}
    value = values.pop()
    if values or _DIGITS.fullmatch(value) is None:
        raise MalformedAnswer("the answer's Content-Length is not one number")
    return _counted(reader, int(value), max_bytes)


def _counted(reader: _Reader, length: int, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    try:
        while size < min(length, max_bytes):
            data = reader.take(min(length, max_bytes) - size)
            if not data:  # closed short of its length: what came is kept, the connection is not
                return b"".join(chunks), False
            chunks.append(data)
            size += len(data)
    except TimeoutError:
        return b"".join(chunks), False  # dripped past the deadline: what came is kept, the connection is not
    return b"".join(chunks), size == length


def _until_close(reader: _Reader, max_bytes: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    try:
        while size < max_bytes and (data := reader.take(max_bytes - size)):
            chunks.append(data)
            size += len(data)
    except TimeoutError:
        pass  # dripped past the deadline: what came is kept
    return b"".join(chunks)


def _chunked(reader: _Reader, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    try:
        while True:
            line = reader.line(MAX_LINE_BYTES).split(b";", 1)[0].strip()
            if _CHUNK_SIZE.fullmatch(line) is None:
                raise MalformedAnswer("not a chunk size")
            length = int(line, 16)
            if length == 0:
                _trailers(reader)
                return b"".join(chunks), True
            if size + length > max_bytes:
                chunks.append(_counted(reader, length, max_bytes - size)[0])
                return b"".join(chunks), False  # more than the caller reads: the rest is left, unread
            data, whole = _counted(reader, length, length)
            chunks.append(data)
            size += len(data)
            if not whole or reader.line(2):
                return b"".join(chunks), False
    except TimeoutError:
        return b"".join(chunks), False


def _trailers(reader: _Reader) -> None:
    budget = MAX_HEAD_BYTES
    while True:
        line, budget = _field_line(reader, budget, "trailer")
        if not line:
            return


def _field_line(reader: _Reader, budget: int, part: str) -> tuple[bytes, int]:
    """The next line of the answer's head or trailer, and the bytes of its `part` left after it
    and its line end (MalformedAnswer past them)."""
    line = reader.line(budget)
    budget -= len(line) + 2
    if budget < 0:
        raise MalformedAnswer(f"the answer's {part} is too long")
    return line, budget
