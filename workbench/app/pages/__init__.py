"""The workbench's pages, assembled for one session (`build_app`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import panel as pn
import param

from workbench.app.pages.authoring import authoring_page
from workbench.app.pages.decisions import decisions_page
from workbench.app.pages.migration import migration_page
from workbench.app.pages.overview import overview_page
from workbench.app.state.authoring import AuthoringState
from workbench.app.state.decisions import DecisionsState
from workbench.app.state.migration import MigrationState
from workbench.app.state.overview import OverviewState
from workbench.app.store import WorkbenchStore
from workbench.textsafe import md_text


class Session(param.Parameterized):
    """The session's shared selection: one scope for every page."""

    scope = param.String(default="")
    dataset = param.String(default="")

    def __init__(self, store: WorkbenchStore, scopes: list[str], export_root: Path, **params) -> None:
        super().__init__(**params)
        self.store = store
        self.scopes = scopes
        self.overview = OverviewState(store)
        self.decisions = DecisionsState(store)
        self.authoring = AuthoringState(store)
        self.migration = MigrationState(store, self.authoring, export_root)
        self.describe_dataset()
        self._scope_changed()
        self.authoring.param.watch(lambda e: setattr(self.migration, "rulebook_id", e.new), "rulebook_id")

    @param.depends("scope", watch=True)
    def _scope_changed(self) -> None:
        if self.scope and self.scope not in self.scopes:  # SECURITY: only granted scopes
            self.scope = ""
            return
        for state in (self.overview, self.decisions, self.authoring, self.migration):
            state.scope = self.scope

    def describe_dataset(self, note: str = "") -> None:
        """The status line's text (plain text: the page escapes it)."""
        status = self.store.dataset_status()
        if not status["ok"]:
            self.dataset = status["message"]
            return
        rows = status["rows"]
        self.dataset = (f"dataset updated {status['updated_at']} · {rows.get('decisions', 0)} decisions, "
                        f"{rows.get('outcomes', 0)} outcomes" + (" · synthetic" if status["synthetic"] else "")
                        + (f" · {note}" if note else ""))


def build_app(store: WorkbenchStore, scopes: list[str], *, user: str | None = None,
              export_root: Path | None = None) -> pn.viewable.Viewable:
    export_root = export_root or store.exports_dir
    session = Session(store, scopes, export_root)
    scope = pn.widgets.Select.from_param(session.param.scope, name="Scope", options=[""] + scopes)
    refresh = pn.widgets.Button(name="Refresh dataset from ledger")
    bar = pn.indicators.Progress(value=0, max=100, width=200, visible=False)
    status = pn.pane.Markdown(pn.bind(md_text, session.param.dataset), css_classes=["dataset-status"])

    def policies():
        return store.policies(session.scope) if session.scope else []

    async def refresh_dataset(_):
        refresh.disabled, bar.visible, bar.value = True, True, 0

        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:  # called in the export's worker thread
            value = int(100 * done / total) if total else 100
            loop.call_soon_threadsafe(setattr, bar, "value", value)  # widgets change on the loop

        try:
            outcome = await asyncio.to_thread(store.refresh_dataset, progress)
            session.describe_dataset(f"refreshed: {outcome['added']} new rows")
            session.overview.refresh()
            session.decisions.refresh()
        finally:
            refresh.disabled, bar.visible = False, False

    refresh.on_click(refresh_dataset)

    def pages(scope_name: str):
        if not scope_name:
            return pn.pane.Markdown("### Pick a scope to begin" if scopes else
                                    "### No scope is granted to you, or the ledger has no decisions yet")
        names = policies()
        if names and not session.overview.policy_id:
            session.overview.policy_id = names[0]
            session.authoring.rulebook_id = names[0]
            session.migration.rulebook_id = names[0]
        return pn.Tabs(
            overview_page(session.overview, names),
            decisions_page(session.decisions, names),
            authoring_page(session.authoring, names),
            migration_page(session.migration),
            dynamic=False, sizing_mode="stretch_width",
        )

    header = pn.Row(pn.pane.Markdown("## Decision Gate · policy workbench"), scope, refresh, bar,
                    pn.pane.Markdown(f"signed in as **{md_text(user)}**" if user else ""), align="center")
    return pn.Column(header, status, pn.bind(pages, session.param.scope), sizing_mode="stretch_width")
