"""Who may open the workbench, who they are, and what they may do in each scope.

The workbench shows decisions, facts and outcomes of every scope it can read and moves
production (releases), so it is an operator tool, not a public page:

- Bound to a loopback address without sign-in (the default), it serves the person at the
  machine: the local operator, `Principal.operator(<login>)`, with every role in every scope
  (marked as the operator in every event it signs). The operator is one principal: it cannot
  approve a request it made itself.
- With sign-in (required on any other address) people sign in either through an OpenID Connect
  provider (`workbench.app.oidc`: issuer, subject, display name and the groups claim) or
  against a password file of scrypt hashes (`workbench.app.passwords`; issuer "password-file",
  subject the user name). A grants file (`gate.grants.load_grants`) gives each person roles per
  scope, by user (issuer and subject: `Grants.person_entry`, with this workbench's sign-in issuer
  when the file states none; a file stating another issuer is refused at start) and by group; a
  person without a role in a scope does not see it.

Grants file (one per deployment; docs/workbench.md, "Roles and the grants file"):

    {"users":  {"alice": {"payments": ["author", "releaser"]}},
     "groups": {"gate-approvers": {"*": ["approver"]}}}

`"*"` is every scope. The roles are `gate.principals.ROLES`; each grants `read`. The older form
`{"user": ["scope", ...]}` still reads, each listed scope as the `viewer` role only.

SECURITY: the decision to serve without authentication is made from the bind address, before
the server starts; there is no flag that turns it off for a non-loopback address. What a page
may do is decided here, per request, from the signed-in principal; pages only hide what this
refuses anyway.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.grants import ALL_SCOPES, AccessConfigError, Grants, load_grants
from gate.oidc import is_loopback
from gate.principals import ROLES, Permission, Permissions, Principal, permissions_of, permits, require
from workbench.app.passwords import PasswordFileError, load_hashes

if TYPE_CHECKING:
    from workbench.app.oidc_settings import OIDCSettings

PASSWORD_FILE_ISSUER = "password-file"  # noqa: S105  # an issuer name, not a password


@dataclass(frozen=True)
class Identity:
    """Who a session acts as: a principal, the groups its provider vouched for, and whether it
    is the unauthenticated loopback operator (every role everywhere)."""

    principal: Principal
    groups: tuple[str, ...] = ()
    operator: bool = False

    @property
    def label(self) -> str:
        """What the page shows as the signed-in person (display only)."""
        principal = self.principal
        if principal.kind == "person":
            return principal.display_name or principal.subject or principal.id
        return principal.id

    @classmethod
    def local_operator(cls, login: str | None = None) -> Identity:
        return cls(Principal.operator(login or _login()), operator=True)

    @classmethod
    def password_user(cls, user: str) -> Identity:
        return cls(Principal.person(PASSWORD_FILE_ISSUER, user, user))


def _login() -> str:
    """The login of the process's real user id, as `gate release` names the operator
    (gate_cli/context.py `operator`): never LOGNAME/USER, which `getpass.getuser` reads first
    (setting one must not make a second person); "local" when the uid has no name."""
    try:
        import pwd

        return pwd.getpwuid(os.getuid()).pw_name
    except ImportError:  # no POSIX user ids
        return getpass.getuser()
    except KeyError:  # no login name for this uid (a container): still one operator
        return "local"


@dataclass(frozen=True)
class Rights:
    """What one session acts as and may do: its identity, and its roles in a scope as the access
    policy decides them at the moment of each call (never a value the page holds)."""

    identity: Identity
    roles_in: Callable[[str], frozenset[str]]

    @property
    def principal(self) -> Principal:
        return self.identity.principal

    def permissions_in(self, scope: str) -> Permissions:
        return permissions_of(self.roles_in(scope)) if scope else frozenset()

    def may(self, scope: str, permission: Permission) -> bool:
        """Whether the session's roles in `scope` grant `permission` (what a page shows)."""
        return permits(self.permissions_in(scope), permission)

    def require(self, scope: str, permission: Permission, code: str) -> None:
        """A page's check of a right before it asks for a confirmation, refused as the service
        refuses it (gate.principals.require, with the service's code)."""
        require(self.permissions_in(scope), permission, code)

    @classmethod
    def operator(cls, login: str | None = None) -> Rights:
        """The local operator with every role (no sign-in, loopback)."""
        return cls(Identity.local_operator(login), lambda _scope: frozenset(ROLES))


