"""The grants file (docs/workbench.md, "Roles and the grants file"): who holds which roles in
which scope, read by the workbench's sign-in (workbench.app.access), by the API's Slack
interactions (api/routes/integrations.py) and by its CI principals (api/ci.py, docs/ci-principal.md),
so all read one file one way.

    {"issuer": "https://idp.example",
     "users":  {"alice": {"payments": ["author", "releaser"]}},
     "groups": {"gate-approvers": {"*": ["approver"]}},
     "revoked": {"bob": "2026-11-26T18:00:00Z"},
     "slack":  {"T0123ABCD/U0123ABCD": "person:https://idp.example#alice"},
     "ci":     {"acme/policies@refs/heads/main": {"repository_id": "123456", "owner_id": "7890",
                                                  "scopes": {"payments": ["author", "releaser"]}}}}

`issuer` (required with `slack`) is the issuer whose people `users` names by subject: a user
entry is a person's only when issuer AND subject are theirs (`person_entry`), so a Slack user
mapped to `person:https://evil.example#alice` holds none of alice's roles (issue 64). Without it a
reader that signs people in (the workbench) matches its own issuer, and nobody else matches.
`"*"` is every scope. The roles are `gate.principals.ROLES`; each grants `read`. The older form
`{"user": ["scope", ...]}` still reads, each listed scope as the `viewer` role only. `slack` maps
a Slack user (team id, user id) to the person they are: that person's user entry then says what
their Slack buttons may do (a Slack user acts as no group), and they count as that one person
for four eyes and quorums whether they vote in Slack or in the Inbox. A `ci` entry is named
`<repository>@<ref>` exactly as the principal `ci:<repository>@<ref>` names it (another branch of
the same repository is another principal, with no role until the file names it) and states the
ids the repository has, which a rename, a transfer or a re-creation under the same name does not
keep: `{"repository_id": "…", "owner_id": "…", "scopes": {scope: [roles]}}` (GitHub's
`repository_id` and `repository_owner_id`, GitLab's `project_id` and `namespace_id`). A token whose
ids differ holds nothing by that entry. It holds only `gate.principals.CI_ROLES`: a CI run never
approves, resolves or administers; and a run started by an event other than the write events
(`GATE_CI_WRITE_EVENTS`: a `pull_request_target` run executes with the base branch's ref) holds
`viewer` at most. The one pattern is `<repository>@*`, every ref of the repository (pull requests'
`refs/pull/N/merge` among them), which may hold `viewer` alone: a plan on any branch reads, only a
named ref publishes or releases.

    "ci": {"acme/policies@refs/heads/main": {"repository_id": "123456", "owner_id": "7890",
                                             "scopes": {"payments": ["author", "releaser"]}}}
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Protocol, TypeGuard

from gate.errors import CodedError
from gate.principals import CI_PREFIX, CI_ROLES, KIND_CI, KIND_PERSON, ROLES, Principal, ci_name
from gate.strict_json import JsonValue

ALL_SCOPES = "*"
LEGACY_ROLE = "viewer"  # what a scope listed in the older grants form grants
PERSON_PREFIX = "person:"
_SLACK_USER = re.compile(r"^[A-Z0-9]{2,32}/[A-Z0-9]{2,32}$")
ANY_REF = "*"  # `<repository>@*` in the `ci` member: every ref of the repository, viewer only
CI_ID_MEMBERS = ("repository_id", "owner_id")  # what a `ci` entry binds its roles to
READ_ONLY = frozenset({"viewer"})  # the most a CI run of another event than the write events holds
_CI_ID = re.compile(r"^[0-9]{1,32}$")


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


@dataclass(frozen=True, slots=True)
class CIRun:
    """What a verified CI token says beyond its principal: the ids its grants are bound to, and
    whether the event that started it may write (`GATE_CI_WRITE_EVENTS`)."""

    repository_id: str
    owner_id: str
    writes: bool


def ci_id(value: object) -> str | None:
    """A repository or owner id as the grants file and the tokens state it (digits; a JSON number
    is read as its digits), or None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        value = str(value)
    return value if isinstance(value, str) and _CI_ID.fullmatch(value) else None


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
    # A CI run ("<repository>@<ref>", or "<repository>@*") -> scope -> roles (docs/ci-principal.md),
    # and the (repository id, owner id) each entry is bound to.
    ci: RoleTable = field(default_factory=dict)
    ci_ids: dict[str, tuple[str, str]] = field(default_factory=dict)
    # The issuer whose people `users` (and `slack`) name: None when the file states none.
    issuer: str | None = None

    def person_entry(self, principal: Principal, signs_in: str | None = None) -> dict[str, frozenset[str]]:
        """THE match of a person to the file's `users`: the entry of its subject when it is a
        person of the file's `issuer` (a file stating none: of `signs_in`, the one issuer the
        reader signs people in with; none given, nobody), else none. Issuer AND subject: a person
        of another issuer with the same subject is someone else (issue 64)."""
        issuer = self.issuer if self.issuer is not None else signs_in
        if principal.kind != KIND_PERSON or issuer is None or principal.issuer != issuer:
            return {}
        return self.users.get(principal.subject or "", {})

    def roles(self, identity: Signed, scope: str, signs_in: str | None = None) -> frozenset[str]:
        """The roles `identity` holds in `scope`: its user entry's (`person_entry`) and every one
        of its groups'."""
        tables = [self.person_entry(identity.principal, signs_in)]
        tables += [self.groups.get(group, {}) for group in identity.groups]
        roles: set[str] = set()
        for table in tables:
            roles |= table.get(scope, frozenset()) | table.get(ALL_SCOPES, frozenset())
        return frozenset(roles)

    def slack_person(self, team_id: str, user_id: str) -> Principal | None:
        """The person a Slack user is, as the grants file maps `slack:<team_id>/<user_id>` (None:
        not mapped: such a user acts as nobody)."""
        return self.slack.get(f"{team_id}/{user_id}")


    def ci_scopes(self, principal: Principal, run: CIRun) -> dict[str, frozenset[str]]:
        """The scope -> roles entries the file gives a CI principal: its own entry's and its
        repository's `@*` entry's, each only when its ids are the run's; `viewer` at most for a
        run of another event than the write events (none for any other kind)."""
        if principal.kind != KIND_CI:
            return {}
        name = principal.id[len(CI_PREFIX):]
        names = (name, f"{name.partition('@')[0]}@{ANY_REF}")
        # SECURITY: bound to ids, not names: a renamed, transferred or re-created repository of
        # the same name has other ids and holds nothing by an entry written for the one before.
        entries = [self.ci.get(n, {}) for n in names if self.ci_ids.get(n) == (run.repository_id, run.owner_id)]
        table = {scope: frozenset().union(*(entry.get(scope, frozenset()) for entry in entries))
                 for scope in sorted(set().union(*entries))}
        if not run.writes:  # SECURITY: e.g. pull_request_target runs a fork's code with the base's ref
            table = {scope: roles & READ_ONLY for scope, roles in table.items() if roles & READ_ONLY}
        return table

    def ci_roles(self, principal: Principal, scope: str, run: CIRun) -> frozenset[str]:
        """The roles a CI principal holds in `scope` (none for any other kind: fail closed)."""
        table = self.ci_scopes(principal, run)
        return table.get(scope, frozenset()) | table.get(ALL_SCOPES, frozenset())


