"""Overview page: report cards, the hold queues' health, the anomalies with their reasons, every
other report kind of the registry, and the policy's course."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import panel as pn
import polars as pl
from bokeh.models import ColumnDataSource, FactorRange, Range1d
from bokeh.models.annotations import Label, Span
from bokeh.plotting import figure

from gate.reports.registry import REPORTS
from gate.strict_json import JsonValue
from gate.vocabulary import VERDICTS
from workbench.app.pages.common import note
from workbench.app.pages.links import decision_href
from workbench.app.state.overview import OverviewState, listed_anomalies, queue_health
from workbench.reports import numbers
from workbench.reports.holds import HoldReport
from workbench.reports.policy import BenchmarkReport, Health, PolicyReports
from workbench.reports.textsafe import html_text, md_cell, md_text

VERDICT_COLORS: dict[str, str] = dict(zip(VERDICTS, ("#2e7d32", "#c62828", "#f9a825"), strict=True))
Card = tuple[str, float | int | None, str]  # title, value, caption


def _benchmark_caption(benchmarks: BenchmarkReport) -> str:
    """The cohort's median success rate, or why there is none (`cross_customer.status`)."""
    cross = benchmarks["cross_customer"]
    success = cross["percentiles"].get("success_rate")  # only metrics with enough cohort values
    p50 = success["p50"] if success else None
    return f"cohort p50 {numbers.rate(p50)}" if p50 is not None else f"cohort: {cross['status']}"


def _card_values(reports: PolicyReports) -> list[Card]:
    effectiveness, confidence = reports["effectiveness"], reports["confidence"]
    anomalies, benchmarks = reports["anomalies"], reports["benchmarks"]
    health = effectiveness.get("health")
    return [
        # One story: the card states the health (rates, trend and anomalies), not the rate alone.
        ("Effectiveness", effectiveness["effectiveness_score"],
         health["state"] if health else effectiveness["recommendation"]),
        ("Report confidence", effectiveness["confidence"],
         f"{effectiveness['sample']['decisions_considered']} decisions"),
        ("Decision confidence", confidence["score"], confidence["level"]),
        ("Anomalies", anomalies["anomaly_count"], anomalies["recommendation"]),
        ("Benchmark", benchmarks["your_metrics"]["success_rate"], _benchmark_caption(benchmarks)),  # a rate
    ]


# The cards' figures in the one voice (workbench.reports.numbers): a rate as a percentage at one
# decimal (as its caption's cohort p50), a score at three decimals.
RATE_CARDS = frozenset({"Benchmark"})
RATE_FORMAT = "{value:." + str(numbers.RATE_PLACES) + "%}"
SCORE_FORMAT = "{value:." + str(numbers.SCORE_PLACES) + "f}"


def _card(title: str, value: float | int | None, caption: str) -> pn.indicators.Number:
    # Panel puts a Number's name into HTML as it is: escape the caption (report text).
    return pn.indicators.Number(name=html_text(f"{title} · {caption}"), value=value if value is not None else 0,
                                format=(RATE_FORMAT if title in RATE_CARDS else SCORE_FORMAT) if isinstance(value, float)
                                else "{value}",
                                font_size="28pt", title_size="10pt", css_classes=["report-card"])


def _cards(reports: PolicyReports | None) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("*No reports yet.*")
    row = pn.Row(*[_card(*card) for card in _card_values(reports)])
    health = reports["effectiveness"].get("health")
    return pn.Column(row, pn.pane.Markdown(_health_markdown(health), css_classes=["health"]),
                     sizing_mode="stretch_width")


def _health_markdown(health: Health | None) -> str:
    if not health:
        return ""
    because = "; ".join(md_text(reason) for reason in health["because"])
    return (f"**Health: {md_text(health['state'])}** over the {md_text(health['window']['text'])}"
            + (f" · {because}" if because else ""))


