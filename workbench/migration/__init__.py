"""Rulebook migration dry-runs: a draft re-evaluated over every historical decision of its rulebook.

Public interface (the CLI `gate dry-run` and the dashboard call these):

- `dry_run(draft, rulebook_id, scope=…, dataset=… | ledger=…, created_at=…) -> DryRun`:
  validate, load the history, replay it vectorized (`workbench.engines.rulebook_polars`, with
  the scalar evaluator for rows the typed columns cannot hold exactly) and summarize into a
  typed `DryRunResult` plus an unsigned `rulebook_migration_v1` manifest.
- `write_dry_run(out, manifest, signer)`: sign with the service's receipt key and write
  `migration.json`, `report.md`, `report.html`.
- `verify_manifest(manifest, anchors, draft=…, dataset_manifest=…)`: recompute the hashes and
  check the signature against trust anchors.
- `DryRunError`: every bad input (`code`, `message`, `errors` with exact schema paths).
"""

from workbench.migration.errors import DryRunError
from workbench.migration.manifest import sign_manifest, verify_manifest
from workbench.migration.run import DryRun, dry_run, write_dry_run
from workbench.migration.summary import DryRunResult

__all__ = ["DryRun", "DryRunError", "DryRunResult", "dry_run", "sign_manifest", "verify_manifest", "write_dry_run"]
