"""Readable terminal text for the policy reports (`gate report`, without --json).

Figures in the one voice of `workbench.reports.numbers`: rates are percentages with one decimal
(`12.5%`), scores and confidences have three decimals,
parameters are printed as they are typed (`limit=all` for `--limit all`, `threshold=0.35`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

from gate.reports.registry import REPORTS
from gate.strict_json import JsonValue
from workbench.reports import numbers
from workbench.reports.holdtext import hold_lines

if TYPE_CHECKING:  # the reports' types only: printing a report loads no Polars
    from workbench.engines.common import Sample
    from workbench.reports.holds import HoldReport
    from workbench.reports.policy import (
        AnomalyReport,
        BenchmarkReport,
        ConfidenceReport,
        EffectivenessReport,
        Health,
    )


def _pct(value: Any) -> str:
    return numbers.rate(value)


def _sample(sample: Sample) -> list[str]:
    counts = ", ".join(f"{status} {n}" for status, n in sample["latest_outcome_counts"].items()) or "none"
    window = (f"{sample['first_decision_at']} .. {sample['last_decision_at']}"
              if sample["first_decision_at"] else "no decisions")
    return [
        (f"Sample: {sample['decisions_considered']} decisions, {sample['decisions_with_outcome']} with outcomes "
        f"({sample['outcome_records']} outcome records)"),
        f"  latest outcome by status: {counts}",
        f"  decisions from {window}",
    ]


# What an unset parameter means: `--limit all` reads every decision of the selection.
_UNSET = {"limit": "all", "verdict": "any", "action": "any"}


def _param(name: str, value: Any) -> str:
    """A report parameter as the user would type it back (`limit=all`, never `limit=None`)."""
    if value is None:
        return _UNSET.get(name, "none")
    return value if isinstance(value, str) else json.dumps(value)


def _header(title: str, report: Mapping[str, Any], source: str) -> list[str]:
    version = report.get("policy_version") or "all versions"
    params = "  ".join(f"{k}={_param(k, v)}" for k, v in report["parameters"].items() if k != "policy_version")
    return [f"{title} of policy {report['policy_id']} ({version}) from the {source}" if source == "live ledger"
            else f"{title} of policy {report['policy_id']} ({version}) from dataset {source}",
            *_trust(report.get("source")), *_removed(report.get("inputs_removed")), f"  {params}", ""]


def _removed(removed: Any) -> list[str]:
    """A ledger report's `inputs_removed`: how many decisions of its window had their inputs
    removed, by what; their verdicts and outcomes still count, their facts are not read."""
    if not isinstance(removed, Mapping):
        return []
    by = ", ".join(f"{cause} {count}" for cause, count in sorted(removed.get("by", {}).items()))
    return [f"  inputs removed: {removed.get('count', 0)} decisions" + (f" ({by})" if by else "")
            + "; counted by verdict and outcome as any decision (never as changed), their facts not read"]


def _trust(source: Any) -> list[str]:
    """A dataset's trust status as the report's `source` names it: the verified key, or UNSIGNED,
    and STALE with its lag and bound (`workbench.dataset.trust`)."""
    if not isinstance(source, Mapping):
        return []
    lines = [f"  signed by key {source['key_id']} (dataset_hash {source.get('dataset_hash')})"
             if source.get("trust") == "signed" and source.get("key_id")
             else f"  UNSIGNED dataset, read by --allow-unsigned: no key vouches for these figures "
                  f"(dataset_hash {source.get('dataset_hash')})"]
    stale = source.get("stale")
    if isinstance(stale, Mapping):
        lines.append(f"  STALE: {stale.get('lag_seconds')} s behind the live ledger (bound {stale.get('bound_seconds')} s; "
                     f"scopes {', '.join(stale.get('behind_scopes') or [])})")
    return lines


def _effectiveness(report: EffectivenessReport) -> list[str]:
    m = report["metrics"]
    score = report["effectiveness_score"]
    return [
        (f"Effectiveness score {numbers.score(score)}   confidence {numbers.score(report['confidence'])}   "
        f"recommendation: {report['recommendation']}"),
        (f"  success {_pct(m['success_rate'])}  failure {_pct(m['failure_rate'])}  still open {_pct(m['review_rate'])}  "
        f"excluded {_pct(m['excluded_rate'])}"),
        (f"  terminal coverage {_pct(m['terminal_coverage'])}  outcome coverage {_pct(m['outcome_coverage'])}  "
        f"resolved decisions {m['resolved_decisions']}"),
        *_health(report.get("health")),
        "",
    ]


def _health(health: Health | None) -> list[str]:
    """The one headline state (rates, trend and anomalies) and its window."""
    if not health:
        return []
    return [f"Health: {health['state']} over the {health['window']['text']}",
            *(f"  {reason}" for reason in health["because"])]


def _anomalies(report: AnomalyReport) -> list[str]:
    lines = [f"{report['anomaly_count']} anomalies   recommendation: {report['recommendation']}"]
    for item in report["anomalies"]:
        lines.append(f"  [{item['severity']}] {numbers.score(item['anomaly_score'])}  {item['kind']}  {item['dimension']} = {item['value']}")
        lines.extend(f"      {reason}" for reason in item["reasons"])
        if item["decision_ids"]:
            shown = ", ".join(item["decision_ids"][:3]) + (" ..." if len(item["decision_ids"]) > 3 else "")
            lines.append(f"      decisions: {shown}")
    checks = report["checks"]
    lines.append(f"  versions compared: {checks['policy_versions']['previous'] or '-'} -> "
                 f"{checks['policy_versions']['current'] or '-'};  recent month {checks['facts']['recent_month'] or '-'}, "
                 f"{checks['facts']['numeric_facts']} numeric facts")
    return lines + [""]


def _benchmarks(report: BenchmarkReport) -> list[str]:
    mine = report["your_metrics"]
    cross = report["cross_customer"]
    lines = [
        (f"Your metrics: success {_pct(mine['success_rate'])}  failure {_pct(mine['failure_rate'])}  "
        f"still open {_pct(mine['review_rate'])}  terminal coverage {_pct(mine['terminal_coverage'])}  "
        f"({mine['decisions']} decisions, {mine['resolved_decisions']} resolved)"),
        f"Cross-customer: {cross['status']} - {cross['reason']}",
    ]
    for metric, values in cross["percentiles"].items():
        lines.append(f"  {metric:18} p25 {_pct(values['p25'])}  p50 {_pct(values['p50'])}  p75 {_pct(values['p75'])}")
    delta = report["comparison"]["success_rate_delta_vs_p50"]
    if delta is not None:
        lines.append(f"  your success rate vs the cohort median: {numbers.signed(None if delta is None else 100 * delta, numbers.RATE_PLACES)} points")
    lines.append(f"Recommendation: {report['recommendation']}")
    return lines + [""]


def _confidence(report: ConfidenceReport) -> list[str]:
    b = report["based_on"]
    lines = [
        (f"Score {numbers.score(report['score'])}   level {report['level']}   "
        f"policy_stability {numbers.score(report['policy_stability'])}   "
        f"recommendation: {report['recommendation']}"),
        (f"  similar decisions {report['similar_decisions']} (verdict {b['verdict'] or 'any'}, action "
        f"{b['action'] or 'any'}): {b['successes']} succeeded, {b['failures']} failed; current version "
        f"{b['policy_version']}: {b['current_version_successes']} / {b['current_version_failures']}"),
    ]
    for bucket in report["buckets"]:
        lines.append(f"  {bucket['verdict']:6} {str(bucket['action'])[:40]:40} score {numbers.score(bucket['score'])}  "
                     f"{bucket['level']:17} n={bucket['similar_decisions']}")
    return lines + [""]


def _body_lines(kind: str, report: Mapping[str, Any]) -> list[str] | None:
    """The report-specific lines of a kind that has them, with its sample; None for a kind that
    prints its body's members. `report` is the sealed report of `kind` as `workbench.reports`
    builds it, so each kind's branch reads it as that kind's report type."""
    if kind == "effectiveness":
        lines = _effectiveness(cast("EffectivenessReport", report))
    elif kind == "confidence":
        lines = _confidence(cast("ConfidenceReport", report))
    elif kind == "anomalies":
        lines = _anomalies(cast("AnomalyReport", report))
    elif kind == "benchmarks":
        lines = _benchmarks(cast("BenchmarkReport", report))
    elif kind == "holds":
        lines = hold_lines(cast("HoldReport", report))
    else:
        return None
    return lines + _sample(report["sample"])


def render(kind: str, report: Mapping[str, JsonValue], *, source: str) -> str:
    """The report as text: titled by its kind's name, ending with its envelope's hash member."""
    spec = REPORTS[kind].envelope_spec
    lines = _header(kind.capitalize(), report, source)
    body = _body_lines(kind, report)
    lines += body if body is not None else _members(report, {spec.version_member, spec.hash_member})
    lines.append(f"{spec.hash_member} {report[spec.hash_member]}")
    return "\n".join(lines)


def _members(report: Mapping[str, JsonValue], envelope: set[str]) -> list[str]:
    """A kind without its own lines: each member of its body, its value as JSON."""
    shown = envelope | {"policy_id", "policy_version", "parameters", "source", "inputs_removed"}
    return [f"{name}: {json.dumps(value, sort_keys=True)}" for name, value in report.items() if name not in shown]
