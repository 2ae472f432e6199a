"""Report parameters (ranges, defaults, refusals) and the sealed reports over synthetic frames."""

from __future__ import annotations

import typing

import pytest
from workbench_support import frames, random_ledger

from gate.errors import GateError
from gate.protocol.report_envelopes import verify
from gate.reports.registry import REPORTS, parse_params
from workbench.reports.policy import (
    AnomalyReport,
    BenchmarkReport,
    ConfidenceReport,
    EffectivenessReport,
    ReportParams,
    anomaly_report,
    benchmark_report,
    confidence_report,
    effectiveness_report,
)


def test_defaults_are_the_reference_typical_queries():
    p = parse_params("anomalies", {})
    assert (p.limit, p.min_sample, p.threshold, p.max_items) == (1000, 10, 0.35, 5)
    b = parse_params("benchmarks", {})
    assert (b.min_cohort_scopes, b.min_cohort_decisions) == (3, 30)
    assert parse_params("effectiveness", {"limit": "50", "policy_version": "v2"}) == \
        ReportParams(limit=50, policy_version="v2")
    assert parse_params("anomalies", {"threshold": "0.5", "max_items": "100"}).threshold == 0.5


@pytest.mark.parametrize("kind,name,value", [
    ("effectiveness", "limit", "0"), ("effectiveness", "limit", "10001"), ("effectiveness", "limit", "-1"),
    ("effectiveness", "limit", "1e3"), ("effectiveness", "limit", "abc"), ("effectiveness", "min_sample", ""),
    ("anomalies", "threshold", "1.5"), ("anomalies", "threshold", "nan"), ("anomalies", "threshold", "inf"),
    ("anomalies", "max_items", "0"), ("anomalies", "max_items", "101"),
    ("benchmarks", "min_cohort_scopes", "2"), ("benchmarks", "min_cohort_decisions", "29"),
    ("effectiveness", "policy_version", ""), ("effectiveness", "policy_version", "x" * 81),
    ("effectiveness", "threshold", "0.5"),  # not a parameter of this report
    ("benchmarks", "min_sample", "10"), ("effectiveness", "verdict", "yes"),
    ("effectiveness", "limit", "\u0661\u0662"),  # non-ASCII digits
])
def test_bad_values_are_refused_with_the_field(kind, name, value):
    with pytest.raises(GateError) as raised:
        parse_params(kind, {name: value})
    assert raised.value.code == "REQUEST_INVALID"
    assert raised.value.details["errors"][0]["field"] == name


def test_reports_are_sealed_and_state_their_parameters():
    f = frames(*random_ledger(4))
    params = ReportParams(limit=1000)
    for build, kind in ((effectiveness_report, "effectiveness"), (anomaly_report, "anomaly")):
        report = build(f, "pricing", params)
        assert verify(kind, report)
        assert report["policy_id"] == "pricing" and report["policy_version"] is None
        assert set(report["parameters"]) == set(REPORTS["effectiveness" if kind == "effectiveness" else "anomalies"].params)
        assert report["sample"]["decisions_considered"] == 600
    bench = benchmark_report(f, "pricing", params, own_scope="tenant_a", opted_in=set())
    assert verify("benchmark", bench) and bench["cross_customer"]["status"] == "not_opted_in"
    assert effectiveness_report(f, "pricing", params) == effectiveness_report(f, "pricing", params)


def test_health_is_one_state_over_a_named_window_and_an_anomaly_outranks_a_healthy_rate():
    from tests.workbench.test_engine_anomalies import _ledger
    from workbench.reports.policy import anomaly_report, effectiveness_report

    drifting = _ledger(drift=True)  # 86% success (a healthy rate) and a high fact drift
    report = effectiveness_report(drifting, "p", ReportParams())
    anomalies = anomaly_report(drifting, "p", ReportParams())
    assert report["recommendation"] == "healthy" and anomalies["recommendation"] == "investigate"
    health = report["health"]
    assert health["state"] == "investigate" and health["outcome_rates"] == "healthy"
    assert health["anomalies"] == "investigate"
    assert health["because"][1] == anomalies["anomalies"][0]["reasons"][0]
    assert health["window"] == {"limit": 1000, "policy_version": None, "decisions": 200,
                                "from": report["sample"]["first_decision_at"],
                                "to": report["sample"]["last_decision_at"],
                                "text": "latest 200 decisions (limit 1000, every version), 2026-01-01 to 2026-02-27"}
    # The anomaly report handed in is the one computed inside: same health either way.
    assert effectiveness_report(drifting, "p", ReportParams(), anomalies=anomalies) == report
    stable = effectiveness_report(_ledger(), "p", ReportParams())["health"]
    assert stable["state"] == "healthy" and stable["because"] == ["200 resolved decisions, success rate 85.5%"]
    few = effectiveness_report(_ledger(n=8), "p", ReportParams())["health"]
    assert few["state"] == "insufficient_data"


def _members_match(value, kind) -> list[str]:
    """Where `value` lacks a required member of the TypedDict `kind` or has one it does not name
    (recursing into members that are TypedDicts themselves)."""
    # The types' module postpones annotations, so NotRequired is read from the hints themselves.
    hints = typing.get_type_hints(kind, include_extras=True)
    optional = {name for name, hint in hints.items() if typing.get_origin(hint) is typing.NotRequired}
    hints = typing.get_type_hints(kind)
    wrong = [f"{kind.__name__} lacks {name}" for name in hints if name not in value and name not in optional]
    wrong += [f"{kind.__name__} has {name}" for name in value if name not in hints]
    for name, hint in hints.items():
        inner = typing.get_args(hint)[0] if typing.get_origin(hint) is list else hint
        if name in value and typing.is_typeddict(inner):
            for item in value[name] if inner is not hint else [value[name]]:
                wrong += _members_match(item, inner)
    return wrong


def test_every_report_has_the_members_its_type_names():
    f = frames(*random_ledger(4))
    opted_in = {"tenant_a", "tenant_b", "tenant_c", "tenant_d"}
    for params in (ReportParams(), ReportParams(threshold=0.0, limit=50)):
        reports = {
            EffectivenessReport: effectiveness_report(f, "pricing", params),
            AnomalyReport: anomaly_report(f, "pricing", params),
            ConfidenceReport: confidence_report(f, "pricing", params),
            BenchmarkReport: benchmark_report(f, "pricing", params, own_scope="tenant_a", opted_in=opted_in),
        }
        assert reports[AnomalyReport]["anomalies"] or params.threshold > 0
        for kind, report in reports.items():
            assert _members_match(report, kind) == []
