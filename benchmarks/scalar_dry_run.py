"""The dry-run's baseline: the same history replayed one decision at a time by the scalar evaluator.

What `workbench.migration.dry_run` computes with Polars, computed here the way a straightforward
implementation would, end to end from the dataset: read the rulebook's decisions file by file
(pyarrow, only the columns needed, the policy filter pushed into the read), then for each
decision parse its stored facts (`json.loads`), evaluate them with the compiled scalar evaluator
(`gate.rulebook`, the ground truth), and tally in dictionaries; then stream the outcomes once to
find each flipped decision's latest outcome. No Polars.

`scalar_dry_run(root, rulebook_id, evaluate)` returns the figures the dry-run reports in a
normalized form, and `figures_of(dry_run_member)` puts a `migration.json` `dry_run` member in the
same form, so a benchmark can require the two to be equal (every transition, rule transition,
drift row, outcome class, month and field change), not just similar.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Callable
from urllib.parse import unquote

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS

NEEDS_INPUT_STATUS, NEEDS_INPUT_REASON = "needs_input", "INPUT_SCHEMA_FAILED"
DECISION_COLUMNS = ["decision_id", "verdict", "matched_rule_id", "reason_code", "application_verdict", "action",
                    "facts_json"]
OUTCOME_COLUMNS = ["decision_id", "reported_at", "receipt_id", "status"]


def _files(root: Path, table: str) -> list[tuple[str, str, str]]:
    """(path, scope, month) of a table's files: those the manifest lists, else every part file
    (as `workbench.migration.history` reads them)."""
    manifest = json.loads((root / "manifest.json").read_text())
    listed = manifest.get("tables", {}).get(table, {}).get("files")
    paths = ([entry["path"] for entry in listed] if listed is not None
             else sorted(p.relative_to(root).as_posix() for p in (root / table).glob("**/*.parquet")))
    out = []
    for path in paths:
        parts = path.split("/")
        out.append((str(root / path), unquote(parts[-3][len("scope="):]), parts[-2][len("month="):]))
    return out


def scalar_dry_run(root: Path, rulebook_id: str, evaluate: Callable[[Any], Any]) -> dict[str, Any]:
    transitions: Counter = Counter()
    rule_transitions: Counter = Counter()
    rules_before: Counter = Counter()
    rules_after: Counter = Counter()
    reasons_before: Counter = Counter()
    reasons_after: Counter = Counter()
    months: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # replayed, review before, after
    changes: Counter = Counter()
    unreplayable: Counter = Counter()
    flips: dict[str, tuple[str, str]] = {}
    total = 0
    wanted = ds.field("policy_id") == rulebook_id
    for path, _scope, month in _files(root, "decisions"):
        table = pq.read_table(path, columns=DECISION_COLUMNS, filters=wanted)
        columns = [table.column(name).to_pylist() for name in DECISION_COLUMNS]
        for decision_id, verdict, rule, reason, application, action, text in zip(*columns):
            total += 1
            if text is None:
                unreplayable[verdict] += 1
                continue
            e = evaluate(json.loads(text))
            new = e.decision
            transitions[(verdict, new)] += 1
            rule_transitions[(verdict, new, rule, e.matched_rule_id)] += 1
            rules_before[rule] += 1
            rules_after[e.matched_rule_id] += 1
            reasons_before[reason] += 1
            reasons_after[e.reason_code] += 1
            tally = months[month]
            tally[0] += 1
            tally[1] += verdict == "review"
            tally[2] += new == "review"
            changes["status"] += (e.status == NEEDS_INPUT_STATUS) != (reason == NEEDS_INPUT_REASON)
            changes["verdict"] += verdict != new
            changes["application_verdict"] += application != e.application_verdict
            changes["action"] += action != e.action
            changes["reason_code"] += reason != e.reason_code
            changes["matched_rule_id"] += rule != e.matched_rule_id
            if verdict is not None and verdict != new:
                flips[decision_id] = (verdict, new)
    latest: dict[str, tuple] = {}
    for path, _scope, _month in _files(root, "outcomes"):
        table = pq.read_table(path, columns=OUTCOME_COLUMNS)
        columns = [table.column(name).to_pylist() for name in OUTCOME_COLUMNS]
        for decision_id, reported_at, receipt_id, status in zip(*columns):
            if decision_id in flips:
                key = (reported_at, receipt_id)
                seen = latest.get(decision_id)
                if seen is None or key > seen[0]:
                    latest[decision_id] = (key, status)
    outcome_classes: Counter = Counter()
    for decision_id, (old, new) in flips.items():
        if old == "no":
            name = "unobservable"
        elif decision_id not in latest:
            name = "none"
        else:
            name = OUTCOME_EFFECTIVENESS_CLASS.get(latest[decision_id][1], "unknown")
        outcome_classes[(old, new, name)] += 1
    return {
        "decisions_total": total,
        "transitions": {k: v for k, v in transitions.items() if v},
        "rule_transitions": dict(rule_transitions),
        "drift_by_rule": _drift(rules_before, rules_after),
        "drift_by_reason": _drift(reasons_before, reasons_after),
        "review_by_month": {m: tuple(v) for m, v in months.items()},
        "field_changes": {k: int(v) for k, v in changes.items()},
        "unreplayable": {k: v for k, v in unreplayable.items() if v},
        "outcome_classes": {k: v for k, v in outcome_classes.items() if v},
    }


def _drift(before: Counter, after: Counter) -> dict:
    return {key: (before.get(key, 0), after.get(key, 0)) for key in set(before) | set(after)}


def figures_of(member: dict[str, Any]) -> dict[str, Any]:
    """A `migration.json` `dry_run` member in `scalar_dry_run`'s form."""
    classes = ("success", "failure", "excluded", "open", "none", "unobservable")
    return {
        "decisions_total": member["decisions_total"],
        "transitions": {(t["from"], t["to"]): t["count"] for t in member["transitions"] if t["count"]},
        "rule_transitions": {(t["from"], t["to"], t["old_rule"], t["new_rule"]): t["count"]
                             for t in member["rule_transitions"]},
        "drift_by_rule": {r["rule_id"]: (r["before"], r["after"]) for r in member["drift_by_rule"]},
        "drift_by_reason": {r["reason_code"]: (r["before"], r["after"]) for r in member["drift_by_reason"]},
        "review_by_month": {m["month"]: (m["replayed"], m["review_before"], m["review_after"])
                            for m in member["review_load"]["by_month"]},
        "field_changes": dict(member["field_changes"]),
        "unreplayable": {k: v for k, v in member["unreplayable"]["by_verdict"].items() if v},
        "outcome_classes": {(c["from"], c["to"], name): c[name] for c in member["outcomes"]["by_transition"]
                            for name in classes if c[name]},
    }
