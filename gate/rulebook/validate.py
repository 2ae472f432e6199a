"""Validation of a Rulebook v1 object with exact error paths (reference facts §2).

`validate_rulebook(obj)` returns `[]` for a valid rulebook, else a list of
`{"field", "code", "message"}` with `field` a path such as
`rulebook.rules[0].condition.all[1].operator`. All errors are collected, not just the first.
`checked_rulebook(obj)` is the same check as a type guard: it returns `obj` typed as a
`RulebookDocument` when valid and raises `gate.errors.RulebookInvalid` with those errors
otherwise.

Order is deterministic and depends only on the rulebook's content (not on the insertion
order of its keys): a document walk where each object reports its unknown keys first (in
code-point order), then its declared members in contract order (a missing required member
is reported where it would be), then cross-member checks (`rulebook.rules` node budget).
At most `MAX_ERRORS` errors are reported, the first ones of that walk.

The walk never recurses deeper than the condition depth limit plus one, and `value` data is
walked iteratively, so no rulebook can exhaust the interpreter stack here.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any, TypeGuard

from gate.errors import RulebookInvalid
from gate.rulebook.contract import (
    COMBINATORS,
    CONDITION_MEMBERS,
    DUPLICATE_VALUE,
    EXECUTABLE_KEYS,
    FIELD_PATH_RE,
    IDENTIFIER_RE,
    INPUT_PROPERTY_MEMBERS,
    INPUT_SCHEMA_MEMBERS,
    INPUT_TYPES,
    INVALID_CONDITION,
    INVALID_TYPE,
    INVALID_VALUE,
    LEAF_MEMBERS,
    MAX_ACTION_LENGTH,
    MAX_CHILDREN,
    MAX_CONDITION_DEPTH,
    MAX_CONDITION_NODES,
    MAX_ERRORS,
    MAX_INPUT_NAMES,
    MAX_PRIORITY,
    MAX_RULES,
    MAX_VERSION_LENGTH,
    MIN_CHILDREN,
    MIN_PRIORITY,
    MIN_RULES,
    MISSING_FIELD,
    OPERATORS,
    OUTCOME_MEMBERS,
    RULE_MEMBERS,
    RULE_REQUIRED,
    RULEBOOK_MEMBERS,
    RULEBOOK_REQUIRED,
    SCHEMA_VERSION,
    SCHEMA_VIOLATION,
    TOKEN_RE,
    TOO_COMPLEX,
    TOO_DEEP,
    UNKNOWN_FIELD,
    UNSUPPORTED_OPERATOR,
    UNSUPPORTED_VERSION,
    VALUELESS_OPERATORS,
)
from gate.rulebook.shapes import RulebookDocument
from gate.strict_json import JsonValue
from gate.vocabulary import MAX_SAFE_INTEGER, VERDICTS

__all__ = ["checked_rulebook", "validate_rulebook"]

_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # Unicode category Cc


def _member_path(path: str, key: Any) -> str:
    """`path.key` for plain keys, `path["odd key"]` otherwise (dots would be ambiguous)."""
    if isinstance(key, str):
        if _PLAIN_KEY.fullmatch(key):
            return f"{path}.{key}"
        return f"{path}[{json.dumps(key, ensure_ascii=False)}]"
    return f"{path}[{key!r}]"


def _key_order(key: Any) -> tuple[bool, str]:
    return (not isinstance(key, str), str(key))


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, float) and math.isfinite(value) and value.is_integer()


class _Walk:
    """One validation pass: accumulates errors and the condition-node count."""

    def __init__(self) -> None:
        self.errors: list[dict[str, str]] = []
        self.nodes = 0

    def add(self, path: str, code: str, message: str) -> None:
        if len(self.errors) < MAX_ERRORS:
            self.errors.append({"field": path, "code": code, "message": message})

    # ------------------------------------------------------------------ objects

    def closed(self, obj: Mapping[str, JsonValue], path: str, allowed: tuple[str, ...], kind: str) -> None:
        """Report keys outside `allowed`: every Rulebook v1 object is closed."""
        unknown = [key for key in obj if key not in allowed]
        for key in sorted(unknown, key=_key_order):
            self.unknown_key(key, _member_path(path, key), f"{kind} objects are closed")

    def unknown_key(self, key: Any, path: str, why: str) -> None:
        if not isinstance(key, str):
            self.add(path, SCHEMA_VIOLATION, "object keys must be strings")
        elif key in EXECUTABLE_KEYS:
            # SECURITY: customer-supplied executable code is rejected (spec, binding verdicts).
            self.add(path, UNKNOWN_FIELD, f"'{key}' looks like executable content; customer-supplied code is rejected")
        else:
            self.add(path, UNKNOWN_FIELD, f"unknown member; {why}")

    def required(self, obj: Mapping[str, JsonValue], path: str, names: tuple[str, ...]) -> list[str]:
        """Report absent required members; return the present ones to check."""
        for name in names:
            if name not in obj:
                self.add(f"{path}.{name}", MISSING_FIELD, f"{name} is required")
        return [name for name in names if name in obj]

    def expect_object(self, value: Any, path: str, what: str) -> bool:
        if isinstance(value, dict):
            return True
        self.add(path, INVALID_TYPE, f"{what} must be an object")
        return False

    def string(self, value: Any, path: str, what: str) -> bool:
        if isinstance(value, str):
            return True
        self.add(path, INVALID_TYPE, f"{what} must be a string")
        return False

    def pattern(self, value: Any, path: str, what: str, regex: re.Pattern[str], shape: str) -> None:
        if self.string(value, path, what) and not regex.fullmatch(value):
            self.add(path, INVALID_VALUE, f"{what} must match {shape}")

    def length(self, value: Any, path: str, what: str, maximum: int) -> None:
        if self.string(value, path, what):
            if not 1 <= len(value) <= maximum:
                self.add(path, INVALID_VALUE, f"{what} must be 1 to {maximum} characters")
            elif _CONTROL.search(value):
                # One rule on both ledgers: PostgreSQL cannot store NUL in a text column, so
                # no identifier may hold a control character (issue 6, defect 10).
                self.add(path, INVALID_VALUE, f"{what} must not contain control characters")

    # ------------------------------------------------------------------ rulebook

    def rulebook(self, obj: Any, path: str) -> None:
        if not self.expect_object(obj, path, "the rulebook"):
            return
        self.closed(obj, path, RULEBOOK_MEMBERS, "rulebook")
        self.required(obj, path, RULEBOOK_REQUIRED)
        if "schema_version" in obj:
            value = obj["schema_version"]
            if self.string(value, f"{path}.schema_version", "schema_version") and value != SCHEMA_VERSION:
                self.add(f"{path}.schema_version", UNSUPPORTED_VERSION, f"schema_version must be '{SCHEMA_VERSION}'")
        if "rulebook_id" in obj:
            self.pattern(obj["rulebook_id"], f"{path}.rulebook_id", "rulebook_id", IDENTIFIER_RE, IDENTIFIER_RE.pattern)
        if "version" in obj:
            self.length(obj["version"], f"{path}.version", "version", MAX_VERSION_LENGTH)
        if "input_schema" in obj:
            self.input_schema(obj["input_schema"], f"{path}.input_schema")
        if "rules" in obj:
            self.rules(obj["rules"], f"{path}.rules")
        if "default_outcome" in obj:
            self.outcome(obj["default_outcome"], f"{path}.default_outcome", "default_outcome")

    def rules(self, rules: Any, path: str) -> None:
        if not isinstance(rules, list):
            self.add(path, INVALID_TYPE, "rules must be an array")
            return
        if len(rules) < MIN_RULES:
            self.add(path, INVALID_VALUE, f"rules must hold at least {MIN_RULES} rule")
        elif len(rules) > MAX_RULES:
            self.add(path, TOO_COMPLEX, f"rules must hold at most {MAX_RULES} rules")
        seen: dict[str, int] = {}
        for index, rule in enumerate(rules):
            self.rule(rule, f"{path}[{index}]", index, seen)
        if self.nodes > MAX_CONDITION_NODES:
            self.add(path, TOO_COMPLEX, f"conditions hold {self.nodes} nodes; at most {MAX_CONDITION_NODES} are allowed")

    def rule(self, rule: Any, path: str, index: int, seen: dict[str, int]) -> None:
        if not self.expect_object(rule, path, "a rule"):
            return
        self.closed(rule, path, RULE_MEMBERS, "rule")
        self.required(rule, path, RULE_REQUIRED)
        if "rule_id" in rule:
            rule_id = rule["rule_id"]
            self.pattern(rule_id, f"{path}.rule_id", "rule_id", IDENTIFIER_RE, IDENTIFIER_RE.pattern)
            if isinstance(rule_id, str):
                if rule_id in seen:
                    self.add(f"{path}.rule_id", DUPLICATE_VALUE, f"rule_id is already used by rules[{seen[rule_id]}]")
                else:
                    seen[rule_id] = index
        if "priority" in rule:
            self.priority(rule["priority"], f"{path}.priority")
        if "condition" in rule:
            self.condition(rule["condition"], f"{path}.condition", 1)
        if "outcome" in rule:
            self.outcome(rule["outcome"], f"{path}.outcome", "outcome")

    def priority(self, value: Any, path: str) -> None:
        if not _is_integer(value):
            self.add(path, INVALID_TYPE, "priority must be an integer")
        elif not MIN_PRIORITY <= value <= MAX_PRIORITY:
            self.add(path, INVALID_VALUE, f"priority must be between {MIN_PRIORITY} and {MAX_PRIORITY}")

    def outcome(self, obj: Any, path: str, what: str) -> None:
        if not self.expect_object(obj, path, what):
            return
        self.closed(obj, path, OUTCOME_MEMBERS, "outcome")
        present = self.required(obj, path, OUTCOME_MEMBERS)
        if "decision" in present:
            value = obj["decision"]
            if self.string(value, f"{path}.decision", "decision") and value not in VERDICTS:
                self.add(f"{path}.decision", INVALID_VALUE, "decision must be exactly yes, no or review")
        if "verdict" in present:
            self.pattern(obj["verdict"], f"{path}.verdict", "verdict", TOKEN_RE, TOKEN_RE.pattern)
        if "action" in present:
            self.length(obj["action"], f"{path}.action", "action", MAX_ACTION_LENGTH)
        if "reason_code" in present:
            self.pattern(obj["reason_code"], f"{path}.reason_code", "reason_code", TOKEN_RE, TOKEN_RE.pattern)

    # ------------------------------------------------------------------ input_schema

    def input_schema(self, obj: Any, path: str) -> None:
        if not self.expect_object(obj, path, "input_schema"):
            return
        self.closed(obj, path, INPUT_SCHEMA_MEMBERS, "input_schema")
        if "required" in obj:
            self.required_names(obj["required"], f"{path}.required")
        if "properties" in obj:
            self.properties(obj["properties"], f"{path}.properties")

    def required_names(self, names: Any, path: str) -> None:
        if not isinstance(names, list):
            self.add(path, INVALID_TYPE, "required must be an array of field names")
            return
        if len(names) > MAX_INPUT_NAMES:
            self.add(path, TOO_COMPLEX, f"required may list at most {MAX_INPUT_NAMES} fields")
        seen: set[str] = set()
        for index, name in enumerate(names):
            item = f"{path}[{index}]"
            self.pattern(name, item, "a required field name", FIELD_PATH_RE, FIELD_PATH_RE.pattern)
            if isinstance(name, str):
                if name in seen:
                    self.add(item, DUPLICATE_VALUE, "field is listed twice in required")
                seen.add(name)

    def properties(self, props: Any, path: str) -> None:
        if not self.expect_object(props, path, "properties"):
            return
        if len(props) > MAX_INPUT_NAMES:
            self.add(path, TOO_COMPLEX, f"properties may declare at most {MAX_INPUT_NAMES} fields")
        for name in sorted(props, key=_key_order):
            item = _member_path(path, name)
            if not isinstance(name, str) or name in EXECUTABLE_KEYS:
                self.unknown_key(name, item, "not a field name")
                continue
            if not FIELD_PATH_RE.fullmatch(name):
                self.add(item, INVALID_VALUE, f"property names must match {FIELD_PATH_RE.pattern}")
            spec = props[name]
            if not self.expect_object(spec, item, "a property declaration"):
                continue
            self.closed(spec, item, INPUT_PROPERTY_MEMBERS, "property declaration")
            if "type" in self.required(spec, item, INPUT_PROPERTY_MEMBERS):
                kind = spec["type"]
                if self.string(kind, f"{item}.type", "type") and kind not in INPUT_TYPES:
                    self.add(f"{item}.type", INVALID_VALUE, "type must be one of " + ", ".join(INPUT_TYPES))

    # ------------------------------------------------------------------ conditions

    def condition(self, node: Any, path: str, depth: int) -> None:
        self.nodes += 1
        if depth > MAX_CONDITION_DEPTH:
            self.add(path, TOO_DEEP, f"conditions may nest at most {MAX_CONDITION_DEPTH} levels")
            return
        if not self.expect_object(node, path, "a condition"):
            return
        self.closed(node, path, CONDITION_MEMBERS, "condition")
        combinators = [key for key in COMBINATORS if key in node]
        leaf_keys = [key for key in LEAF_MEMBERS if key in node]
        if len(combinators) + (1 if leaf_keys else 0) != 1:
            self.add(
                path,
                INVALID_CONDITION,
                "a condition is exactly one combinator (all, any, not) or one leaf {field, operator, value}",
            )
            return
        if not combinators:
            self.leaf(node, path)
        elif combinators[0] == "not":
            self.negation(node["not"], f"{path}.not", depth)
        else:
            self.children(node[combinators[0]], f"{path}.{combinators[0]}", depth)

    def children(self, items: Any, path: str, depth: int) -> None:
        if not isinstance(items, list):
            self.add(path, INVALID_TYPE, "a combinator takes an array of conditions")
            return
        if len(items) < MIN_CHILDREN:
            self.add(path, INVALID_VALUE, f"a combinator needs at least {MIN_CHILDREN} condition")
        elif len(items) > MAX_CHILDREN:
            self.add(path, TOO_COMPLEX, f"a combinator takes at most {MAX_CHILDREN} conditions")
        for index, child in enumerate(items):
            self.condition(child, f"{path}[{index}]", depth + 1)

    def negation(self, child: Any, path: str, depth: int) -> None:
        if isinstance(child, list):
            if len(child) != 1:
                self.add(path, INVALID_CONDITION, "not takes exactly one condition")
            for index, item in enumerate(child):
                self.condition(item, f"{path}[{index}]", depth + 1)
        elif isinstance(child, dict):
            self.condition(child, path, depth + 1)
        else:
            self.add(path, INVALID_TYPE, "not takes one condition object")

    def leaf(self, node: Mapping[str, JsonValue], path: str) -> None:
        self.required(node, path, ("field", "operator"))
        if "field" in node:
            self.pattern(node["field"], f"{path}.field", "field", FIELD_PATH_RE, FIELD_PATH_RE.pattern)
        operator = node.get("operator")
        if "operator" in node and self.string(operator, f"{path}.operator", "operator"):
            if operator not in OPERATORS:
                self.add(f"{path}.operator", UNSUPPORTED_OPERATOR, "operator must be one of " + ", ".join(OPERATORS))
            elif operator not in VALUELESS_OPERATORS and "value" not in node:
                self.add(f"{path}.value", MISSING_FIELD, f"value is required for operator {operator}")
        if "value" in node:
            self.data(node["value"], f"{path}.value")

    def data(self, value: Any, path: str) -> None:
        """Check that `value` is plain JSON without executable-looking keys (iterative walk)."""
        stack = [(value, path)]
        while stack:
            item, where = stack.pop()
            if isinstance(item, dict):
                pending = []
                for key in sorted(item, key=_key_order):
                    if not isinstance(key, str) or key in EXECUTABLE_KEYS:
                        self.unknown_key(key, _member_path(where, key), "not allowed in value data")
                    else:
                        pending.append((item[key], _member_path(where, key)))
                stack.extend(reversed(pending))
            elif isinstance(item, list):
                stack.extend(reversed([(child, f"{where}[{i}]") for i, child in enumerate(item)]))
            elif item is None or isinstance(item, (str, bool)):
                continue
            elif isinstance(item, int):
                if abs(item) > MAX_SAFE_INTEGER:
                    self.add(where, SCHEMA_VIOLATION, "integers must lie within ±(2^53−1)")
            elif isinstance(item, float):
                if not math.isfinite(item):
                    self.add(where, SCHEMA_VIOLATION, "numbers must be finite")
            else:
                self.add(where, SCHEMA_VIOLATION, f"{type(item).__name__} is not a JSON value")


def validate_rulebook(obj: object, base_path: str = "rulebook") -> list[dict[str, str]]:
    """Validate a Rulebook v1 object; `[]` when valid, else `{field, code, message}` errors.

    Never raises for any Python value. Codes: unknown_field, missing_field, invalid_type,
    invalid_value, unsupported_operator, invalid_condition, too_complex, too_deep,
    duplicate_value, unsupported_version, schema_violation.
    """
    walk = _Walk()
    walk.rulebook(obj, base_path)
    return walk.errors


def _accepted(obj: object, errors: list[dict[str, str]]) -> TypeGuard[RulebookDocument]:
    """Whether `errors`, what `validate_rulebook(obj)` returned, is empty (the narrowing step)."""
    return not errors


def checked_rulebook(obj: object, base_path: str = "rulebook") -> RulebookDocument:
    """`obj` itself, typed as the Rulebook v1 document it is; raises `gate.errors.RulebookInvalid`
    with every `{field, code, message}` error (those of `validate_rulebook`) when it is not."""
    errors = validate_rulebook(obj, base_path)
    if not _accepted(obj, errors):
        raise RulebookInvalid(errors)
    return obj
