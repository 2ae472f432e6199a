"""Each rule's history: how often it decided, its share of the policy's decisions, and how the
decisions it decided turned out (the effectiveness engine's success rate and 95% Wilson interval
per stored `matched_rule_id`, so the figure means what the Effectiveness card means).

The Authoring page's rule table shows one row per draft rule beside these figures; a rule the
history never saw has none (a new rule, or a renamed one: history is keyed by rule id).
"""

from __future__ import annotations

from typing import TypedDict

import polars as pl

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS as CLASSES
from workbench.engines import effectiveness as effectiveness_engine

MIN_SAMPLE = 10  # fewest resolved decisions before a rule's success rate is judged (the reports' default)


class RuleHistory(TypedDict):
    """One rule's figures over the history read (every version of the policy in the scope)."""

    rule_id: str | None  # None: the default outcome
    decisions: int
    share: float | None  # of every decision of the policy in the history read
    resolved: int  # decisions whose latest outcome is a success or a failure
    success_rate: float | None
    success_rate_interval: list[float | None] | None  # 95% Wilson
    judged: bool  # resolved >= MIN_SAMPLE
    first_at: str | None
    last_at: str | None


def rule_history(decisions: pl.LazyFrame, outcomes: pl.LazyFrame) -> list[RuleHistory]:
    """Per stored matched rule (most decisions first): decisions, share and outcome figures."""
    groups = effectiveness_engine.by_group(decisions, outcomes, CLASSES, "matched_rule_id", min_sample=MIN_SAMPLE)
    total = sum(body["sample"]["decisions_considered"] for _, body in groups)
    rows: list[RuleHistory] = []
    for rule_id, body in groups:
        metrics, sample = body["metrics"], body["sample"]
        n = int(sample["decisions_considered"])
        rows.append({
            "rule_id": rule_id, "decisions": n, "share": round(n / total, 6) if total else None,
            "resolved": int(metrics["resolved_decisions"]), "success_rate": metrics["success_rate"],
            "success_rate_interval": metrics["success_rate_interval"],
            "judged": body["recommendation"] != "insufficient_data",
            "first_at": sample["first_decision_at"], "last_at": sample["last_decision_at"],
        })
    return rows
