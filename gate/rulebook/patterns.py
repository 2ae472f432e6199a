"""Policy patterns (spec "Registries and patterns"; reference facts §7): ready-made decision
boundaries a caller can adopt, each bound to one shipped Rulebook v1.

The registry is built from `gate/data/patterns/policy-patterns.json` (what a person writes: names,
summary, tags, use cases, an example question, context, facts, outcome metrics and a CRM
mapping) and from the rulebook each pattern names. Everything else is derived here, so one fact
has one source:

* `policy_id` / `recommended_policy_version` are the rulebook's `rulebook_id` / `version`;
* `evidence_codes` are the rulebook's reason codes (rules in order, then the default outcome);
* `required_context_fields` are the template's context keys and `context.inputs.<name>` for
  each name the rulebook's `input_schema` requires;
* `decision_request_template` is a complete rulebook-mode `POST /api/decide` body (the
  rulebook embedded as published); `outcome_template` and `crm_sync_template` are bodies for the
  lifecycle writes, with `{{record_hash}}`-style placeholders naming Decision Record members;
* `sdk_examples` are `curl` and Python snippets posting the template;
* `pattern_hash` = sha256(canonical(pattern without `pattern_hash`)).

The registry is validated at load (every rulebook valid, every template's request evaluates to
a verdict) and cached per file; pure apart from reading the two kinds of file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from gate.errors import CodedError
from gate.protocol.canonical import clone, parse_strict, sha256_hex
from gate.protocol.evaluation import STATUS_OK
from gate.resources import data_path
from gate.rulebook import get_evaluator
from gate.rulebook.contract import VERDICT_YES
from gate.rulebook.shapes import Outcome, Rule, RulebookDocument
from gate.rulebook.validate import checked_rulebook
from gate.strict_json import JsonValue
from gate.vocabulary import BINDING_DIRECT, MODE_RULEBOOK, RULEBOOK_SCHEMA_VERSION

PATTERN_VERSION = "decision_pattern_v1"
REGISTRY_VERSION = "decision_pattern_registry_v1"
PATTERNS_FILE = data_path("patterns", "policy-patterns.json")

_ID = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
_TAG = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_AUTHORED = ("pattern_id", "name", "version", "category", "status", "summary", "rulebook_file", "tags",
             "use_cases", "question", "context", "inputs", "observed_metrics", "crm")
_STATUSES = ("active", "deprecated")
_PLACEHOLDERS = {name: "{{" + name + "}}" for name in  # `{{record_hash}}`: names a record member
                 ("record_hash", "receipt_hash", "verdict", "action", "policy_id", "policy_version")}


class _Described(TypedDict):
    """What a pattern says of itself, as authored and as the registry lists it."""

    pattern_id: str
    name: str
    version: str
    category: str
    status: str
    summary: str
    tags: list[str]
    use_cases: list[str]


class AuthoredPattern(_Described):
    """One entry of the pattern file as a person writes it (`_check_authored` holds its members
    to `_AUTHORED` and its context, inputs, metrics and CRM mapping to objects)."""

    rulebook_file: str
    question: str
    context: dict[str, JsonValue]
    inputs: dict[str, JsonValue]
    observed_metrics: dict[str, JsonValue]
    crm: dict[str, JsonValue]


class RequestTemplate(TypedDict):
    """`decision_request_template`: a rulebook-mode `POST /api/decide` body."""

    question: str
    mode: str
    binding_mode: str
    rulebook: RulebookDocument
    context: dict[str, JsonValue]


class PatternEntry(_Described):
    """One registry entry (the order it is written, and hashed, in is `_registry_entry`'s: the version
    label, the `_Described` members with the policy after `summary`, then these)."""

    decision_pattern_version: str
    policy_id: str
    recommended_policy_version: str
    required_context_fields: list[str]
    evidence_codes: list[str]
    decision_request_template: RequestTemplate
    outcome_template: dict[str, JsonValue]
    crm_sync_template: dict[str, JsonValue]
    sdk_examples: dict[str, str]
    pattern_hash: NotRequired[str]  # the sha256 of the rest: added last, once the rest is written


class RegistryBody(TypedDict):
    """The `GET /api/patterns` body: the registry's entries (those of one tag when asked)."""

    ok: bool
    decision_pattern_registry_version: str
    count: int
    patterns: list[PatternEntry]