def _read_json_object(path: Path, what: str) -> dict[str, JsonValue]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AccessConfigError(f"{what} {path} does not exist") from None
    except (OSError, ValueError) as exc:
        raise AccessConfigError(f"{what} {path} is not readable JSON: {exc}") from None
    if not isinstance(data, dict) or not data:
        raise AccessConfigError(f"{what} {path} must be a non-empty JSON object")
    return data


def _names(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(s, str) and s for s in value)


def _role_table(path: Path, section: str, entries: object, allowed: tuple[str, ...] = ROLES) -> RoleTable:
    if not isinstance(entries, dict):
        raise AccessConfigError(f"grants file {path}: {section!r} must map names to {{scope: [roles]}}")
    table: RoleTable = {}
    for name, scopes in entries.items():
        if not isinstance(scopes, dict) or not all(isinstance(s, str) and s and _names(r) for s, r in scopes.items()):
            raise AccessConfigError(f"grants file {path}: {section} {name!r} must map scope names to lists of roles")
        for scope, roles in scopes.items():
            unknown = sorted(set(roles) - set(allowed))
            if unknown:
                raise AccessConfigError(f"grants file {path}: {section} {name!r}, scope {scope!r}: unknown "
                                        f"role(s) {', '.join(map(repr, unknown))}; roles are {', '.join(allowed)}")
        table[name] = {scope: frozenset(roles) for scope, roles in scopes.items()}
    return table


