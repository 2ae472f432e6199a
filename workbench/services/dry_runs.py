"""The dry-run use case: a draft rulebook replayed over history, and its signed manifest written.

`gate dry-run` and the workbench's Migration page run and write here. One signing rule for the
result (`workbench.signing.result_signer`): signed with the gate's receipt key; refused
(`SigningRefused`, nothing written) without a key while signing is required, or over a dataset
that lags the live ledger past the bound unless the caller allows it (`allow_stale`: the manifest
then names the lag).
"""

from __future__ import annotations

from contextlib import nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gate.clock import Clock
    from gate.keys.config import LiveSigning, SigningSetup
    from gate.ledger import Ledger
    from gate.services.releases import ReleaseService
    from workbench.migration.impact import CostModel
    from workbench.migration.manifest import MigrationManifest
    from workbench.migration.run import DryRun

__all__ = ["Baseline", "DryRunService"]

# A version a draft is compared with: the parsed rulebook and where it came from.
Baseline = tuple[object, str]  # the version's JSON as read, not yet checked: `load_draft` validates it


class DryRunService:
    """Dry-runs over `ledger` (None: dataset runs only), timestamped by `clock`, signed with
    `signing`; `releases` says what production runs (None: nothing runs, as without a ledger)."""

    def __init__(self, signing: SigningSetup | LiveSigning, clock: Clock, ledger: Ledger | None = None,
                 releases: ReleaseService | None = None) -> None:
        self.signing, self.clock, self.ledger, self.releases = signing, clock, ledger, releases

    def production(self, scope: str, rulebook_id: str) -> Baseline | None:
        """What production runs for the rulebook in `scope` (`ReleaseService.running_rulebook`: the
        active release version, else the newest inline version), None where nothing runs there."""
        return self.releases.running_rulebook(scope, rulebook_id) if self.releases is not None else None

    def check_signing(self) -> None:
        """Refuse (`SigningRefused`) before any work when the result could not be signed."""
        from workbench.signing import result_signer

        result_signer(self.signing)

    def run(self, draft: object, rulebook_id: str, *, scope: str | None = None, dataset: str | Path | None = None,
            trust: Any = None, cluster: str | None = None, baseline: Baseline | None = None,
            flips_limit: int = 200, flips_path: Path | None = None, cost: CostModel | None = None) -> DryRun:
        """`draft` replayed over the rulebook's history in `scope` (every scope when None): the
        dataset read under `trust` when given, else the live ledger; on the Dask cluster at address
        `cluster` when given (DryRunError CLUSTER_UNAVAILABLE when it cannot be reached). Compared
        with `baseline` (replayed over the same history), else with the verdicts stored then."""
        from gate.clock import iso_ms
        from workbench.cluster import ClusterError, connect
        from workbench.migration import DryRunError, dry_run

        try:
            with connect(cluster) if cluster is not None else nullcontext() as client:
                return dry_run(draft, rulebook_id, scope=scope, dataset=dataset,
                               ledger=self.ledger if dataset is None else None, created_at=iso_ms(self.clock.now()),
                               flips_limit=flips_limit, flips_path=flips_path, anchors=trust, cost=cost,
                               cluster=client, baseline=baseline[0] if baseline else None,
                               baseline_source=baseline[1] if baseline else None)
        except ClusterError as error:
            raise DryRunError("CLUSTER_UNAVAILABLE", str(error)) from None

    def write(self, run: DryRun, out: str | Path, *, allow_stale: bool = False) -> MigrationManifest:
        """Sign (the rule above) and write the run's `migration.json`, `report.md` and `report.html`
        into `out`; the manifest as written. `SigningRefused`, nothing written, when refused."""
        from workbench.migration import write_dry_run
        from workbench.signing import result_signer

        return write_dry_run(out, run.manifest, result_signer(self.signing, run.history.source, allow_stale=allow_stale))