class PatternError(CodedError):
    """The pattern file or a rulebook it names is unusable; the gate refuses to start."""

    CODE = "POLICY_PATTERNS_INVALID"


@dataclass(frozen=True)
class Pattern:
    """One registry entry (`body`, hashed) and the rulebook it binds."""

    body: PatternEntry
    rulebook: RulebookDocument
    rulebook_hash: str

    @property
    def pattern_id(self) -> str:
        return self.body["pattern_id"]

    @property
    def policy_id(self) -> str:
        return self.body["policy_id"]

    @property
    def workflow(self) -> str | None:
        workflow = self.body["decision_request_template"]["context"].get("workflow")
        return workflow if isinstance(workflow, str) else None


@dataclass(frozen=True)
class PatternRegistry:
    patterns: tuple[Pattern, ...]

    def find(self, wanted: str) -> Pattern | None:
        """By pattern id, else by policy id (the spec's `pattern_id` query takes either)."""
        for pattern in self.patterns:
            if pattern.pattern_id == wanted:
                return pattern
        for pattern in self.patterns:
            if pattern.policy_id == wanted:
                return pattern
        return None

    def for_workflow(self, workflow: Any) -> Pattern | None:
        if not isinstance(workflow, str):
            return None
        return next((p for p in self.patterns if p.workflow == workflow), None)

    def with_tag(self, tag: str | None) -> list[PatternEntry]:
        return [p.body for p in self.patterns if tag is None or tag in p.body["tags"]]

    def registry_body(self, tag: str | None = None) -> RegistryBody:
        listed = self.with_tag(tag)
        return {"ok": True, "decision_pattern_registry_version": REGISTRY_VERSION, "count": len(listed),
                "patterns": listed}


def _reason_codes(rulebook: RulebookDocument) -> list[str]:
    codes: list[str] = []
    for outcome in [r["outcome"] for r in rulebook["rules"]] + [rulebook["default_outcome"]]:
        if outcome["reason_code"] not in codes:
            codes.append(outcome["reason_code"])
    return codes


def _approving_action(rulebook: RulebookDocument) -> str:
    rule: Rule
    for rule in rulebook["rules"]:
        if rule["outcome"]["decision"] == VERDICT_YES:
            return rule["outcome"]["action"]
    default: Outcome = rulebook["default_outcome"]
    return default["action"]


def _sdk_examples(request: RequestTemplate) -> dict[str, str]:
    body = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
    return {
        "curl": ("curl -sS -X POST \"$GATE_URL/api/decide\" -H \"x-api-key: $GATE_API_KEY\" "
                 "-H 'content-type: application/json' -H \"x-idempotency-key: $IDEMPOTENCY_KEY\" --data @request.json"),
        "python": ("import json, os, urllib.request\n"
                   "request = json.load(open('request.json'))  # this pattern's decision_request_template\n"
                   "req = urllib.request.Request(os.environ['GATE_URL'] + '/api/decide', data=json.dumps(request).encode(),\n"
                   "    headers={'x-api-key': os.environ['GATE_API_KEY'], 'content-type': 'application/json'})\n"
                   "record = json.load(urllib.request.urlopen(req, timeout=10))\n"
                   "proceed = record.get('verdict') == 'yes' and record.get('c') == 'yes'  # anything else holds\n"),
        "request_json": body,
    }


