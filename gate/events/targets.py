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


class Unresolved(TargetRefused):
    """The host does not resolve (now: a later connection checks again)."""


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


# IPv6 addresses that carry an IPv4 address, and where (docs/events.md, "Targets"). A network with
# a translator, a relay or a dual-stack socket delivers a packet for such an address to the IPv4
# host inside, so the gate judges that host as it judges a plain IPv4 address:
# - IPv4-compatible ::/96 (RFC 4291 section 2.5.5.1, deprecated but still routed by some stacks)
#   and IPv4-mapped ::ffff:0:0/96 (RFC 4291 section 2.5.5.2): the last 32 bits;
# - the SIIT "IPv4-translated" form ::ffff:0:0:0/96 (RFC 2765 section 2.1, RFC 7915): the last 32 bits;
# - NAT64's well-known prefix 64:ff9b::/96 (RFC 6052 section 2.1): the last 32 bits;
# - the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215), which an operator may split into any
#   RFC 6052 prefix that fits in it (/48, /56, /64, /96; RFC 6052 section 2.2: bits 64-71 are the
#   "u" octet, never part of the address). The gate cannot know which one a translator uses, so
#   every reading must be public;
# - 6to4 2002::/16 (RFC 3056 section 2): bits 16-47;
# - Teredo 2001::/32 (RFC 4380 section 4): the server at bits 32-63, the client in the last 32
#   bits with every bit inverted (XOR 0xffffffff);
# - ISATAP (RFC 5214 section 6.1): under any /64 prefix, an interface identifier of
#   0000:5efe or 0200:5efe (the universal/local bit either way) followed by the IPv4 address in
#   the last 32 bits; read in addition to whatever the prefix carries.
_MAPPED = ipaddress.IPv6Network("::ffff:0:0/96")
_COMPATIBLE = ipaddress.IPv6Network("::/96")
_SIIT = ipaddress.IPv6Network("::ffff:0:0:0/96")
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = ipaddress.IPv6Network("64:ff9b:1::/48")
_SIX_TO_FOUR = ipaddress.IPv6Network("2002::/16")
_TEREDO = ipaddress.IPv6Network("2001::/32")
_ISATAP, _ISATAP_UL = 0x00005EFE, 0x02000000  # bits 64-95 of an ISATAP address, and its u/l bit
# RFC 6052 section 2.2: (prefix length, the bit ranges (from, to) of the IPv4 address, counted from
# the top of the 128 bits), the u octet (bits 64-71) skipped.
_RFC6052_LAYOUTS = ((48, ((48, 64), (72, 88))), (56, ((56, 64), (72, 96))), (64, ((72, 104),)),
                    (96, ((96, 128),)))


def _bits(value: int, start: int, end: int) -> int:
    """Bits start..end-1 of a 128-bit value, counted from its most significant bit."""
    return (value >> (128 - end)) & ((1 << (end - start)) - 1)


def _rfc6052(value: int, ranges: tuple[tuple[int, int], ...]) -> ipaddress.IPv4Address:
    """The IPv4 address an RFC 6052 layout carries: its bit ranges joined, first to last."""
    embedded = 0
    for start, end in ranges:
        embedded = (embedded << (end - start)) | _bits(value, start, end)
    return ipaddress.IPv4Address(embedded)


def embedded_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address `ip` may stand for (the comment above); () for a plain IPv6 address."""
    isatap = (ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF),) if _bits(int(ip), 64, 96) & ~_ISATAP_UL == _ISATAP else ()
    return _prefix_ipv4(ip) + isatap


def _prefix_ipv4(ip: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """The IPv4 addresses the prefixes above carry in `ip`."""
    value, last = int(ip), ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip in _MAPPED or ip in _COMPATIBLE or ip in _SIIT or ip in _NAT64:
        return (last,)
    if ip in _NAT64_LOCAL:
        return tuple(_rfc6052(value, ranges) for _length, ranges in _RFC6052_LAYOUTS)
    if ip in _SIX_TO_FOUR:
        return (ipaddress.IPv4Address(_bits(value, 16, 48)),)
    if ip in _TEREDO:
        return ipaddress.IPv4Address(_bits(value, 32, 64)), ipaddress.IPv4Address(int(last) ^ 0xFFFFFFFF)
    return ()


def _public_ip(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    return ip.is_global and not ip.is_multicast


def public(address: str) -> bool:
    """Whether the gate may connect to `address` (SECURITY: fail closed): a global unicast address
    and, for an IPv6 address that carries IPv4 addresses, every one of those too."""
    ip = ipaddress.ip_address(address)  # a scoped IPv6 address ("fe80::1%eth0") parses with its zone
    if isinstance(ip, ipaddress.IPv4Address):
        return _public_ip(ip)
    return _public_ip(ip) and all(_public_ip(v4) for v4 in embedded_ipv4(ip))


def check(url: object, allow_hosts: Collection[str], resolve: Resolver = _resolve,
          setting: str = "GATE_WEBHOOK_ALLOW_HOSTS") -> Target:
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
    if port == 0:
        raise TargetRefused("url has an invalid port (0 names no port to connect to)")
    port = (443 if parts.scheme == "https" else 80) if port is None else port
    address = checked_address(host, port, allow_hosts, resolve, setting)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    return Target(parts.scheme, host, port, path, address)


def checked_address(host: str, port: int, allow_hosts: Collection[str], resolve: Resolver = _resolve,
                    setting: str = "GATE_WEBHOOK_ALLOW_HOSTS") -> str:
    """The address to connect to for `host`: resolved once, every answer public unless the host is
    in `allow_hosts` (the `setting` that names them, for the message); TargetRefused otherwise."""
    try:
        addresses = resolve(host, port)
    except (OSError, UnicodeError) as exc:
        raise Unresolved(f"the host {host} does not resolve") from exc
    if not addresses:
        raise Unresolved(f"the host {host} does not resolve")
    if host not in allow_hosts:
        inside = [a for a in addresses if not public(a)]
        if inside:
            raise TargetRefused(f"the host {host} resolves to a private, loopback, link-local or reserved "
                                f"address ({inside[0]}); an operator may allow it by name ({setting})")
    return addresses[0]
