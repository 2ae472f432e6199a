"""The dry-run's baseline: the same history replayed one decision at a time by the scalar evaluator.

What `workbench.migration.dry_run` computes with Polars, computed here the way a straightforward
implementation would, end to end from the dataset: read the rulebook's decisions file by file
(pyarrow, only the columns needed, the policy filter pushed into the read), then for each
decision parse its stored facts (`json.loads`), evaluate them with the compiled scalar evaluator
(`gate.rulebook`, the ground truth), and tally in dictionaries; then stream the outcomes once to
find each flipped decision's latest outcome. No Polars.

`scalar_dry_run(root, rulebook_id, evaluate, rule_ids=..., flips_limit=...)` returns the figures
the dry-run reports in a normalized form, and `figures_of(dry_run_member)` puts a `migration.json`
`dry_run` member in the same form, so a benchmark (and `tests/workbench/test_scalar_dry_run_figures.py`,
at a small size) can require the two to be equal, not just similar: every count, transition, rule
transition, drift row, outcome class and its totals, the review forecast and its months, the
field changes, the unreplayable decisions, each rule's firings and the listed flips.
`decisions_scalar` (how many rows the vectorized code handed to the scalar evaluator) is how
the work was done, not a result, so it is not compared.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pyarrow.dataset as ds
import pyarrow.parquet as pq

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.migration.impact import CostModel, impact

NEEDS_INPUT_STATUS, NEEDS_INPUT_REASON = "needs_input", "INPUT_SCHEMA_FAILED"
DECISION_COLUMNS = ["decision_id", "created_at", "verdict", "matched_rule_id", "reason_code", "application_verdict",
                    "action", "facts_json"]
VERDICTS = ("yes", "no", "review")
CLASSES = ("success", "failure", "excluded", "open", "none", "unobservable")
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


class _Tally:
    """The one-by-one tallies of a replay (dictionaries and counters only)."""

    def __init__(self) -> None:
        self.total = 0
        self.transitions: Counter = Counter()
        self.rule_transitions: Counter = Counter()
        self.rules_before: Counter = Counter()       # replayed decisions, by stored rule
        self.rules_history: Counter = Counter()      # every decision, replayable or not
        self.rules_after: Counter = Counter()
        self.reasons_before: Counter = Counter()
        self.reasons_after: Counter = Counter()
        self.months: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])  # replayed, review before, after
        self.changes: Counter = Counter()
        self.needs_input = 0
        self.unreplayable: Counter = Counter()
        self.flips: dict[str, tuple] = {}          # id -> (created_at, scope, old, new, old/new rule, reason)
        self.newest = None                         # the newest decision's time (the impact's as_of)

    def add(self, row: tuple, scope: str, month: str, evaluate: Callable[[Any], Any]) -> None:
        decision_id, created_at, verdict, rule, reason, application, action, text = row
        self.total += 1
        self.newest = created_at if self.newest is None or created_at > self.newest else self.newest
        self.rules_history[rule] += 1
        if text is None:
            self.unreplayable[verdict] += 1
            return
        e = evaluate(json.loads(text))
        new = e.decision
        self.transitions[(verdict, new)] += 1
        self.rule_transitions[(verdict, new, rule, e.matched_rule_id)] += 1
        self.rules_before[rule] += 1
        self.rules_after[e.matched_rule_id] += 1
        self.reasons_before[reason] += 1
        self.reasons_after[e.reason_code] += 1
        tally = self.months[month]
        tally[0] += 1
        tally[1] += verdict == "review"
        tally[2] += new == "review"
        self.needs_input += e.status == NEEDS_INPUT_STATUS
        self.changes["status"] += (e.status == NEEDS_INPUT_STATUS) != (reason == NEEDS_INPUT_REASON)
        self.changes["verdict"] += verdict != new
        self.changes["application_verdict"] += application != e.application_verdict
        self.changes["action"] += action != e.action
        self.changes["reason_code"] += reason != e.reason_code
        self.changes["matched_rule_id"] += rule != e.matched_rule_id
        if verdict is not None and verdict != new:
            self.flips[decision_id] = (created_at, scope, verdict, new, rule, e.matched_rule_id, reason, e.reason_code)


def _latest_outcomes(root: Path, wanted: dict) -> dict[str, tuple]:
    """decision id -> ((reported_at, receipt_id), status) of its latest outcome, for `wanted` ids."""
    latest: dict[str, tuple] = {}
    for path, _scope, _month in _files(root, "outcomes"):
        table = pq.read_table(path, columns=OUTCOME_COLUMNS)
        columns = [table.column(name).to_pylist() for name in OUTCOME_COLUMNS]
        for decision_id, reported_at, receipt_id, status in zip(*columns, strict=True):
            if decision_id in wanted:
                key = (reported_at, receipt_id)
                seen = latest.get(decision_id)
                if seen is None or key > seen[0]:
                    latest[decision_id] = (key, status)
    return latest


def _iso(value: Any) -> str:
    return f"{value:%Y-%m-%dT%H:%M:%S}.{value.microsecond // 1000:03d}Z"


def _flip_rows(tally: _Tally, latest: dict[str, tuple]) -> list[dict[str, Any]]:
    """Every flip with its latest outcome status and class (`unobservable` after a stored no)."""
    rows = []
    for decision_id, (created_at, scope, old, new, old_rule, new_rule, old_reason, new_reason) in tally.flips.items():
        status = latest[decision_id][1] if decision_id in latest else None
        if old == "no":
            name = "unobservable"
        elif status is None:
            name = "none"
        else:
            name = OUTCOME_EFFECTIVENESS_CLASS.get(status, "unknown")
        rows.append({"decision_id": decision_id, "created_at": _iso(created_at), "scope": scope,
                     "old_verdict": old, "new_verdict": new, "old_rule": old_rule, "new_rule": new_rule,
                     "old_reason": old_reason, "new_reason": new_reason, "outcome_status": status,
                     "outcome_class": name})
    return rows


def scalar_dry_run(root: Path, rulebook_id: str, evaluate: Callable[[Any], Any], *,
                   rule_ids: list[str] | None = None, flips_limit: int = 200) -> dict[str, Any]:
    """Every figure of the dry-run, one decision at a time. `rule_ids` (the draft's rules in
    evaluation order) adds each rule's firings; `flips_limit` bounds the listed flips as the
    dry-run does (newest first)."""
    tally = _Tally()
    wanted = ds.field("policy_id") == rulebook_id
    for path, scope, month in _files(root, "decisions"):
        table = pq.read_table(path, columns=DECISION_COLUMNS, filters=wanted)
        for row in zip(*(table.column(name).to_pylist() for name in DECISION_COLUMNS), strict=True):
            tally.add(row, scope, month, evaluate)
    flips = _flip_rows(tally, _latest_outcomes(root, tally.flips))
    outcome_classes = Counter((row["old_verdict"], row["new_verdict"], row["outcome_class"]) for row in flips)
    flips.sort(key=lambda row: row["decision_id"])
    flips.sort(key=lambda row: row["created_at"], reverse=True)
    figures = {
        "decisions_total": tally.total,
        "transitions": {k: v for k, v in tally.transitions.items() if v},
        "rule_transitions": dict(tally.rule_transitions),
        "drift_by_rule": _drift(tally.rules_before, tally.rules_after),
        "drift_by_reason": _drift(tally.reasons_before, tally.reasons_after),
        "review_by_month": {m: tuple(v) for m, v in tally.months.items()},
        "field_changes": {k: int(v) for k, v in tally.changes.items()},
        "unreplayable": {k: v for k, v in tally.unreplayable.items() if v},
        "outcome_classes": {k: v for k, v in outcome_classes.items() if v},
        "flips_listed": flips[:flips_limit],
    }
    figures.update(_totals(tally, outcome_classes))
    figures["impact"] = _impact(tally, flips)
    if rule_ids is not None:
        rules = {rule_id: (tally.rules_history[rule_id], tally.rules_after[rule_id]) for rule_id in rule_ids}
        figures["rules"] = rules
        figures["rules_never"] = ([r for r in rule_ids if rules[r][0] == 0], [r for r in rule_ids if rules[r][1] == 0])
    return figures


def _totals(tally: _Tally, outcome_classes: Counter) -> dict[str, Any]:
    """The dry-run's totals, each computed from the one-by-one tallies."""
    replayed = sum(tally.transitions.values())
    changed = sum(count for (old, new), count in tally.transitions.items() if old != new)
    before = sum(count for (old, _new), count in tally.transitions.items() if old == "review")
    after = sum(count for (_old, new), count in tally.transitions.items() if new == "review")
    months = len(tally.months) or 1
    cell = {(old, new): {name: outcome_classes.get((old, new, name), 0) for name in CLASSES}
            for old in VERDICTS for new in VERDICTS if old != new}
    return {
        "counts": {"decisions_evaluated": replayed, "decisions_unreplayable": sum(tally.unreplayable.values()),
                   "unreplayable_count": sum(tally.unreplayable.values()),
                   "decisions_changed": changed, "flips": changed, "needs_input": tally.needs_input,
                   "decisions_reason_changed": tally.changes["reason_code"],
                   "decisions_rule_changed": tally.changes["matched_rule_id"]},
        "review_load": {"before": before, "after": after, "delta": after - before,
                        "relative_change": None if before == 0 else round((after - before) / before, 6),
                        "months": len(tally.months), "per_month_before": round(before / months, 3),
                        "per_month_after": round(after / months, 3)},
        "outcome_totals": {
            "caught_failures": cell[("yes", "no")]["failure"] + cell[("review", "no")]["failure"],
            "blocked_successes": cell[("yes", "no")]["success"] + cell[("review", "no")]["success"],
            "unobserved_new_approvals": sum(cell[("no", "yes")].values()),
            "unobserved_new_reviews": sum(cell[("no", "review")].values()),
            "flips_without_outcome": sum(c["none"] for c in cell.values()),
            "by_transition_count": {key: sum(c.values()) for key, c in cell.items()},
        },
    }


