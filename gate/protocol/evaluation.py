"""The result of evaluating a compiled Rulebook v1 over facts, and its trace entries.

This is the contract between the evaluator (`gate.rulebook`) and the record builder
(`gate.protocol.records`): a frozen value, the same for the same rulebook hash and facts (spec,
evaluation rule 5). It lives here, below both, so that the record protocol needs nothing of the
rulebook package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypedDict


class Check(TypedDict):
    """One evaluated leaf in an evaluation's trace, in evaluation order."""

    rule_id: str
    field: str
    operator: str
    passed: bool


class EvaluationTrace(TypedDict):
    """The record's `evaluation` member: whether a rule matched, and the evaluated leaves."""

    matched: bool
    checks: list[Check]


STATUS_OK = "ok"
"""`Evaluation.status` when the facts satisfied `input_schema` (else NEEDS_INPUT_STATUS)."""


@dataclass(frozen=True, slots=True)
class Evaluation:
    """Outcome of one evaluation.

    status: STATUS_OK ("ok") when the facts satisfied `input_schema`, NEEDS_INPUT_STATUS
        ("needs_input") otherwise.
    decision: normalized verdict, one of gate.vocabulary.VERDICTS.
    application_verdict, action, reason_code: from the matched rule, the default outcome,
        or the needs_input path (NEEDS_INPUT / collect_required_input / INPUT_SCHEMA_FAILED).
    matched_rule_id: the first matching rule's id; None for default outcome or needs_input.
    matched: True when a rule matched.
    checks: trace of evaluated leaves in evaluation order, each
        {"rule_id", "field", "operator", "passed"}.
    missing_fields / invalid_fields: input_schema failures (sorted), empty when status is "ok".
    """

    status: str
    decision: str
    application_verdict: str
    action: str
    reason_code: str
    matched_rule_id: str | None
    matched: bool
    checks: tuple[Check, ...] = field(default_factory=tuple)
    missing_fields: tuple[str, ...] = ()
    invalid_fields: tuple[str, ...] = ()

    def trace(self) -> EvaluationTrace:
        """The record's `evaluation` member: `{matched, checks}`."""
        return {"matched": self.matched, "checks": [c.copy() for c in self.checks]}
