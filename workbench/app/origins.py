"""The workbench's own origins: the names browsers reach it under, the scheme a request came by,
and whether an `Origin` (or a `Referer`) names the workbench itself.

- `Origins.names`: the `host:port` names of the workbench (the bind address, `localhost` and
  `127.0.0.1` on its port, and every `--allow-origin`). Its websocket and its sign-in form accept
  an `Origin` only when it is one of these or the request's own `Host`, and only under the scheme
  the request came by.
- `Origins.scheme(request)`: `https` when the request came over TLS. The workbench itself serves
  plain http, so that is known only from a TLS-terminating proxy's `X-Forwarded-Proto`, which is
  read only on requests whose TCP peer is one of `--trusted-proxy` (an address or a network);
  from anyone else the header is ignored (a client could write it).

SECURITY: a request's scheme decides the `Secure` flag of the cookies set on it (with the bind
address, `workbench.app.sessions`), and an `Origin` of the other scheme is a foreign origin: a
page an attacker injects into plain http on the workbench's host name cannot open the https
workbench's websocket or post its sign-in form (docs/workbench.md, "TLS").
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass

from tornado.httputil import HTTPServerRequest

__all__ = ["DEFAULT_PORTS", "Origins", "ProxyNetwork", "parse_proxies"]

ProxyNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
DEFAULT_PORTS = {"http": 80, "https": 443}
FORWARDED_PROTO = "X-Forwarded-Proto"


def parse_proxies(values: Iterable[str]) -> tuple[ProxyNetwork, ...]:
    """`--trusted-proxy` values as networks (an address is a network of one), or ValueError
    with the line `gate workbench` prints."""
    networks = []
    for value in values:
        try:
            networks.append(ipaddress.ip_network(value.strip(), strict=False))
        except ValueError:
            raise ValueError(f"--trusted-proxy {value!r} is neither an IP address nor a network") from None
    return tuple(networks)


def _authority(scheme: str, netloc: str) -> str | None:
    """`host:port` of a URL's `netloc`, lowercased, with the scheme's default port made explicit
    (None when it names no host or carries user information)."""
    netloc = netloc.lower()
    if not netloc or "@" in netloc:
        return None
    host, colon, port = netloc.rpartition(":")
    if not colon or "]" in port:
        host, port = netloc, str(DEFAULT_PORTS.get(scheme, ""))
    return f"{host}:{port}" if host and port.isdigit() else None


@dataclass(frozen=True)
class Origins:
    """The names and trusted proxies of one workbench server (module docstring)."""

    names: frozenset[str] = frozenset()
    proxies: tuple[ProxyNetwork, ...] = ()

    def _from_proxy(self, request: HTTPServerRequest) -> bool:
        try:
            peer = ipaddress.ip_address(request.remote_ip or "")
        except ValueError:
            return False
        if isinstance(peer, ipaddress.IPv6Address) and peer.ipv4_mapped is not None:
            peer = peer.ipv4_mapped
        return any(peer in network for network in self.proxies)

    def scheme(self, request: HTTPServerRequest) -> str:
        """`https` or `http`: how the browser reached the workbench (module docstring)."""
        if request.protocol == "https":
            return "https"
        if self.proxies and self._from_proxy(request):
            # The proxy nearest to us appends last: its entry is the one it vouches for.
            forwarded = request.headers.get(FORWARDED_PROTO, "").split(",")[-1].strip().lower()
            if forwarded in DEFAULT_PORTS:
                return forwarded
        return "http"

    def is_own(self, request: HTTPServerRequest, origin: str) -> bool:
        """True when `origin` (an `Origin` header, or the origin of a `Referer`) is this
        workbench, under one of its names or the `Host` this request names, by the scheme this
        request came by."""
        try:
            parts = urllib.parse.urlsplit(origin.strip())
        except ValueError:
            return False
        scheme = parts.scheme.lower()
        if scheme != self.scheme(request):
            return False
        authority = _authority(scheme, parts.netloc)
        # The name the browser asked for (its Host) is the workbench's too, as Tornado holds.
        return authority is not None and (authority in self.names or authority == _authority(scheme, request.host))

    @classmethod
    def of(cls, names: Iterable[str], proxies: Iterable[ProxyNetwork] = ()) -> Origins:
        """Origins from `host:port` names (a name without a port is on port 80)."""
        known = {_authority("http", name) for name in names}
        return cls(frozenset(name for name in known if name is not None), tuple(proxies))
