"""A rulebook laid out for reading: members in the Rulebook v1 schema's documented order.

Bound snapshots are stored as canonical JSON (keys sorted), so a version loaded for editing would
otherwise put `version` near the end and `condition` after `outcome`. `readable_order` only moves
keys (never a value): the canonical hash of the result is the hash of its input. Members the
order does not name keep their relative order after the named ones.
"""

from __future__ import annotations

from typing import Any

from gate.strict_json import JsonValue

TOP = ("schema_version", "rulebook_id", "version", "description", "input_schema", "rules", "default_outcome")
RULE = ("rule_id", "priority", "description", "condition", "outcome")
OUTCOME = ("decision", "verdict", "action", "reason_code")
CONDITION = ("field", "operator", "value", "all", "any", "not")
INPUT_SCHEMA = ("required", "properties")


def _ordered(node: dict[str, JsonValue], order: tuple[str, ...]) -> dict[str, JsonValue]:
    named = {key: node[key] for key in order if key in node}
    return {**named, **{key: value for key, value in node.items() if key not in named}}


def _condition(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    ordered = _ordered(node, CONDITION)
    for key in ("all", "any"):
        children = ordered.get(key)
        if isinstance(children, list):
            ordered[key] = [_condition(child) for child in children]
    if "not" in ordered:
        child = ordered["not"]
        ordered["not"] = [_condition(c) for c in child] if isinstance(child, list) else _condition(child)
    return ordered


def _rule(rule: Any) -> Any:
    if not isinstance(rule, dict):
        return rule
    ordered = _ordered(rule, RULE)
    if "condition" in ordered:
        ordered["condition"] = _condition(ordered["condition"])
    outcome = ordered.get("outcome")
    if isinstance(outcome, dict):
        ordered["outcome"] = _ordered(outcome, OUTCOME)
    return ordered


def readable_order(rulebook: Any) -> Any:
    """The same rulebook with its members in the schema's documented order (module doc)."""
    if not isinstance(rulebook, dict):
        return rulebook
    ordered = _ordered(rulebook, TOP)
    schema, rules, default = ordered.get("input_schema"), ordered.get("rules"), ordered.get("default_outcome")
    if isinstance(schema, dict):
        ordered["input_schema"] = _ordered(schema, INPUT_SCHEMA)
    if isinstance(rules, list):
        ordered["rules"] = [_rule(rule) for rule in rules]
    if isinstance(default, dict):
        ordered["default_outcome"] = _ordered(default, OUTCOME)
    return ordered
