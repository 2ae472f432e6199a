"""What a request member is and whose it is: the one answer every way out of the gate asks
(issue 67; docs/privacy.md).

A scope's privacy settings are one governed safeguard (`privacy`, gate.governance.table): its
*data map* names request members by path (`context.customer_email`,
`context.inputs.customer_email`, `adapter.input.email`) as `personal` or `sensitive`, and the
path of the data subject's key (`subject_key`, for example `context.customer_id`), which is
personal unless the map calls it sensitive. Its *rules* say, per destination (`events`: webhooks
and the NATS stream; `notices`: hold e-mail and Slack; `dataset`: Parquet and Iceberg; `logs`;
`mcp`), what leaves of each class (`keep`, `hash`: a keyed HMAC per scope, `drop`), with
per-member exceptions. Defaults: nothing declared; personal and sensitive members never leave
in events, notices, logs or MCP answers; the dataset keeps them hashed.

Why beside the rulebook and not in its `input_schema`: Rulebook v1 closes every object (an
unknown key anywhere is refused, reference facts §2), so an annotation there would make a
rulebook the reference verifier refuses and change its hash (docs/notes.md).

A later erasure (issue 67, items 4 and 5) finds a subject's decisions by `subject_key` through
`Found.subject`, the same answer the destinations use.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate import bodies
from gate.strict_json import JsonValue

SCHEMA = "privacy"  # gate/bodies/privacy.schema.json
INVALID = "PRIVACY_SETTINGS_INVALID"
PERSONAL, SENSITIVE = "personal", "sensitive"
CLASSES = (PERSONAL, SENSITIVE)
KEEP, HASH, DROP = "keep", "hash", "drop"
_STRICTNESS = {KEEP: 0, HASH: 1, DROP: 2}
EVENTS, NOTICES, DATASET, LOGS, MCP = "events", "notices", "dataset", "logs", "mcp"
DESTINATIONS = (EVENTS, NOTICES, DATASET, LOGS, MCP)
_PREFIXES = (("adapter", "input"), ("context",))


class RuleJSON(TypedDict, total=False):
    personal: str
    sensitive: str
    members: dict[str, str]


class RetentionJSON(TypedDict):
    facts_days: int | None


class PrivacyJSON(TypedDict):
    """`PrivacySettings` as JSON (gate/bodies/privacy.schema.json)."""

    data_map: dict[str, JsonValue]
    rules: dict[str, RuleJSON]
    retention: RetentionJSON


def strictness(action: str) -> int:
    """keep 0 < hash 1 < drop 2: a change to a lower number lets more out."""
    return _STRICTNESS[action]


@dataclass(frozen=True, slots=True)
class DataMap:
    """The declared members (path → class) and the subject key's path."""

    members: Mapping[str, str] = field(default_factory=dict)
    subject_key: str | None = None

    def declared(self) -> dict[str, str]:
        """Every declared path with its class, the subject key's included (personal unless said)."""
        out = dict(self.members)
        if self.subject_key is not None:
            out.setdefault(self.subject_key, PERSONAL)
        return out

    def class_of(self, path: str) -> str | None:
        """What the member at `path` is: personal, sensitive, or None (nobody's data)."""
        return self.declared().get(path)


@dataclass(frozen=True, slots=True)
class Rule:
    """One destination's rule: an action per class, and per-member exceptions."""

    personal: str = DROP
    sensitive: str = DROP
    members: Mapping[str, str] = field(default_factory=dict)

    def action(self, path: str, kind: str) -> str:
        return self.members.get(path) or (self.personal if kind == PERSONAL else self.sensitive)

    def to_json(self) -> RuleJSON:
        out: RuleJSON = {"personal": self.personal, "sensitive": self.sensitive}
        if self.members:
            out["members"] = dict(sorted(self.members.items()))
        return out


DEFAULT_RULES: Mapping[str, Rule] = {EVENTS: Rule(), NOTICES: Rule(), DATASET: Rule(HASH, HASH), LOGS: Rule(),
                                     MCP: Rule()}


