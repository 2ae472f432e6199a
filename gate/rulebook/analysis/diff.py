"""Semantic diff of two rulebook versions: every input region whose result changes.

Exact method: both rulebooks are cut over one shared `Space`; the old decision list is run
over the whole input space (disjoint labelled cubes), then the new decision list is run inside
each old cube. Where the two labels differ (per `compare`, see `common`), the cube is a
difference. Cubes with the same (old, new) pair of labels are united where they differ in one
field only, each resulting region gets a witness fact set, and the witness is run through both
scalar evaluators: the report only claims what the evaluators confirm (a disagreement would be
a bug in this module and raises instead of reporting something false).

An empty list is the proof that the versions are equivalent (`verdict: "equivalent"`). When
the exact method does not apply (see `space` and `regions`), the versions are compared on
samples; differences found are real (witnessed), but "no difference" is then only
`no_difference_found`, with `exact: false` and the reasons.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gate.rulebook.analysis.common import (
    CompareKey,
    Region,
    compare_key,
    evaluator,
    label_of,
    region,
)
from gate.rulebook.analysis.model import Label, decision_list
from gate.rulebook.analysis.regions import Budget, BudgetExceeded, Cube, merge, partition
from gate.rulebook.analysis.sampling import DEFAULT_SAMPLES, samples
from gate.rulebook.analysis.shapes import FieldDescription, InexactReason, LabelJSON, RegionJSON
from gate.rulebook.analysis.space import Space
from gate.rulebook.shapes import Evaluator, RulebookDocument, RulebookRef, rulebook_ref
from gate.strict_json import JsonValue


class DifferenceJSON(TypedDict):
    """One difference: the old and new results and the region (`where` and `text` null, and
    `samples` given, for a sampled one)."""

    old: LabelJSON
    new: LabelJSON
    where: list[FieldDescription] | None
    text: str | None
    witness: dict[str, JsonValue]
    samples: NotRequired[int]


class DiffReportJSON(TypedDict):
    """`DiffReport.to_json()` (docs/rulebook-analysis.md, "Semantic diff JSON")."""

    kind: str
    old: RulebookRef
    new: RulebookRef
    compare: str
    verdict: str
    exact: bool
    method: str
    inexact: list[InexactReason]
    samples: int | None
    difference_count: int
    differences: list[DifferenceJSON]


@dataclass
class Difference:
    """One region where the old and the new rulebook give different results."""

    old: Label
    new: Label
    region: Region | None  # None for a sampled difference (only its witness is known)
    witness: dict[str, JsonValue]
    count: int = 1  # sampled differences: how many samples had this pair of results

    def contains(self, facts: Any) -> bool:
        return self.region is not None and self.region.contains(facts)

    def to_json(self) -> DifferenceJSON:
        body: RegionJSON = (self.region.to_json() if self.region
                            else {"where": None, "text": None, "witness": self.witness})
        out: DifferenceJSON = {"old": self.old.to_json(), "new": self.new.to_json(), "where": body["where"],
                               "text": body["text"], "witness": body["witness"]}
        if self.region is None:
            out["samples"] = self.count
        return out


@dataclass
class DiffReport:
    old_ref: RulebookRef
    new_ref: RulebookRef
    compare: str
    exact: bool
    differences: list[Difference] = field(default_factory=list)
    inexact: list[InexactReason] = field(default_factory=list)
    samples: int | None = None

    @property
    def verdict(self) -> str:
        if self.differences:
            return "different"
        return "equivalent" if self.exact else "no_difference_found"

    @property
    def equivalent(self) -> bool:
        return self.exact and not self.differences

    def region_of(self, facts: Any) -> Difference | None:
        """The difference whose region holds these facts (exact reports), else None."""
        return next((d for d in self.differences if d.contains(facts)), None)

    def to_json(self) -> DiffReportJSON:
        return {
            "kind": "rulebook_semantic_diff",
            "old": self.old_ref,
            "new": self.new_ref,
            "compare": self.compare,
            "verdict": self.verdict,
            "exact": self.exact,
            "method": "exact" if self.exact else "sampling",
            "inexact": self.inexact,
            "samples": self.samples,
            "difference_count": len(self.differences),
            "differences": [d.to_json() for d in self.differences],
        }


def semantic_diff(old: RulebookDocument, new: RulebookDocument, compare: str = "outcome", *, budget: int = 3_000_000,
                  sample_count: int = DEFAULT_SAMPLES) -> DiffReport:
    """Every input region whose result differs between two valid Rulebook v1 versions.

    Raises gate.errors.RulebookInvalid when either rulebook is invalid, ValueError for an
    unknown `compare`.
    """
    key = compare_key(compare)
    run_old, run_new = evaluator(old), evaluator(new)
    space = Space([old, new])
    report = DiffReport(rulebook_ref(old), rulebook_ref(new), compare, exact=space.exact, inexact=list(space.inexact))
    if space.exact:
        try:
            report.differences = _exact(space, old, new, key, Budget(budget))
        except BudgetExceeded as exc:
            report.exact = False
            report.inexact.append({"field": None, "operators": [], "reason": str(exc)})
    if not report.exact:
        report.differences, report.samples = _sampled(space, run_old, run_new, key, sample_count)
        return report
    for difference in report.differences:
        got_old, got_new = label_of(run_old, difference.witness), label_of(run_new, difference.witness)
        if (got_old, got_new) != (difference.old, difference.new):  # pragma: no cover - a bug guard
            raise AssertionError(f"diff witness {difference.witness!r} evaluates to {got_old} -> {got_new}")
    return report


def _exact(space: Space, old: RulebookDocument, new: RulebookDocument, key: CompareKey, budget: Budget) -> list[Difference]:
    a, b = decision_list(space, old, budget), decision_list(space, new, budget)
    groups: dict[tuple[Label, Label], list[Cube]] = {}
    b_items = b.items()
    for cube, old_label in partition(a.items(), a.default, {}, space.full, budget):
        old_key = key(old_label)
        for piece, new_label in partition(b_items, b.default, cube, space.full, budget):
            if key(new_label) != old_key:
                groups.setdefault((old_label, new_label), []).append(piece)
    rank_a = {label: i for i, label in enumerate([*(lab for lab, _ in a.items()), a.default])}
    rank_b = {label: i for i, label in enumerate([*(lab for lab, _ in b.items()), b.default])}
    out: list[Difference] = []
    for (old_label, new_label) in sorted(groups, key=lambda p: (rank_a[p[0]], rank_b[p[1]])):
        for cube in merge(groups[(old_label, new_label)], space.full):
            found = region(space, cube)
            if found is not None:
                out.append(Difference(old_label, new_label, found, found.witness))
    return out


def _sampled(space: Space, run_old: Evaluator, run_new: Evaluator, key: CompareKey, count: int) -> tuple[list[Difference], int]:
    found: dict[tuple[Label, Label], Difference] = {}
    for facts in samples(space, count):
        old_label, new_label = label_of(run_old, facts), label_of(run_new, facts)
        if key(old_label) != key(new_label):
            pair = (old_label, new_label)
            if pair in found:
                found[pair].count += 1
            else:
                found[pair] = Difference(old_label, new_label, None, facts)
    return list(found.values()), count
