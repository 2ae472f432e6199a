"""The one outbound client: every request the gate makes to another party (docs/events.md, "Targets").

Webhook deliveries (`gate.events.webhook`), Slack's Web API and an interaction's `response_url`
(`gate.events.notices`, `gate.services.slack_actions`), the OpenID Connect issuers' discovery
documents and key sets (`gate.oidc.fetch_json`: the CI issuer, the workbench's provider) and the
operator's SMTP server all connect through the same rule (targets.py): SECURITY (SSRF)

* the host is resolved once, every answer must be a public unicast address unless the host is
  allowed by name, and the connection goes to the very address that was checked (TLS still
  verifies the certificate for the host name), so a DNS answer that changes between check and
  connect cannot move a request inside;
* no redirect is followed unless the caller asks for some, and then each hop is checked anew
  (its own resolution, its own address);
* the operator's own URLs (`GATE_SLACK_API_URL`, `GATE_SMTP_URL`, `GATE_CI_ISSUER`) are checked
  when the gate starts (`check_operator_urls`): an internal host is refused unless it is in
  `GATE_OUTBOUND_ALLOW_HOSTS` (exact host names or literal addresses; the tests allow
  `127.0.0.1` and `localhost`). A name that does not resolve at start is let through: every
  connection checks again.

The resolver and the clock are injected (the tests drive a resolver that changes its answer).
"""

from __future__ import annotations

import os
import smtplib
import socket
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from gate.events import targets
from gate.events.http11 import host_field, open_socket, read_answer, request_bytes
from gate.events.targets import Resolver, TargetRefused, Unresolved

ALLOW_SETTING = "GATE_OUTBOUND_ALLOW_HOSTS"
TIMEOUT_SECONDS = 5.0
MAX_ANSWER_BYTES = 1_048_576
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True, slots=True)
class Answer:
    """An answer: its status, its headers (names in lower case) and at most `max_bytes` + 1 of its body."""

    status: int
    headers: Mapping[str, str]
    body: bytes


class Outbound:
    """Requests to other parties under the rule of the module's text."""

    def __init__(self, allow_hosts: Iterable[str] = (), resolve: Resolver = targets._resolve,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.allow_hosts = frozenset(allow_hosts)
        self.resolve, self.clock = resolve, clock

    def target(self, url: str) -> targets.Target:
        """The checked target of `url` (TargetRefused otherwise): resolved once, here."""
        return targets.check(url, self.allow_hosts, self.resolve, ALLOW_SETTING)

    def address(self, host: str, port: int) -> str:
        """The checked address of a host that is not named by an http URL (the SMTP server)."""
        return targets.checked_address(host, port, self.allow_hosts, self.resolve, ALLOW_SETTING)

    def request(self, method: str, url: str, body: bytes | None = None, headers: Mapping[str, str] | None = None,
                *, redirects: int = 0, timeout: float = TIMEOUT_SECONDS, max_bytes: int = MAX_ANSWER_BYTES,
                each_url: Callable[[str], object] | None = None) -> Answer:
        """One request, following at most `redirects` redirects, each hop checked anew (and by
        `each_url`, the caller's own rule, which raises). A redirect beyond them is answered as it
        came (a 3xx: the caller's failure). Raises TargetRefused for a refused hop, OSError or
        http.client.HTTPException (`gate.events.http11`'s refusals of a malformed answer or request
        among them) for a failed connection."""
        deadline = self.clock() + timeout
        for hop in range(redirects + 1):
            if each_url is not None:
                each_url(url)
            answer = self._once(method, self.target(url), body, headers or {}, deadline, max_bytes)
            location = answer.headers.get("location")
            if answer.status not in _REDIRECTS or not location or hop == redirects:
                return answer
            url = urljoin(url, location)
            if answer.status == 303 or (answer.status in (301, 302) and method == "POST"):
                method, body = "GET", None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns

    def _once(self, method: str, target: targets.Target, body: bytes | None, headers: Mapping[str, str],
              deadline: float, max_bytes: int) -> Answer:
        left = deadline - self.clock()
        if left <= 0:
            raise TimeoutError("the request's time ran out")
        request = request_bytes(method, host_field(target), target.path, headers, body)
        connection = open_socket(target, left)
        try:
            connection.sendall(request)
            answer = read_answer(connection, deadline, max_bytes + 1, head_only=method == "HEAD", clock=self.clock)
            return Answer(answer.status, answer.headers, answer.body)
        finally:
            connection.close()

    def smtp(self, url: str, timeout: float, context: Any) -> smtplib.SMTP:
        """A connected SMTP client for the operator's `smtp://` or `smtps://` URL, to the checked address."""
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port or (465 if parts.scheme == "smtps" else 25)
        address = self.address(host, port)
        if parts.scheme == "smtps":
            client: smtplib.SMTP = _PinnedSMTPSSL(address, context=context, timeout=timeout)
        else:
            client = _PinnedSMTP(address, timeout=timeout)
        client.connect(host, port)
        return client


class _PinnedSMTP(smtplib.SMTP):
    """SMTP to a fixed address; STARTTLS still verifies the certificate for the host name."""

    def __init__(self, address: str, **options: Any) -> None:
        self._address = address
        super().__init__(**options)

    def _get_socket(self, host: str, port: int, timeout: float) -> socket.socket:
        return socket.create_connection((self._address, port), timeout, self.source_address)


class _PinnedSMTPSSL(smtplib.SMTP_SSL, _PinnedSMTP):
    """SMTPS to a fixed address: SMTP_SSL wraps the pinned socket for the host name."""

    def __init__(self, address: str, **options: Any) -> None:
        self._address = address
        smtplib.SMTP_SSL.__init__(self, **options)


def check_operator_urls(settings: Any, resolve: Resolver = targets._resolve) -> None:
    """The operator's outbound URLs, at start (ValueError naming the setting when one is refused):
    each host in use must resolve to public addresses only, or be in GATE_OUTBOUND_ALLOW_HOSTS."""
    client = Outbound(settings.outbound_allow_hosts, resolve)
    named: list[tuple[str, str]] = []
    if settings.slack_bot_token or settings.slack_signing_secret:
        named.append(("GATE_SLACK_API_URL", settings.slack_api_url))
    if settings.smtp_url:
        named.append(("GATE_SMTP_URL", settings.smtp_url))
    if settings.ci_issuer:
        named.append(("GATE_CI_ISSUER", settings.ci_issuer))
    for setting, url in named:
        parts = urlsplit(url)
        try:
            port = parts.port or {"https": 443, "http": 80, "smtps": 465}.get(parts.scheme, 25)
            client.address(parts.hostname or "", port)
        except Unresolved:
            continue  # not known yet: every connection checks again
        except TargetRefused as refused:
            raise ValueError(f"{setting}: {refused.message}") from None


def from_environment() -> Outbound:
    """The client of this process's GATE_OUTBOUND_ALLOW_HOSTS (the workbench's provider, a CLI)."""
    return Outbound(h.strip() for h in os.environ.get(ALLOW_SETTING, "").split(",") if h.strip())


def for_settings(settings: Any) -> Outbound:
    """The client of a gate's settings (its GATE_OUTBOUND_ALLOW_HOSTS)."""
    return Outbound(settings.outbound_allow_hosts)

