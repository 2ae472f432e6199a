"""The draft's rules as table rows, and a cell edit written back into the draft (no UI here).

A row is a view of one rule: `priority`, `rule_id`, `condition` (compact JSON, editable),
`reads` (the condition in words, read-only) and the outcome's four members. Editing a cell
changes exactly that member of that rule in the parsed draft; every other member, value and key
keeps its place (JSON objects keep their authored key order), so the table and the JSON editor
round-trip exactly: the rows of `with_cell(draft, i, column, row[column])` are the rows of the
draft, and the draft is unchanged. A cell that cannot be read (a priority that is not an
integer in the schema's range, a condition that is not a JSON object) raises `RuleEditError`
and changes nothing; anything else it writes is then validated like typed text (the editor's
live validation marks it).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, TypedDict

from gate.errors import CodedError
from gate.rulebook.operators import OPERATORS, Operand
from gate.rulebook.shapes import Rule

OUTCOME_COLUMNS = ("decision", "verdict", "action", "reason_code")
EDITABLE = ("priority", "rule_id", "condition", *OUTCOME_COLUMNS)
COLUMNS = ("index", "priority", "rule_id", "condition", "reads", *OUTCOME_COLUMNS)
PRIORITY_RANGE = (-1000, 1000)  # the Rulebook v1 schema's
# How the table writes each operator between a field and its value (`fraud_score ≥ 0.8`).
WORDS = {operator.name: operator.words for operator in OPERATORS}
VALUELESS = frozenset(operator.name for operator in OPERATORS if operator.operand is Operand.NONE)
NEW_RULE: Rule = {
    "rule_id": "new_rule", "priority": 0,
    "condition": {"field": "amount", "operator": "gt", "value": 0},
    "outcome": {"decision": "review", "verdict": "REVIEW", "action": "route_to_review", "reason_code": "NEW_RULE"},
}


class RuleRow(TypedDict):
    """One rule of a draft as a table row (COLUMNS): its members as the draft states them (the
    draft is not yet valid: None where a member is missing), its condition as JSON and in words."""

    index: int
    priority: Any
    rule_id: Any
    condition: str | None
    reads: str | None
    decision: Any
    verdict: Any
    action: Any
    reason_code: Any


class RuleRowHistory(RuleRow):
    """A row with its rule's stored history in the scope (`workbench.reports.rules.RuleHistory`;
    0 and None for a rule the history never saw)."""

    fired: int
    share: float | None
    success_rate: float | None
    success_interval: list[float | None] | None  # 95% Wilson
    resolved: int


class RuleEditError(CodedError):
    """A cell value the table cannot write into the draft (the draft is unchanged)."""

    CODE = "RULE_EDIT_INVALID"


def compact(value: Any) -> str:
    """One line of JSON, as the table shows a condition."""
    return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


def reads(condition: Any) -> str:
    """A condition in words: `fraud_score ≥ 0.8`, `all of (a, b)` as `a and b`, `not (…)`."""
    if not isinstance(condition, dict):
        return compact(condition)
    for key, joiner in (("all", " and "), ("any", " or ")):
        if isinstance(condition.get(key), list):
            parts = [_grouped(child) for child in condition[key]]
            return joiner.join(parts) if parts else f"{key} of nothing"
    if "not" in condition:
        child = condition["not"]
        return "not " + _grouped(child[0] if isinstance(child, list) and len(child) == 1 else child, always=True)
    operator = str(condition.get("operator"))
    field = str(condition.get("field"))
    if operator in VALUELESS:
        return f"{field} {WORDS[operator]}"
    words = WORDS.get(operator, operator.replace("_", " "))
    return f"{field} {words} {compact(condition.get('value'))}"


def _grouped(child: Any, *, always: bool = False) -> str:
    text = reads(child)
    combinator = isinstance(child, dict) and any(key in child for key in ("all", "any"))
    return f"({text})" if always or combinator else text


def rule_rows(rulebook: dict[str, Any]) -> list[RuleRow]:
    """One row per rule in authored order (COLUMNS); a missing member is None."""
    rules = rulebook.get("rules") if isinstance(rulebook, dict) else None
    rows: list[RuleRow] = []
    for index, item in enumerate(rules if isinstance(rules, list) else []):
        rule: dict[str, Any] = item if isinstance(item, dict) else {}
        found = rule.get("outcome")
        outcome: dict[str, Any] = found if isinstance(found, dict) else {}
        condition = rule.get("condition")
        rows.append({
            "index": index, "priority": rule.get("priority"), "rule_id": rule.get("rule_id"),
            "condition": None if condition is None else compact(condition),
            "reads": None if condition is None else reads(condition),
            "decision": outcome.get("decision"), "verdict": outcome.get("verdict"),  # OUTCOME_COLUMNS
            "action": outcome.get("action"), "reason_code": outcome.get("reason_code"),
        })
    return rows


def _priority(value: Any) -> int | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None  # no priority member: 0, as the schema says
    if isinstance(value, bool):
        raise RuleEditError("priority must be a whole number")
    try:
        number = int(value) if isinstance(value, int) else int(str(value).strip())
    except ValueError:
        raise RuleEditError(f"priority must be a whole number, not {str(value)[:40]!r}") from None
    if isinstance(value, float) and value != number:
        raise RuleEditError("priority must be a whole number")
    low, high = PRIORITY_RANGE
    if not low <= number <= high:
        raise RuleEditError(f"priority must be from {low} to {high}")
    return number


def _condition(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(str(value))
    except json.JSONDecodeError as exc:
        raise RuleEditError(f"the condition is not JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(parsed, dict):
        raise RuleEditError("the condition must be a JSON object (a leaf, or all, any, not)")
    return parsed


def with_cell(rulebook: dict[str, Any], index: int, column: str, value: Any) -> dict[str, Any]:
    """A copy of `rulebook` with one cell of rule `index` written (RuleEditError: unchanged)."""
    rules = rulebook.get("rules")
    if column not in EDITABLE:
        raise RuleEditError(f"{column!r} cannot be edited in the table")
    if not isinstance(rules, list) or not 0 <= index < len(rules) or not isinstance(rules[index], dict):
        raise RuleEditError(f"the draft has no rule at row {index + 1}")
    edited = copy.deepcopy(rulebook)
    rule = edited["rules"][index]
    if column == "priority":
        number = _priority(value)
        if number is None:
            rule.pop("priority", None)
        else:
            rule["priority"] = number
    elif column == "condition":
        rule["condition"] = _condition(value)
    elif column == "rule_id":
        rule["rule_id"] = "" if value is None else str(value)
    else:
        outcome = rule.setdefault("outcome", {})
        if not isinstance(outcome, dict):
            raise RuleEditError(f"rule {rule.get('rule_id')!r} has no outcome object to edit")
        outcome[column] = "" if value is None else str(value)
    return edited


def with_rule_added(rulebook: dict[str, Any]) -> dict[str, Any]:
    """A copy with a new rule appended (an id not yet used), for the author to fill in."""
    edited = copy.deepcopy(rulebook)
    rules = edited.setdefault("rules", [])
    taken = {rule.get("rule_id") for rule in rules if isinstance(rule, dict)}
    rule = copy.deepcopy(NEW_RULE)
    number = 1
    while rule["rule_id"] in taken:
        number += 1
        rule["rule_id"] = f"new_rule_{number}"
    rules.append(rule)
    return edited


def with_rule_removed(rulebook: dict[str, Any], index: int) -> dict[str, Any]:
    rules = rulebook.get("rules")
    if not isinstance(rules, list) or not 0 <= index < len(rules):
        raise RuleEditError(f"the draft has no rule at row {index + 1}")
    edited = copy.deepcopy(rulebook)
    del edited["rules"][index]
    return edited


def draft_text(rulebook: Mapping[str, object]) -> str:
    """The draft as the JSON editor shows it after a table edit (keys in their authored order)."""
    return json.dumps(rulebook, indent=2, ensure_ascii=False)
