"""Who acts: the principal behind every action that changes production or governance (issue 42).

A principal is never a name typed by a caller: an API key is its key id, a person is the issuer
and subject an identity provider (or the scrypt password file) vouched for, the local operator is
the login of the process acting on the ledger directly, the guardrail is the gate itself halting a
canary, the clock is the gate expiring or escalating a hold whose time came, and a CI run is the
repository and ref a CI issuer's signed workload-identity token names (`ci:<repository>@<ref>`,
docs/ci-principal.md).
Two principals are the same person exactly when their ids are equal; the display name is for
display only and never compared.

Every principal acts for a **holder** (issue 52): who answers for it when approvals are counted.
A person, the operator, the guardrail, the clock and a CI run are their own holders (their `actor`). An API
key belongs to the holder stated when it was created (`gate keys create --holder`): a person
`person:<issuer>#<subject>`, a named service `service:<name>` or the operator `operator:<login>`;
a key created before holders existed (none stated) is its own holder, `key:<key id>`. Four eyes,
quorums and the two-person rule count distinct holders, never keys: `is_distinct_approver` is the
one rule every safeguard asks (docs/releases.md, docs/holds.md). A CI run is never a human: it
never counts as a distinct approver, so a CI request needs a person (or a person's key) to approve
it and two CI runs, of one repository or of two, never satisfy a rule that needs a second holder.

The API, the CLI and the workbench's sign-in all build their principals here (docs/releases.md,
"Who may do what"), and check every right (`require`). Pure core: the stdlib and gate.errors.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Literal, TypeAlias, TypeGuard, get_args

from gate.errors import GateError

KIND_API_KEY = "api_key"
KIND_PERSON = "person"
KIND_OPERATOR = "operator"
KIND_GUARDRAIL = "guardrail"
KIND_CLOCK = "clock"  # the gate acting on time: a hold's deadline or escalation came (docs/holds.md)
KIND_CI = "ci"  # a CI run: a workload-identity token's repository and ref (docs/ci-principal.md)
KINDS = (KIND_API_KEY, KIND_PERSON, KIND_OPERATOR, KIND_GUARDRAIL, KIND_CLOCK, KIND_CI)

ROLES = ("viewer", "author", "releaser", "approver", "reviewer", "admin")

# The one vocabulary of rights: what an API key is granted (KEY_PERMISSIONS, `gate keys create
# --permissions`) and what a person's roles grant in the workbench (ROLE_PERMISSIONS) are the same
# names. `read`, `draft`, `dry_run` and `export` are the workbench's own; `decide` is every key's.
Permission = Literal["decide", "publish", "release", "approve", "resolve", "admin", "read", "draft", "dry_run",
                     "export"]
PERMISSIONS: tuple[Permission, ...] = get_args(Permission)
KEY_PERMISSIONS: tuple[Permission, ...] = ("decide", "publish", "release", "approve", "resolve", "admin")
# What a principal may do: the type every signature from `permissions_of` (and a key's stored list,
# gate.keys.apikeys.parse_permissions) to `require` and a page's `may` takes, so a misspelt right
# is a type error (mypy), never a check that silently fails. Text from outside (a key's list, a
# typed `--permissions`) becomes one only through `is_permission`.
Permissions: TypeAlias = frozenset[Permission]


def is_permission(name: object) -> TypeGuard[Permission]:
    """Whether `name` (text from outside: a stored or typed list) is one of the rights."""
    return name in PERMISSIONS


def permits(permissions: Collection[Permission], permission: Permission) -> bool:
    """Whether `permissions` hold `permission`: what `require` checks and a page shows (never a
    bare `in`, which a misspelt right would pass type checking)."""
    return permission in permissions


def require(permissions: Collection[Permission], permission: Permission, code: str) -> None:
    """The one check of a right, for every route, service, command and page: refused with `code`,
    the refusing area's (RELEASE_, HOLD_, EVENTS_ or WORKBENCH_PERMISSION_DENIED, 403), naming the
    permission; nothing is changed."""
    if not permits(permissions, permission):
        raise GateError(code, f"this principal lacks the {permission!r} permission in this scope",
                        permission=permission)


# Role -> the permissions it grants.
ROLE_PERMISSIONS: dict[str, Permissions] = {
    "viewer": frozenset({"read"}),
    "author": frozenset({"read", "draft", "dry_run", "export"}),
    # publish, shadow, canary, halt, rollback, request activation
    "releaser": frozenset({"read", "publish", "release"}),
    "approver": frozenset({"read", "approve"}),
    "reviewer": frozenset({"read", "resolve"}),
    # the release policy, grants
    "admin": frozenset({"read", "admin"}),
}

_OPERATOR_PREFIX = "operator:"
_PERSON_PREFIX = "person:"
_GUARDRAIL_ID = "guardrail"
_CLOCK_ID = "clock"
CI_PREFIX = "ci:"
# The roles a CI principal may hold (gate.grants refuses the others): a CI run writes and releases,
# it never approves, resolves a hold or changes the policy, which are a person's to do.
CI_ROLES = ("viewer", "author", "releaser")
SERVICE_HOLDER_PREFIX = "service:"
KEY_HOLDER_PREFIX = "key:"  # the implicit holder of a key created before holders (key:<key id>)
_MAX_TEXT = 512


def _text(value: object, what: str) -> str:
    """A non-empty string of printable characters, at most 512 of them, or ValueError."""
    if not isinstance(value, str) or not value or len(value) > _MAX_TEXT:
        raise ValueError(f"a principal's {what} must be a non-empty string of at most {_MAX_TEXT} characters")
    if not value.isprintable():
        raise ValueError(f"a principal's {what} must be printable text")
    return value


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated actor. Build one with the class methods, never by hand."""

    kind: str
    id: str
    issuer: str | None = None
    subject: str | None = None
    display_name: str | None = None
    holder: str | None = None  # an API key's stated holder (parse_holder); None: a key of none, key:<id>

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def api_key(cls, key_id: str, holder: str | None = None) -> Principal:
        return cls(KIND_API_KEY, _text(key_id, "key id"), holder=None if holder is None else parse_holder(holder))

    @classmethod
    def person(cls, issuer: str, subject: str, display_name: str | None = None) -> Principal:
        issuer, subject = _text(issuer, "issuer"), _text(subject, "subject")
        name = None if display_name is None else _text(display_name, "display name")
        return cls(KIND_PERSON, f"{issuer}#{subject}", issuer, subject, name)

    @classmethod
    def operator(cls, login: str) -> Principal:
        return cls(KIND_OPERATOR, _OPERATOR_PREFIX + _text(login, "login"))

    @classmethod
    def ci(cls, repository: str, ref: str) -> Principal:
        """A CI run of `repository` at `ref` (from a verified workload-identity token's claims)."""
        return cls(KIND_CI, CI_PREFIX + ci_name(repository, ref))

    @classmethod
    def guardrail(cls) -> Principal:
        return cls(KIND_GUARDRAIL, _GUARDRAIL_ID)

    @classmethod
    def clock(cls) -> Principal:
        return cls(KIND_CLOCK, _CLOCK_ID)

    @property
    def actor(self) -> str:
        """The string written as an event's `actor` (unchanged meaning for old events):
        api_key -> key id, operator -> "operator:<login>", guardrail -> "guardrail",
        person -> "person:<issuer>#<subject>"."""
        if self.kind == KIND_PERSON:
            return _PERSON_PREFIX + self.id
        return self.id

    @property
    def holder_id(self) -> str:
        """The holder this principal acts for (see the module's text)."""
        return holder_id(self.actor, self.holder)

    def to_json(self) -> dict[str, str]:
        """{"kind", "id"} plus "issuer", "subject", "display_name" for persons and "holder" for a
        key with a stated one (members that are None are left out, so an event written before
        holders states exactly what it stated). Written as an event's signed `principal` member."""
        out = {"kind": self.kind, "id": self.id}
        for name in ("issuer", "subject", "display_name", "holder"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_json(cls, value: object) -> Principal:
        """The principal a `to_json` value states; ValueError on anything malformed."""
        if not isinstance(value, dict):
            raise ValueError("a principal must be a JSON object")
        allowed = {"kind", "id", "issuer", "subject", "display_name", "holder"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ValueError(f"a principal has unknown members: {', '.join(map(str, unknown))}")
        kind = value.get("kind")
        if kind not in KINDS:
            raise ValueError(f"a principal's kind must be one of {', '.join(KINDS)}")
        return cls(kind, value.get("id"), value.get("issuer"), value.get("subject"),  # type: ignore[arg-type]
                   value.get("display_name"), value.get("holder"))


def _check(principal: Principal) -> None:
    """Every member consistent with the kind: the id derives from the rest, exactly."""
    if principal.kind not in KINDS:
        raise ValueError(f"a principal's kind must be one of {', '.join(KINDS)}")
    _text(principal.id, "id")
    if principal.holder is not None:
        if principal.kind != KIND_API_KEY:
            raise ValueError("only an API key states a holder (any other principal is its own)")
        parse_holder(principal.holder)
    if principal.kind == KIND_PERSON:
        issuer, subject = _text(principal.issuer, "issuer"), _text(principal.subject, "subject")
        if principal.display_name is not None:
            _text(principal.display_name, "display name")
        if principal.id != f"{issuer}#{subject}":
            raise ValueError("a person's id must be <issuer>#<subject>")
        return
    if (principal.issuer, principal.subject, principal.display_name) != (None, None, None):
        raise ValueError("only a person carries an issuer, a subject and a display name")
    if principal.kind == KIND_OPERATOR and (
        not principal.id.startswith(_OPERATOR_PREFIX) or len(principal.id) == len(_OPERATOR_PREFIX)
    ):
        raise ValueError("an operator's id must be operator:<login>")
    if principal.kind == KIND_GUARDRAIL and principal.id != _GUARDRAIL_ID:
        raise ValueError("the guardrail's id is 'guardrail'")
    if principal.kind == KIND_CLOCK and principal.id != _CLOCK_ID:
        raise ValueError("the clock's id is 'clock'")
    if principal.kind == KIND_CI:
        repository, _, ref = principal.id[len(CI_PREFIX):].partition("@")
        if not principal.id.startswith(CI_PREFIX) or principal.id != CI_PREFIX + ci_name(repository, ref):
            raise ValueError("a CI principal's id must be ci:<repository>@<ref>")
    if principal.kind == KIND_API_KEY and (
        principal.id.startswith((_OPERATOR_PREFIX, _PERSON_PREFIX, CI_PREFIX))
        or principal.id in (_GUARDRAIL_ID, _CLOCK_ID)
    ):
        raise ValueError("an API key id cannot look like an operator, a person, a CI run, the guardrail or the clock")


def ci_name(repository: object, ref: object) -> str:
    """`<repository>@<ref>` of a CI run, or ValueError: the repository `owner/name` (ASCII letters,
    digits, `-`, `_`, `.`, `/`), the ref printable with no spaces (`refs/heads/main`). This is how
    the grants file's `ci` member names a CI principal (gate.grants)."""
    repository, ref = _text(repository, "CI repository"), _text(ref, "CI ref")
    if not all(c.isascii() and (c.isalnum() or c in "-_./") for c in repository) or "/" not in repository.strip("/"):
        raise ValueError("a CI repository is owner/name (ASCII letters, digits, '-', '_', '.', '/')")
    if any(c.isspace() for c in ref):
        raise ValueError("a CI ref has no spaces")
    return f"{repository}@{ref}"



def parse_holder(value: object) -> str:
    """A holder a key may be created for: `person:<issuer>#<subject>`, `service:<name>` or
    `operator:<login>` (printable, at most 512 characters), or ValueError. `key:<id>` is never
    stated: it is what a key of no stated holder is."""
    text = _text(value, "holder")
    if text.startswith(_PERSON_PREFIX):
        issuer, mark, subject = text[len(_PERSON_PREFIX):].partition("#")
        if issuer and mark and subject:
            return text
    for prefix in (SERVICE_HOLDER_PREFIX, _OPERATOR_PREFIX):
        if text.startswith(prefix) and len(text) > len(prefix):
            return text
    raise ValueError("a holder is person:<issuer>#<subject>, service:<name> or operator:<login>")


def holder_id(actor: str, holder: str | None = None) -> str:
    """The holder an event's `actor` acted for: the `holder` its key states; else a person, the
    operator, the guardrail, the clock and a CI run are their own, and an API key of no stated holder is
    `key:<key id>` (what every key created before holders is, so old histories keep their rules)."""
    if holder is not None:
        return holder
    if actor.startswith((_OPERATOR_PREFIX, _PERSON_PREFIX, CI_PREFIX)) or actor in (_GUARDRAIL_ID, _CLOCK_ID):
        return actor
    return KEY_HOLDER_PREFIX + actor


def is_distinct_approver(holder: str, others: Iterable[str | None]) -> bool:
    """THE rule of four eyes, quorums and the two-person rule: a holder approves only when it is
    none of `others` (the requester, the earlier approvers; None stands for nobody). Compare
    holders (`holder_id`), never keys: a person's second key is the same approver.

    SECURITY: a CI run (`ci:…`) is never a distinct approver, whoever asked: a workload token
    stands for code, not for a person, so two CI runs (of one repository or of two) never make the
    two-person rule, and neither does CI approving a person's request (docs/ci-principal.md)."""
    if holder.startswith(CI_PREFIX):
        return False
    return all(holder != other for other in others)


def is_member(principal: Principal, members: Collection[str]) -> bool:
    """Whether a quorum `all` lists `principal` (docs/holds.md): by its holder (`person:…`,
    `service:…`, `operator:…`: any key of that holder, counted once, as every quorum counts
    holders) or by its own id (a key id, a person's `<issuer>#<subject>`, as before issue 52)."""
    return principal.id in members or principal.holder_id in members


def permissions_of(roles: Iterable[str]) -> Permissions:
    """The union of the permissions the roles grant; ValueError on an unknown role."""
    out: set[Permission] = set()
    for role in roles:
        if role not in ROLE_PERMISSIONS:
            raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
        out |= ROLE_PERMISSIONS[role]
    return frozenset(out)
