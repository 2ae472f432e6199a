"""A scope's release policy, pure: its members, how a full or partial change is read, and which
changes weaken it (docs/releases.md, "The release policy and its governance").

A PUT states the whole policy (every member, a missing one is named); a PATCH names the members
it changes and keeps the others exactly. Nothing falls back to a default once a policy exists.
While approvals are required, a weakening change (any member in `weakenings`) is a request a
second principal approves (gate.releases.governance).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from gate import bodies
from gate.errors import GateError

SCHEMA = "release-policy"  # gate/bodies/release-policy.schema.json: each member's type and range
_SHAPE = bodies.schema(SCHEMA)["properties"]
TTL_RANGE: tuple[int, int] = (_SHAPE["approval_ttl_seconds"]["minimum"], _SHAPE["approval_ttl_seconds"]["maximum"])
DRY_RUN_AGE_RANGE: tuple[int, int] = (_SHAPE["dry_run_max_age_seconds"]["minimum"],
                                      _SHAPE["dry_run_max_age_seconds"]["maximum"])


@dataclass(frozen=True, slots=True)
class ReleasePolicy:
    """A scope's release policy (`gate release policy`, `/api/decision/release-policy`)."""

    require_approval: bool = False
    approval_ttl_seconds: int = 86_400
    refuse_superseded_inline: bool = False
    require_dry_run: bool = False
    dry_run_canary_percent: float = 0
    dry_run_max_age_seconds: int = 7 * 86_400

    def to_json(self) -> dict[str, bool | int | float]:
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_json(cls, body: Any) -> ReleasePolicy:
        """A whole policy as a PUT states it: every member present and valid."""
        _check_members(body)
        missing = [name for name in MEMBERS if name not in body]
        if missing:
            raise GateError("RELEASE_POLICY_INVALID", f"a PUT states the whole policy: missing {', '.join(missing)} "
                            "(PATCH changes named members only)", missing=missing)
        return _checked(cls(**{name: body[name] for name in MEMBERS}))

    @classmethod
    def stored(cls, body: Any) -> ReleasePolicy:
        """A policy as stored before this version (members it lacks keep their defaults)."""
        if not isinstance(body, Mapping):
            return cls()
        return _checked(replace(cls(), **{k: v for k, v in body.items() if k in MEMBERS}))

    def patched(self, body: Any) -> ReleasePolicy:
        """This policy with the members a PATCH names changed, every other kept as it is."""
        _check_members(body)
        if not body:
            raise GateError("RELEASE_POLICY_INVALID", "a PATCH names at least one member")
        return _checked(replace(self, **dict(body)))


MEMBERS = tuple(f.name for f in fields(ReleasePolicy))


def _check_members(body: Any) -> None:
    if not isinstance(body, Mapping):
        raise GateError("RELEASE_POLICY_INVALID", "a release policy is a JSON object")
    unknown = sorted(set(body) - set(MEMBERS))
    if unknown:
        raise GateError("RELEASE_POLICY_INVALID", f"unknown member(s) {', '.join(map(str, unknown))}; a release "
                        f"policy has {', '.join(MEMBERS)}")


def _number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, (int, float))


def _checked(policy: ReleasePolicy) -> ReleasePolicy:
    """Every member's type and range (gate/bodies/release-policy.schema.json), or
    RELEASE_POLICY_INVALID naming the first wrong one."""
    error = bodies.first_error(SCHEMA, policy.to_json())
    if error is not None:
        member = str(error.absolute_path[0]) if error.absolute_path else None
        raise GateError("RELEASE_POLICY_INVALID", bodies.refusal(SCHEMA, error), member=member)
    return policy


def weakenings(before: ReleasePolicy, after: ReleasePolicy) -> tuple[str, ...]:
    """The members `after` weakens: a check turned off, a longer approval expiry, and, while the
    dry-run stays required, a staler dry-run or a larger canary share without one (turning the
    dry-run off is named itself; turning it on never weakens). No member names who may approve:
    that is the `approve` permission of keys and roles, not the policy."""
    out = []
    for name in ("require_approval", "refuse_superseded_inline", "require_dry_run"):
        if getattr(before, name) and not getattr(after, name):
            out.append(name)
    numbers = ["approval_ttl_seconds"]
    if before.require_dry_run and after.require_dry_run:  # the dry-run's bounds matter only while it is on
        numbers += ["dry_run_max_age_seconds", "dry_run_canary_percent"]
    out += [name for name in numbers if getattr(after, name) > getattr(before, name)]
    return tuple(out)


def needs_approval(before: ReleasePolicy, after: ReleasePolicy) -> bool:
    """A change is a request for a second principal's approval exactly when approvals are
    required now and the change weakens the policy."""
    return before.require_approval and bool(weakenings(before, after))


def needs_dry_run(policy: ReleasePolicy, action: Any, percent: Any) -> bool:
    """Whether the policy asks this action for a dry-run manifest: every activation, and a canary
    above `dry_run_canary_percent`, while `require_dry_run` is on."""
    if not policy.require_dry_run:
        return False
    if action == "activate":
        return True
    return action == "canary" and _number(percent) and percent > policy.dry_run_canary_percent