def _check_authored(authored: Any) -> str:
    """The authored entry's own members are well formed; its pattern id."""
    if not isinstance(authored, dict) or set(authored) != set(_AUTHORED):
        raise PatternError(f"a pattern must have exactly the members {', '.join(_AUTHORED)}")
    pattern_id = authored["pattern_id"]
    if not isinstance(pattern_id, str) or not _ID.fullmatch(pattern_id):
        raise PatternError(f"pattern_id {pattern_id!r} must match {_ID.pattern}")
    if authored["status"] not in _STATUSES:
        raise PatternError(f"{pattern_id}: status must be one of {', '.join(_STATUSES)}")
    tags = authored["tags"]
    if not isinstance(tags, list) or not tags or not all(isinstance(t, str) and _TAG.fullmatch(t) for t in tags):
        raise PatternError(f"{pattern_id}: tags must be a non-empty list of lower-case tokens")
    for name in ("context", "inputs", "observed_metrics", "crm"):
        if not isinstance(authored[name], dict):
            raise PatternError(f"{pattern_id}: {name} must be an object")
    return pattern_id


def _read_rulebook(pattern_id: str, rulebook_file: str, base: Path) -> object:
    """The Rulebook v1 the entry names, parsed strictly (not yet validated)."""
    try:
        rulebook = parse_strict((base / rulebook_file).read_bytes())
    except (OSError, ValueError) as exc:
        raise PatternError(f"{pattern_id}: rulebook {rulebook_file!r} is unreadable: {exc}") from exc
    if not isinstance(rulebook, dict) or rulebook.get("schema_version") != RULEBOOK_SCHEMA_VERSION:
        raise PatternError(f"{pattern_id}: {rulebook_file!r} is not a Rulebook v1")
    return rulebook


def _check_example(pattern_id: str, rulebook: object, rulebook_hash: str, inputs: dict[str, JsonValue]) -> RulebookDocument:
    """The rulebook, typed: it is valid and the entry's example inputs reach a verdict (not needs_input)."""
    try:
        document = checked_rulebook(rulebook)
        evaluation = get_evaluator(document, rulebook_hash).evaluate(inputs)
    except Exception as exc:  # RulebookInvalid and friends: refuse to start
        raise PatternError(f"{pattern_id}: rulebook is invalid: {exc}") from exc
    if evaluation.status != STATUS_OK:
        raise PatternError(f"{pattern_id}: the example inputs do not satisfy the rulebook's input_schema")
    return document


def _without_nulls(body: dict[str, JsonValue]) -> dict[str, JsonValue]:
    return {k: v for k, v in body.items() if v is not None}


def _outcome_template(pattern_id: str, authored: AuthoredPattern, rulebook: RulebookDocument) -> dict[str, JsonValue]:
    """A `POST /api/decision/outcome` body for the approving action, the context's target."""
    context = authored["context"]
    return _without_nulls({
        "outcome_status": "succeeded",
        "action_taken": _approving_action(rulebook),
        "action_executed": True,
        "target_system": context.get("target_system"),
        "target_object_id": context.get("target_object_id"),
        "mutation": clone(context.get("mutation")),
        "external_ref": f"{pattern_id}_outcome_1",
        "decision_record_hash": _PLACEHOLDERS["record_hash"],
        "decision_receipt_hash": _PLACEHOLDERS["receipt_hash"],
        "observed_metrics": clone(authored["observed_metrics"]),
    })


