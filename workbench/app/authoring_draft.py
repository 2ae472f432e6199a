"""The authoring page's draft (docs/workbench.md): the rulebook the author types, checked on every
edit (`check`: schema paths with the line and column typed), its rule table (the draft's rules
as rows, each with its stored history in the scope, and a table edit written back into the draft),
and the draft tested by hand: over facts typed in, over a stored decision's facts, and its exact
lint. The live impact and the threshold sweeps that follow each valid edit are the page state's
(`workbench.app.state.authoring.AuthoringState`, built over this class).
"""

from __future__ import annotations

import json
from typing import Any

import param

from gate.errors import GateError
from gate.rulebook import RulebookDocument
from gate.rulebook.analysis import lint, minimal_flips
from gate.rulebook.layout import readable_order
from workbench.app import ruletable
from workbench.app.ruletable import RuleRow, RuleRowHistory
from workbench.app.store import DraftCheck, WorkbenchStore, check_draft, evaluate
from workbench.migration.errors import DryRunError


class AuthoringDraft(param.Parameterized):
    """A draft rulebook of one session, its rule table and its hand tests (see the module docstring).

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
    # The rule table (rows of the draft as typed; `rule_history` of the stored decisions).
    rules = param.List(default=[], doc="ruletable.rule_rows of the draft, each with its history")
    rule_history = param.List(default=[], doc="workbench.reports.rules rows of the rulebook in the scope")
    table_message = param.String(default="")

    def __init__(self, store: WorkbenchStore, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[no-untyped-call]  # param's Parameterized.__init__ is unannotated
        self.store = store
        self._history_for: tuple[str, str] | None = None
        self.check = check_draft(self.draft_text) if self.draft_text else None

    # ------------------------------------------------------------------ the rule table

    def _with_history(self, rows: list[RuleRow]) -> list[RuleRowHistory]:
        """Each row with its rule's stored history (by rule id; none for a rule history never saw)."""
        by_rule = {row["rule_id"]: row for row in self.rule_history}
        out: list[RuleRowHistory] = []
        for row in rows:
            seen = by_rule.get(row["rule_id"])
            out.append({**row, "fired": seen["decisions"] if seen else 0,
                        "share": seen["share"] if seen else None,
                        "success_rate": seen["success_rate"] if seen else None,
                        "success_interval": seen["success_rate_interval"] if seen else None,
                        "resolved": seen["resolved"] if seen else 0})
        return out

    def load_rule_history(self) -> None:
        """Read each rule's history in the scope (cached by the store per dataset) and show it."""
        self._read_rule_history()
        parsed = self.check.rulebook if self.check is not None and isinstance(self.check.rulebook, dict) else None
        self.rules = self._with_history(ruletable.rule_rows(parsed)) if parsed is not None else []

    def _read_rule_history(self) -> None:
        self._history_for = (self.scope, self.rulebook_id)
        if not (self.scope and self.rulebook_id):
            self.rule_history = []
            return
        try:
            self.rule_history = list(self.store.migration.rule_history(self.scope, self.rulebook_id))
        except (DryRunError, GateError, OSError, ValueError) as exc:
            self.rule_history = []
            self.table_message = f"rule history unavailable: {exc}"

    def _edited(self, change: Any) -> None:
        """Write a table edit into the draft. The table then shows the draft's rows again, whatever
        became of the edit: a refused cell goes back to the draft's value (the message says why),
        and an edit the draft already held (a condition typed with other spacing) shows as the
        draft writes it. `rules` is sent even when equal to the last rows: the table's cell holds
        what was typed, not what `rules` holds."""
        parsed = self.check.rulebook if self.check is not None else None
        if not isinstance(parsed, dict):
            self.table_message = "not changed: the JSON does not parse: fix it in the editor first"
            self.param.trigger("rules")
            return
        try:
            text = ruletable.draft_text(change(parsed))
        except ruletable.RuleEditError as exc:
            self.table_message = f"not changed: {exc}"
            self.param.trigger("rules")
            return
        self.table_message = ""
        if text == self.draft_text:
            self.param.trigger("rules")
        else:
            self.draft_text = text

    def edit_cell(self, index: int, column: str, value: Any) -> None:
        """Write one table cell into the draft (the JSON editor follows); a bad cell changes nothing."""
        self._edited(lambda parsed: ruletable.with_cell(parsed, index, column, value))

    def add_rule(self) -> None:
        self._edited(ruletable.with_rule_added)

    def remove_rule(self, index: int) -> None:
        self._edited(lambda parsed: ruletable.with_rule_removed(parsed, index))

    @property
    def draft(self) -> RulebookDocument | None:
        check: DraftCheck | None = self.check
        return check.document if check is not None else None

    def _require_draft(self) -> RulebookDocument | None:
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
        self.load_rule_history()
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
        stored = self.store.decisions.stored_evaluation(self.scope, decision_id) if decision_id else None
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
