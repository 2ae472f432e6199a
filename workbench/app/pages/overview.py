"""Overview page: report cards, the anomalies with their reasons, and the policy's course."""

from __future__ import annotations

import panel as pn
from bokeh.models import ColumnDataSource, Range1d
from bokeh.plotting import figure

from workbench.app.pages.common import note
from workbench.app.state.overview import OverviewState
from workbench.textsafe import html_text, md_text

VERDICT_COLORS = {"yes": "#2e7d32", "no": "#c62828", "review": "#f9a825"}


def _cards(reports) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("*No reports yet.*")
    eff, ano, ben = reports["effectiveness"], reports["anomalies"], reports["benchmarks"]
    your = ben.get("your_metrics", {}) or {}
    cross = ben.get("cross_customer", {}) or {}
    p50 = ((cross.get("percentiles") or {}).get("success_rate") or {}).get("p50")
    cards = [
        ("Effectiveness", eff.get("effectiveness_score"), eff.get("recommendation")),
        ("Report confidence", eff.get("confidence"), f"{eff['sample']['decisions_considered']} decisions"),
        ("Anomalies", ano.get("anomaly_count"), ano.get("recommendation")),
        ("Benchmark", your.get("success_rate"),
         f"cohort p50 {p50}" if p50 is not None else f"cohort: {cross.get('status')}"),
    ]
    for key in ("confidence",):
        if key in reports:
            cards.insert(2, ("Decision confidence", reports[key].get("score"), reports[key].get("level")))
    # Panel puts a Number's name into HTML as it is: escape the caption (report text).
    return pn.Row(*[pn.indicators.Number(name=html_text(f"{title} · {caption}"), value=value if value is not None else 0,
                                         format="{value:.3f}" if isinstance(value, float) else "{value}",
                                         font_size="28pt", title_size="10pt", css_classes=["report-card"])
                    for title, value, caption in cards])


def _anomalies(reports) -> pn.viewable.Viewable:
    if not reports:
        return pn.pane.Markdown("")
    items = reports["anomalies"].get("anomalies", [])
    if not items:
        return pn.pane.Markdown("**No anomaly above the threshold.**")
    lines = ["### Anomalies"]
    for item in items:  # reasons quote versions, actions and rule ids that callers chose: text only
        ids = ", ".join(md_text(i) for i in item.get("decision_ids", [])[:5])
        lines.append(f"- **{md_text(item['severity'])}** · score {item['anomaly_score']:.2f} · "
                     + "; ".join(md_text(reason) for reason in item.get("reasons", []))
                     + (f"  \n  decisions: {ids}" if ids else ""))
    return pn.pane.Markdown("\n".join(lines), css_classes=["anomalies"], sizing_mode="stretch_width")


def _course(series) -> pn.viewable.Viewable:
    if series is None or series.height == 0:
        return pn.pane.Markdown("*No history.*")
    months = series["month"].to_list()
    data = {"month": months, **{v: series[v].to_list() for v in VERDICT_COLORS},
            "score": [s if s is not None else float("nan") for s in series["effectiveness_score"].to_list()]}
    source = ColumnDataSource(data)
    volume = figure(x_range=months, height=260, sizing_mode="stretch_width", title="Decisions per month by verdict",
                    toolbar_location=None)
    volume.vbar_stack(list(VERDICT_COLORS), x="month", width=0.8, source=source,
                      color=list(VERDICT_COLORS.values()), legend_label=list(VERDICT_COLORS))
    volume.legend.location = "top_left"
    score = figure(x_range=months, height=260, sizing_mode="stretch_width", toolbar_location=None,
                   title="Effectiveness score per month (latest outcome per decision)")
    score.line(x="month", y="score", source=source, line_width=2)
    score.scatter(x="month", y="score", source=source, size=7)
    score.y_range = Range1d(0, 1.05)
    return pn.Column(pn.pane.Bokeh(volume), pn.pane.Bokeh(score), sizing_mode="stretch_width")


def overview_page(state: OverviewState, policies: list[str]) -> pn.viewable.Viewable:
    policy = pn.widgets.Select.from_param(state.param.policy_id, name="Policy", options=[""] + policies)
    limit = pn.widgets.IntInput.from_param(state.param.limit, name="Most recent decisions")
    return pn.Column(
        pn.Row(policy, limit),
        note(state.param.message),
        pn.bind(_cards, state.param.reports),
        pn.bind(_anomalies, state.param.reports),
        pn.bind(_course, state.param.series),
        name="Overview",
    )
