"""Whole-history policy reports with the engines' partials computed on a cluster.

`cluster_frames(client, DIR, policy_id=…)` is `workbench.dataset.load.from_dataset` for a
whole-history read (`limit` None) whose `Frames.rollup` is a `ClusterView`: the policy reports
(`workbench.reports.policy`) take their merged partials from it, as they take them from the
dataset's stored rollups. The view maps, over the selection's decision chunks (the rollup
rebuild's units, `workbench.dataset.rollups.plan_chunks`: one scope, at most BATCH_DECISIONS
decisions, with every outcome record of them), the rollups' own `chunk_partials` (the
effectiveness, anomaly and benchmark engines' `partial`s) or the confidence engine's `partial`
on the workers; the client stacks and merges them and the report finalizes them. Before that,
every file the single-process read would check is checked on the workers, one task per
(scope, month) partition: a changed or missing file refuses the report (DatasetError).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial as bind
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl

from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from workbench.cluster import by_partition, run_all, tasks
from workbench.dataset import integrity, rollups
from workbench.dataset import location as dataset
from workbench.dataset.load import Frames, empty, open_dataset
from workbench.dataset.manifest import DatasetManifest
from workbench.engines import confidence as confidence_engine

if TYPE_CHECKING:
    from distributed import Client

__all__ = ["ClusterView", "cluster_frames"]


@dataclass
class ClusterView:
    """The partials of one policy (optionally one version) in some scopes (all when None),
    computed on the cluster when a report first asks (`partial`, `by_month`, `confidence`)."""

    client: Client
    uri: str
    chunks: list[rollups.Chunk]
    policy_id: str
    policy_version: str | None
    scopes: tuple[str, ...] | None
    _rows: rollups.RollupView | None = field(default=None, repr=False)

    def usable(self, classes: Mapping[str, str]) -> bool:
        """The partials are computed with the caller's mapping (the reports pass CLASSES)."""
        return dict(classes) == dict(OUTCOME_EFFECTIVENESS_CLASS)

    def rows(self) -> rollups.RollupView:
        """The rollup rows of every chunk (effectiveness, anomalies, benchmarks), computed once."""
        if self._rows is None:
            task = bind(tasks.rollup_rows, self.uri, dict(OUTCOME_EFFECTIVENESS_CLASS), self.policy_id)
            fresh: dict[str, list[pl.DataFrame]] = defaultdict(list)
            for partials in run_all(self.client, task, self.chunks):
                for name, frames in partials.items():
                    fresh[name].extend(frames)
            self._rows = rollups.RollupView.in_memory(fresh, OUTCOME_EFFECTIVENESS_CLASS, policy_id=self.policy_id,
                                                      policy_version=self.policy_version, scopes=self.scopes)
        return self._rows

    def partial(self, kind: str, *, own_scope: str | None = None) -> dict[str, pl.DataFrame]:
        return self.rows().partial(kind, own_scope=own_scope)

    def by_month(self, name: str) -> pl.DataFrame:
        return self.rows().by_month(name)

    def confidence(self, *, verdict: str | None, action: str | None) -> dict[str, pl.DataFrame]:
        """The confidence engine's merged state (every version of the policy in the scopes)."""
        task = bind(tasks.confidence_partial, self.uri, dict(OUTCOME_EFFECTIVENESS_CLASS), self.policy_id,
                    verdict, action)
        partials = [p for p in run_all(self.client, task, self.chunks) if p is not None]
        if not partials:  # no decision of the policy: the partial of no rows
            partials = [confidence_engine.partial(empty("decisions"), empty("outcomes"), policy_id=self.policy_id,
                                                  classes=OUTCOME_EFFECTIVENESS_CLASS)]
        return confidence_engine.merge(partials)


def _partition_groups(manifest: DatasetManifest, policy_id: str,
                      scopes: Sequence[str] | None) -> list[list[integrity.ListedFile]]:
    """The files a whole-history read of the policy checks (the scopes' decisions, outcomes and
    the policy's facts), grouped by (scope, month) partition: one checking task each."""
    entries = [entry for kind, name in (("decisions", None), ("outcomes", None), ("facts", policy_id))
               for entry in integrity.in_scopes(integrity.listed_files(manifest, kind, name), scopes)]
    return by_partition(entries, lambda entry: entry.path)


def cluster_frames(client: Client, root: str | Path, *, policy_id: str, policy_version: str | None = None,
                   scopes: Sequence[str] | None = None, trust: Any = None) -> Frames:
    """`from_dataset(root, scopes=…, policy_id=…, policy_version=…, limit=None)` whose reports'
    partials are computed on the cluster (`Frames.rollup` is a `ClusterView`). DatasetError as
    `from_dataset` raises it: the manifest's trust (`open_dataset` under `trust`) here, each listed
    file of the selection on the workers."""
    uri = str(root)
    opened = open_dataset(root, trust)
    manifest = opened.manifest
    location = dataset.open_location(uri)
    groups = _partition_groups(manifest, policy_id, scopes)
    run_all(client, bind(tasks.check, uri), groups)
    decision_files = rollups.files_by_partition(manifest, "decisions")
    wanted = None if scopes is None else set(scopes)
    todo = sorted(key for key in decision_files if wanted is None or key[0] in wanted)
    chunks = rollups.plan_chunks(location, manifest, todo, decision_files)
    view = ClusterView(client, uri, chunks, policy_id, policy_version, None if scopes is None else tuple(scopes))
    return Frames(empty("decisions"), empty("outcomes"), None, view, opened.source)
