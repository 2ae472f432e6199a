"""The HTTP LLM advisor: one model behind an OpenAI-compatible chat-completions endpoint.

Configured by environment (`gate.settings`: `GATE_ADVISOR_BASE_URL`, `GATE_ADVISOR_MODEL`,
`GATE_ADVISOR_API_KEY` or `GATE_ADVISOR_API_KEY_FILE`, `GATE_ADVISOR_TIMEOUT`) and passed into
the advisory service, so the core has no hidden I/O.

Exchange: `POST {base_url}/chat/completions` with `{model, temperature: 0, response_format:
{type: "json_object"}, messages: [system, user]}` and `Authorization: Bearer <key>` when a key is
configured. The user message is canonical JSON of `{mode, question, context, policy_pattern}`.
The answer's `choices[0].message.content` must be a JSON object `{decision: yes|no|review,
rationale: string, evidence?: [REASON_CODE…]}`.

Fails closed: a timeout (`GATE_ADVISOR_TIMEOUT` bounds the whole exchange, connect to last
byte, not each read: a slow-loris upstream cannot hold a request), a refused connection, a
malformed HTTP answer, a redirect (never followed, so the key cannot leak
to another host), a non-2xx status, a body over 256 KiB, or an answer of any other shape is a
failed vote (`status: "failed"`, `decision: "review"`, `error` = `ADVISOR_TIMEOUT`,
`ADVISOR_UNREACHABLE`, `ADVISOR_HTTP_STATUS` or `ADVISOR_RESPONSE_INVALID`), never a verdict.
Neither the key nor the response text is logged or recorded; the record keeps the model, the
provider host, the parsed vote and `response_hash` (sha256 of the raw response bytes).
"""

from __future__ import annotations

import http.client
import json
import re
import socket
import threading
import time
import urllib.error
import urllib.request
from contextlib import suppress
from email.message import Message
from typing import IO
from urllib.parse import urlsplit

from gate.advisory.advisors import AdvisoryQuestion, Vote
from gate.errors import Signal
from gate.protocol.canonical import canonical_text, sha256_bytes_hex
from gate.vocabulary import VERDICTS

MAX_RESPONSE_BYTES = 262_144
MAX_RATIONALE = 500
MAX_EVIDENCE = 8
_CODE = re.compile(r"^[A-Z][A-Z0-9_]{1,79}$")

SYSTEM_PROMPT = (
    "You are an advisory reviewer for a decision gate. Your answer is advisory only and never authorizes a "
    "production change. Read the question and the structured context and answer with one JSON object: "
    '{"decision": "yes" | "no" | "review", "rationale": "<one or two sentences>", '
    '"evidence": ["UPPER_SNAKE_REASON_CODE", ...]}. Answer "review" when the context does not settle the question.'
)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Message, newurl: str) -> None:
        return None  # SECURITY: never forward the Authorization header to another location


class _Deadline:
    """One exchange's wall-clock bound. `socket.timeout` bounds each read, not the exchange: an
    upstream that sends one byte (or one header line) just inside it would hold the request for
    minutes. The connections of the exchange register here, and when the deadline passes their
    sockets are shut down, which ends any read or write in progress."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def register(self, sock: socket.socket) -> None:
        with self._lock:
            if self.expired:
                _shut(sock)
            self._sockets.append(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()


def _shut(sock: socket.socket) -> None:
    with suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)


def _deadline_handlers(deadline: _Deadline) -> list[urllib.request.BaseHandler]:
    """HTTP and HTTPS handlers whose connections register their socket with `deadline`."""

    class _HTTPConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            super().connect()
            deadline.register(self.sock)

    class _HTTPSConnection(http.client.HTTPSConnection):
        def connect(self) -> None:
            super().connect()
            deadline.register(self.sock)

    class _HTTPHandler(urllib.request.HTTPHandler):
        def http_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            return self.do_open(_HTTPConnection, req)

    class _HTTPSHandler(urllib.request.HTTPSHandler):
        def https_open(self, req: urllib.request.Request) -> http.client.HTTPResponse:
            # HTTPSHandler keeps its SSL context in `_context` (CPython), which typeshed does not declare.
            return self.do_open(_HTTPSConnection, req, context=self._context)  # type: ignore[attr-defined]

    return [_HTTPHandler(), _HTTPSHandler(), _NoRedirect()]


class AdvisorFailure(Signal):
    """The exchange failed (`code`): `advise` answers it as the advisor's failed vote."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


