"""Authoring: a draft rulebook with live validation, tests against facts and stored decisions,
exact lint and minimal flips."""

from __future__ import annotations

import json
from typing import Any

import param

from gate.rulebook.analysis import lint, minimal_flips
from gate.rulebook.layout import readable_order
from workbench.app.store import DraftCheck, WorkbenchStore, check_draft, evaluate


class AuthoringState(param.Parameterized):
    """State of the authoring page for one session.

    `draft_text` is what the author typed; every change re-validates it (`check`), and the
    errors carry the exact schema path and the line and column where the author typed it.
    """

    scope = param.String(default="")
    rulebook_id = param.String(default="")
    draft_text = param.String(default="")
    check = param.Parameter(default=None, doc="DraftCheck of draft_text")
    facts_text = param.String(default="{}")
    test_result = param.Dict(default=None, allow_None=True)
    flips = param.List(default=[])
    decision_id = param.String(default="")
    decision_test = param.Dict(default=None, allow_None=True)
    lint_report = param.Dict(default=None, allow_None=True)
    message = param.String(default="")

    def __init__(self, store: WorkbenchStore, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self.check = check_draft(self.draft_text) if self.draft_text else None

    @param.depends("draft_text", watch=True)
    def _revalidate(self) -> None:
        self.check = check_draft(self.draft_text)
        self.lint_report = None

    @property
    def draft(self) -> dict[str, Any] | None:
        check: DraftCheck | None = self.check
        return check.rulebook if check is not None and check.valid else None

    def _require_draft(self) -> dict[str, Any] | None:
        draft = self.draft
        if draft is None:
            self.message = "fix the draft's errors first"
        return draft

    def load_current(self) -> None:
        """Start a draft from the scope's current version of `rulebook_id`."""
        current = self.store.current_rulebook(self.scope, self.rulebook_id) if self.rulebook_id else None
        if current is None:
            self.message = f"no registered version of {self.rulebook_id!r} in scope {self.scope!r}"
            return
        # Stored canonically (keys sorted): shown in the schema's reading order instead.
        self.draft_text = json.dumps(readable_order(current), indent=2, ensure_ascii=False)
        self.message = f"loaded {current['rulebook_id']} version {current['version']}"

    def run_facts(self) -> None:
        """Evaluate the draft over the hand-entered facts, with each fact's minimal flip."""
        draft = self._require_draft()
        if draft is None:
            return
        try:
            facts = json.loads(self.facts_text)
        except json.JSONDecodeError as exc:
            self.test_result, self.flips = None, []
            self.message = f"facts are not JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
            return
        self.test_result = evaluate(draft, facts)
        self.flips = [flip.to_json() for flip in minimal_flips(draft, facts)] if isinstance(facts, dict) else []
        self.message = ""

    def run_decision(self) -> None:
        """Evaluate the draft over a stored decision's facts, beside the stored verdict."""
        draft = self._require_draft()
        if draft is None:
            return
        decision_id = self.decision_id.strip()
        stored = self.store.stored_evaluation(self.scope, decision_id) if decision_id else None
        if stored is None:
            self.decision_test = None
            self.message = f"no decision {decision_id!r} in scope {self.scope!r}"
            return
        self.decision_test = {**stored, "draft": evaluate(draft, stored["facts"])}
        self.message = ""

    def run_lint(self) -> None:
        draft = self._require_draft()
        if draft is not None:
            self.lint_report = lint(draft).to_json()
            self.message = ""
