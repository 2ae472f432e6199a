"""Migration page: dry-run the draft over full history, beside the exact semantic diff; export
the signed manifest and report; start the draft in shadow or request its activation (releases)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import panel as pn

from gate.vocabulary import VERDICTS
from workbench.app.pages.common import confirmation_box, note
from workbench.app.state.migration import Computed, MigrationState, Refused
from workbench.migration.baseline import compared_with
from workbench.migration.holdcost import hold_cost_text
from workbench.migration.impact import impact_rows
from workbench.migration.summary import DryRunResult
from workbench.reports.textsafe import md_text

DEFAULT_RULE = "(default outcome)"  # a null rule id: no rule matched (or needs_input)
RULE_COLUMNS = ("old_rule", "new_rule", "rule_id")


def table(rows: Sequence[Mapping[str, object]]) -> pd.DataFrame:
    """Result rows as a frame, a null rule id shown as the default outcome it stands for."""
    frame = pd.DataFrame(rows)
    for column in RULE_COLUMNS:
        if column in frame:
            frame[column] = frame[column].fillna(DEFAULT_RULE)
    return frame


def transition_matrix(result: DryRunResult) -> pd.DataFrame:
    """Baseline verdict (rows: the current version's, or the history's) × draft verdict (columns),
    from the result's `transitions`."""
    counts = {(t["from"], t["to"]): t["count"] for t in result["transitions"]}
    old_side = "current" if (result.get("baseline") or {}).get("kind") == "version" else "history"
    return pd.DataFrame({f"draft: {new}": [counts.get((old, new), 0) for old in VERDICTS] for new in VERDICTS},
                        index=[f"{old_side}: {old}" for old in VERDICTS])


def _result_view(result: DryRunResult | None) -> pn.viewable.Viewable:
    if not result:
        return pn.pane.Markdown("*Run a dry-run to see the draft's impact on history.*")
    review = result["review_load"]
    impact = "  \n".join(f"{label}: **{md_text(text)}**" for label, text in impact_rows(result["impact"]))
    summary = (
        f"*{md_text(compared_with(result.get('baseline')).capitalize())}.*  \n"
        f"**{result['decisions_evaluated']}** decisions replayed · **{result['decisions_changed']}** change verdict · "
        f"**{result['decisions_unreplayable']}** could not be replayed (no stored facts)  \n"
        f"{impact}  \n"
        f"Review queue: {review['before']} → {review['after']} ({review['delta']:+d}) · "
        f"rules that never fired in history: {md_text(', '.join(result['rules_never_fired_in_history']) or 'none')}  \n"
        f"Cost of a hold: {md_text(hold_cost_text(review.get('hold_cost')))}"
    )
    flips = table(result["flips"]["listed"])
    return pn.Column(
        pn.pane.Markdown(summary, css_classes=["dry-run-summary"], sizing_mode="stretch_width"),
        pn.Row(
            pn.Column("#### Verdict transitions", pn.pane.DataFrame(transition_matrix(result), css_classes=["transition-matrix"])),
            pn.Column("#### Old rule → draft rule",
                      pn.widgets.Tabulator(table(result["rule_transitions"]), disabled=True,
                                           show_index=False, height=240, layout="fit_data_table")),
        ),
        pn.Row(
            pn.Column("#### Drift by rule", pn.widgets.Tabulator(table(result["drift_by_rule"]),
                                                                   disabled=True, show_index=False, height=220,
                                                                   layout="fit_data_table")),
            pn.Column("#### Drift by reason code", pn.widgets.Tabulator(pd.DataFrame(result["drift_by_reason"]),
                                                                          disabled=True, show_index=False, height=220,
                                                                          layout="fit_data_table")),
        ),
        "#### Decisions that flip, with their known outcomes",
        pn.widgets.Tabulator(flips, disabled=True, show_index=False, height=260, sizing_mode="stretch_width",
                             pagination="local", page_size=10),
        sizing_mode="stretch_width",
    )


