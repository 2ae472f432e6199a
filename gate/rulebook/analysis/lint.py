"""Lint of one rulebook: dead rules, overlaps, fall-through regions, undeclared fields.

Findings (each `{code, severity, message, ...}`):

- `unsatisfiable` (warning): no input that passes `input_schema` satisfies the rule's condition.
- `shadowed` (warning): the condition can hold, but every such input is taken by
  higher-priority rules (listed in `by`) or by needs_input: the rule can never match.
- `undeclared_field` (warning): the rule reads a field path that `input_schema` does not
  declare (reported only when the rulebook has an `input_schema`).
- `overlap` (info): two rules with different outcomes both match some input; `winner` is the
  one evaluation order picks, with a region and a witness.
- `falls_through` (info): a region of valid inputs that no rule matches (the default outcome).
- `no_input_schema` (info): the rulebook declares no inputs.

Exact when the space is exact (see `space`); otherwise the rulebook is run on samples and the
dead-rule findings become `not_observed` (info: a rule no sample matched), overlaps and
fall-through are reported from samples with their witness, and the report says `exact: false`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, NotRequired, TypedDict

from gate.protocol.evaluation import STATUS_OK
from gate.rulebook.analysis.common import Region, evaluator, region
from gate.rulebook.analysis.model import Label, decision_list
from gate.rulebook.analysis.regions import (
    Budget,
    BudgetExceeded,
    Cube,
    meet,
    merge,
    partition,
)
from gate.rulebook.analysis.sampling import DEFAULT_SAMPLES, samples
from gate.rulebook.analysis.shapes import FieldDescription, InexactReason, LabelJSON
from gate.rulebook.analysis.space import Space, leaves_of
from gate.rulebook.compile import rule_order
from gate.rulebook.shapes import Evaluator, RulebookDocument, RulebookRef, rulebook_ref
from gate.strict_json import JsonValue

WARNING, INFO = "warning", "info"


class Finding(TypedDict):
    """One line of the lint report: `code`, `severity`, `message` and the members its code has
    (the module doc; a rule id is None only for a rule the validator would have refused)."""

    code: str
    severity: str
    rule_id: NotRequired[str | None]
    rule_ids: NotRequired[list[str | None]]
    winner: NotRequired[str | None]
    by: NotRequired[list[str | None]]
    field: NotRequired[str]
    outcome: NotRequired[LabelJSON]
    message: str
    where: NotRequired[list[FieldDescription] | None]
    text: NotRequired[str | None]
    witness: NotRequired[dict[str, JsonValue]]


class LintReportJSON(TypedDict):
    """`LintReport.to_json()` (docs/rulebook-analysis.md, "Lint JSON")."""

    kind: str
    rulebook: RulebookRef
    exact: bool
    method: str
    inexact: list[InexactReason]
    samples: int | None
    counts: dict[str, int]
    findings: list[Finding]


@dataclass
class LintReport:
    rulebook_ref: RulebookRef
    exact: bool
    findings: list[Finding] = field(default_factory=list)
    inexact: list[InexactReason] = field(default_factory=list)
    samples: int | None = None

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f["severity"] == WARNING]

    def to_json(self) -> LintReportJSON:
        counts = {WARNING: len(self.warnings), INFO: len(self.findings) - len(self.warnings)}
        return {"kind": "rulebook_lint", "rulebook": self.rulebook_ref, "exact": self.exact,
                "method": "exact" if self.exact else "sampling", "inexact": self.inexact,
                "samples": self.samples, "counts": counts, "findings": self.findings}


REGION_KEYS = ("where", "text", "witness")  # what tells apart findings that say the same thing
SEVERITY_RANK = {WARNING: 0, INFO: 1}


def group_findings(findings: list[Finding]) -> list[dict[str, Any]]:
    """A report's findings as a reader wants them: findings identical but for their region (the
    same code, severity, rules, field and message: the fall-through regions, or a sampled and an
    exact overlap of one pair) as one group, `{...the finding's members, count, regions}`, each
    region `{where, text, witness}` in the report's order; warnings before notes, the report's
    order within a severity. The report is unchanged (the pages and `gate rulebook lint` print
    the groups; `--json` keeps every finding)."""
    groups: dict[str, dict[str, Any]] = {}
    for finding in findings:
        said = {key: value for key, value in finding.items() if key not in REGION_KEYS}
        group = groups.setdefault(json.dumps(said, sort_keys=True, default=str), {**said, "count": 0, "regions": []})
        group["count"] += 1
        if any(finding.get(key) is not None for key in REGION_KEYS):
            group["regions"].append({key: finding.get(key) for key in REGION_KEYS})
    last = len(SEVERITY_RANK)
    return sorted(groups.values(), key=lambda group: SEVERITY_RANK.get(str(group.get("severity")), last))


def lint(rulebook: RulebookDocument, *, budget: int = 3_000_000, sample_count: int = DEFAULT_SAMPLES) -> LintReport:
    """Lint a valid Rulebook v1 (raises gate.errors.RulebookInvalid when it is not)."""
    run = evaluator(rulebook)
    space = Space([rulebook])
    report = LintReport(rulebook_ref(rulebook),
                        exact=space.exact, inexact=list(space.inexact))
    report.findings.extend(_declarations(rulebook))
    if space.exact:
        try:
            report.findings.extend(_exact(space, rulebook, Budget(budget)))
        except BudgetExceeded as exc:
            report.exact = False
            report.inexact.append({"field": None, "operators": [], "reason": str(exc)})
    if not report.exact:
        report.findings.extend(_sampled(space, rulebook, run, sample_count))
        report.samples = sample_count
    return report


def _declarations(rulebook: RulebookDocument) -> list[Finding]:
    if "input_schema" not in rulebook:
        return [{"code": "no_input_schema", "severity": INFO,
                 "message": "the rulebook declares no input_schema, so no input is checked before evaluation"}]
    schema = rulebook["input_schema"]
    declared = set(schema.get("required", ())) | set(schema.get("properties", {}))
    out: list[Finding] = []
    for rule in rule_order(rulebook["rules"]):
        for path in sorted({leaf["field"] for leaf in leaves_of(rule["condition"])} - declared):
            out.append({"code": "undeclared_field", "severity": WARNING, "rule_id": rule["rule_id"], "field": path,
                        "message": f"rule {rule['rule_id']} reads {path}, which input_schema does not declare"})
    return out


def _in_region(finding: Finding, found: Region) -> Finding:
    """The finding with its region's `where`, `text` and `witness` after its own members."""
    region_json = found.to_json()
    finding["where"] = region_json["where"]
    finding["text"] = region_json["text"]
    finding["witness"] = region_json["witness"]
    return finding