class HttpLLMAdvisor:
    kind = "http_llm"

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout: float = 10.0) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("the advisor base URL must be an http(s) URL with a host")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.provider = parts.hostname + (f":{parts.port}" if parts.port else "")
        self.timeout = timeout
        self.advisor_id = f"http_llm:{model}"
        self._api_key = api_key

    def __repr__(self) -> str:  # SECURITY: the key never appears in a repr or a log line
        return f"HttpLLMAdvisor(provider={self.provider!r}, model={self.model!r})"

    def identity(self, question: AdvisoryQuestion) -> dict[str, str]:
        return {"advisor_id": self.advisor_id, "kind": self.kind, "model": self.model, "provider": self.provider}

    def _payload(self, question: AdvisoryQuestion) -> bytes:
        user = {
            "mode": question.mode,
            "question": question.question,
            "context": dict(question.context),
            "policy_pattern": None if question.pattern is None else {
                "pattern_id": question.pattern.pattern_id, "summary": question.pattern.body["summary"]},
        }
        return json.dumps({
            "model": self.model,
            "temperature": 0,
            "response_format": {"type": "json_object"},
            "messages": [{"role": "system", "content": SYSTEM_PROMPT},
                         {"role": "user", "content": canonical_text(user)}],
        }, ensure_ascii=False).encode("utf-8")

    def _exchange(self, payload: bytes) -> bytes:
        headers = {"content-type": "application/json", "accept": "application/json"}
        if self._api_key:
            headers["authorization"] = f"Bearer {self._api_key}"
        # The base URL's scheme is http or https, checked when the advisor is configured.
        req = urllib.request.Request(self.base_url + "/chat/completions", data=payload,  # noqa: S310
                                     headers=headers, method="POST")
        timed_out = AdvisorFailure("ADVISOR_TIMEOUT", f"no answer within {self.timeout:g} s")
        with _Deadline(self.timeout) as deadline:
            # SECURITY: a fresh opener per exchange, so the deadline covers only its own sockets.
            opener = urllib.request.build_opener(*_deadline_handlers(deadline))
            ends = time.monotonic() + self.timeout
            try:
                # The base URL's scheme is http or https (checked when the advisor is configured).
                with opener.open(req, timeout=self.timeout) as response:
                    raw = b""
                    while len(raw) <= MAX_RESPONSE_BYTES:
                        if time.monotonic() >= ends:
                            raise timed_out
                        chunk = response.read(min(65536, MAX_RESPONSE_BYTES + 1 - len(raw)))
                        if not chunk:
                            break
                        raw += chunk
            except AdvisorFailure:
                raise
            except urllib.error.HTTPError as error:
                raise AdvisorFailure("ADVISOR_HTTP_STATUS", f"provider answered HTTP {error.code}") from None
            except TimeoutError:
                raise timed_out from None
            except urllib.error.URLError as error:
                if deadline.expired or isinstance(error.reason, (socket.timeout, TimeoutError)):
                    raise timed_out from None
                raise AdvisorFailure("ADVISOR_UNREACHABLE", "provider unreachable") from None
            except (OSError, ValueError):
                if deadline.expired:
                    raise timed_out from None
                raise AdvisorFailure("ADVISOR_UNREACHABLE", "provider connection failed") from None
            except http.client.HTTPException:
                # http.client's own errors (a malformed status line, too many headers, a short
                # body) are not OSError: without this they escaped the advisor as a 500.
                if deadline.expired:
                    raise timed_out from None
                raise AdvisorFailure("ADVISOR_RESPONSE_INVALID", "provider answer is not valid HTTP") from None
            if deadline.expired:
                raise timed_out
        if len(raw) > MAX_RESPONSE_BYTES:
            raise AdvisorFailure("ADVISOR_RESPONSE_INVALID", "provider answer exceeds 256 KiB")
        return raw

    @staticmethod
    def _parse(raw: bytes) -> tuple[str, str, tuple[str, ...]]:
        def invalid(message: str) -> AdvisorFailure:
            return AdvisorFailure("ADVISOR_RESPONSE_INVALID", message)

        try:
            document = json.loads(raw.decode("utf-8"))
            content = document["choices"][0]["message"]["content"]
            answer = json.loads(content) if isinstance(content, str) else None
        except (UnicodeDecodeError, ValueError, KeyError, IndexError, TypeError):
            raise invalid("provider answer is not a chat completion with JSON content") from None
        if not isinstance(answer, dict):
            raise invalid("the model's content is not a JSON object")
        decision = answer.get("decision")
        if decision not in VERDICTS:
            raise invalid("the model's decision is not yes, no or review")
        rationale = answer.get("rationale")
        if not isinstance(rationale, str) or not rationale.strip():
            raise invalid("the model gave no rationale")
        evidence = answer.get("evidence", [])
        if not isinstance(evidence, list) or not all(isinstance(c, str) and _CODE.fullmatch(c) for c in evidence):
            raise invalid("evidence must be a list of UPPER_SNAKE reason codes")
        return decision, rationale.strip()[:MAX_RATIONALE], tuple(dict.fromkeys(evidence))[:MAX_EVIDENCE]

    def advise(self, question: AdvisoryQuestion) -> Vote:
        details: dict[str, str] = {"model": self.model, "provider": self.provider}
        try:
            raw = self._exchange(self._payload(question))
            details["response_hash"] = sha256_bytes_hex(raw)
            decision, rationale, evidence = self._parse(raw)
        except AdvisorFailure as failure:
            return Vote(self.advisor_id, self.kind, "failed", "review", str(failure), (), failure.code, details)
        return Vote(self.advisor_id, self.kind, "ok", decision, rationale, evidence, details=details)


__all__ = ["MAX_RESPONSE_BYTES", "SYSTEM_PROMPT", "HttpLLMAdvisor"]