def _crm_sync_template(crm: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A CRM write-back body: the authored CRM mapping, the record's members as placeholders."""
    return _without_nulls({
        "sync_status": "written",
        "sync_direction": "writeback",
        "crm_provider": crm.get("crm_provider"),
        "crm_object_type": crm.get("crm_object_type"),
        "crm_object_id": crm.get("crm_object_id"),
        "decision_record_hash": _PLACEHOLDERS["record_hash"],
        "decision_receipt_hash": _PLACEHOLDERS["receipt_hash"],
        "decision_verdict": _PLACEHOLDERS["verdict"],
        "decision_action": _PLACEHOLDERS["action"],
        "policy_id": _PLACEHOLDERS["policy_id"],
        "policy_version": _PLACEHOLDERS["policy_version"],
        "field_mapping": clone(crm.get("field_mapping") or {}),
    })


def _registry_entry(pattern_id: str, authored: AuthoredPattern, rulebook: RulebookDocument) -> PatternEntry:
    """The registry entry without its `pattern_hash`: the authored members, then what is derived."""
    context = clone(authored["context"])
    request: RequestTemplate = {"question": authored["question"], "mode": MODE_RULEBOOK,
                                "binding_mode": BINDING_DIRECT, "rulebook": clone(rulebook),
                                "context": {**context, "inputs": clone(authored["inputs"])}}
    required = list((rulebook.get("input_schema") or {}).get("required") or [])
    return {
        "decision_pattern_version": PATTERN_VERSION,
        "pattern_id": pattern_id,
        "name": authored["name"],
        "version": authored["version"],
        "category": authored["category"],
        "status": authored["status"],
        "summary": authored["summary"],
        "policy_id": rulebook["rulebook_id"],
        "recommended_policy_version": rulebook["version"],
        "tags": list(authored["tags"]),
        "use_cases": list(authored["use_cases"]),
        "required_context_fields": [*context.keys(), *(f"context.inputs.{name}" for name in required)],
        "evidence_codes": _reason_codes(rulebook),
        "decision_request_template": request,
        "outcome_template": _outcome_template(pattern_id, authored, rulebook),
        "crm_sync_template": _crm_sync_template(authored["crm"]),
        "sdk_examples": _sdk_examples(request),
    }


def build_pattern(authored: Any, base: Path) -> Pattern:
    """One authored entry → a registry entry (see the module docstring for what is derived)."""
    pattern_id = _check_authored(authored)
    parsed = _read_rulebook(pattern_id, authored["rulebook_file"], base)
    rulebook_hash = sha256_hex(parsed)
    rulebook = _check_example(pattern_id, parsed, rulebook_hash, authored["inputs"])
    body = _registry_entry(pattern_id, authored, rulebook)
    body["pattern_hash"] = sha256_hex(body)
    return Pattern(body, rulebook, rulebook_hash)


def pattern_hash_valid(body: Any) -> bool:
    """Whether a registry entry's `pattern_hash` is the sha256 of the rest of it."""
    if not isinstance(body, dict):
        return False
    return body.get("pattern_hash") == sha256_hex({k: v for k, v in body.items() if k != "pattern_hash"})


@lru_cache(maxsize=4)
def _load(path: Path) -> PatternRegistry:
    try:
        document = parse_strict(path.read_bytes())
    except (OSError, ValueError) as exc:
        raise PatternError(f"policy patterns file {path} is unreadable: {exc}") from exc
    if not isinstance(document, dict) or document.get("decision_pattern_registry_version") != REGISTRY_VERSION \
            or not isinstance(document.get("patterns"), list):
        raise PatternError(f"{path} is not a {REGISTRY_VERSION} file")
    patterns = tuple(build_pattern(entry, path.parent) for entry in document["patterns"])
    seen: set[str] = set()
    for pattern in patterns:
        for name in {pattern.pattern_id, pattern.policy_id}:
            if name in seen:
                raise PatternError(f"pattern or policy id {name!r} is listed twice")
            seen.add(name)
    return PatternRegistry(patterns)


def load_patterns(path: str | Path | None = None) -> PatternRegistry:
    """The registry of `path` (default: the shipped `gate/data/patterns/policy-patterns.json`)."""
    return _load(Path(path or PATTERNS_FILE).resolve())


__all__ = ["PATTERN_VERSION", "REGISTRY_VERSION", "Pattern", "PatternError", "PatternRegistry", "build_pattern",
           "load_patterns", "pattern_hash_valid"]
