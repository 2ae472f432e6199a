"""The report use case: any report kind of the registry (`gate.reports.registry.REPORTS`),
for every shell.

The API's routes (`GET /api/decision/policies/{policy_id}/{kind}`), `gate report` (from the
ledger, a dataset, or a dataset's partitions on a cluster) and the workbench's Overview build
their reports here, so a kind added to the registry is served by all of them: the sealed report
of `workbench.reports.policy.build_report`, over frames read the kind's way (its decisions and
their outcomes, or, for a kind that reads holds, its holds and their decisions' outcomes), with
the opted-in scopes of a cross-scope kind read from the live ledger.

Polars and the readers load on the first report built (the API imports this at start-up).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gate.errors import GateError
from gate.reports.registry import Cohort, ReportKind
from gate.strict_json import JsonValue

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from gate.reports.params import ReportParams
    from workbench.dataset.load import Frames

__all__ = ["ReportService"]


class ReportService:
    """Reports of any kind; `ledger` is the live ledger (None: a dataset read with no live ledger
    at hand, where a cross-scope kind has no cohort)."""

    def __init__(self, ledger: Ledger | None = None) -> None:
        self.ledger = ledger

    def cohort(self, kind: ReportKind, scope: str | None) -> tuple[Cohort, list[str]]:
        """A cross-scope kind's cohort (`scope` and the scopes opted in to benchmarks, read from the
        live ledger) and the scopes it loads besides `scope`; none for any other kind."""
        if not kind.cohort or self.ledger is None or scope is None:
            return Cohort(), []
        from gate.ledger.reports import MAX_SCOPES, benchmark_opt_ins
        from gate.reports.params import cohort_scopes

        opted_in = benchmark_opt_ins(self.ledger)
        return Cohort(own_scope=scope, opted_in=opted_in), cohort_scopes(opted_in, scope, MAX_SCOPES)

    def live(self, kind: ReportKind, scope: str, policy_id: str, params: ReportParams) -> Mapping[str, JsonValue]:
        """The sealed report of `scope`'s policy from the live ledger: its `params.limit` most recent
        decisions (of `policy_version` unless the kind reads every version) and their outcomes, or
        its holds, with a cross-scope kind's cohort."""
        from workbench.dataset.load import from_ledger, holds_from_ledger

        if self.ledger is None:
            raise ValueError("no live ledger to report from")
        if params.limit is None:
            raise GateError("REQUEST_INVALID", "a report from the live ledger reads 1 to 10000 decisions: give a limit")
        cohort, cohort_of = self.cohort(kind, scope)
        if kind.reads_holds:
            frames = holds_from_ledger(self.ledger, scope, policy_id, policy_version=kind.loaded_version(params),
                                       limit=params.limit)
        else:
            frames = from_ledger(self.ledger, scope, policy_id, policy_version=kind.loaded_version(params),
                                 limit=params.limit, cohort_scopes=cohort_of)
        return self.build(kind, frames, policy_id, params, cohort)

    def from_dataset(self, kind: ReportKind, dataset: str | Path, policy_id: str, params: ReportParams, *,
                     scope: str | None, trust: Any, cluster: Any = None) -> Mapping[str, JsonValue]:
        """The sealed report from an exported dataset read under `trust` (`scope`'s decisions, and a
        cross-scope kind's cohort; every scope when `scope` is None). `cluster`: a Dask client
        whose workers compute the built-in engines' partials of a whole-history read (`params.limit`
        None); a kind with its own engine reads the rows in this process."""
        cohort, cohort_of = self.cohort(kind, scope)
        scopes = None if scope is None else [scope, *cohort_of]
        return self.build(kind, self._dataset_frames(kind, dataset, policy_id, params, scopes, trust, cluster),
                          policy_id, params, cohort)

    @staticmethod
    def _dataset_frames(kind: ReportKind, dataset: str | Path, policy_id: str, params: ReportParams,
                        scopes: Sequence[str] | None, trust: Any, cluster: Any) -> Frames:
        from workbench.dataset.load import from_dataset, holds_from_dataset

        version = kind.loaded_version(params)
        if kind.reads_holds:
            return holds_from_dataset(dataset, scopes=scopes, policy_id=policy_id, policy_version=version, trust=trust)
        if cluster is not None and kind.engine is None:
            # The cluster computes the built-in engines' partials (`workbench.cluster.reports`); a
            # kind with its own engine reads its rows here, so its figures are the same either way.
            from workbench.cluster.reports import cluster_frames

            return cluster_frames(cluster, dataset, policy_id=policy_id, policy_version=version, scopes=scopes,
                                  trust=trust)
        return from_dataset(dataset, scopes=scopes, policy_id=policy_id, policy_version=version, limit=params.limit,
                            trust=trust)

    @staticmethod
    def build(kind: ReportKind, frames: Frames, policy_id: str, params: ReportParams, cohort: Cohort | None = None,
              *, anomalies: Mapping[str, Any] | None = None) -> Mapping[str, Any]:
        """The sealed `kind` report over frames the caller read (the workbench's cached ones).
        `anomalies`: the anomaly report of the same frames and parameters, when the caller has it
        (the effectiveness report's health then reads it instead of computing it again)."""
        from workbench.reports.policy import build_report

        return build_report(kind, frames, policy_id, params, cohort or Cohort(), anomalies=anomalies)
