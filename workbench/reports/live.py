"""The reports the API computes over the live ledger, behind one deferred import.

A gate worker imports this module at start-up; Polars, Arrow and the engines load on the
first report it serves (a packet with intelligence, a policy report, a policy alert), so a
worker that only decides never pays for them: its start-up stays about a second and its
memory about half (docs/operating.md, "Start-up"; `tests/server/test_startup_imports.py`).
Each function is the one the route calls, with the same meaning as the CLI's and the
workbench's: they all end in `workbench.reports.policy`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from workbench.reports.params import ReportParams
from workbench.reports.registry import Cohort, ReportKind

if TYPE_CHECKING:
    from gate.ledger import Ledger


def policy_report(kind: ReportKind, ledger: Ledger, scope: str, policy_id: str, params: ReportParams,
                  cohort: Cohort, cohort_scopes: Sequence[str] = ()) -> Mapping[str, Any]:
    """The sealed `kind` report of `scope`'s policy from the live ledger (GET .../policies/{id}/{kind}):
    its decisions and their outcomes, or (a kind that reads holds) its holds and their decisions' outcomes."""
    from workbench.dataset.load import from_ledger, holds_from_ledger
    from workbench.reports import policy

    if kind.reads_holds:
        frames = holds_from_ledger(ledger, scope, policy_id, policy_version=kind.loaded_version(params),
                                   limit=params.ledger_limit)
    else:
        frames = from_ledger(ledger, scope, policy_id, policy_version=kind.loaded_version(params),
                             limit=params.ledger_limit, cohort_scopes=cohort_scopes)
    return policy.build_report(kind, frames, policy_id, params, cohort)


def anomaly_report(ledger: Ledger, scope: str, policy_id: str) -> dict[str, Any]:
    """The sealed anomaly report of one policy at the default parameters (the policy alerts' source)."""
    from workbench.dataset.load import from_ledger
    from workbench.reports import policy

    params = ReportParams()
    frames = from_ledger(ledger, scope, policy_id, limit=params.ledger_limit)
    return dict(policy.anomaly_report(frames, policy_id, params))


def packet_intelligence(ledger: Ledger, scope: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """The policy reports a packet embeds for `record`, over every version of its policy in `scope`."""
    from workbench.dataset.load import from_ledger
    from workbench.reports import policy

    frames = from_ledger(ledger, scope, record["policy_id"], policy_version=None,
                         limit=ReportParams().ledger_limit)
    return dict(policy.packet_intelligence(frames, record))
