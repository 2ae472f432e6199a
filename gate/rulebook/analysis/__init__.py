"""Exact analysis of Rulebook v1: lint, semantic diff of two versions, minimal flips.

Pure Python over the evaluator's own semantics (no solver): every field's values are cut into
finitely many atoms on which every leaf is constant (`space`), conditions become unions of
products of atom sets (`regions`), and a rulebook becomes a decision list over them (`model`).
Where that is not possible (many `contains` values on one field, or a rulebook too large for
the cube budget) the functions fall back to sampling through the scalar evaluator and say so
(`exact: false` with the reasons); they never silently claim more than they know.

Public interface (all take validated-or-not Rulebook v1 dicts and raise
`gate.errors.RulebookInvalid` when one is invalid):

- `lint(rulebook) -> LintReport`: dead (unsatisfiable or shadowed) rules, overlapping rules with
  different outcomes and the winner, fall-through regions, fields `input_schema` does not declare;
  `group_findings(report findings)` the same findings grouped as readers see them (one line per
  distinct finding, with its count and regions).
- `semantic_diff(old, new, compare="outcome") -> DiffReport`: every region where the result
  changes, with old → new labels and a witness; `verdict` is "equivalent" when there is none.
- `minimal_flips(rulebook, facts, compare="outcome") -> list[Flip]`: per field, the smallest
  change of that one fact that changes the result, with the rule that then matches.

Each result has `.to_json()`; the JSON shapes are documented in docs/rulebook-analysis.md and
typed as `DiffReportJSON`, `LintReportJSON` and `FlipJSON` (their parts in `shapes`).
"""

from gate.rulebook.analysis.diff import Difference, DiffReport, DiffReportJSON, semantic_diff
from gate.rulebook.analysis.flips import Flip, FlipJSON, minimal_flips
from gate.rulebook.analysis.lint import LintReport, LintReportJSON, group_findings, lint
from gate.rulebook.analysis.shapes import LabelJSON

__all__ = ["DiffReport", "DiffReportJSON", "Difference", "Flip", "FlipJSON", "LabelJSON", "LintReport",
           "LintReportJSON", "group_findings", "lint", "minimal_flips", "semantic_diff"]
