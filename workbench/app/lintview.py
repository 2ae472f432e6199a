"""Lint findings as a reader wants them: one line each, with where in the draft and what to do.

`lint_items(report, text)` turns a `gate.rulebook.analysis.lint` report into items
`{severity, code, where, line, message, fix, count, regions}`, one per distinct finding: `line` is
the 1-based line of the rule the finding is about in the draft text (None for the rulebook as a
whole), `fix` a suggested change per finding code, `count` how many findings say it and `regions`
where each holds with a fact set there. The page renders the items as text (caller-supplied ids
are escaped there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import TypedDict

from gate.rulebook.analysis import group_findings
from gate.strict_json import JsonValue

FIXES = {
    "undeclared_field": "declare the fact in input_schema.properties (with its type), or read a declared fact",
    "unsatisfiable": "no input that passes input_schema reaches this rule: check the value's type against the "
                     "declared type (a number compared with a string never matches) or loosen the condition",
    "shadowed": "a higher-priority rule always decides first: raise this rule's priority or narrow the other rule",
    "overlap": "both rules match some inputs: make the conditions disjoint or set their priorities on purpose",
    "falls_through": "some valid inputs match no rule and take the default outcome: add a rule or accept the default",
    "no_input_schema": "add an input_schema so missing or mistyped facts answer needs_input instead of a verdict",
    "not_observed": "no sampled input reached this rule: check its condition",
}


class LintRegion(TypedDict):
    """Where a finding holds, in words, and a fact set inside it."""

    text: str
    witness: JsonValue


class LintItem(TypedDict):
    """One distinct finding as the page lists it (`lint_items`)."""

    severity: str
    code: str
    where: str
    line: int | None  # of the rule it is about in the draft text, 1-based; None for the rulebook
    message: str
    fix: str
    count: int
    regions: list[LintRegion]


def _rule_lines(text: str) -> dict[str, int]:
    """rule id → 1-based line of its `"rule_id": …` member in the draft text."""
    lines: dict[str, int] = {}
    pattern = re.compile(r'"rule_id"\s*:\s*("(?:[^"\\]|\\.)*")')
    for number, line in enumerate(text.splitlines(), start=1):
        match = pattern.search(line)
        if match:
            try:
                lines.setdefault(json.loads(match.group(1)), number)
            except ValueError:
                continue
    return lines


def lint_items(report: Mapping[str, object] | None, text: str) -> list[LintItem]:
    """One item per distinct finding (`group_findings`: the seven fall-through regions of a
    rulebook are one item), with its `count` and `regions` (each `{text, witness}`: where, in
    words, and a fact set inside it), most severe first, then by line."""
    if not report:
        return []
    lines = _rule_lines(text)
    items: list[LintItem] = []
    findings = report.get("findings", [])
    for finding in group_findings(findings if isinstance(findings, list) else []):
        rule_ids = finding.get("rule_ids") or ([finding["rule_id"]] if finding.get("rule_id") else [])
        where = ", ".join(f"rule {rule_id}" for rule_id in rule_ids) or "the rulebook"
        if finding.get("field"):
            where += f", fact {finding['field']}"
        items.append({"severity": finding.get("severity", "info"), "code": finding.get("code", ""), "where": where,
                      "line": lines.get(rule_ids[0]) if rule_ids else None, "message": finding.get("message", ""),
                      "fix": FIXES.get(finding.get("code", ""), ""), "count": finding["count"],
                      "regions": [{"text": region["text"] or "a sampled input", "witness": region["witness"]}
                                  for region in finding["regions"]]})
    order = {"error": 0, "warning": 1, "info": 2}
    return sorted(items, key=lambda item: (order.get(item["severity"], 3), item["line"] or 0))
