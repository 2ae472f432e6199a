"""The shapes the rulebook package passes around, named once.

A rulebook reaches the compiler, the cost bound and the analyses as the JSON object that
`validate_rulebook` accepted, so its members are those of `gate.rulebook.contract`. Callers
hold it as a plain `dict` (it is hashed and stored as sent), hence `RulebookDocument`; the
parts read out of it are typed here. An evaluation's trace entries are `Check`s, defined with
the `Evaluation` they belong to (`gate.protocol.evaluation`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from gate.protocol.evaluation import Evaluation

__all__ = ["Condition", "Evaluator", "InputSchema", "Outcome", "Rule", "RulebookDocument"]

RulebookDocument = dict[str, Any]
"""A Rulebook v1 object that `validate_rulebook` accepted (members: `contract.RULEBOOK_MEMBERS`)."""

Condition = dict[str, Any]
"""A condition node: a leaf `{field, operator, value?}` or a combinator `{all: [...]}`,
`{any: [...]}` or `{not: node}` (`not` may also hold a one-element list)."""


class Outcome(TypedDict):
    """A rule's outcome or the default outcome."""

    decision: str  # one of gate.vocabulary.VERDICTS
    verdict: str
    action: str
    reason_code: str


class Rule(TypedDict):
    rule_id: str
    priority: NotRequired[int]
    condition: Condition
    outcome: Outcome


class InputSchema(TypedDict, total=False):
    required: list[str]
    properties: dict[str, dict[str, str]]  # name -> {"type": one of contract.INPUT_TYPES}


Evaluator = Callable[[Any], Evaluation]
"""A compiled rulebook's `evaluate(facts)`: pure, total, never raises."""
