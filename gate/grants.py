"""The grants file (docs/workbench.md, "Roles and the grants file"): who holds which roles in
which scope, read by the workbench's sign-in (workbench.app.access) and by the API's Slack
interactions (api/routes/integrations.py), so both read one file one way.

    {"users":  {"alice": {"payments": ["author", "releaser"]}},
     "groups": {"gate-approvers": {"*": ["approver"]}},
     "revoked": {"bob": "2026-11-26T18:00:00Z"},
     "slack":  {"T0123ABCD/U0123ABCD": "person:https://idp.example#alice"}}

`"*"` is every scope. The roles are `gate.principals.ROLES`; each grants `read`. The older form
`{"user": ["scope", ...]}` still reads, each listed scope as the `viewer` role only. `slack` maps
a Slack user (team id, user id) to the person they are: that person's user entry then says what
their Slack buttons may do (a Slack user acts as no group), and they count as that one person
for four eyes and quorums whether they vote in Slack or in the Inbox.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from gate.errors import CodedError
from gate.principals import ROLES, Principal

ALL_SCOPES = "*"
LEGACY_ROLE = "viewer"  # what a scope listed in the older grants form grants
PERSON_PREFIX = "person:"
_SLACK_USER = re.compile(r"^[A-Z0-9]{2,32}/[A-Z0-9]{2,32}$")


class Signed(Protocol):
    """Who the roles are asked for: a principal and the groups its provider vouched for."""

    @property
    def principal(self) -> Principal: ...

    @property
    def groups(self) -> tuple[str, ...]: ...


class AccessConfigError(CodedError):
    """The workbench's access configuration is unusable; the message says what to fix."""

    CODE = "WORKBENCH_ACCESS_INVALID"




RoleTable = dict[str, dict[str, frozenset[str]]]  # name -> scope (or "*") -> roles


@dataclass(frozen=True)
class Grants:
    """Roles per scope, by user (the subject) and by group (the groups claim)."""

    users: RoleTable = field(default_factory=dict)
    groups: RoleTable = field(default_factory=dict)
    # An administrator's revocation: subject -> epoch seconds; that subject's sessions opened
    # before it end (workbench.app.sessions). Not a role: it never grants anything.
    revoked: dict[str, float] = field(default_factory=dict)

    # A Slack user ("<team id>/<user id>") -> the person they are (`person:<issuer>#<subject>`).
    slack: dict[str, Principal] = field(default_factory=dict)

    def roles(self, identity: Signed, scope: str) -> frozenset[str]:
        """The roles `identity` holds in `scope`: its user entry's and every one of its groups'."""
        tables = [self.users.get(identity.principal.subject or "", {})]
        tables += [self.groups.get(group, {}) for group in identity.groups]
        roles: set[str] = set()
        for table in tables:
            roles |= table.get(scope, frozenset()) | table.get(ALL_SCOPES, frozenset())
        return frozenset(roles)

    def slack_person(self, team_id: str, user_id: str) -> Principal | None:
        """The person a Slack user is, as the grants file maps `slack:<team_id>/<user_id>` (None:
        not mapped: such a user acts as nobody)."""
        return self.slack.get(f"{team_id}/{user_id}")




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
    unknown = sorted(set(data) - {"users", "groups", "revoked", "slack"})
    if unknown:
        raise AccessConfigError(f"grants file {path}: unknown member(s) {', '.join(map(repr, unknown))}; "
                                'it is {"users": {...}, "groups": {...}, "revoked": {...}, "slack": {...}}')
    return Grants(_role_table(path, "users", data.get("users", {})),
                  _role_table(path, "groups", data.get("groups", {})),
                  _revocations(path, data.get("revoked", {})),
                  _slack_people(path, data.get("slack", {})))


def _slack_people(path: Path, entries: object) -> dict[str, Principal]:
    """The grants file's `slack`: {"<team id>/<user id>": "person:<issuer>#<subject>"}."""
    if not isinstance(entries, dict):
        raise AccessConfigError(f"grants file {path}: 'slack' must map \"<team id>/<user id>\" to a person")
    people: dict[str, Principal] = {}
    for key, holder in entries.items():
        if not _SLACK_USER.fullmatch(key):
            raise AccessConfigError(f"grants file {path}: slack {key[:80]!r} is not \"<team id>/<user id>\" "
                                    "(T0123ABCD/U0123ABCD)")
        refused = AccessConfigError(f"grants file {path}: slack {key!r} must name a person, "
                                    "\"person:<issuer>#<subject>\" (as a key's --holder)")
        if not isinstance(holder, str) or not holder.startswith(PERSON_PREFIX):
            raise refused
        issuer, _mark, subject = holder[len(PERSON_PREFIX):].partition("#")
        try:
            people[key] = Principal.person(issuer, subject)
        except ValueError:
            raise refused from None
    return people


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
