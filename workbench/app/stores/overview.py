"""The Overview's figures (`reports`, `hold_report`, `every_anomaly`, the monthly
course): the report service's envelopes over the dataset, cached by manifest in the store's
bounded figure cache, so a refreshed dataset is read again."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import polars as pl

from gate.ledger.reports import MAX_SCOPES, benchmark_opt_ins
from gate.reports.params import PARAMS, ReportParams, cohort_scopes
from gate.reports.registry import REPORTS, Cohort, ReportKind
from workbench.app.stores.shared import StoreShared
from workbench.dataset.load import Frames, holds_from_dataset
from workbench.dataset.rollups import RollupView
from workbench.reports.holds import HoldReport
from workbench.reports.policy import PolicyReports, policy_reports_of
from workbench.reports.timeseries import (
    monthly,
    monthly_from_rollups,
    version_changes,
    version_changes_from_rollups,
)

# The hold report: beside the Overview's cards at its default parameters (`hold_report`), not in `reports`.
HOLDS = "holds"


class OverviewFigures:
    """The Overview's reads over the one `WorkbenchStore` (`StoreShared`)."""

    def __init__(self, store: StoreShared) -> None:
        self.store = store

    def reports(self, scope: str, policy_id: str, *, limit: int = 1000) -> dict[str, Mapping[str, Any]]:
        """Every report kind of the registry (`gate.reports.registry.REPORTS`) but the hold
        report (`hold_report`), built by the report service the API and `gate report` call (same
        engines, envelopes and hashes, same cohort rule) over the dataset instead of the live
        ledger, at the page's `limit`: kind → sealed report, in the registry's order. A kind added
        to the registry is among them. Cached by manifest and cohort."""
        opted_in = benchmark_opt_ins(self.store.ledger)
        manifest_key = self.store._manifest_key()
        cohort_of = tuple(cohort_scopes(opted_in, scope, MAX_SCOPES))
        key = (manifest_key, "reports", scope, policy_id, limit, cohort_of, frozenset(opted_in))
        reports: dict[str, Mapping[str, Any]] = self.store._remembered(
            key, lambda: self._reports(scope, policy_id, limit, opted_in, cohort_of, manifest_key))
        return reports

    def policy_reports(self, scope: str, policy_id: str, *, limit: int = 1000) -> PolicyReports:
        """The four policy reports of the Overview's cards (`reports`, those kinds)."""
        return policy_reports_of(self.reports(scope, policy_id, limit=limit))

    def _reports(self, scope: str, policy_id: str, limit: int, opted_in: set[str],
                 cohort_of: tuple[str, ...], manifest_key: str | None) -> dict[str, Mapping[str, Any]]:
        params = ReportParams(limit=limit)
        kinds = [kind for name, kind in REPORTS.items() if name != HOLDS]

        def frames_of(kind: ReportKind) -> Frames:
            if kind.reads_holds:
                return holds_from_dataset(self.store.dataset_dir, scopes=[scope], policy_id=policy_id,
                                          policy_version=kind.loaded_version(params), trust=self.store.trust())
            return self.store._frames((scope, *cohort_of) if kind.cohort else (scope,), policy_id, limit, manifest_key)

        service = self.store.services.reports
        built: dict[str, Mapping[str, Any]] = {}
        # The anomaly report first: the effectiveness report's health reads it (the same report).
        for kind in sorted(kinds, key=lambda kind: kind.name != "anomalies"):
            cohort = Cohort(own_scope=scope, opted_in=opted_in) if kind.cohort else Cohort()
            built[kind.name] = service.build(kind, frames_of(kind), policy_id, params, cohort,
                                             anomalies=built.get("anomalies"))
        return {kind.name: built[kind.name] for kind in kinds}

    def hold_report(self, scope: str, policy_id: str) -> HoldReport:
        """The policy's hold report (the registry's kind `holds`, at its default parameters) over
        the dataset, exactly as `gate report holds --dataset` builds it (the report service): the
        queues' health beside the policy's on the Overview. Cached by manifest like the other reports."""
        manifest_key = self.store._manifest_key()
        kind, params = REPORTS[HOLDS], ReportParams()

        def compute() -> dict[str, Any]:
            frames = holds_from_dataset(self.store.dataset_dir, scopes=[scope], policy_id=policy_id,
                                        trust=self.store.trust())
            return dict(self.store.services.reports.build(kind, frames, policy_id, params))
        report: HoldReport = self.store._remembered((manifest_key, "holds", scope, policy_id), compute)
        return report

    def every_anomaly(self, scope: str, policy_id: str, *, limit: int = 1000) -> list[Any]:
        """Every finding of the policy's anomaly report, strongest first (the report lists the first
        `max_items` and counts them all): the same report with `max_items` at its bound."""
        manifest_key = self.store._manifest_key()
        bound = int(PARAMS["max_items"].high)

        def compute() -> list[Any]:
            frames = self.store._frames((scope,), policy_id, limit, manifest_key)
            report = self.store.services.reports.build(REPORTS["anomalies"], frames, policy_id,
                                                       ReportParams(limit=limit, max_items=bound))
            return list(report["anomalies"])
        found: list[Any] = self.store._remembered((manifest_key, "anomalies", scope, policy_id, limit), compute)
        return found

    def monthly_series(self, scope: str, policy_id: str) -> pl.DataFrame:
        """Volume by verdict and effectiveness, month by month (`workbench.reports.timeseries`): from the
        dataset's rollups when they are current, else from the rows."""
        return self._whole_history("monthly", scope, policy_id, monthly_from_rollups,
                                   lambda frames: monthly(frames, policy_id))

    def version_changes(self, scope: str, policy_id: str) -> pl.DataFrame:
        """Each version of the policy with the month of its first decision (`workbench.reports.timeseries`):
        from the dataset's rollups when they are current, else from the rows."""
        return self._whole_history("versions", scope, policy_id, version_changes_from_rollups, version_changes)

    def _whole_history(self, name: str, scope: str, policy_id: str,
                       from_rollups: Callable[[RollupView | None], pl.DataFrame | None],
                       from_rows: Callable[[Frames], pl.DataFrame]) -> pl.DataFrame:
        """A whole-history figure of one scope and policy, cached by manifest: `from_rollups` of
        the dataset's rollups when they are current (never for `reference`), else `from_rows`."""
        manifest_key = self.store._manifest_key()

        def compute() -> pl.DataFrame:
            if not self.store.reference:
                opened = self.store.opened()
                manifest = None if opened is None else opened.manifest
                view = None if manifest is None else RollupView.of(
                    self.store.dataset_dir, manifest, policy_id=policy_id, policy_version=None, scopes=[scope])
                figure = from_rollups(view)
                if figure is not None:
                    return figure
            return from_rows(self.store._frames((scope,), policy_id, None, manifest_key))

        figure: pl.DataFrame = self.store._remembered((manifest_key, name, scope, policy_id), compute)
        return figure
