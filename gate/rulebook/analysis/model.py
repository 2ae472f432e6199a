"""A rulebook as a decision list over a `Space`: what the scalar evaluator does, as regions.

The evaluator first checks `input_schema` (a missing required field or a present declared
field of the wrong type gives status needs_input), then tries the rules by priority
descending, ties by rule_id in collation order (`gate.rulebook.compile.rule_order`), and
falls back to `default_outcome`. Here that is a list of labelled items: a needs_input item
whose region is the complement of the one cube of inputs that satisfy `input_schema`, then one
item per rule in evaluation order, then the default label.

A `Label` is what an evaluation returns for a region: status, matched rule id (None for the
default outcome and for needs_input) and the four outcome members.
"""

from __future__ import annotations

from dataclasses import dataclass

from gate.protocol.evaluation import STATUS_OK, Evaluation
from gate.rulebook.analysis.regions import (
    Budget,
    Cube,
    condition_cubes,
    disjoint,
    subtract,
)
from gate.rulebook.analysis.shapes import LabelJSON
from gate.rulebook.analysis.space import Space, type_ok
from gate.rulebook.compile import rule_order
from gate.rulebook.contract import NEEDS_INPUT_DECISION
from gate.rulebook.shapes import Outcome, RulebookDocument
from gate.vocabulary import (
    NEEDS_INPUT_ACTION,
    NEEDS_INPUT_REASON,
    NEEDS_INPUT_STATUS,
    NEEDS_INPUT_VERDICT,
)


@dataclass(frozen=True)
class Label:
    """The result an evaluation gives on a region."""

    status: str
    rule_id: str | None
    decision: str
    verdict: str
    action: str
    reason_code: str

    def outcome_key(self) -> tuple[str, ...]:
        return (self.status, self.decision, self.verdict, self.action, self.reason_code)

    def to_json(self) -> LabelJSON:
        return {"status": self.status, "rule_id": self.rule_id, "decision": self.decision,
                "verdict": self.verdict, "action": self.action, "reason_code": self.reason_code}

    @classmethod
    def of_evaluation(cls, evaluation: Evaluation) -> Label:
        return cls(evaluation.status, evaluation.matched_rule_id, evaluation.decision,
                   evaluation.application_verdict, evaluation.action, evaluation.reason_code)


NEEDS_INPUT = Label(NEEDS_INPUT_STATUS, None, NEEDS_INPUT_DECISION, NEEDS_INPUT_VERDICT, NEEDS_INPUT_ACTION, NEEDS_INPUT_REASON)


def _label(outcome: Outcome, rule_id: str | None) -> Label:
    return Label(STATUS_OK, rule_id, outcome["decision"], outcome["verdict"], outcome["action"], outcome["reason_code"])


@dataclass
class DecisionList:
    """One rulebook over a space: its rules' condition cubes in evaluation order, and its labels."""

    ok_cube: Cube  # inputs that satisfy input_schema
    needs_input: list[Cube]  # disjoint cubes of inputs that do not
    conditions: list[list[Cube]]  # per rule in evaluation order, disjoint cubes of its condition
    labels: list[Label]  # per rule
    default: Label

    def items(self) -> list[tuple[Label, list[Cube]]]:
        """The decision list: needs_input first, then every rule in evaluation order."""
        head = [(NEEDS_INPUT, self.needs_input)] if self.needs_input else []
        return head + list(zip(self.labels, self.conditions, strict=True))  # both per rule


def ok_cube(space: Space, rulebook: RulebookDocument) -> Cube:
    """The one cube of inputs that pass `input_schema`.

    Its fields are entered in field path order: the needs_input pieces are cut from it field
    by field (`regions.subtract`), so an order taken from a set would change the reported
    regions with the process's hash seed.
    """
    schema = rulebook.get("input_schema", {})
    required = set(schema.get("required", ()))
    properties = schema.get("properties", {})
    cube: Cube = {}
    for name in sorted(required | set(properties)):
        index = space.index[name]
        f = space.fields[index]
        mask = 0
        kind = properties[name]["type"] if name in properties else None
        for i, atom in enumerate(f.atoms):
            if atom.kind == "missing":
                allowed = name not in required
            else:
                allowed = kind is None or type_ok(kind, atom.rep)
            if allowed:
                mask |= 1 << i
        if mask != f.full:
            cube[index] = mask
    return cube


def decision_list(space: Space, rulebook: RulebookDocument, budget: Budget) -> DecisionList:
    ordered = rule_order(rulebook["rules"])
    ok = ok_cube(space, rulebook)
    needs = subtract({}, ok, space.full) if ok else []
    conditions = [disjoint(condition_cubes(space, rule["condition"], budget), space.full, budget) for rule in ordered]
    return DecisionList(ok, needs, conditions,
                        [_label(rule["outcome"], rule["rule_id"]) for rule in ordered],
                        _label(rulebook["default_outcome"], None))