def _impact(tally: _Tally, flips: list[dict[str, Any]]) -> dict[str, Any]:
    """`dry_run.impact` from these tallies: each flip classed young by its own time against the
    newest decision, fed to the one impact function (workbench.migration.impact)."""
    cost = CostModel()
    cutoff = _iso(tally.newest - timedelta(days=cost.outcome_horizon_days)) if tally.newest else ""
    classes = Counter((row["old_verdict"], row["new_verdict"], row["outcome_class"], row["created_at"] > cutoff)
                      for row in flips)
    into = sum(c for (old, new), c in tally.transitions.items() if new == "review" and old != "review")
    out = sum(c for (old, new), c in tally.transitions.items() if old == "review" and new != "review")
    return impact(dict(classes), sum(tally.transitions.values()), cost,
                  as_of=_iso(tally.newest) if tally.newest else None, review_in=into, review_out=out)


def _drift(before: Counter, after: Counter) -> dict:
    return {key: (before.get(key, 0), after.get(key, 0)) for key in set(before) | set(after)}


def figures_of(member: dict[str, Any]) -> dict[str, Any]:
    """A `migration.json` `dry_run` member in `scalar_dry_run`'s form (`rules` too, which
    `scalar_dry_run` gives when asked with `rule_ids`)."""
    outcomes, load = member["outcomes"], member["review_load"]
    return {
        "decisions_total": member["decisions_total"],
        "transitions": {(t["from"], t["to"]): t["count"] for t in member["transitions"] if t["count"]},
        "rule_transitions": {(t["from"], t["to"], t["old_rule"], t["new_rule"]): t["count"]
                             for t in member["rule_transitions"]},
        "drift_by_rule": {r["rule_id"]: (r["before"], r["after"]) for r in member["drift_by_rule"]},
        "drift_by_reason": {r["reason_code"]: (r["before"], r["after"]) for r in member["drift_by_reason"]},
        "review_by_month": {m["month"]: (m["replayed"], m["review_before"], m["review_after"])
                            for m in load["by_month"]},
        "field_changes": dict(member["field_changes"]),
        "unreplayable": {k: v for k, v in member["unreplayable"]["by_verdict"].items() if v},
        "outcome_classes": {(c["from"], c["to"], name): c[name] for c in outcomes["by_transition"]
                            for name in CLASSES if c[name]},
        "flips_listed": member["flips"]["listed"],
        "counts": {"decisions_evaluated": member["decisions_evaluated"],
                   "decisions_unreplayable": member["decisions_unreplayable"],
                   "unreplayable_count": member["unreplayable"]["count"],
                   "decisions_changed": member["decisions_changed"], "flips": member["flips"]["count"],
                   "needs_input": member["needs_input"],
                   "decisions_reason_changed": member["decisions_reason_changed"],
                   "decisions_rule_changed": member["decisions_rule_changed"]},
        "review_load": {name: load[name] for name in ("before", "after", "delta", "relative_change", "months",
                                                      "per_month_before", "per_month_after")},
        "outcome_totals": {**{name: outcomes[name] for name in (
            "caught_failures", "blocked_successes", "unobserved_new_approvals", "unobserved_new_reviews",
            "flips_without_outcome")},
            "by_transition_count": {(c["from"], c["to"]): c["count"] for c in outcomes["by_transition"]}},
        "rules": {r["rule_id"]: (r["fired_in_history"], r["fires_under_draft"]) for r in member["rules"]},
        "impact": member["impact"],
        "rules_never": (member["rules_never_fired_in_history"], member["rules_never_firing_under_draft"]),
    }
