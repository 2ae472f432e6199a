"""Decisions page: filters, a paged table, and one decision's record, receipts, proof and
verification."""

from __future__ import annotations

import panel as pn

from workbench.app.pages.common import note
from workbench.app.state.decisions import DecisionsState
from workbench.textsafe import md_text


def _verification_markdown(detail) -> str:
    if not detail:
        return "*Open a decision to verify it.*"
    result = detail.get("verification") or {}
    verdict = "verified" if result.get("verified") else "NOT verified"
    failed = result.get("failed_checks") or []
    lines = [f"**{verdict}** (recomputed now from the ledger)"]
    if failed:
        lines.append("Failed checks: " + ", ".join(md_text(name) for name in failed))
    return "\n\n".join(lines)


def decisions_page(state: DecisionsState, policies: list[str]) -> pn.viewable.Viewable:
    policy = pn.widgets.Select.from_param(state.param.policy_id, name="Policy", options=[""] + policies)
    verdict = pn.widgets.Select.from_param(state.param.verdict, name="Verdict")
    rule = pn.widgets.TextInput.from_param(state.param.rule, name="Matched rule")
    search = pn.widgets.TextInput.from_param(state.param.search, name="Decision id starts with")
    previous = pn.widgets.Button(name="◀ Previous")
    following = pn.widgets.Button(name="Next ▶")
    previous.on_click(lambda _: setattr(state, "page", max(1, state.page - 1)))
    following.on_click(lambda _: setattr(state, "page", min(state.pages, state.page + 1)))

    table = pn.widgets.Tabulator(state.rows.to_pandas() if state.rows is not None else None,
                                 selectable=1, disabled=True, show_index=False, height=420,
                                 sizing_mode="stretch_width", name="decisions")

    def rows_changed(event):
        table.value = event.new.to_pandas() if event.new is not None else None

    state.param.watch(rows_changed, "rows")

    def picked(event):
        if event.new and table.value is not None:
            state.open(str(table.value.iloc[event.new[0]]["decision_id"]))

    table.param.watch(picked, "selection")
    open_id = pn.widgets.TextInput(name="Open decision id", placeholder="dec_…")
    open_button = pn.widgets.Button(name="Open", button_type="primary")
    open_button.on_click(lambda _: state.open(open_id.value))

    def detail_view(detail):
        if not detail:
            return pn.pane.Markdown("*Select a row or enter a decision id.*")
        receipts = detail["receipts"]
        return pn.Tabs(
            ("Record", pn.pane.JSON(detail["record"], depth=1, sizing_mode="stretch_width")),
            (f"Executions ({receipts['execution']['total']})",
             pn.pane.JSON(receipts["execution"]["items"], depth=2)),
            (f"Outcomes ({receipts['outcome']['total']})", pn.pane.JSON(receipts["outcome"]["items"], depth=2)),
            (f"CRM syncs ({receipts['crm_sync']['total']})", pn.pane.JSON(receipts["crm_sync"]["items"], depth=2)),
            ("Inclusion proof", pn.pane.JSON(detail["inclusion"], depth=2)),
            ("Verification", pn.pane.JSON(detail["verification"], depth=1)),
            dynamic=False,
        )

    return pn.Column(
        pn.Row(policy, verdict, rule, search),
        note(state.param.message),
        table,
        pn.Row(previous, following, open_id, open_button, align="end"),
        pn.pane.Markdown(pn.bind(_verification_markdown, state.param.detail), css_classes=["verification"]),
        pn.bind(detail_view, state.param.detail),
        name="Decisions",
    )
