"""Overview: one scope's policy at a glance: effectiveness, confidence, anomalies (with their
reasons) and benchmarks, the health of its hold queues (the hold report), every other report
kind of the registry, and their course month by month."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import param

from gate.strict_json import JsonValue
from workbench.app.store import WorkbenchStore
from workbench.dataset.location import DatasetError
from workbench.dataset.trust import trust_text
from workbench.reports.holds import HoldReport
from workbench.reports.holdtext import health_cells
from workbench.reports.policy import POLICY_REPORT_KINDS, PolicyReports, policy_reports_of


class OverviewState(param.Parameterized):
    scope = param.String(default="")
    policy_id = param.String(default="")
    limit = param.Integer(default=1000, bounds=(1, 10_000_000),
                          doc="most recent decisions the reports consider (the API's default is 1000)")
    reports = param.Parameter(default=None, doc="PolicyReports: kind → report envelope, as the API serves it")
    holds = param.Parameter(default=None, doc="HoldReport: the policy's hold report (its queues' health), as the "
                                              "API serves it")
    more = param.Parameter(default=None, doc="kind → report envelope: every other kind of the report registry "
                                             "(`gate.reports.registry`), as the API serves it")
    series = param.Parameter(default=None, doc="polars DataFrame: one row per month")
    versions = param.Parameter(default=None, doc="polars DataFrame: each version and the month it took over")
    message = param.String(default="")
    every_anomaly = param.Parameter(default=None, doc="every finding of the anomaly report when asked for "
                                                      "(`show_every_anomaly`); None: the report's listed ones")

    def __init__(self, store: WorkbenchStore, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.refresh()

    @param.depends("scope", "policy_id", "limit", watch=True)
    def refresh(self) -> None:
        self.every_anomaly = None
        if not (self.scope and self.policy_id):
            self.reports, self.series, self.versions, self.holds, self.more = None, None, None, None, None
            self.message = "pick a scope and a policy"
            return
        try:
            every = self.store.overview.reports(self.scope, self.policy_id, limit=self.limit)
            reports = policy_reports_of(every)
            self.reports = reports
            self.more = other_reports(every)
            self.holds = self.store.overview.hold_report(self.scope, self.policy_id)
            self.series = self.store.overview.monthly_series(self.scope, self.policy_id)
            self.versions = self.store.overview.version_changes(self.scope, self.policy_id)
        except DatasetError as exc:  # a dataset that does not match its manifest is never shown
            self.reports, self.series, self.versions, self.holds, self.more = None, None, None, None, None
            self.message = f"the dataset cannot be used: {exc}"
            return
        self.message = status_line(reports)


    def show_every_anomaly(self) -> None:
        """List every anomaly the report counts, not only the strongest it lists."""
        if self.reports is not None:
            try:
                self.every_anomaly = self.store.overview.every_anomaly(self.scope, self.policy_id, limit=self.limit)
            except DatasetError as exc:
                self.message = f"the dataset cannot be used: {exc}"


ALL_QUEUES = "all queues"


def other_reports(reports: Mapping[str, Mapping[str, JsonValue]]) -> dict[str, Mapping[str, JsonValue]]:
    """The reports of the kinds the cards do not show (`POLICY_REPORT_KINDS`), in the registry's order."""
    return {name: report for name, report in reports.items() if name not in POLICY_REPORT_KINDS}


def queue_health(holds: HoldReport | None) -> list[tuple[str, dict[str, str]]]:
    """The hold queues' health beside the policy's: (`all queues`, the policy's cells), then each
    queue's, most open holds first (`workbench.reports.holdtext.health_cells`: open holds, the oldest
    one's age, p50 time to resolution, expiry rate). Empty when the policy has no hold."""
    if holds is None or not holds["sample"]["decisions_considered"]:
        return []
    return [(ALL_QUEUES, health_cells(holds["holds"])),
            *((queue["queue"], health_cells(queue)) for queue in holds["queues"])]


def listed_anomalies(reports: PolicyReports, every: list[Any] | None) -> tuple[list[Any], str]:
    """The anomalies to list and their heading: "5 of 7 anomalies (the strongest)" when the report
    lists fewer than it counts, "7 anomalies" when every one is listed."""
    count = reports["anomalies"]["anomaly_count"]
    items = list(every if every is not None else reports["anomalies"]["anomalies"])
    if len(items) < count:
        return items, f"{len(items)} of {count} anomalies (the strongest first)"
    return items, f"{count} {'anomaly' if count == 1 else 'anomalies'} (the strongest first)"


def status_line(reports: PolicyReports) -> str:
    """The status line over the reports: the sample, the anomalies and the health."""
    effectiveness = reports["effectiveness"]
    health = effectiveness["health"]  # the store builds the reports with their health
    return (f"{trust_text(effectiveness.get('source'))} · "
            f"{effectiveness['sample']['decisions_considered']} decisions considered · "
            f"{reports['anomalies']['anomaly_count']} anomalies · "
            f"health: {health['state']} over the {health['window']['text']}")
