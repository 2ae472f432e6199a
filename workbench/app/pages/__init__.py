"""The workbench's pages, assembled for one session (`build_app`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import panel as pn
import param

from gate.principals import Permission
from workbench.app.access import Identity, Rights, roles_text
from workbench.app.pages.authoring import authoring_page
from workbench.app.pages.decisions import decisions_page
from workbench.app.pages.events import events_page
from workbench.app.pages.inbox import inbox_page
from workbench.app.pages.links import (
    QUERY,
    Links,
    draft_for_url,
    draft_value,
    share_in_url,
    text_value,
)
from workbench.app.pages.migration import migration_page
from workbench.app.pages.overview import overview_page
from workbench.app.pages.releases import releases_page
from workbench.app.state.authoring import AuthoringState
from workbench.app.state.decisions import DecisionsState
from workbench.app.state.events import EventsState
from workbench.app.state.inbox import InboxState
from workbench.app.state.migration import MigrationState
from workbench.app.state.overview import OverviewState
from workbench.app.state.releases import ReleasesState
from workbench.app.store import RefreshRunning, WorkbenchStore
from workbench.dataset.trust import trust_text
from workbench.reports.textsafe import md_text
from workbench.signing import SigningRefused

# The pages, in tab order: each one's name in the URL (`?page=`) and its view of the session's
# state (a `Session`, below). A new page is one entry here, its state in `Session.__init__`, its
# view and state modules and its browser test (docs/architecture.md "Where a change goes").
VIEWS: tuple[tuple[str, Callable[[Any, list[str]], Any]], ...] = (
    ("overview", lambda session, names: overview_page(session.overview, names)),
    ("decisions", lambda session, names: decisions_page(session.decisions, names)),
    ("authoring", lambda session, names: authoring_page(session.authoring, names)),
    ("migration", lambda session, _names: migration_page(session.migration)),
    ("releases", lambda session, _names: releases_page(session.releases)),
    ("events", lambda session, _names: events_page(session.events)),
    ("inbox", lambda session, _names: inbox_page(session.inbox)),
)
PAGES = tuple(name for name, _view in VIEWS)


class Session(param.Parameterized):
    """The session's shared selection: one scope and one policy for every page, and the deep
    link (`links`) that names them, the open page, the open decision, the draft, and the Inbox's
    open hold and filters."""

    scope = param.String(default="")
    policy = param.String(default="")
    page: param.Selector[str] = param.Selector(default=PAGES[0], objects=list(PAGES))
    dataset = param.String(default="")

    def __init__(self, store: WorkbenchStore, scopes: list[str], export_root: Path, *,
                 rights: Rights, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.scopes = scopes
        self.links = Links()  # type: ignore[no-untyped-call]  # its __init__ is param's, unannotated
        self.overview = OverviewState(store)
        self.decisions = DecisionsState(store)
        self.authoring = AuthoringState(store)
        self.migration = MigrationState(store, self.authoring, export_root, rights)
        self.releases = ReleasesState(store, rights, dry_run_result=lambda: self.migration.result)
        self.events = EventsState(store, rights)
        self.inbox = InboxState(store, rights)
        self.describe_dataset()
        self._scope_changed()
        self.authoring.param.watch(lambda e: setattr(self.migration, "rulebook_id", e.new), "rulebook_id")
        self.overview.param.watch(lambda e: setattr(self, "policy", e.new), "policy_id")
        self._writing_link = False
        self.links.param.watch(lambda *_: self.follow_link(), list(QUERY))  # one call per batch
        self.param.watch(lambda *events: self._to_link(**{e.name: e.new for e in events}), ["scope", "policy", "page"])
        self.decisions.param.watch(lambda e: self._to_link(decision=e.new), "selected")
        self.inbox.param.watch(lambda e: self._to_link(hold=e.new), "selected")
        self.inbox.param.watch(lambda *events: self._to_link(**{e.name: e.new for e in events}), ["state", "queue"])
        self.authoring.param.watch(lambda e: self._to_link(draft=draft_for_url(e.new)), "draft_text")
        # The Releases page reads the release again when it opens and after Migration moves it.
        self.param.watch(lambda e: self.releases.refresh() if e.new == "releases" else None, "page")
        self.param.watch(lambda e: self.events.refresh() if e.new == "events" else None, "page")
        self.param.watch(lambda e: self.inbox.reload() if e.new == "inbox" else None, "page")
        self.migration.param.watch(lambda _e: self.releases.refresh(), "message")

    def _to_link(self, **values: str) -> None:
        """Write the session's state into the link (the URL); not read back as a new link."""
        self._writing_link = True
        try:
            self.links.param.update(values)
        finally:
            self._writing_link = False

    @param.depends("scope", watch=True)
    def _scope_changed(self) -> None:
        if self.scope and self.scope not in self.scopes:  # SECURITY: only granted scopes
            self.scope = ""
            return
        for state in (self.overview, self.decisions, self.authoring, self.migration, self.releases, self.events,
                      self.inbox):
            state.scope = self.scope
        self.decisions.selected, self.decisions.detail = "", None  # another scope's decision is not shown
        self.inbox.selected, self.inbox.detail, self.inbox.proposal = "", None, None  # nor its hold
        names = self.store.policies(self.scope) if self.scope else []
        if self.policy not in names:
            self.policy = names[0] if names else ""
        else:
            self._policy_changed()

    @param.depends("policy", watch=True)
    def _policy_changed(self) -> None:
        """The Overview's policy is the session's: the Decisions filter and the Authoring and
        Migration rulebook follow it."""
        if not self.policy:
            return
        self.overview.policy_id = self.policy
        self.decisions.policy_id = self.policy
        self.authoring.rulebook_id = self.policy
        self.migration.rulebook_id = self.policy
        self.releases.rulebook_id = self.policy

    def follow_link(self) -> None:
        """Apply the URL's values (untrusted): a scope must be granted (else nothing opens), a
        policy must be the scope's, a page one of PAGES; the decision and the hold open only in the
        scope, and a hold's link only opens it (`InboxState.follow`)."""
        if self._writing_link:  # our own write, not a link the browser opened
            return
        links = self.links  # read every value first: applying the scope rewrites the others
        scope, policy, page = text_value(links.scope), text_value(links.policy), text_value(links.page)
        decision, draft = text_value(links.decision), draft_value(links.draft)
        hold, hold_state, queue = text_value(links.hold), text_value(links.state), text_value(links.queue)
        if scope != self.scope:
            self.scope = scope if scope in self.scopes else ""
        if not self.scope:
            return
        if policy and policy != self.policy and policy in self.store.policies(self.scope):
            self.policy = policy
        if page in PAGES and page != self.page:
            self.page = page
        if decision and decision != self.decisions.selected:
            self.decisions.open(decision)
        if draft and draft_for_url(draft) != draft_for_url(self.authoring.draft_text):
            self.authoring.draft_text = draft
        self.inbox.follow(hold_state, queue, hold)

    def describe_dataset(self, note: str = "") -> None:
        """The status line's text (plain text: the page escapes it)."""
        status = self.store.dataset_status()
        if not status["ok"]:
            self.dataset = status["message"]
            return
        rows = status["rows"]
        self.dataset = (f"dataset updated {status['updated_at']} · {rows.get('decisions', 0)} decisions, "
                        f"{rows.get('outcomes', 0)} outcomes" + (" · synthetic" if status["synthetic"] else "")
                        + f" · {trust_text(status['source'])}" + (f" · {note}" if note else ""))


