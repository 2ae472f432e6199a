"""`gate export --out DIR --rebuild-rollups`: recompute every partition's report rollups.

A rebuild is a run that writes no rows: the rollups of every (scope, month) decision partition
are computed again from the listed rows (`workbench.dataset.rollups.update(every_partition=True)`,
each earlier file checked against its digest first), written as `rollups/run-<run>/` of a new run
number, and the manifest is committed (sealed, signed as the export signs it) with that run and
`last_run.rollups_rebuilt`. Readers of the previous manifest keep its rollups until the next run.
`run_chunks` computes the chunks and `run_checks` checks the listed files elsewhere
(`workbench.cluster`: on a cluster's workers); the rollups are the same either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from datetime import UTC, datetime

import pyarrow as pa

from gate.clock import iso_ms
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.dataset import integrity, rollups
from workbench.dataset.location import DatasetError, open_location, read_manifest, write_manifest
from workbench.dataset.manifest import DatasetManifest, new_rows_of
from workbench.dataset.schema import TABLES

__all__ = ["rebuild_rollups"]


def rebuild_rollups(uri: str, *, signer: ReceiptSigner | None, now: datetime | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    run_chunks: rollups.RunChunks | None = None,
                    run_checks: rollups.RunChecks | None = None, anchors: TrustAnchors | None = None
                    ) -> DatasetManifest:
    """Recompute the rollups of every partition of the dataset at `uri` and commit them as a new
    run; returns the committed manifest. DatasetError (nothing committed) when the location holds
    no committed export, its manifest does not match its `dataset_hash`, or a listed file no
    longer matches its digest, or, with `anchors`, it is not signed by one of them (`integrity.build_on`).
    A synthetic dataset stays unsigned."""
    from workbench.dataset.export import _remove_uncommitted  # the export's own clean-up of failed runs

    now = now or datetime.now(UTC)
    location = open_location(uri)
    manifest = read_manifest(location, required=True)
    if manifest is None:  # required: read_manifest raises instead
        raise DatasetError(f"{uri}: no manifest")
    if manifest.get("dataset_hash") != integrity.dataset_hash(manifest):
        raise DatasetError(f"{uri}: the manifest does not match its dataset_hash (changed after it was written)")
    integrity.build_on(manifest, signer, anchors, uri)
    runs = manifest.get("runs")
    if not isinstance(runs, int) or runs < 1:
        raise DatasetError(f"{uri}: no committed export run; nothing to rebuild")
    _remove_uncommitted(location, runs)
    run = runs + 1
    try:
        member = rollups.update(location, manifest, run, [], OUTCOME_EFFECTIVENESS_CLASS, outcome_partitions=(),
                                progress=progress, every_partition=True, run_chunks=run_chunks,
                                run_checks=run_checks)
    except BaseException:
        with contextlib.suppress(OSError, pa.ArrowException):
            rollups.remove_runs(location, newer_than=runs)
        raise
    last = manifest.get("last_run")
    before = last.get("receipts_reported_before") if isinstance(last, dict) else None
    manifest["rollups"], manifest["runs"], manifest["updated_at"] = member, run, iso_ms(now)
    manifest["previous_dataset_hash"] = manifest.get("dataset_hash")
    manifest["last_run"] = {"run": run, "at": iso_ms(now), "rollups_rebuilt": True,
                            "new_rows": new_rows_of(dict.fromkeys(TABLES, 0), {}), "scopes": [],
                            "receipts_reported_before": before}
    manifest = integrity.seal(manifest, None if manifest.get("synthetic") else signer)
    write_manifest(location, manifest)
    with contextlib.suppress(OSError, pa.ArrowException):
        rollups.remove_runs(location, older_than=run - 1)
    return manifest
