"""Decisions: filter and page through a scope's decisions; open one to see its record,
receipts and outcomes, its chain inclusion proof and a fresh verification."""

from __future__ import annotations

from typing import Any

import param

from gate.vocabulary import VERDICTS
from workbench.app.paging import PagedState
from workbench.app.store import WorkbenchStore
from workbench.dataset.location import DatasetError


class DecisionsState(PagedState):
    scope = param.String(default="")
    policy_id = param.String(default="")
    verdict: param.Selector[str] = param.Selector(default="", objects=["", *VERDICTS])
    rule = param.String(default="", doc="matched rule id; empty for any")
    search = param.String(default="", doc="decision id prefix")
    rows = param.Parameter(default=None, doc="polars DataFrame of the current page")
    selected = param.String(default="")
    detail = param.Dict(default=None, allow_None=True)
    message = param.String(default="")

    def __init__(self, store: WorkbenchStore, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.refresh()

    @param.depends("scope", "policy_id", "verdict", "rule", "search", "page_size", watch=True)
    def _filters_changed(self) -> None:
        self.first_page()

    @param.depends("page", watch=True)
    def refresh(self) -> None:
        """Load the current page from the dataset."""
        if not self.scope:
            self.rows, self.total = None, 0
            return
        try:
            rows, total = self.store.decisions.decision_page(
                self.scope, policy_id=self.policy_id or None, verdict=self.verdict or None,
                rule=self.rule or None, id_prefix=self.search.strip() or None,
                offset=(min(self.page, 10**9) - 1) * self.page_size, limit=self.page_size)
        except DatasetError as exc:  # a dataset that does not match its manifest is never shown
            self.rows, self.total = None, 0
            self.message = f"the dataset cannot be used: {exc}"
            return
        self.rows, self.total = rows, total
        self.message = f"{total} decision(s) · page {self.page} of {self.pages}"

    def open(self, decision_id: str) -> None:
        """Open one decision of this scope (another scope's id reads as not found)."""
        decision_id = decision_id.strip()
        self.selected = decision_id
        self.detail = self.store.decisions.decision_detail(self.scope, decision_id) if decision_id else None
        if self.detail is None:
            self.message = f"no decision {decision_id!r} in scope {self.scope!r}"