@dataclass(frozen=True, slots=True)
class PrivacySettings:
    """The value of the `privacy` safeguard: the data map, the rule of every destination and the
    days the scope's request facts and record bodies are kept (`facts_days`; None: the gate's
    GATE_FACTS_RETENTION_DAYS; docs/privacy.md, "Retention")."""

    data_map: DataMap = field(default_factory=DataMap)
    rules: Mapping[str, Rule] = field(default_factory=lambda: dict(DEFAULT_RULES))
    facts_days: int | None = None

    def rule(self, destination: str) -> Rule:
        return self.rules[destination]

    def to_json(self) -> PrivacyJSON:
        return {"data_map": {"members": dict(sorted(self.data_map.members.items())),
                             "subject_key": self.data_map.subject_key},
                "rules": {name: self.rules[name].to_json() for name in DESTINATIONS},
                "retention": {"facts_days": self.facts_days}}

    @classmethod
    def from_json(cls, body: Any) -> PrivacySettings:
        """data_map and rules stated, retention optional (gate/bodies/privacy.schema.json), or
        PRIVACY_SETTINGS_INVALID: an unknown class, action, destination or member is refused,
        never ignored."""
        bodies.check(SCHEMA, body, INVALID)
        data_map = DataMap(dict(body["data_map"]["members"]), body["data_map"]["subject_key"])
        rules = {name: Rule(rule["personal"], rule["sensitive"], dict(rule.get("members", {})))
                 for name, rule in body["rules"].items()}
        return cls(data_map, rules, body.get("retention", {}).get("facts_days"))


def weakenings(before: PrivacySettings, after: PrivacySettings) -> tuple[str, ...]:
    """What a change lets out that was not let out before, per destination: a class's action
    loosened (drop → hash → keep), a member that leaves looser than it did (declassified, made
    less sensitive, or given a looser exception), and a subject key removed or moved (a later
    erasure would no longer find the subject's decisions by it); and any change of the facts'
    retention, in either direction: kept longer (or back to the gate's default) keeps personal
    data longer, kept shorter destroys evidence sooner, irreversibly, as an erasure does."""
    out: list[str] = []
    was, now = before.data_map.declared(), after.data_map.declared()
    for name in DESTINATIONS:
        old, new = before.rule(name), after.rule(name)
        for kind in CLASSES:
            if strictness(getattr(new, kind)) < strictness(getattr(old, kind)):
                out.append(f"{name}: {kind} {getattr(old, kind)} -> {getattr(new, kind)}")
        for path in sorted(set(was) | set(now) | set(old.members) | set(new.members)):
            then = old.action(path, was[path]) if path in was else KEEP
            later = new.action(path, now[path]) if path in now else KEEP
            if strictness(later) < strictness(then):
                out.append(f"{name}: {path} {then} -> {later}")
    if before.data_map.subject_key is not None and after.data_map.subject_key != before.data_map.subject_key:
        out.append(f"subject_key: {before.data_map.subject_key} -> {after.data_map.subject_key}")
    if before.facts_days != after.facts_days:
        out.append(f"retention: facts_days {before.facts_days} -> {after.facts_days} "
                   f"({_retention_change(before.facts_days, after.facts_days)})")
    return tuple(out)


def _retention_change(before: int | None, after: int | None) -> str:
    if before is None or after is None:
        return "to or from the gate's GATE_FACTS_RETENTION_DAYS"
    return "inputs removed sooner" if after < before else "personal data kept longer"


def _split(path: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    parts = tuple(path.split("."))
    for prefix in _PREFIXES:
        if parts[:len(prefix)] == prefix:
            return prefix, parts[len(prefix):]
    raise ValueError(f"not a request path: {path!r}")


def value_at(request: Mapping[str, JsonValue], path: str) -> tuple[bool, Any]:
    """(found, value) of `path` in a request body, walking objects only."""
    prefix, rest = _split(path)
    node: Any = request
    for part in prefix + rest:
        if not isinstance(node, Mapping) or part not in node:
            return False, None
        node = node[part]
    return True, node


@dataclass(frozen=True, slots=True)
class Found:
    """The declared members one request holds: (path, class, value), and its subject's key."""

    members: tuple[tuple[str, str, Any], ...] = ()
    subject: Any = None

    def __bool__(self) -> bool:
        return bool(self.members)


def found_in(data_map: DataMap, request: Any) -> Found:
    """What the data map declares that `request` (a decide body) holds; empty for anything else."""
    if not isinstance(request, Mapping):
        return Found()
    members = []
    for path, kind in sorted(data_map.declared().items()):
        present, value = value_at(request, path)
        if present and value is not None:
            members.append((path, kind, value))
    subject = None
    if data_map.subject_key is not None:
        subject = value_at(request, data_map.subject_key)[1]
    return Found(tuple(members), subject)
