"""What every report states about its sample, as a type (`workbench.engines.common.sample_block`).
A module of its own so that report modules below the policy reports (the hold report) can name it
without importing them."""

from __future__ import annotations

from typing import TypedDict


class Sample(TypedDict):
    """What every report states about its sample (`workbench.engines.common.sample_block`)."""

    decisions_considered: int
    decisions_with_outcome: int
    outcome_records: int
    latest_outcome_counts: dict[str, int]
    outcome_classes: dict[str, int]
    first_decision_at: str | None
    last_decision_at: str | None
