"""Who acts: the principal behind every action that changes production or governance (issue 42).

A principal is never a name typed by a caller: an API key is its key id, a person is the issuer
and subject an identity provider (or the scrypt password file) vouched for, the local operator is
the login of the process acting on the ledger directly, the guardrail is the gate itself halting a
canary, and the clock is the gate expiring or escalating a hold whose time came.
Two principals are the same person exactly when their ids are equal; the display name is for
display only and never compared.

The API, the CLI and the workbench's sign-in all build their principals here (docs/releases.md,
"Who may do what"). Pure core: stdlib only.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

KIND_API_KEY = "api_key"
KIND_PERSON = "person"
KIND_OPERATOR = "operator"
KIND_GUARDRAIL = "guardrail"
KIND_CLOCK = "clock"  # the gate acting on time: a hold's deadline or escalation came (docs/holds.md)
KINDS = (KIND_API_KEY, KIND_PERSON, KIND_OPERATOR, KIND_GUARDRAIL, KIND_CLOCK)

ROLES = ("viewer", "author", "releaser", "approver", "reviewer", "admin")

# Role -> the permissions it grants. API keys keep their permission names; these are the same names.
ROLE_PERMISSIONS: dict[str, frozenset[str]] = {
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

    def __post_init__(self) -> None:
        _check(self)

    @classmethod
    def api_key(cls, key_id: str) -> Principal:
        return cls(KIND_API_KEY, _text(key_id, "key id"))

    @classmethod
    def person(cls, issuer: str, subject: str, display_name: str | None = None) -> Principal:
        issuer, subject = _text(issuer, "issuer"), _text(subject, "subject")
        name = None if display_name is None else _text(display_name, "display name")
        return cls(KIND_PERSON, f"{issuer}#{subject}", issuer, subject, name)

    @classmethod
    def operator(cls, login: str) -> Principal:
        return cls(KIND_OPERATOR, _OPERATOR_PREFIX + _text(login, "login"))

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

    def to_json(self) -> dict[str, str]:
        """{"kind", "id"} plus "issuer", "subject", "display_name" for persons (members that are
        None are left out). Written as an event's signed `principal` member."""
        out = {"kind": self.kind, "id": self.id}
        for name in ("issuer", "subject", "display_name"):
            value = getattr(self, name)
            if value is not None:
                out[name] = value
        return out

    @classmethod
    def from_json(cls, value: object) -> Principal:
        """The principal a `to_json` value states; ValueError on anything malformed."""
        if not isinstance(value, dict):
            raise ValueError("a principal must be a JSON object")
        allowed = {"kind", "id", "issuer", "subject", "display_name"}
        unknown = sorted(set(value) - allowed)
        if unknown:
            raise ValueError(f"a principal has unknown members: {', '.join(map(str, unknown))}")
        kind = value.get("kind")
        if kind not in KINDS:
            raise ValueError(f"a principal's kind must be one of {', '.join(KINDS)}")
        return cls(kind, value.get("id"), value.get("issuer"), value.get("subject"),  # type: ignore[arg-type]
                   value.get("display_name"))


def _check(principal: Principal) -> None:
    """Every member consistent with the kind: the id derives from the rest, exactly."""
    if principal.kind not in KINDS:
        raise ValueError(f"a principal's kind must be one of {', '.join(KINDS)}")
    _text(principal.id, "id")
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
    if principal.kind == KIND_API_KEY and (
        principal.id.startswith((_OPERATOR_PREFIX, _PERSON_PREFIX)) or principal.id in (_GUARDRAIL_ID, _CLOCK_ID)
    ):
        raise ValueError("an API key id cannot look like an operator, a person, the guardrail or the clock")


def permissions_of(roles: Iterable[str]) -> frozenset[str]:
    """The union of the permissions the roles grant; ValueError on an unknown role."""
    out: set[str] = set()
    for role in roles:
        if role not in ROLE_PERMISSIONS:
            raise ValueError(f"unknown role {role!r}: one of {', '.join(ROLES)}")
        out |= ROLE_PERMISSIONS[role]
    return frozenset(out)
