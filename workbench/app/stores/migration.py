"""The Migration and Authoring pages' runs over the dataset's history: the dry-run, the live
impact, the sweep and a field's spread (the services `gate dry-run` and `gate sweep` call), the
rule history, the exact diff and the signed export of a result."""

from __future__ import annotations

import copy
from pathlib import Path

from gate.rulebook import RulebookDocument, checked_rulebook
from gate.rulebook.analysis import DiffReportJSON, semantic_diff
from workbench.app.stores.shared import StoreShared
from workbench.dataset.load import from_dataset
from workbench.dataset.trust import Trust, Untrusted
from workbench.migration.errors import DryRunError
from workbench.migration.run import DryRun
from workbench.migration.sweep import FieldSpread, Sweep
from workbench.reports.rules import RuleHistory, rule_history
from workbench.services.impact import LiveSummary

# What a dry-run compares the draft with (`MigrationRuns.dry_run`): the version production runs, or the history.
CURRENT, HISTORY = "current", "history"


class MigrationRuns:
    """The runs over history of the one `WorkbenchStore` (`StoreShared`)."""

    def __init__(self, store: StoreShared) -> None:
        self.store = store

    def dry_run(self, scope: str, rulebook_id: str, draft: RulebookDocument, *, on_cluster: bool = True,
                against: str = CURRENT) -> DryRun:
        """The dry-run of `gate dry-run` (the same service) over this scope's history in the
        dataset, on the workbench's cluster when it has one and `on_cluster`. `against`: CURRENT
        compares the draft with what production runs in the scope (`ReleaseService.running_rulebook`,
        replayed over the same history; the history where the scope has no version), HISTORY with
        the verdicts stored when each decision was made (workbench.migration.baseline). Raises
        DryRunError for a bad draft, an unknown rulebook or empty history, or an unreachable cluster."""
        if against not in (CURRENT, HISTORY):
            raise DryRunError("USAGE", f"compare with {CURRENT!r} or {HISTORY!r}, not {against!r}")
        dry_runs = self.store.services.dry_runs
        baseline = dry_runs.production(scope, rulebook_id) if against == CURRENT else None
        # The dataset is read only as trusted (signed by a key this gate trusts, or unsigned by opt-in).
        cluster = self.store.cluster if on_cluster and self.store.cluster else None
        return dry_runs.run(draft, rulebook_id, scope=scope, dataset=self.store.dataset_dir, trust=self._run_trust(),
                            cluster=cluster, baseline=baseline)

    def _run_trust(self) -> Trust:
        """`trust` for a dry-run or a sweep: DryRunError USAGE when it cannot be established."""
        try:
            return self.store.trust()
        except Untrusted as error:
            raise DryRunError("USAGE", str(error)) from None

    def impact_summary(self, scope: str, rulebook_id: str, draft: RulebookDocument) -> LiveSummary:
        """The live impact (`workbench.services.impact`): the dry-run's summary of the draft against
        what production runs, over full history in this process (the same figures as the Migration
        page and `gate dry-run`), beside the Authoring page's editor. Raises DryRunError like `dry_run`."""
        return self.store.services.impact.summary(scope, rulebook_id, draft, dataset=self.store.dataset_dir,
                                                  trust=self._run_trust())

    def sweep(self, scope: str, rulebook_id: str, draft: RulebookDocument, leaf: tuple[str, str, int],
              thresholds: list[float]) -> Sweep:
        """`gate sweep`'s service over this scope's history in the dataset, compared with what
        production runs there, as the live impact (DryRunError)."""
        trust = self._run_trust()
        sweeps, baseline = self.store.services.sweeps, self.store.services.dry_runs.production(scope, rulebook_id)
        return sweeps.sweep(draft, rulebook_id, leaf, thresholds, scope=scope, dataset=self.store.dataset_dir,
                            trust=trust, baseline=baseline)

    def field_spread(self, scope: str, rulebook_id: str, field: str) -> FieldSpread:
        """How one fact is spread over the rulebook's history in this scope (`sweep.field_spread`:
        what a sweep's default range is drawn from), cached by manifest (DryRunError)."""
        trust = self._run_trust()
        spread: FieldSpread = self.store._remembered(
            (self.store._manifest_key(), "spread", scope, rulebook_id, field),
            lambda: self.store.services.sweeps.field_spread(rulebook_id, field, scope=scope,
                                                            dataset=self.store.dataset_dir, trust=trust))
        return spread

    def rule_history(self, scope: str, policy_id: str) -> list[RuleHistory]:
        """Each stored matched rule of the policy over its whole history in the scope: decisions,
        share and success rate with its interval (`workbench.reports.rules`), cached by manifest."""
        manifest_key = self.store._manifest_key()

        def compute() -> list[RuleHistory]:
            frames = from_dataset(self.store.dataset_dir, scopes=[scope], policy_id=policy_id, trust=self.store.trust())
            return rule_history(frames.decisions, frames.outcomes)

        rows: list[RuleHistory] = self.store._remembered((manifest_key, "rules", scope, policy_id), compute)
        return copy.deepcopy(rows)

    def semantic_diff(self, scope: str, rulebook_id: str, draft: RulebookDocument) -> DiffReportJSON | None:
        """The exact diff from the scope's current version to the draft (None without one)."""
        current = self.store.current_rulebook(scope, rulebook_id)
        return semantic_diff(checked_rulebook(current), draft).to_json() if current is not None else None

    def export_migration(self, run: DryRun, out: Path) -> dict[str, str]:
        """Sign (with the receipt key) and write the manifest and the reports; name → path. The
        dry-run service's rule, as `gate dry-run` writes (`workbench.signing.result_signer`):
        SigningRefused, nothing written, without a key while signing is required or over a stale
        dataset (unless `allow_stale`)."""
        self.store.services.dry_runs.write(run, out, allow_stale=self.store.allow_stale)
        return {name: str(Path(out) / name) for name in ("migration.json", "report.md", "report.html")}
