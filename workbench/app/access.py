"""Who may open the workbench, and which scopes each author sees.

The workbench shows decisions, facts and outcomes of every scope it can read, so it is an
operator tool, not a public page:

- Bound to a loopback address (the default), it serves without sign-in, to the person at the
  machine, with every scope.
- Bound to any other address it refuses to start unless authentication is configured
  (Panel's login page over a password file of scrypt hashes, `{"user": "scrypt$n$r$p$salt$hash"}`,
  written by `gate workbench-passwd`; see `workbench.app.passwords`), and a grants file maps
  each user to the scopes they may see (`{"user": ["scope", ...]}`, `"*"` for all). A user
  without a grant sees nothing.

SECURITY: the decision to serve without authentication is made from the bind address, before
the server starts; there is no flag that turns it off for a non-loopback address.
"""

from __future__ import annotations

import ipaddress
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.app.passwords import PasswordFileError, load_hashes

ALL_SCOPES = "*"


class AccessConfigError(ValueError):
    """The workbench's access configuration is unusable; the message says what to fix."""


def is_loopback(address: str) -> bool:
    """True for `localhost` and loopback IP addresses (127.0.0.0/8, ::1)."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    """The access policy of one running workbench."""

    basic_auth_file: Path | None
    grants: dict[str, tuple[str, ...]] | None  # None: every scope for everyone (loopback only)

    @property
    def authenticated(self) -> bool:
        return self.basic_auth_file is not None

    def scopes_for(self, user: str | None, known_scopes: list[str]) -> list[str]:
        """The scopes `user` may see, in the order of `known_scopes`."""
        if self.grants is None:
            return list(known_scopes)
        granted = self.grants.get(user or "", ())
        if ALL_SCOPES in granted:
            return list(known_scopes)
        return [scope for scope in known_scopes if scope in granted]


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


def load_grants(path: Path) -> dict[str, tuple[str, ...]]:
    """Read `{"user": ["scope", ...]}`; every value a list of non-empty strings."""
    data = _read_json_object(path, "grants file")
    grants: dict[str, tuple[str, ...]] = {}
    for user, scopes in data.items():
        if not isinstance(scopes, list) or not all(isinstance(s, str) and s for s in scopes):
            raise AccessConfigError(f"grants file {path}: {user!r} must map to a list of scope names")
        grants[user] = tuple(scopes)
    return grants


def access_for(address: str, basic_auth_file: Path | None, grants_file: Path | None) -> Access:
    """Decide the access policy for a bind address, or refuse with `AccessConfigError`."""
    if basic_auth_file is None:
        if grants_file is not None:
            raise AccessConfigError("--grants needs --basic-auth: grants name signed-in users")
        if not is_loopback(address):
            # SECURITY: never serve ledger contents to a network without sign-in.
            raise AccessConfigError(
                f"refusing to serve the workbench on {address} without authentication: "
                "pass --basic-auth FILE and --grants FILE, or bind to 127.0.0.1")
        return Access(None, None)
    try:
        # SECURITY: only scrypt hashes; a plaintext entry is refused before anything is served.
        load_hashes(basic_auth_file)
    except PasswordFileError as exc:
        raise AccessConfigError(str(exc)) from None
    if grants_file is None:
        raise AccessConfigError("--basic-auth needs --grants FILE: say which scopes each user may see")
    return Access(basic_auth_file, load_grants(grants_file))
