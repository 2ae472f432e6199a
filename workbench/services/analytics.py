"""The serving process's analytics (`gate.services.analytics.Analytics`) by the workbench's
engines: the policy reports through the one report service (`workbench.services.reports`), a
packet's policy intelligence and the policy alerts' anomaly report (`workbench.reports.live`).

The API imports none of this (issue 66, item 4): the composition root above both (`gate_cli.served_app`)
hands it to the app. Polars and the engines load on the first report, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gate.strict_json import JsonValue
from workbench.reports import live
from workbench.services.reports import ReportService

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from gate.reports.params import ReportParams
    from gate.reports.registry import ReportKind

__all__ = ["LedgerAnalytics"]


class LedgerAnalytics:
    """Every report over the live ledger the serving process passes in."""

    def report(self, ledger: Ledger, kind: ReportKind, scope: str, policy_id: str,
               params: ReportParams) -> Mapping[str, JsonValue]:
        return ReportService(ledger).live(kind, scope, policy_id, params)

    def packet_intelligence(self, ledger: Ledger, scope: str, record: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
        return live.packet_intelligence(ledger, scope, record)

    def anomalies(self, ledger: Ledger, scope: str, policy_id: str) -> Mapping[str, Any]:
        return live.anomaly_report(ledger, scope, policy_id)