def load_grants(path: Path) -> Grants:
    """Read the grants file (module docstring); refuses anything else with the member at fault."""
    data = _read_json_object(path, "grants file")
    # The older {"user": ["scope", ...]} (a file naming "users", "groups" or "ci" is the current form).
    if not {"users", "groups", "ci"} & set(data) and all(isinstance(value, list) for value in data.values()):
        legacy: dict[str, list[str]] = {}
        for user, scopes in data.items():
            if not _names(scopes):
                raise AccessConfigError(f"grants file {path}: {user!r} must map to a list of scope names")
            legacy[user] = scopes
        return Grants(users={user: {scope: frozenset({LEGACY_ROLE}) for scope in scopes}
                             for user, scopes in legacy.items()})
    unknown = sorted(set(data) - {"issuer", "users", "groups", "revoked", "slack", "ci"})
    if unknown:
        raise AccessConfigError(f"grants file {path}: unknown member(s) {', '.join(map(repr, unknown))}; "
                                'it is {"issuer": "...", "users": {...}, "groups": {...}, "revoked": {...}, '
                                '"slack": {...}, "ci": {...}}')
    issuer = _issuer(path, data.get("issuer"))
    if data.get("slack") and issuer is None:
        raise AccessConfigError(f"grants file {path}: 'slack' maps Slack users to people: state 'issuer', the "
                                "issuer whose people 'users' names (a person is matched by issuer and subject)")
    ci, ci_ids = _ci_table(path, data.get("ci", {}))
    return Grants(_role_table(path, "users", data.get("users", {})),
                  _role_table(path, "groups", data.get("groups", {})),
                  _revocations(path, data.get("revoked", {})),
                  _slack_people(path, data.get("slack", {})),
                  ci, ci_ids, issuer)


def _issuer(path: Path, value: object) -> str | None:
    """The grants file's `issuer`: absent, or an issuer as a person's is (printable text)."""
    if value is None:
        return None
    try:
        return Principal.person(value, "subject").issuer  # type: ignore[arg-type]  # checked by person()
    except ValueError:
        raise AccessConfigError(f"grants file {path}: 'issuer' must be the issuer's text (https://idp.example), "
                                "printable, at most 512 characters") from None


def _ci_table(path: Path, entries: object) -> tuple[RoleTable, dict[str, tuple[str, str]]]:
    """The `ci` member: `<repository>@<ref>` -> {"repository_id", "owner_id", "scopes": scope ->
    roles of CI_ROLES only}, as the role table and each entry's ids."""
    if not isinstance(entries, dict):
        raise AccessConfigError(f"grants file {path}: 'ci' must map <repository>@<ref> to "
                                '{"repository_id": ..., "owner_id": ..., "scopes": {scope: [roles]}}')
    scopes_of: dict[str, JsonValue] = {}
    ids: dict[str, tuple[str, str]] = {}
    for name, entry in entries.items():
        repository, _, ref = name.partition("@")
        try:
            ci_name(repository, ref)
        except ValueError as exc:
            raise AccessConfigError(f"grants file {path}: ci {name!r} is not <repository>@<ref> "
                                    f"(acme/policies@refs/heads/main): {exc}") from None
        stated = [ci_id(entry.get(member)) for member in CI_ID_MEMBERS] if isinstance(entry, dict) else [None]
        if not isinstance(entry, dict) or set(entry) != {*CI_ID_MEMBERS, "scopes"} or None in stated:
            raise AccessConfigError(f"grants file {path}: ci {name!r} must be {{\"repository_id\": \"<digits>\", "
                                    '"owner_id": "<digits>", "scopes": {scope: [roles]}} (the ids the CI '
                                    "token states: a name can change hands, the ids cannot)")
        ids[name] = (str(stated[0]), str(stated[1]))
        scopes = scopes_of[name] = entry["scopes"]
        for roles in scopes.values() if isinstance(scopes, dict) else ():
            # SECURITY: a CI run is code, not a person: it never approves, resolves or administers.
            forbidden = sorted(set(roles) & (set(ROLES) - set(CI_ROLES))) if _names(roles) else []
            if forbidden:
                raise AccessConfigError(f"grants file {path}: ci {name!r} holds {', '.join(map(repr, forbidden))}: "
                                        f"a CI principal holds only {', '.join(CI_ROLES)} (approvals are a "
                                        "person's)")
            # SECURITY: any branch (a pull request's too) may read; only a named ref writes.
            if ref == ANY_REF and _names(roles) and set(roles) - {"viewer"}:
                raise AccessConfigError(f"grants file {path}: ci {name!r} (every ref) may hold only viewer: "
                                        "name the ref that publishes and releases")
    return _role_table(path, "ci", scopes_of, CI_ROLES), ids


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
