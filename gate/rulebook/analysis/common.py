"""Pieces shared by lint, diff and flips: comparison keys, evaluators, regions with witnesses.

`compare` says when two evaluations count as different:
- "outcome" (default): status, decision, application verdict, action or reason_code differ;
- "decision": only the normalized yes/no/review decision differs;
- "rule": the outcome or the matched rule id differs.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gate.protocol.canonical import sha256_hex
from gate.rulebook.analysis.describe import describe
from gate.rulebook.analysis.model import Label
from gate.rulebook.analysis.regions import Cube
from gate.rulebook.analysis.shapes import RegionJSON
from gate.rulebook.analysis.space import Space
from gate.rulebook.cache import get_evaluator
from gate.rulebook.shapes import Evaluator, RulebookDocument
from gate.strict_json import JsonValue

COMPARE_MODES = ("outcome", "decision", "rule")

CompareKey = Callable[[Label], tuple[Any, ...]]
"""What two results are compared by: `compare_key(mode)` for a compare mode."""


def compare_key(mode: str) -> CompareKey:
    if mode == "outcome":
        return Label.outcome_key
    if mode == "decision":
        return lambda label: (label.decision,)
    if mode == "rule":
        return lambda label: (label.rule_id,) + label.outcome_key()
    raise ValueError(f"compare must be one of {', '.join(COMPARE_MODES)}, not {mode!r}")


def evaluator(rulebook: RulebookDocument) -> Evaluator:
    """The scalar evaluator (validates; raises gate.errors.RulebookInvalid when invalid)."""
    return get_evaluator(rulebook, sha256_hex(rulebook)).evaluate


def label_of(evaluate: Evaluator, facts: Any) -> Label:
    return Label.of_evaluation(evaluate(facts))


@dataclass
class Region:
    """A cube of a space with a concrete witness fact set inside it."""

    space: Space
    cube: Cube
    witness: dict[str, JsonValue]

    def contains(self, facts: Any) -> bool:
        """Is this fact set inside the region?"""
        return self.space.contains(self.cube, self.space.locate(facts))

    def to_json(self) -> RegionJSON:
        where = describe(self.space, self.cube)
        return {"where": where,
                "text": "; ".join(f"{w['field']}: {w['text']}" for w in where) or "any input",
                "witness": copy.deepcopy(self.witness)}


def region(space: Space, cube: Cube) -> Region | None:
    """The region of a cube with a witness, or None when no fact set lies in it."""
    facts = space.witness(cube)
    if facts is None:
        return None
    return Region(space, cube, copy.deepcopy(facts))