def queue_health_markdown(holds: HoldReport | None) -> str:
    """The hold queues' health beside the policy's, from the hold report: a table of open holds,
    the oldest one's age, p50 time to resolution and expiry rate, and the window it covers."""
    rows = queue_health(holds)
    if holds is None or not rows:
        return "**Holds:** none for this policy in the dataset."
    lines = [f"**Hold queues** · {md_text(holds['window']['text'])}", "",
             "| queue | open | oldest open | time to resolution p50 | expiry rate |", "|---|---|---|---|---|"]
    lines += [f"| {md_cell(name)} | {cells['open']} | {cells['oldest']} | {cells['p50']} | {cells['expiry']} |"
              for name, cells in rows]
    return "\n".join(lines)


def _queues(holds: HoldReport | None) -> pn.viewable.Viewable:
    return pn.pane.Markdown(queue_health_markdown(holds), css_classes=["queue-health"], sizing_mode="stretch_width")


def _figures(report: Mapping[str, JsonValue]) -> Iterator[tuple[str, str]]:
    """A report's members as (name, text): numbers and words as they are (a float as a score),
    an object's members one level in (`sample.decisions_considered`), a list by its length."""
    for name, value in report.items():
        if isinstance(value, Mapping):
            for inner, item in value.items():
                if not isinstance(item, Mapping | list):
                    yield f"{name}.{inner}", _figure(item)
        else:
            yield name, f"{len(value)} items" if isinstance(value, list) else _figure(value)


def _figure(value: Any) -> str:
    return numbers.score(value) if isinstance(value, float) else str(value)


def more_reports_markdown(more: Mapping[str, Mapping[str, JsonValue]] | None) -> str:
    """Every report kind of the registry the cards and the queues do not show (a kind added to
    `gate.reports.registry` shows here with no page code): its name and summary, then its
    figures and its hash, read from the sealed report as the API serves it."""
    lines: list[str] = []
    for name, report in (more or {}).items():
        kind = REPORTS.get(name)
        lines += [f"#### Report: {md_text(name)}", md_text(kind.summary) if kind is not None else "", "",
                  "| member | value |", "|---|---|"]
        lines += [f"| {md_cell(member)} | {md_cell(text)} |" for member, text in _figures(report)]
        lines.append("")
    return "\n".join(lines).rstrip()


def _more_reports(more: Mapping[str, Mapping[str, JsonValue]] | None) -> pn.viewable.Viewable:
    return pn.pane.Markdown(more_reports_markdown(more), css_classes=["more-reports"], sizing_mode="stretch_width")


def _anomalies(reports: PolicyReports | None, every: list[dict[str, JsonValue]] | None, scope: str,
               policy: str) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("")
    items, heading = listed_anomalies(reports, every)
    if not items:
        return pn.pane.Markdown("**No anomaly above the threshold.**")
    lines = [f"### {heading}"]
    for item in items:  # reasons quote versions, actions and rule ids that callers chose: text only
        reasons = item["reasons"]
        # Each decision id links to the Decisions page with it open (a shareable URL).
        ids = ", ".join(f"[{md_text(i)}]({decision_href(scope, policy, i)})" for i in item["decision_ids"][:5])
        lines.append(f"- **{md_text(reasons[0] if reasons else item['kind'])}**  \n"
                     f"  {md_text(item['severity'])} · score {numbers.score(item['anomaly_score'])} · "
                     + "; ".join(md_text(reason) for reason in reasons[1:])
                     + (f"  \n  decisions: {ids}" if ids else ""))
    return pn.pane.Markdown("\n".join(lines), css_classes=["anomalies"], sizing_mode="stretch_width")


