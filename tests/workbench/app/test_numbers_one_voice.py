"""Figures in one voice (issue 45, item 6): the pages, the reports, the CLI and the notebooks print
rates, intervals, scores and net effects through `workbench.reports.numbers`, and the words of a
health state only where they are the state."""

from __future__ import annotations

import copy
import json
import re

from gate_cli.release_cmd import status_text
from gate_cli.report_text import render
from gate_cli.sweep_cmd import sweep_text
from workbench.app.pages.overview import _benchmark_caption, _card
from workbench.app.pages.sweep import sweep_frame
from workbench.app.state.authoring import AuthoringState
from workbench.migration.impact import NET_PLACES, impact_rows
from workbench.migration.report import render_markdown
from workbench.reports import numbers

LONG_DECIMALS = re.compile(r"\d\.\d{5,}")  # 0.006868, -0.045604, 0.392974: never printed
STATES = ("healthy", "monitor", "investigate", "review_policy", "insufficient_data")


def test_the_formatter():
    assert numbers.rate(0.92134) == "92.1%" and numbers.rate(None) == "n/a"
    assert numbers.rate_interval(0.392974, 0.607026) == "39.3–60.7%"
    assert numbers.rate_interval(0.004, 0.021, signed=True) == "+0.4 to +2.1%"
    assert numbers.signed(0.006868, 4) == "+0.0069" and numbers.signed_interval([0.0051, 0.008636], 4) == "+0.0051 to +0.0086"
    assert numbers.score(0.93134) == "0.931" and numbers.signed_rate(-0.045604) == "-4.6%"


def _draft(store):
    authoring = AuthoringState(store, scope="acme", rulebook_id="pricing_exception")
    authoring.load_current()
    draft = copy.deepcopy(authoring.draft)
    draft["version"] = "2026-12-01"
    draft["rules"][0]["condition"]["value"] = 15
    return draft


def test_the_impact_rows_the_reports_and_the_sweep_speak_the_formatter(workbench_home, tmp_path):
    store, _, _ = workbench_home
    draft = _draft(store)
    run = store.migration.dry_run("acme", "pricing_exception", draft)
    impact = run.result["impact"]
    rows = dict(impact_rows(impact))
    net = impact["expected_net_effect"]
    assert rows["Expected net effect"].startswith(
        f"{numbers.signed(net['per_decision'], NET_PLACES)} per decision "
        f"(95% {numbers.signed_interval(net['interval_95'], NET_PLACES)})")
    caught = impact["failures_caught"]
    assert f"{numbers.rate(caught['rate'])} (95% {numbers.rate_interval(*caught['interval_95'])})" \
        in rows["Failures caught"]
    report = render_markdown(run.manifest)
    for text in (*rows.values(), report):
        assert not LONG_DECIMALS.search(text), text
    leaf = next(i for i, rule in enumerate(draft["rules"]) if "value" in rule["condition"])
    swept = store.migration.sweep("acme", "pricing_exception", draft, (draft["rules"][leaf]["rule_id"],
                                                             draft["rules"][leaf]["condition"]["field"], 0),
                        [10.0, 15.0, 20.0])
    frame = sweep_frame(swept)
    for point, row in zip(swept["points"], frame.to_dict("records"), strict=True):
        assert row["net_effect"] == numbers.signed(point["expected_net_effect"]["per_decision"], NET_PLACES)
        figure = point["failures_caught"]
        assert row["failures_caught"] == (f"{figure['count']:,} ({numbers.rate(figure['rate'])}, 95% "
                                          f"{numbers.rate_interval(*figure['interval_95'])})")
    cli = sweep_text(swept)
    assert not LONG_DECIMALS.search(cli + json.dumps(frame.to_dict("records")))


def test_the_overview_the_cli_reports_and_the_health_speak_the_formatter(workbench_home):
    store, _, _ = workbench_home
    reports = store.overview.policy_reports("acme", "pricing_exception")
    benchmark = reports["benchmarks"]
    cohort = {**benchmark, "cross_customer": {**benchmark["cross_customer"],
                                              "percentiles": {"success_rate": {"p25": 0.9, "p50": 0.9313, "p75": 0.95}}}}
    assert _benchmark_caption(cohort) == "cohort p50 93.1%"
    card = _card("Benchmark", 0.921, "cohort p50 93.1%")
    assert card.format.format(value=card.value) == "92.1%"  # beside its cohort's p50, at one voice
    health = reports["effectiveness"]["health"]
    for reason in health["because"][:1]:
        assert not any(word in reason for word in STATES), reason  # the state is said once, as the state
    for kind in ("effectiveness", "confidence", "anomalies", "benchmarks"):
        text = render(kind, reports[kind], source="dataset x")
        assert not LONG_DECIMALS.search(text), text
    rate = reports["effectiveness"]["metrics"]["success_rate"]
    assert f"success {numbers.rate(rate)}" in render("effectiveness", reports["effectiveness"], source="dataset x")


def test_the_release_status_prints_rates_and_intervals_in_the_one_voice():
    status = {"rulebook_id": "refunds", "state": {"seq": 3, "active": {"version": "1"}, "pending": []},
              "comparison": {"shadow": {"decisions": 40, "agreement": {"events": 20, "n": 40, "rate": 0.5,
                                                                        "interval_95": [0.392974, 0.607026]}},
                             "canary": {"arms": [{"arm": "canary", "decisions": 12,
                                                  "failure_rate": {"rate": 0.083333, "n": 12,
                                                                   "interval_95": [0.014876, 0.353879]}}],
                                        "guardrails": {"tripped": []}}}}
    text = status_text(status)
    assert "shadow agreement 20/40 (50.0%, 95% 39.3–60.7%)" in text
    assert "failure rate 8.3% of 12 resolved (95% 1.5–35.4%)" in text
    assert not LONG_DECIMALS.search(text) and "[0." not in text
