"""The reports a serving process computes over its live ledger, behind one protocol (issue 66,
item 4): the API documents and checks every report kind with the catalogue alone
(`gate.reports`) and computes them through the `Analytics` it is composed with, so it imports no
analytics package. The workbench's engines are the one implementation
(`workbench.services.analytics.LedgerAnalytics`), wired in by the composition root above both
(`gate_cli.served_app`); a process composed without them answers each report `REPORTS_UNAVAILABLE` (503,
docs/errors.md) through `NoAnalytics`, and decides as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

from gate.errors import GateError

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from gate.reports.params import ReportParams
    from gate.reports.registry import ReportKind

__all__ = ["REPORTS_UNAVAILABLE", "Analytics", "NoAnalytics"]

REPORTS_UNAVAILABLE = "REPORTS_UNAVAILABLE"


class Analytics(Protocol):
    """What the serving process asks of its report engines, each over the live `ledger`."""

    def report(self, ledger: Ledger, kind: ReportKind, scope: str, policy_id: str,
               params: ReportParams) -> Mapping[str, Any]:
        """The sealed `kind` report of `scope`'s policy (GET /api/decision/policies/{policy_id}/{kind})."""
        ...

    def packet_intelligence(self, ledger: Ledger, scope: str, record: Mapping[str, Any]) -> dict[str, Any]:
        """The policy reports a decision packet embeds for `record` (its `policy_intelligence`)."""
        ...

    def anomalies(self, ledger: Ledger, scope: str, policy_id: str) -> Mapping[str, Any]:
        """The sealed anomaly report at the default parameters (the policy alerts' source,
        `gate.services.operations.AnomalySource`)."""
        ...


class NoAnalytics:
    """The analytics of a process composed without a report engine: every report is refused."""

    def report(self, ledger: Ledger, kind: ReportKind, scope: str, policy_id: str,
               params: ReportParams) -> Mapping[str, Any]:
        raise _unavailable(f"the {kind.name} report")

    def packet_intelligence(self, ledger: Ledger, scope: str, record: Mapping[str, Any]) -> dict[str, Any]:
        raise _unavailable("a packet's policy intelligence (export it with include_intelligence=false)")

    def anomalies(self, ledger: Ledger, scope: str, policy_id: str) -> Mapping[str, Any]:
        raise _unavailable("the anomaly report the policy alerts read")


def _unavailable(what: str) -> GateError:
    return GateError(REPORTS_UNAVAILABLE, f"{what} needs the report engines, which this gate was "
                                          "composed without (install and serve it with the analytics package)")
