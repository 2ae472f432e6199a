"""The policy report kinds: one entry per report, read by every shell that serves one.

The API's routes (`api/routes/reports.py`), `gate report` (`gate_cli/report_cmd.py`), the
workbench's Overview (`workbench/app/store.py`, its page), the OpenAPI document and its cost table
(`api/openapi.py`) and the report engines (`workbench.reports.policy`) take the kinds, their
names, envelopes, parameters, summaries and engines from `REPORTS`; none of them lists report
kinds of its own, and all of them build reports through the report service
(`workbench.services.reports`; the API through the analytics it is composed with,
`gate.services.analytics`). A new report engine is its engine module, one entry here (with
`engine="module:function"` and its own envelope), its test and its doc
(tests/workbench/test_report_registry.py adds one that way and finds it served everywhere).

The table imports no engine and no Polars (issue 66, item 4): `gate` builds its parser from it
at every start, and the API documents and checks every kind with it when no analytics package is
installed. A kind's own engine is a reference the engines' shell loads when a report is first
built (`workbench.reports.policy.build_report`); a kind's query is parsed here (`parse_params`),
with the parameters of `gate.reports.params`, below it.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import asdict, dataclass, field

from gate.protocol.report_envelopes import Envelope, spec_of
from gate.reports.params import ParamValue, ReportParams, parse_query


@dataclass(frozen=True)
class Cohort:
    """What a cross-scope report compares against: the caller's scope and the opted-in scopes."""

    own_scope: str = ""
    opted_in: AbstractSet[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ReportKind:
    """One policy report: how the shells name it, which envelope seals it, what it reads."""

    name: str             # `gate report NAME`, GET /api/decision/policies/{policy_id}/NAME
    envelope: str | Envelope  # its envelope's kind in gate.protocol.report_envelopes.KINDS, or its own envelope
    summary: str          # the OpenAPI summary of its route
    params: tuple[str, ...]  # the query parameters it accepts (gate.reports.params.PARAMS)
    every_version: bool = False  # policy_version names the current version; every version is evidence
    cohort: bool = False  # compares against opted-in scopes (benchmarks): per scope, reads their settings
    # Its body's engine, "module:function" (frames, parameters, cohort → the body its envelope
    # seals), loaded by `workbench.reports.policy`; None: the built-in reports' own functions there.
    engine: str | None = None
    # Reads held actions, not decisions: the shells load its frames with
    # `workbench.dataset.load.holds_from_dataset` / `holds_from_ledger` (the holds and their
    # decisions' outcomes) instead of `from_dataset` / `from_ledger`.
    reads_holds: bool = False

    @property
    def envelope_spec(self) -> Envelope:
        """Its envelope: version member, version, hash member."""
        return spec_of(self.envelope)

    @property
    def path(self) -> str:
        """The route's OpenAPI path."""
        return f"/api/decision/policies/{{policy_id}}/{self.name}"

    @property
    def unauthorized(self) -> str:
        """The error code of a request without a usable key."""
        return f"SVC_POLICY_{self.name.upper()}_UNAUTHORIZED"

    def loaded_version(self, params: ReportParams) -> str | None:
        """The policy version whose decisions are loaded (None: every version)."""
        return None if self.every_version else params.policy_version

    def parameters(self, params: ReportParams) -> dict[str, ParamValue]:
        """The parameters this kind takes, with their values: the sealed report's `parameters`."""
        values = asdict(params)
        return {name: values[name] for name in self.params}


# The hold report's own envelope (no packet embeds it).
HOLD_REPORT = Envelope("holds", "hold_report_version", "hold_report_v1", "holds_hash")


REPORTS: dict[str, ReportKind] = {kind.name: kind for kind in (
    ReportKind(
        "effectiveness", "effectiveness",
        "Policy effectiveness (decision_effectiveness_report_v1, effectiveness_hash): effectiveness_score, "
        "confidence, recommendation from the latest outcome per decision; health: one state over a named window "
        "that also weighs the anomaly detectors.",
        ("policy_version", "limit", "min_sample")),
    ReportKind(
        "confidence", "confidence",
        "Decision confidence baseline (decision_confidence_v1, confidence_hash): score, level, similar_decisions, "
        "policy_stability, recommendation, based_on, sample, buckets; the formulas of the decide-time block. "
        "policy_version names the current version and does not filter (every version counts as evidence).",
        ("policy_version", "verdict", "action", "limit", "min_sample"), every_version=True),
    ReportKind(
        "anomalies", "anomaly",
        "Explainable anomalies (decision_anomaly_report_v1, anomaly_hash): failure-rate, verdict-mix and "
        "fact-distribution shifts with severity, anomaly_score, reasons, decision ids.",
        ("policy_version", "limit", "min_sample", "threshold", "max_items")),
    ReportKind(
        "benchmarks", "benchmark",
        "Opt-in anonymized benchmarks (decision_benchmark_v1, benchmark_hash): your_metrics, cross_customer "
        "percentiles, comparison.success_rate_delta_vs_p50.",
        ("policy_version", "limit", "min_cohort_scopes", "min_cohort_decisions"), cohort=True),
    ReportKind(
        "holds", HOLD_REPORT,
        "Held actions (hold_report_v1, holds_hash): the backlog and its age, time to resolution p50/p90, "
        "approval and expiry rates with 95% Wilson intervals, and approvals whose decision later failed (too-young "
        "ones counted apart); for the policy, per queue and per reviewer, over the window it names.",
        ("policy_version", "limit", "outcome_window_days"), engine="workbench.reports.holds:hold_body", reads_holds=True),
)}
NAMES = tuple(REPORTS)


def parse_params(kind: str, raw: Mapping[str, str], *, limit_high: int | None = None) -> ReportParams:
    """Query-string values → ReportParams, refusing (REQUEST_INVALID) anything out of range or
    not meant for this report kind. `limit_high` lets a local dataset read raise the limit."""
    return parse_query(kind, REPORTS[kind].params, raw, limit_high=limit_high)


__all__ = ["HOLD_REPORT", "NAMES", "REPORTS", "Cohort", "ReportKind", "parse_params"]