def _show_every(state: OverviewState) -> pn.viewable.Viewable:
    """"Show all 7 anomalies" while the report lists fewer than it counts (and none is asked yet)."""
    def button(reports: PolicyReports | None, every: list[dict[str, JsonValue]] | None) -> pn.viewable.Viewable:
        if not reports or every is not None:
            return pn.Spacer(height=0)
        count = reports["anomalies"]["anomaly_count"]
        if len(reports["anomalies"]["anomalies"]) >= count:
            return pn.Spacer(height=0)
        show = pn.widgets.Button(name=f"Show all {count} anomalies", css_classes=["show-every-anomaly"])
        show.on_click(lambda _: state.show_every_anomaly())
        return show
    return pn.Column(pn.bind(button, state.param.reports, state.param.every_anomaly))


def _mark_versions(plot: figure, months: list[str], versions: pl.DataFrame | None) -> None:
    """A dashed line where each version took over, labelled with the version (drawn as canvas
    text, never markup)."""
    if versions is None or versions.height < 2:
        return
    for version, month in zip(versions["policy_version"].to_list(), versions["month"].to_list(), strict=True):
        if month in months:
            at = months.index(month)
            plot.add_layout(Span(location=at, dimension="height", line_dash="dashed", line_color="#555"))
            plot.add_layout(Label(x=at, y=0, x_units="data", y_units="screen", x_offset=3, y_offset=4,
                                  text=f"v {version}", text_font_size="9pt", text_color="#333"))


def _course(series: pl.DataFrame | None, versions: pl.DataFrame | None = None) -> pn.viewable.Viewable:
    if series is None or series.height == 0:
        return pn.pane.Markdown("*No history.*")
    months = series["month"].to_list()

    def floats(name: str) -> list[float]:
        return [v if v is not None else float("nan") for v in series[name].to_list()]

    data = {"month": months, **{v: series[v].to_list() for v in VERDICT_COLORS}, "score": floats("effectiveness_score"),
            "low": floats("interval_low"), "high": floats("interval_high")}
    source = ColumnDataSource(data)
    volume = figure(x_range=FactorRange(factors=months), height=260, sizing_mode="stretch_width", title="Decisions per month by verdict",
                    toolbar_location=None)
    volume.vbar_stack(list(VERDICT_COLORS), x="month", width=0.8, source=source,
                      color=list(VERDICT_COLORS.values()), legend_label=list(VERDICT_COLORS))
    # The legends beside the plots, not over them: the version labels sit at the plots' bottom
    # left, where the score plot's legend hid the first one.
    volume.add_layout(volume.legend[0], "right")
    score = figure(x_range=FactorRange(factors=months), height=260, sizing_mode="stretch_width", toolbar_location=None,
                   title="Effectiveness score per month with its 95% Wilson interval (latest outcome per decision)")
    score.varea(x="month", y1="low", y2="high", source=source, fill_alpha=0.2, fill_color="#1f77b4",
                legend_label="95% interval")
    score.line(x="month", y="score", source=source, line_width=2)
    score.scatter(x="month", y="score", source=source, size=7)
    score.y_range = Range1d(start=0, end=1.05)
    score.add_layout(score.legend[0], "right")
    for plot in (volume, score):
        _mark_versions(plot, months, versions)
    return pn.Column(pn.pane.Bokeh(volume), pn.pane.Bokeh(score), sizing_mode="stretch_width")


def overview_page(state: OverviewState, policies: list[str]) -> pn.viewable.Viewable:
    policy = pn.widgets.Select.from_param(state.param.policy_id, name="Policy", options=[""] + policies)
    limit = pn.widgets.IntInput.from_param(state.param.limit, name="Most recent decisions")
    return pn.Column(
        pn.Row(policy, limit),
        note(state.param.message),
        pn.bind(_cards, state.param.reports),
        pn.bind(_queues, state.param.holds),
        pn.bind(_anomalies, state.param.reports, state.param.every_anomaly, state.param.scope, state.param.policy_id),
        _show_every(state),
        pn.bind(_more_reports, state.param.more),
        pn.bind(_course, state.param.series, state.param.versions),
        name="Overview",
    )
