"""The Authoring page's threshold sweep: one numeric comparison of the draft swept over a range,
approvals, failures caught, successes lost and review load plotted against the threshold with
their 95% intervals (`workbench.migration.sweep`, the call behind `gate sweep`). Clicking a point,
or a row of the table under it, sets that threshold in the draft."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

import pandas as pd
import panel as pn
from bokeh.models import ColumnDataSource, HoverTool, TapTool
from bokeh.models.annotations import Span
from bokeh.models.renderers import DataRenderer
from bokeh.plotting import figure

from workbench.app.state.authoring import AuthoringState, comparison_key, comparison_label
from workbench.migration.impact import NET_PLACES, Figure
from workbench.migration.sweep import Comparison, Sweep
from workbench.reports import numbers
from workbench.reports.textsafe import md_text

# (figure member, label, colour): each plotted as its rate of the decisions replayed, in %.
Plotted = Literal["approvals", "failures_caught", "successes_lost", "review_load_change"]
SERIES: tuple[tuple[Plotted, str, str], ...] = (("approvals", "approvals", "#2a9d8f"), ("failures_caught", "failures caught", "#e76f51"),
          ("successes_lost", "successes lost", "#8d6cab"), ("review_load_change", "review load change", "#e9c46a"))

TITLES: dict[str, str] = {**{name: label for name, label, _ in SERIES}, "net_effect": "net effect / decision",
          "immature": "too young to judge"}


def sweep_columns(result: Sweep) -> dict[str, list[Any]]:
    """The plot's columns: threshold, and per series its rate and interval bounds in %."""
    points = result["points"]
    columns: dict[str, list[Any]] = {"threshold": [p["threshold"] for p in points]}
    for name, _label, _colour in SERIES:
        rates = [p[name]["rate"] for p in points]
        intervals = [p[name]["interval_95"] or (None, None) for p in points]
        columns[name] = [None if r is None else 100 * r for r in rates]
        columns[f"{name}_low"] = [None if i[0] is None else 100 * i[0] for i in intervals]
        columns[f"{name}_high"] = [None if i[1] is None else 100 * i[1] for i in intervals]
    return columns


def sweep_frame(result: Sweep) -> pd.DataFrame:
    """One row per threshold, as text with the counts and intervals (the same figures as the plot)."""
    def cell(figure: Figure) -> str:
        interval, rate = figure["interval_95"], figure["rate"]
        if rate is None or interval is None:
            return f"{figure['count']:,}"
        return f"{figure['count']:,} ({numbers.rate(rate)}, 95% {numbers.rate_interval(interval[0], interval[1])})"

    # The threshold as the draft will hold it (100, 0.3: never 0.30000000000000004).
    rows = [{"threshold": f"{p['threshold']:.12g}", **{name: cell(p[name]) for name, _, _ in SERIES},
             "net_effect": numbers.signed(p["expected_net_effect"]["per_decision"], NET_PLACES),
             "immature": p["immature"]["count"]}
            for p in result["points"]]
    return pd.DataFrame(rows)


def sweep_plot(result: Sweep, on_pick: Any) -> pn.pane.Bokeh:
    """The sweep's figure; tapping a point calls `on_pick(threshold)`."""
    source = ColumnDataSource(sweep_columns(result))
    leaf = result["leaf"]
    plot = figure(height=300, sizing_mode="stretch_width", tools="reset", toolbar_location="above",
                  x_axis_label=f"{leaf['field']} threshold ({leaf['rule_id']}, {leaf['operator']})",
                  y_axis_label="% of decisions replayed",
                  title=f"Threshold sweep over {result['decisions_replayed']:,} decisions (95% intervals)")
    circles: list[DataRenderer] = []
    for name, label, colour in SERIES:
        plot.varea(x="threshold", y1=f"{name}_low", y2=f"{name}_high", source=source, fill_color=colour,
                   fill_alpha=0.2)
        plot.line(x="threshold", y=name, source=source, line_color=colour, line_width=2, legend_label=label)
        circles.append(plot.scatter(x="threshold", y=name, source=source, size=7, color=colour))
    plot.add_layout(Span(location=leaf["draft_value"], dimension="height", line_dash="dashed", line_color="#555"))
    plot.add_tools(HoverTool(renderers=circles, tooltips=[("threshold", "@threshold{0.[000]}")]))
    plot.add_tools(TapTool(renderers=circles))
    plot.legend.location = "top_left"
    plot.legend.click_policy = "hide"

    def picked(_attr: str, _old: list[int], new: list[int]) -> None:
        if new:
            on_pick(float(source.data["threshold"][new[0]]))

    source.selected.on_change("indices", picked)
    return pn.pane.Bokeh(plot, sizing_mode="stretch_width", css_classes=["sweep-plot"])


def sweep_view(state: AuthoringState) -> pn.Column:
    def options(comparisons: list[Comparison]) -> dict[str, str]:
        return {comparison_label(c): comparison_key(c) for c in comparisons}

    pick = pn.widgets.Select.from_param(state.param.sweep_key, name="Comparison", options=options(state.comparisons),
                                        width=360)
    state.param.watch(lambda e: setattr(pick, "options", options(e.new)), "comparisons")
    low = pn.widgets.FloatInput.from_param(state.param.sweep_from, name="From", width=110)
    high = pn.widgets.FloatInput.from_param(state.param.sweep_to, name="To", width=110)
    steps = pn.widgets.IntInput.from_param(state.param.sweep_steps, name="Thresholds", width=110)
    run = pn.widgets.Button(name="Sweep threshold", button_type="primary")

    async def start(_: object) -> None:
        request = state.sweep_request()
        if request is None:
            return
        run.disabled = True
        computed = None
        try:
            computed = await asyncio.to_thread(state.compute_sweep, request)
        finally:
            state.apply_sweep(computed)
            run.disabled = False

    run.on_click(start)

    def shown(result: Sweep | None) -> pn.viewable.Viewable:
        if not result:
            return pn.pane.Markdown("*Pick a comparison and a range, then sweep: each threshold's figures over "
                                    "full history.*")
        table = pn.widgets.Tabulator(sweep_frame(result), disabled=True, show_index=False, height=240, titles=TITLES,
                                     sizing_mode="stretch_width", css_classes=["sweep-points"])
        table.on_click(lambda event: state.use_threshold(float(table.value.iloc[event.row]["threshold"])))
        head = pn.pane.Markdown(
            f"Draft value {md_text(result['leaf']['draft_value'])} (dashed). Click a point, or a row, to set "
            f"that threshold in the draft. As of {md_text(result['as_of'])}; "
            f"{result['scalar_rows']:,} rows evaluated by the scalar evaluator.", css_classes=["sweep-head"])
        return pn.Column(head, sweep_plot(result, state.use_threshold), table, sizing_mode="stretch_width")

    basis = pn.pane.Markdown(pn.bind(md_text, state.param.sweep_basis), css_classes=["sweep-basis"])
    return pn.Column("### Threshold sweep", pn.Row(pick, low, high, steps, run, align="end"), basis,
                     pn.bind(shown, state.param.sweep_result), sizing_mode="stretch_width")
