"""What an operator configures for OpenID Connect sign-in (`gate workbench --oidc-issuer ...`).

A value of its own, below both modules that use it: the access configuration holds it
(`workbench.app.access.Access.oidc`) and the sign-in flow reads it (`workbench.app.oidc`), which
itself builds on the access module's identities.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["OIDCSettings"]


@dataclass(frozen=True)
class OIDCSettings:
    """What an operator configures (`gate workbench --oidc-issuer ...`; docs/workbench.md)."""

    issuer: str
    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    groups_claim: str = "groups"
    scopes: tuple[str, ...] = ("openid", "profile")
    redirect_uri: str | None = None  # default: http(s)://<the Host the browser used>/login
