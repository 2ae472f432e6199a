"""The reports the API computes over the live ledger, behind one deferred import.

A gate worker imports this module at start-up; Polars, Arrow and the engines load on the
first report it serves (a packet with intelligence, a policy alert), so a worker that only
decides never pays for them: its start-up stays about a second and its memory about half
(docs/operating.md, "Start-up"; `tests/server/test_startup_imports.py`). The policy reports of
the routes are the report service's (`workbench.services.reports`), which defers its imports the
same way. Each function here ends in `workbench.reports.policy`, as the CLI's and the workbench's do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gate.reports.params import ReportParams

if TYPE_CHECKING:
    from gate.ledger import Ledger
    from workbench.reports.policy import AnomalyReport


def anomaly_report(ledger: Ledger, scope: str, policy_id: str) -> AnomalyReport:
    """The sealed anomaly report of one policy at the default parameters (the policy alerts' source)."""
    from workbench.dataset.load import from_ledger
    from workbench.reports import policy

    params = ReportParams()
    frames = from_ledger(ledger, scope, policy_id, limit=params.ledger_limit)
    return policy.anomaly_report(frames, policy_id, params)


def packet_intelligence(ledger: Ledger, scope: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The policy reports a packet embeds for `record`, over every version of its policy in `scope`."""
    from workbench.dataset.load import from_ledger
    from workbench.reports import policy

    frames = from_ledger(ledger, scope, record["policy_id"], policy_version=None,
                         limit=ReportParams().ledger_limit)
    return dict(policy.packet_intelligence(frames, record))
