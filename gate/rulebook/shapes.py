"""The shapes the rulebook package passes around, named once.

A Rulebook v1 document is the JSON object that `validate_rulebook` accepted; its members are
those of `gate.rulebook.contract`, typed here as TypedDicts (optional members `NotRequired`).
Callers hold it as a plain `dict` (it is hashed and stored as sent), so the TypedDicts add no
run-time cost; a value becomes a `RulebookDocument` only through `checked_rulebook`
(`gate.rulebook.validate`), which runs the validator. `RulebookRef` names a rulebook
in the analyses' reports (id and version). An evaluation's trace entries are `Check`s, defined
with the `Evaluation` they belong to (`gate.protocol.evaluation`).
"""

# No `from __future__ import annotations`: the TypedDicts' `NotRequired` members must be seen at
# run time (`__required_keys__`), which string annotations would hide on Python 3.11.
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from gate.protocol.evaluation import Evaluation
from gate.strict_json import JsonValue
from gate.vocabulary import Verdict

__all__ = [
    "Condition",
    "Evaluator",
    "InputProperty",
    "InputSchema",
    "Outcome",
    "Rule",
    "RulebookDocument",
    "RulebookRef",
    "rulebook_ref",
]


Condition = TypedDict(
    "Condition",
    {
        "field": NotRequired[str],
        "operator": NotRequired[str],  # one of contract.OPERATORS
        "value": NotRequired[JsonValue],  # absent for contract.VALUELESS_OPERATORS
        "all": NotRequired[list["Condition"]],
        "any": NotRequired[list["Condition"]],
        "not": NotRequired["Condition | list[Condition]"],  # a one-element list is also accepted
    },
)
"""A condition node: a leaf `{field, operator, value?}` or exactly one combinator `{all: [...]}`,
`{any: [...]}` or `{not: node}` (a validated node holds one of those shapes, never a mix)."""


class Outcome(TypedDict):
    """A rule's outcome or the default outcome."""

    decision: Verdict
    verdict: str
    action: str
    reason_code: str


class Rule(TypedDict):
    rule_id: str
    priority: NotRequired[float]  # an integer value (JSON may spell it 5.0); absent means 0
    condition: Condition
    outcome: Outcome


class InputProperty(TypedDict):
    type: str  # one of contract.INPUT_TYPES


class InputSchema(TypedDict):
    required: NotRequired[list[str]]
    properties: NotRequired[dict[str, InputProperty]]


class RulebookDocument(TypedDict):
    """A Rulebook v1 object that `validate_rulebook` accepted (members: `contract.RULEBOOK_MEMBERS`)."""

    schema_version: str  # contract.SCHEMA_VERSION
    rulebook_id: str
    version: str
    input_schema: NotRequired[InputSchema]
    rules: list[Rule]
    default_outcome: Outcome


class RulebookRef(TypedDict):
    """Which rulebook a report is about: its id and version (the analyses' `rulebook`, `old`, `new`)."""

    rulebook_id: str
    version: str


def rulebook_ref(rulebook: RulebookDocument) -> RulebookRef:
    return {"rulebook_id": rulebook["rulebook_id"], "version": rulebook["version"]}


Evaluator = Callable[[Any], Evaluation]
"""A compiled rulebook's `evaluate(facts)`: pure, total, never raises."""
