"""The live impact use case: what the Authoring page shows beside the editor as the author types,
the dry-run's summary of the draft against what production runs, over full history in this
process (the same `dry_run` call and figures as the Migration page and `gate dry-run`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.services.dry_runs import DryRunService

__all__ = ["LIVE_SUMMARY_KEYS", "LiveImpactService"]

# What the live impact shows of a dry-run's result (the same figures as the Migration page).
LIVE_SUMMARY_KEYS = ("draft", "baseline", "decisions_evaluated", "decisions_changed", "decisions_unreplayable", "impact",
                     "review_load", "rules", "transitions")


class LiveImpactService:
    def __init__(self, dry_runs: DryRunService) -> None:
        self.dry_runs = dry_runs

    def summary(self, scope: str, rulebook_id: str, draft: dict[str, Any], *, dataset: str | Path,
                trust: Any) -> dict[str, Any]:
        """The dry-run of `draft` over `scope`'s history in the dataset (read under `trust`), against
        what production runs there, reduced to `LIVE_SUMMARY_KEYS` (DryRunError like a dry-run)."""
        run = self.dry_runs.run(draft, rulebook_id, scope=scope, dataset=dataset, trust=trust,
                                baseline=self.dry_runs.production(scope, rulebook_id))
        result = run.result.to_dict()
        return {key: result[key] for key in LIVE_SUMMARY_KEYS}