@dataclass(frozen=True)
class Access:
    """The access policy of one running workbench."""

    basic_auth_file: Path | None
    grants: Grants | None  # None: the loopback operator alone, every role in every scope
    oidc: OIDCSettings | None = None
    grants_file: Path | None = None  # re-read when it changes (workbench.app.sessions.GrantsWatch)

    @property
    def authenticated(self) -> bool:
        return self.basic_auth_file is not None or self.oidc is not None

    @property
    def sign_in_issuer(self) -> str | None:
        """The one issuer this workbench signs people in with (None: no sign-in)."""
        if self.oidc is not None:
            return self.oidc.issuer
        return PASSWORD_FILE_ISSUER if self.basic_auth_file is not None else None

    def roles_in(self, identity: Identity | None, scope: str) -> frozenset[str]:
        """The roles `identity` holds in `scope` (none for no identity: fail closed)."""
        if identity is None:
            return frozenset()
        if identity.operator and self.grants is None and not self.authenticated:
            return frozenset(ROLES)
        return self.grants.roles(identity, scope, self.sign_in_issuer) if self.grants is not None else frozenset()

    def permissions_in(self, identity: Identity | None, scope: str) -> Permissions:
        """What `identity` may do in `scope` (gate.principals.ROLE_PERMISSIONS of its roles)."""
        return permissions_of(self.roles_in(identity, scope))

    def scopes_for(self, identity: Identity | None, known_scopes: list[str]) -> list[str]:
        """The scopes `identity` may see (a role there), in the order of `known_scopes`."""
        return [scope for scope in known_scopes if permits(self.permissions_in(identity, scope), "read")]


def access_for(address: str, basic_auth_file: Path | None, grants_file: Path | None,
               oidc: OIDCSettings | None = None) -> Access:
    """Decide the access policy for a bind address, or refuse with `AccessConfigError`."""
    if basic_auth_file is not None and oidc is not None:
        raise AccessConfigError("give either --basic-auth or --oidc-issuer, not both")
    if basic_auth_file is None and oidc is None:
        if grants_file is not None:
            raise AccessConfigError("--grants needs sign-in (--oidc-issuer or --basic-auth): grants name "
                                    "signed-in people")
        if not is_loopback(address):
            # SECURITY: never serve ledger contents to a network without sign-in.
            raise AccessConfigError(
                f"refusing to serve the workbench on {address} without authentication: pass "
                "--oidc-issuer ... or --basic-auth FILE, and --grants FILE, or bind to 127.0.0.1")
        return Access(None, None)
    if basic_auth_file is not None:
        try:
            # SECURITY: only scrypt hashes; a plaintext entry is refused before anything is served.
            load_hashes(basic_auth_file)
        except PasswordFileError as exc:
            raise AccessConfigError(str(exc)) from None
    if grants_file is None:
        raise AccessConfigError("sign-in needs --grants FILE: say which roles each person has in which scopes")
    access = Access(basic_auth_file, load_grants(grants_file), oidc, grants_file)
    stated = access.grants.issuer if access.grants is not None else None
    if stated is not None and stated != access.sign_in_issuer:
        raise AccessConfigError(f"grants file {grants_file}: its issuer {stated!r} is not the issuer people sign in "
                                f"with here ({access.sign_in_issuer!r}): its users would match nobody")
    return access


def roles_text(roles: Iterable[str]) -> str:
    """Roles in the order of ROLES, comma-separated (for the page's header)."""
    held = set(roles)
    return ", ".join(role for role in ROLES if role in held) or "none"


def identity_from_claims(claims: Mapping[str, Any], groups_claim: str) -> tuple[str, str, str | None, tuple[str, ...]]:
    """(issuer, subject, display name, groups) from verified ID-token claims; the groups claim
    may be a list of strings or one string; anything else counts as no groups."""
    groups = claims.get(groups_claim)
    if isinstance(groups, str):
        groups = [groups]
    names = tuple(g for g in groups if isinstance(g, str) and g) if isinstance(groups, list) else ()
    display = claims.get("name") or claims.get("preferred_username")
    return claims["iss"], claims["sub"], display if isinstance(display, str) and display else None, names


__all__ = ["ALL_SCOPES", "Access", "AccessConfigError", "Grants", "Identity", "Rights", "access_for",
           "identity_from_claims", "is_loopback", "load_grants", "roles_text"]
