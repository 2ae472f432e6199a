"""The live impact use case: what the Authoring page shows beside the editor as the author types,
the dry-run's summary of the draft against what production runs, over full history in this
process (the same `dry_run` call and figures as the Migration page and `gate dry-run`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from gate.rulebook import RulebookDocument
from workbench.services.dry_runs import DryRunService

if TYPE_CHECKING:  # the dry-run's shapes only: importing them loads the engines (Polars, Arrow), which
    # every gate worker builds this service without (tests/server/test_startup_imports.py)
    from workbench.migration.baseline import Baseline
    from workbench.migration.impact import Impact
    from workbench.migration.summary import DraftIdentity, ReviewLoad, RuleFiring, Transition

__all__ = ["LIVE_SUMMARY_KEYS", "LiveImpactService", "LiveSummary"]

# What the live impact shows of a dry-run's result (the same figures as the Migration page).
LIVE_SUMMARY_KEYS = ("draft", "baseline", "decisions_evaluated", "decisions_changed", "decisions_unreplayable", "impact",
                     "review_load", "rules", "transitions")


class LiveSummary(TypedDict):
    """A dry-run's result (`DryRunResult`) reduced to `LIVE_SUMMARY_KEYS`, in their order."""

    draft: DraftIdentity
    baseline: Baseline
    decisions_evaluated: int
    decisions_changed: int
    decisions_unreplayable: int
    impact: Impact | None
    review_load: ReviewLoad
    rules: list[RuleFiring]
    transitions: list[Transition]


class LiveImpactService:
    def __init__(self, dry_runs: DryRunService) -> None:
        self.dry_runs = dry_runs

    def summary(self, scope: str, rulebook_id: str, draft: RulebookDocument, *, dataset: str | Path,
                trust: Any) -> LiveSummary:
        """The dry-run of `draft` over `scope`'s history in the dataset (read under `trust`), against
        what production runs there, reduced to `LIVE_SUMMARY_KEYS` (DryRunError like a dry-run)."""
        run = self.dry_runs.run(draft, rulebook_id, scope=scope, dataset=dataset, trust=trust,
                                baseline=self.dry_runs.production(scope, rulebook_id))
        result = run.result
        return {"draft": result["draft"], "baseline": result["baseline"],
                "decisions_evaluated": result["decisions_evaluated"], "decisions_changed": result["decisions_changed"],
                "decisions_unreplayable": result["decisions_unreplayable"], "impact": result["impact"],
                "review_load": result["review_load"], "rules": result["rules"], "transitions": result["transitions"]}
