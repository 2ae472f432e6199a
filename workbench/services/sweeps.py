"""The sweep use case: one numeric threshold of a draft rule swept over history (`gate sweep`,
the Authoring page's sweep), and the spread of a fact a sweep's default range is drawn from."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from workbench.migration.impact import CostModel
    from workbench.migration.sweep import FieldSpread, Sweep
    from workbench.services.dry_runs import Baseline

__all__ = ["SweepService"]


class SweepService:
    """Sweeps over a dataset (read under the caller's trust) or the live `ledger`."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger

    def sweep(self, draft: object, rulebook_id: str, leaf: tuple[str, str, int], thresholds: Sequence[float], *,
              scope: str | None = None, dataset: str | Path | None = None, trust: Any = None,
              cost: CostModel | None = None, baseline: Baseline | None = None) -> Sweep:
        """The threshold of `leaf` (rule id, field, occurrence) swept over `thresholds`, each point
        compared with `baseline` (else the stored verdicts) as the dry-run compares (DryRunError)."""
        from workbench.migration.sweep import sweep

        return sweep(draft, rulebook_id, leaf, thresholds, scope=scope, dataset=dataset,
                     ledger=self.ledger if dataset is None else None, anchors=trust, cost=cost,
                     baseline=baseline[0] if baseline else None, baseline_source=baseline[1] if baseline else None)

    def field_spread(self, rulebook_id: str, field: str, *, scope: str | None = None,
                     dataset: str | Path | None = None, trust: Any = None) -> FieldSpread:
        """How `field` is spread over the rulebook's history (`workbench.migration.sweep.field_spread`)."""
        from workbench.migration.sweep import field_spread

        return field_spread(rulebook_id, field, scope=scope, dataset=dataset,
                            ledger=self.ledger if dataset is None else None, anchors=trust)