def _pages(session: Session, scopes: list[str]) -> Callable[..., Any]:
    """The scope's pages as tabs, the open tab kept in step with the session (and the URL):
    a function of the scope that Panel renders again when the scope changes."""
    shown: dict[str, pn.Tabs] = {}

    def pages(scope_name: str) -> pn.viewable.Viewable:
        if not scope_name:
            return pn.pane.Markdown("### Pick a scope to begin" if scopes else
                                    "### No scope is granted to you, or the ledger has no decisions yet")
        names = session.store.policies(scope_name)
        tabs = pn.Tabs(
            *(view(session, names) for _name, view in VIEWS),
            dynamic=False, sizing_mode="stretch_width", active=PAGES.index(session.page),
        )
        tabs.param.watch(lambda e: setattr(session, "page", PAGES[e.new]), "active")
        shown["tabs"] = tabs
        return tabs

    def page_changed(event: param.parameterized.Event) -> None:
        tabs = shown.get("tabs")
        if tabs is not None and tabs.active != PAGES.index(event.new):
            tabs.active = PAGES.index(event.new)

    session.param.watch(page_changed, "page")
    if pn.state.location is not None:  # served: the URL carries the state (a shareable link)
        share_in_url(pn.state.location, session.links)

    return pn.bind(pages, session.param.scope)


