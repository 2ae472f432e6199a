"""Authoring: a draft rulebook with live validation, tests against facts and stored decisions,
exact lint and minimal flips (`workbench.app.authoring_draft.AuthoringDraft`: the draft, its check,
its rule table and its tests), and what follows each valid edit here: the live impact over the
scope's history and the threshold sweeps of one numeric comparison."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict, final

import param

from gate.errors import GateError
from gate.rulebook import RulebookDocument
from gate.rulebook.analysis import lint
from workbench.app import ruletable
from workbench.app.authoring_draft import AuthoringDraft
from workbench.app.store import check_draft
from workbench.migration.errors import DryRunError
from workbench.migration.sweep import (
    MAX_THRESHOLDS,
    SPREAD_QUANTILES,
    Comparison,
    Sweep,
    SweepRefused,
    default_range,
    numeric_comparisons,
    thresholds_between,
    with_threshold,
)
from workbench.services.impact import LiveSummary

LIVE_DEBOUNCE_S = 0.25  # the live impact runs this long after the last valid edit (pages schedule it)
SWEEP_STEPS = 41  # thresholds a sweep tries by default


@final  # no other member: "refused" tells a refusal apart
class LiveShown(TypedDict):
    """The live impact of a draft and its lint (`AuthoringState.compute_live`)."""

    summary: LiveSummary
    lint: Mapping[str, object]  # gate.rulebook.analysis.lint's report, as JSON


@final
class LiveRefused(TypedDict):
    """A draft whose live impact could not be computed (why), and its lint."""

    refused: str
    lint: Mapping[str, object]


class AuthoringState(AuthoringDraft):
    """State of the authoring page for one session: its draft (`AuthoringDraft`), the live impact
    of the last valid draft and the threshold sweeps of one of its numeric comparisons.
    """

    # Live impact: the dry-run's summary of the last valid draft, recomputed after each edit.
    live = param.Dict(default=None, allow_None=True, doc="store.migration.impact_summary of `live_hash`'s draft")
    live_hash = param.String(default="", doc="rulebook hash of the draft `live` describes")
    live_note = param.String(default="")
    # Threshold sweeps of one numeric comparison of the draft (`workbench.migration.sweep`).
    comparisons = param.List(default=[], doc="sweep.numeric_comparisons of the valid draft")
    sweep_key = param.String(default="", allow_None=True, doc="rule_id|field|occurrence of the swept comparison")
    sweep_from = param.Number(default=0.0)
    sweep_to = param.Number(default=1.0)
    sweep_steps = param.Integer(default=SWEEP_STEPS, bounds=(1, MAX_THRESHOLDS))
    sweep_basis = param.String(default="", doc="where the picked comparison's From and To came from")
    sweep_result = param.Dict(default=None, allow_None=True)

    @param.depends("draft_text", watch=True)
    def _revalidate(self) -> None:
        """The draft's check, its rule table's rows, and what follows from them.

        The rows are set first. The editor's text and marks, the lint and the sweep's picks follow
        `check`, and drawing them takes the server a while on a busy host: a table edit's answer
        (a cell the draft writes otherwise, the reading of a condition, a renamed rule's history)
        sent after them reached the browser after the JSON showed the edit, and drew the table again
        under the next cell's editor, which the author had opened meanwhile."""
        check = check_draft(self.draft_text)
        parsed = check.rulebook if isinstance(check.rulebook, dict) else None
        if parsed is not None and self._history_for != (self.scope, self.rulebook_id):
            self._read_rule_history()  # the first edit of another rulebook reads its history once
        self.rules = self._with_history(ruletable.rule_rows(parsed)) if parsed is not None else []
        self.check = check
        self.lint_report = None
        if check.document is not None:
            self._offer_comparisons(check.document)
            self.live_note = "updating…" if self.live_hash != check.rulebook_hash else self.live_note
        else:
            self.live_note = "the draft has errors: the live impact waits for a valid draft"

    # ------------------------------------------------------------------ live impact

    def compute_live(self, draft: RulebookDocument) -> LiveShown | LiveRefused:
        """The dry-run summary and the lint of `draft`, without touching any parameter (pages
        run it in a worker thread, then `apply_live` on the server's event loop)."""
        report = lint(draft).to_json()
        try:
            summary = self.store.migration.impact_summary(self.scope, self.rulebook_id or draft["rulebook_id"], draft)
        except (DryRunError, GateError) as exc:
            return {"refused": str(exc), "lint": report}
        return {"summary": summary, "lint": report}

    def apply_live(self, computed: LiveShown | LiveRefused | None, draft_hash: str) -> None:
        """Show what `compute_live` returned, unless the draft changed meanwhile."""
        check = self.check
        if check is None or check.rulebook_hash != draft_hash:
            return  # an older draft's figures: the newer edit's run will show its own
        if computed is None:
            self.live_note = "live impact failed: see the server log"
            return
        self.lint_report = computed["lint"]
        if "refused" in computed:
            self.live, self.live_hash = None, draft_hash
            self.live_note = f"no live impact: {computed['refused']}"
            return
        self.live, self.live_hash = computed["summary"], draft_hash
        self.live_note = ""

    # ------------------------------------------------------------------ threshold sweeps

    def _offer_comparisons(self, rulebook: RulebookDocument) -> None:
        """The draft's sweepable comparisons; a new pick only when the current one is gone (its
        range follows the pick, `_range_of_pick`). One batch: the picker follows once."""
        comparisons = numeric_comparisons(rulebook)
        keys = [comparison_key(c) for c in comparisons]
        if self.sweep_key in keys or not comparisons:
            self.param.update(comparisons=comparisons, sweep_key=self.sweep_key if comparisons else "")
            return
        self.param.update(comparisons=comparisons, sweep_key=keys[0])

    @param.depends("sweep_key", watch=True)
    def _range_of_pick(self) -> None:
        """Each picked comparison gets its own From and To: its field's observed spread in the
        scope's history (`sweep.default_range`), widened to hold the draft's value; an edit of
        From or To afterwards stands until the next pick."""
        chosen = next((c for c in self.comparisons if comparison_key(c) == self.sweep_key), None)
        if chosen is None:
            return
        value, field = float(chosen["value"]), chosen["field"]
        draft = self.draft
        rulebook_id = self.rulebook_id or (draft["rulebook_id"] if draft is not None else "")
        try:
            spread = (self.store.migration.field_spread(self.scope, rulebook_id, field)
                      if self.scope and rulebook_id else None)
            why = "no scope or rulebook to read its history"
        except (DryRunError, GateError, OSError, ValueError) as exc:
            spread, why = None, str(exc)
        low, high = default_range(value, spread)
        if spread is not None and spread["observed"]:
            q_low, q_high = (round(100 * q) for q in SPREAD_QUANTILES)
            basis = (f"{field}'s range: percentiles {q_low} to {q_high} of its {spread['observed']:,} observed "
                     f"values, and the draft's {value:g}")
        else:
            reason = why if spread is None else f"no decision in history has a number {field}"
            basis = f"{field}'s range: around the draft's {value:g} ({reason})"
        self.param.update(sweep_from=low, sweep_to=high, sweep_basis=basis)

    def sweep_request(self) -> tuple[RulebookDocument, tuple[str, str, int], list[float]] | None:
        """(draft, comparison, thresholds) of the sweep to run, or None (the message says why)."""
        draft = self._require_draft()
        if draft is None:
            return None
        chosen = next((c for c in self.comparisons if comparison_key(c) == self.sweep_key), None)
        if chosen is None:
            self.message = "pick a numeric comparison of the draft to sweep"
            return None
        try:
            thresholds = thresholds_between(float(self.sweep_from), float(self.sweep_to), int(self.sweep_steps))
        except DryRunError as exc:
            self.message = f"sweep refused: {exc}"
            return None
        return draft, (chosen["rule_id"], chosen["field"], int(chosen["occurrence"])), thresholds

    def compute_sweep(self, request: tuple[RulebookDocument, tuple[str, str, int], list[float]]
                      ) -> Sweep | SweepRefused:
        draft, leaf, thresholds = request
        try:
            return self.store.migration.sweep(self.scope, self.rulebook_id or draft["rulebook_id"], draft, leaf,
                                              thresholds)
        except (DryRunError, GateError) as exc:
            return {"refused": str(exc)}

    def apply_sweep(self, computed: Sweep | SweepRefused | None) -> None:
        if computed is None:
            self.message = "sweep failed: see the server log"
        elif "refused" in computed:
            self.sweep_result, self.message = None, f"sweep refused: {computed['refused']}"
        else:
            self.sweep_result = computed
            self.message = (f"swept {len(computed['points'])} thresholds over "
                            f"{computed['decisions_replayed']:,} decisions")

    def use_threshold(self, value: float) -> None:
        """Set the swept comparison's threshold in the draft (a clicked point of the sweep)."""
        leaf = (self.sweep_result or {}).get("leaf")
        parsed = self.draft
        if leaf is None or parsed is None:
            self.message = "run a sweep of a valid draft first"
            return
        try:
            edited = with_threshold(parsed, leaf["rule_id"], leaf["field"], int(leaf["occurrence"]), value)
        except DryRunError as exc:
            self.message = f"threshold not set: {exc}"
            return
        self.draft_text = ruletable.draft_text(edited)
        self.message = f"{leaf['rule_id']}: {leaf['field']} {leaf['operator']} {value:g} set in the draft"


def comparison_key(comparison: Comparison) -> str:
    """The sweep picker's value of one comparison: `rule_id|field|occurrence`."""
    return f"{comparison['rule_id']}|{comparison['field']}|{comparison['occurrence']}"


def comparison_label(comparison: Comparison) -> str:
    symbol = ruletable.WORDS.get(comparison["operator"], comparison["operator"])
    return f"{comparison['rule_id']}: {comparison['field']} {symbol} {comparison['value']}"
