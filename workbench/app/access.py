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
  subject the user name). A grants file (`load_grants`) gives each person roles per scope, by
  user (subject) and by group; a person without a role in a scope does not see it.

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
import ipaddress
import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import CodedError
from gate.principals import ROLES, Permission, Principal, permissions_of, require
from workbench.app.passwords import PasswordFileError, load_hashes

if TYPE_CHECKING:
    from workbench.app.oidc_settings import OIDCSettings

ALL_SCOPES = "*"
PASSWORD_FILE_ISSUER = "password-file"  # noqa: S105  # an issuer name, not a password
LEGACY_ROLE = "viewer"  # what a scope listed in the older grants form grants


class AccessConfigError(CodedError):
    """The workbench's access configuration is unusable; the message says what to fix."""

    CODE = "WORKBENCH_ACCESS_INVALID"


def is_loopback(address: str) -> bool:
    """True for `localhost` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


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

    def permissions_in(self, scope: str) -> frozenset[str]:
        return permissions_of(self.roles_in(scope)) if scope else frozenset()

    def may(self, scope: str, permission: str) -> bool:
        return permission in self.permissions_in(scope)

    def require(self, scope: str, permission: Permission, code: str) -> None:
        """A page's check of a right before it asks for a confirmation, refused as the service
        refuses it (gate.principals.require, with the service's code)."""
        require(self.permissions_in(scope), permission, code)

    @classmethod
    def operator(cls, login: str | None = None) -> Rights:
        """The local operator with every role (no sign-in, loopback)."""
        return cls(Identity.local_operator(login), lambda _scope: frozenset(ROLES))


RoleTable = dict[str, dict[str, frozenset[str]]]  # name -> scope (or "*") -> roles


@dataclass(frozen=True)
class Grants:
    """Roles per scope, by user (the subject) and by group (the groups claim)."""

    users: RoleTable = field(default_factory=dict)
    groups: RoleTable = field(default_factory=dict)
    # An administrator's revocation: subject -> epoch seconds; that subject's sessions opened
    # before it end (workbench.app.sessions). Not a role: it never grants anything.
    revoked: dict[str, float] = field(default_factory=dict)

    def roles(self, identity: Identity, scope: str) -> frozenset[str]:
        """The roles `identity` holds in `scope`: its user entry's and every one of its groups'."""
        tables = [self.users.get(identity.principal.subject or "", {})]
        tables += [self.groups.get(group, {}) for group in identity.groups]
        roles: set[str] = set()
        for table in tables:
            roles |= table.get(scope, frozenset()) | table.get(ALL_SCOPES, frozenset())
        return frozenset(roles)


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

    def roles_in(self, identity: Identity | None, scope: str) -> frozenset[str]:
        """The roles `identity` holds in `scope` (none for no identity: fail closed)."""
        if identity is None:
            return frozenset()
        if identity.operator and self.grants is None and not self.authenticated:
            return frozenset(ROLES)
        return self.grants.roles(identity, scope) if self.grants is not None else frozenset()

    def permissions_in(self, identity: Identity | None, scope: str) -> frozenset[str]:
        """What `identity` may do in `scope` (gate.principals.ROLE_PERMISSIONS of its roles)."""
        return permissions_of(self.roles_in(identity, scope))

    def scopes_for(self, identity: Identity | None, known_scopes: list[str]) -> list[str]:
        """The scopes `identity` may see (a role there), in the order of `known_scopes`."""
        return [scope for scope in known_scopes if "read" in self.permissions_in(identity, scope)]


def _read_json_object(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccessConfigError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise AccessConfigError(f"{what} {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise AccessConfigError(f"{what} {path} must be a non-empty JSON object")
    return data


def _names(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(s, str) and s for s in value)


def _role_table(path: Path, section: str, entries: object) -> RoleTable:
    if not isinstance(entries, dict):
        raise AccessConfigError(f"grants file {path}: {section!r} must map names to {{scope: [roles]}}")
    table: RoleTable = {}
    for name, scopes in entries.items():
        if not isinstance(scopes, dict) or not all(isinstance(s, str) and s and _names(r) for s, r in scopes.items()):
            raise AccessConfigError(f"grants file {path}: {section} {name!r} must map scope names to lists of roles")
        for scope, roles in scopes.items():
            unknown = sorted(set(roles) - set(ROLES))
            if unknown:
                raise AccessConfigError(f"grants file {path}: {section} {name!r}, scope {scope!r}: unknown "
                                        f"role(s) {', '.join(map(repr, unknown))}; roles are {', '.join(ROLES)}")
        table[name] = {scope: frozenset(roles) for scope, roles in scopes.items()}
    return table


def load_grants(path: Path) -> Grants:
    """Read the grants file (module docstring); refuses anything else with the member at fault."""
    data = _read_json_object(path, "grants file")
    # The older {"user": ["scope", ...]} (a file naming "users" or "groups" is the current form).
    if not {"users", "groups"} & set(data) and all(isinstance(value, list) for value in data.values()):
        for user, scopes in data.items():
            if not _names(scopes):
                raise AccessConfigError(f"grants file {path}: {user!r} must map to a list of scope names")
        return Grants(users={user: {scope: frozenset({LEGACY_ROLE}) for scope in scopes}
                             for user, scopes in data.items()})
    unknown = sorted(set(data) - {"users", "groups", "revoked"})
    if unknown:
        raise AccessConfigError(f"grants file {path}: unknown member(s) {', '.join(map(repr, unknown))}; "
                                'it is {"users": {...}, "groups": {...}, "revoked": {...}}')
    return Grants(_role_table(path, "users", data.get("users", {})),
                  _role_table(path, "groups", data.get("groups", {})),
                  _revocations(path, data.get("revoked", {})))


def _revocations(path: Path, revoked: object) -> dict[str, float]:
    """The grants file's `revoked`: {"<subject>": "<ISO time with zone>"} as epoch seconds."""
    if not isinstance(revoked, dict):
        raise AccessConfigError(f"grants file {path}: 'revoked' must map subjects to ISO times")
    out: dict[str, float] = {}
    for subject, when in revoked.items():
        try:
            moment = datetime.fromisoformat(when) if isinstance(when, str) else None
        except ValueError:
            moment = None
        if moment is None or moment.tzinfo is None:
            raise AccessConfigError(f"grants file {path}: revoked {subject!r}: {when!r} is not an ISO time "
                                    "with its zone (2026-11-26T18:00:00Z)")
        out[subject] = moment.timestamp()
    return out


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
    return Access(basic_auth_file, load_grants(grants_file), oidc, grants_file)


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
