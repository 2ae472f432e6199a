"""Overview page: report cards, the anomalies with their reasons, and the policy's course."""

from __future__ import annotations

import panel as pn
from bokeh.models import ColumnDataSource, Label, Range1d, Span
from bokeh.plotting import figure

from workbench.app.pages.common import note
from workbench.app.pages.links import decision_href
from workbench.app.state.overview import OverviewState
from workbench.reports.textsafe import html_text, md_text

VERDICT_COLORS = {"yes": "#2e7d32", "no": "#c62828", "review": "#f9a825"}


def _cards(reports) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("*No reports yet.*")
    eff, ano, ben = reports["effectiveness"], reports["anomalies"], reports["benchmarks"]
    your = ben.get("your_metrics", {}) or {}
    cross = ben.get("cross_customer", {}) or {}
    p50 = ((cross.get("percentiles") or {}).get("success_rate") or {}).get("p50")
    health = eff.get("health") or {}
    cards = [
        # One story: the card states the health (rates, trend and anomalies), not the rate alone.
        ("Effectiveness", eff.get("effectiveness_score"), health.get("state", eff.get("recommendation"))),
        ("Report confidence", eff.get("confidence"), f"{eff['sample']['decisions_considered']} decisions"),
        ("Anomalies", ano.get("anomaly_count"), ano.get("recommendation")),
        ("Benchmark", your.get("success_rate"),
         f"cohort p50 {p50}" if p50 is not None else f"cohort: {cross.get('status')}"),
    ]
    for key in ("confidence",):
        if key in reports:
            cards.insert(2, ("Decision confidence", reports[key].get("score"), reports[key].get("level")))
    # Panel puts a Number's name into HTML as it is: escape the caption (report text).
    row = pn.Row(*[pn.indicators.Number(name=html_text(f"{title} · {caption}"), value=value if value is not None else 0,
                                        format="{value:.3f}" if isinstance(value, float) else "{value}",
                                        font_size="28pt", title_size="10pt", css_classes=["report-card"])
                   for title, value, caption in cards])
    return pn.Column(row, pn.pane.Markdown(_health_markdown(health), css_classes=["health"]),
                     sizing_mode="stretch_width")


def _health_markdown(health) -> str:
    if not health:
        return ""
    because = "; ".join(md_text(reason) for reason in health.get("because", []))
    return (f"**Health: {md_text(health.get('state'))}** over the {md_text(health['window']['text'])}"
            + (f" · {because}" if because else ""))


def _anomalies(reports, scope: str, policy: str) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("")
    items = reports["anomalies"].get("anomalies", [])
    if not items:
        return pn.pane.Markdown("**No anomaly above the threshold.**")
    lines = ["### Anomalies"]
    for item in items:  # reasons quote versions, actions and rule ids that callers chose: text only
        reasons = item.get("reasons", [])
        # Each decision id links to the Decisions page with it open (a shareable URL).
        ids = ", ".join(f"[{md_text(i)}]({decision_href(scope, policy, i)})" for i in item.get("decision_ids", [])[:5])
        lines.append(f"- **{md_text(reasons[0] if reasons else item['kind'])}**  \n"
                     f"  {md_text(item['severity'])} · score {item['anomaly_score']:.2f} · "
                     + "; ".join(md_text(reason) for reason in reasons[1:])
                     + (f"  \n  decisions: {ids}" if ids else ""))
    return pn.pane.Markdown("\n".join(lines), css_classes=["anomalies"], sizing_mode="stretch_width")


def _mark_versions(plot, months: list[str], versions) -> None:
    """A dashed line where each version took over, labelled with the version (drawn as canvas
    text, never markup)."""
    if versions is None or versions.height < 2:
        return
    for version, month in zip(versions["policy_version"].to_list(), versions["month"].to_list()):
        if month in months:
            at = months.index(month)
            plot.add_layout(Span(location=at, dimension="height", line_dash="dashed", line_color="#555"))
            plot.add_layout(Label(x=at, y=0, x_units="data", y_units="screen", x_offset=3, y_offset=4,
                                  text=f"v {version}", text_font_size="9pt", text_color="#333"))


def _course(series, versions=None) -> pn.viewable.Viewable:
    if series is None or series.height == 0:
        return pn.pane.Markdown("*No history.*")
    months = series["month"].to_list()

    def floats(name):
        return [v if v is not None else float("nan") for v in series[name].to_list()]

    data = {"month": months, **{v: series[v].to_list() for v in VERDICT_COLORS}, "score": floats("effectiveness_score"),
            "low": floats("interval_low"), "high": floats("interval_high")}
    source = ColumnDataSource(data)
    volume = figure(x_range=months, height=260, sizing_mode="stretch_width", title="Decisions per month by verdict",
                    toolbar_location=None)
    volume.vbar_stack(list(VERDICT_COLORS), x="month", width=0.8, source=source,
                      color=list(VERDICT_COLORS.values()), legend_label=list(VERDICT_COLORS))
    volume.legend.location = "top_left"
    score = figure(x_range=months, height=260, sizing_mode="stretch_width", toolbar_location=None,
                   title="Effectiveness score per month with its 95% Wilson interval (latest outcome per decision)")
    score.varea(x="month", y1="low", y2="high", source=source, fill_alpha=0.2, fill_color="#1f77b4",
                legend_label="95% interval")
    score.line(x="month", y="score", source=source, line_width=2)
    score.scatter(x="month", y="score", source=source, size=7)
    score.y_range = Range1d(0, 1.05)
    score.legend.location = "bottom_left"
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
        pn.bind(_anomalies, state.param.reports, state.param.scope, state.param.policy_id),
        pn.bind(_course, state.param.series, state.param.versions),
        name="Overview",
    )
