"""Which webhook addresses the gate may call (SSRF, docs/events.md "Targets").

A subscription's URL is a tenant's text; posting to it from inside the operator's network could
reach what only that network should (a metadata service, a database's HTTP port, an admin page).
SECURITY: a target is refused unless every address its host resolves to is a public unicast
address, or the operator allowed the host by name (`GATE_WEBHOOK_ALLOW_HOSTS`, exact host names
or literal addresses; the tests allow `127.0.0.1`). The check runs when a subscription is made and
again at every delivery, and the delivery connects to the very address that was checked (so a DNS
answer that changes between check and connect cannot move it inside).
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable, Collection
from dataclasses import dataclass
from urllib.parse import urlsplit

from gate.errors import CodedError

MAX_URL_LENGTH = 2000
Resolver = Callable[[str, int], list[str]]


class TargetRefused(CodedError):
    """The URL may not be called; the message says why (shown to the subscriber)."""

    CODE = "EVENT_TARGET_REFUSED"


@dataclass(frozen=True, slots=True)
class Target:
    scheme: str
    host: str
    port: int
    path: str  # path and query, at least "/"
    address: str  # the checked address the delivery connects to


def _resolve(host: str, port: int) -> list[str]:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


def check(url: object, allow_hosts: Collection[str], resolve: Resolver = _resolve) -> Target:
    """The target `url` names, or TargetRefused."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise TargetRefused(f"url must be a string of at most {MAX_URL_LENGTH} characters")
    if any(ch.isspace() or ord(ch) < 0x21 or ord(ch) == 0x7F for ch in url):
        raise TargetRefused("url must not contain spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http"):
        raise TargetRefused("url must be an http or https URL")
    if parts.username is not None or parts.password is not None:
        raise TargetRefused("url must not carry credentials (the signature authenticates the gate)")
    try:
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise TargetRefused("url has an invalid port") from exc
    if not host:
        raise TargetRefused("url must name a host")
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise TargetRefused(f"the host {host} does not resolve") from exc
    if not addresses:
        raise TargetRefused(f"the host {host} does not resolve")
    allowed = host in allow_hosts
    if not allowed:
        inside = [a for a in addresses if not _public(a)]
        if inside:
            raise TargetRefused(f"the host {host} resolves to a private, loopback, link-local or reserved "
                                f"address ({inside[0]}); an operator may allow it by name "
                                "(GATE_WEBHOOK_ALLOW_HOSTS)")
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, addresses[0])