SEMANTIC_WIDTH = 480  # the semantic diff's column beside the dry-run


def _semantic_view(semantic: dict[str, Any] | None) -> pn.viewable.Viewable:
    if semantic is None:
        return pn.pane.Markdown("*Semantic diff: no current version registered to compare with.*")
    differences = semantic.get("differences", [])
    head = (f"**Exact semantic diff (current → draft): {md_text(semantic.get('verdict'))}** · "
            f"{len(differences)} region(s) can change" + ("" if semantic.get("exact", True) else " · sampled, not exact"))
    rows = [{"where": d.get("text"),
             "current": f"{d['old'].get('decision')} · {d['old'].get('rule_id') or 'default'}",
             "draft": f"{d['new'].get('decision')} · {d['new'].get('rule_id') or 'default'}",
             "witness": json.dumps(d.get("witness"), ensure_ascii=False)} for d in differences[:50]]
    # The column's width, every cell wrapped: its longest texts ran the table past the page's edge.
    wrapped = {name: {"type": "textarea"} for name in ("where", "current", "draft", "witness")}
    return pn.Column(pn.pane.Markdown(head, css_classes=["semantic-diff"]),
                     pn.widgets.Tabulator(pd.DataFrame(rows), disabled=True, show_index=False, height=320,
                                          width=SEMANTIC_WIDTH - 10, layout="fit_columns", formatters=wrapped,
                                          stylesheets=[".tabulator-cell { overflow-wrap: anywhere; }"],
                                          css_classes=["semantic-table"]) if rows else pn.Spacer())


def migration_page(state: MigrationState) -> pn.viewable.Viewable:
    run = pn.widgets.Button(name="Dry-run draft over full history", button_type="primary")
    progress = pn.indicators.Progress(active=False, value=-1, width=240, visible=False)
    export = pn.widgets.Button(name="Export manifest and report")
    shadow = pn.widgets.Button(name="Start shadow", button_type="warning")
    activate = pn.widgets.Button(name="Request activation", button_type="danger")

    async def start(_: object) -> None:
        # The dry-run computes in a worker thread; every parameter and widget is written here,
        # on the server's event loop, so each change reaches the browser.
        draft = state.begin()
        if draft is None:
            return
        run.disabled, progress.visible, progress.active = True, True, True
        computed: Computed | Refused | None = None
        try:
            computed = await asyncio.to_thread(state.compute, draft)
        finally:
            state.finish(computed)
            run.disabled, progress.visible, progress.active = False, False, False

    run.on_click(start)
    export.on_click(lambda _: state.export())
    shadow.on_click(lambda _: state.start_shadow())
    activate.on_click(lambda _: state.request_activation())

    def follow(*_: object) -> None:
        # Only what the session's roles permit is shown; MigrationState refuses the rest anyway.
        run.visible, export.visible = state.may("dry_run"), state.may("export")
        shadow.visible = activate.visible = state.may("publish") and state.may("release")

    state.param.watch(follow, "scope")
    follow()

    def downloads(exported: dict[str, str] | None) -> pn.viewable.Viewable:
        if not exported:
            return pn.Spacer()
        return pn.Row(*[pn.widgets.FileDownload(file=path, filename=name, label=f"Download {name}",
                                                button_type="success")
                        for name, path in exported.items() if name != "report.md"])

    against = pn.widgets.RadioButtonGroup.from_param(state.param.against, name="Compare with",
                                                     css_classes=["dry-run-baseline"])
    return pn.Column(
        pn.Row(run, against, progress, export, shadow, activate, align="center"),
        confirmation_box(state.param.proposal, state.confirmation_text, state.confirm, state.cancel, "migration"),
        note(state.param.message),
        pn.bind(downloads, state.param.exported),
        pn.Row(pn.Column(pn.bind(_result_view, state.param.result), sizing_mode="stretch_width"),
               pn.Column(pn.bind(_semantic_view, state.param.semantic), width=SEMANTIC_WIDTH)),
        name="Migration",
    )