def _exact(space: Space, rulebook: RulebookDocument, budget: Budget) -> list[Finding]:
    book = decision_list(space, rulebook, budget)
    pieces: dict[Label, list[Cube]] = {}
    for cube, label in partition(book.items(), book.default, {}, space.full, budget):
        pieces.setdefault(label, []).append(cube)
    findings: list[Finding] = []
    ok = book.ok_cube
    valid = [[c for cube in conds if (c := meet(cube, ok)) is not None and space.witness(c) is not None]
             for conds in book.conditions]
    overlaps: dict[int, list[str | None]] = {}
    for j, label_j in enumerate(book.labels):
        for i in range(j):
            label_i = book.labels[i]
            hits = [c for a in valid[i] for b in valid[j] if (c := meet(a, b)) is not None]
            budget.spend(len(valid[i]) * len(valid[j]) + 1)
            found = next((r for c in hits if (r := region(space, c)) is not None), None)
            if found is None:
                continue
            overlaps.setdefault(j, []).append(label_i.rule_id)
            if label_i.outcome_key() != label_j.outcome_key():
                findings.append(_in_region({
                    "code": "overlap", "severity": INFO, "rule_ids": [label_i.rule_id, label_j.rule_id],
                    "winner": label_i.rule_id,
                    "message": f"rules {label_i.rule_id} and {label_j.rule_id} both match some inputs "
                               f"with different outcomes; {label_i.rule_id} wins by evaluation order"}, found))
    dead: list[Finding] = []
    for j, label in enumerate(book.labels):
        if any(region(space, c) is not None for c in pieces.get(label, [])):
            continue
        rule_id = label.rule_id
        if not valid[j]:
            dead.append({"code": "unsatisfiable", "severity": WARNING, "rule_id": rule_id,
                         "message": f"rule {rule_id} matches no input that passes input_schema"})
        else:
            by = overlaps.get(j, [])
            dead.append({"code": "shadowed", "severity": WARNING, "rule_id": rule_id, "by": by,
                         "message": f"rule {rule_id} can never match: higher-priority rules "
                                    f"({', '.join(map(str, by))}) take every input it matches"})
    for cube in merge(pieces.get(book.default, []), space.full):
        found = region(space, cube)
        if found is not None:
            findings.append(_in_region({"code": "falls_through", "severity": INFO,
                                        "outcome": book.default.to_json(),
                                        "message": "inputs here match no rule and get the default outcome"}, found))
    return dead + findings


def _sampled(space: Space, rulebook: RulebookDocument, run: Evaluator, count: int) -> list[Finding]:
    ordered = rule_order(rulebook["rules"])
    single = [evaluator({**rulebook, "rules": [rule]}) for rule in ordered]
    hit: set[int] = set()
    pairs: dict[tuple[int, int], dict[str, JsonValue]] = {}
    fall: dict[str, JsonValue] | None = None
    for facts in samples(space, count):
        result = run(facts)
        if result.status != STATUS_OK:
            continue
        matched = [i for i, one in enumerate(single) if one(facts).matched]
        hit.update(matched[:1])
        if not matched and fall is None:
            fall = facts
        for x in range(len(matched)):
            for y in range(x + 1, len(matched)):
                i, j = matched[x], matched[y]
                a, b = ordered[i]["outcome"], ordered[j]["outcome"]
                if a != b and (i, j) not in pairs:
                    pairs[(i, j)] = facts
    out: list[Finding] = [{"code": "not_observed", "severity": INFO, "rule_id": rule["rule_id"],
            "message": f"no sample matched rule {rule['rule_id']} (sampling cannot prove it unreachable)"}
           for i, rule in enumerate(ordered) if i not in hit]
    for (i, j), facts in sorted(pairs.items()):
        out.append({"code": "overlap", "severity": INFO,
                    "rule_ids": [ordered[i]["rule_id"], ordered[j]["rule_id"]], "winner": ordered[i]["rule_id"],
                    "message": f"rules {ordered[i]['rule_id']} and {ordered[j]['rule_id']} both match a sample "
                               f"with different outcomes; {ordered[i]['rule_id']} wins by evaluation order",
                    "where": None, "text": None, "witness": facts})
    if fall is not None:
        out.append({"code": "falls_through", "severity": INFO,
                    "message": "a sample matched no rule and got the default outcome",
                    "where": None, "text": None, "witness": fall})
    return out