def _who(scope: str, rights: Rights) -> str:
    """The header's line: who acts, and the roles they hold in the open scope."""
    identity = rights.identity
    who = "local operator" if identity.operator else "signed in as"
    line = f"{who} **{md_text(identity.label)}**"
    if scope:
        line += f" · roles here: {md_text(roles_text(rights.roles_in(scope)))}"
    return line


EXPORT: Permission = "export"  # the permission a refresh needs, in every scope the ledger holds (it exports them all)


def may_refresh(store: WorkbenchStore, rights: Rights) -> bool:
    """Whether this session may re-export (and re-sign) the dataset: `export` in every scope."""
    return all(rights.may(scope, EXPORT) for scope in store.scopes())


def _refresh_control(store: WorkbenchStore, session: Session, rights: Rights) -> tuple[pn.widgets.Button, Any]:
    """The **Refresh dataset from ledger** button and its progress bar. SECURITY: the click is
    checked on the server (`may_refresh`, at the moment of the click), whatever the page sends;
    the store runs one refresh at a time."""
    refresh = pn.widgets.Button(name="Refresh dataset from ledger", visible=may_refresh(store, rights),
                                css_classes=["refresh-dataset"])
    bar = pn.indicators.Progress(value=0, max=100, width=200, visible=False)

    async def refresh_dataset(_: object) -> None:
        if not may_refresh(store, rights):
            session.describe_dataset("refresh refused: it needs the export permission in every scope")
            return
        refresh.disabled, bar.visible, bar.value = True, True, 0
        loop = asyncio.get_running_loop()

        def progress(done: int, total: int) -> None:  # called in the export's worker thread
            value = int(100 * done / total) if total else 100
            loop.call_soon_threadsafe(setattr, bar, "value", value)  # widgets change on the loop

        try:
            outcome = await asyncio.to_thread(store.refresh_dataset, progress)
        except SigningRefused as refused:  # nothing written: the export rule of `gate export`
            session.describe_dataset(f"refresh refused ({refused.code}): {refused.message}")
            return
        except RefreshRunning as running:
            session.describe_dataset(f"refresh refused: {running}")
            return
        finally:
            refresh.disabled, bar.visible = False, False
        session.describe_dataset(f"refreshed: {outcome['added']} new rows")
        session.overview.refresh()
        session.decisions.refresh()

    refresh.on_click(refresh_dataset)
    return refresh, bar


SIGN_OUT = "[Sign out](/logout) · [Switch person](/logout?switch=1)"


def build_app(store: WorkbenchStore, scopes: list[str], *, identity: Identity | None = None,
              roles: Callable[[str], frozenset[str]] | None = None,
              export_root: Path | None = None, signed_in: bool = False) -> pn.viewable.Viewable:
    """The app of one session. `identity` is who acts (default: the local operator, as on a
    loopback workbench without sign-in) and `roles(scope)` the roles it holds there (default:
    every role, the operator's); `signed_in`: the header offers sign-out and switch-person."""
    export_root = export_root or store.exports_dir
    if (identity is None) != (roles is None):
        raise ValueError("build_app: give both identity and roles, or neither")
    rights = Rights(identity, roles) if identity is not None and roles is not None else Rights.operator()
    session = Session(store, scopes, export_root, rights=rights)
    scope = pn.widgets.Select.from_param(session.param.scope, name="Scope", options=[""] + scopes)
    refresh, bar = _refresh_control(store, session, rights)
    status = pn.pane.Markdown(pn.bind(md_text, session.param.dataset), css_classes=["dataset-status"])
    who = pn.pane.Markdown(pn.bind(_who, session.param.scope, rights), css_classes=["signed-in"])
    account = [pn.pane.Markdown(SIGN_OUT, css_classes=["sign-out"])] if signed_in else []
    header = pn.Row(pn.pane.Markdown("## Decision Gate · policy workbench"), scope, refresh, bar, who, *account,
                    align="center")
    return pn.Column(header, status, _pages(session, scopes), sizing_mode="stretch_width")
