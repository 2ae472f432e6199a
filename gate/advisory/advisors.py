"""Advisors and the rules that combine their votes.

An advisor answers one `AdvisoryQuestion` with a `Vote`: `yes`, `no` or `review` plus a short
rationale and evidence codes, or a failure (`status: "failed"`, an `error` code, and the vote
`review`). Advisors never raise for an upstream problem: a failure is a value, so `multi` can
record it beside the other votes, and the single-advisor paths refuse (502) on it.

The offline default, `PatternRulebookAdvisor`, needs no network: it finds the policy pattern the
request names (`context.policy_pattern`, a pattern or policy id) or whose template workflow equals
`context.workflow`, evaluates that pattern's Rulebook v1 over `context.inputs` with the gate's own
evaluator, and says so in the vote (`kind: "policy_pattern_rulebook"` with the pattern and rulebook
lineage and the evaluation). Without a matching pattern it answers `review`
(`NO_MATCHING_POLICY_PATTERN`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator
from gate.rulebook.budget import check_evaluation_cost
from gate.rulebook.patterns import Pattern, PatternRegistry
from gate.strict_json import JsonValue
from gate.vocabulary import EVALUATOR_VERSION, VERDICTS

DECISIONS = VERDICTS  # an advisor answers with one of the gate's verdicts
OFFLINE_ADVISOR_ID = "policy_pattern_rulebook"
SINGLE_RULE = "single_advisor_v1"
MULTI_RULE = "unanimous_yes_majority_no_v1"
RULES = {
    SINGLE_RULE: "The one advisor's vote is the advisory verdict; a failed advisor refuses the request (502).",
    MULTI_RULE: ("yes only when every advisor answered yes; otherwise no when more than half of all advisors "
                 "answered no; otherwise review. A failed advisor counts as review; all failed refuses (502)."),
}


@dataclass(frozen=True)
class AdvisoryQuestion:
    """What every advisor of one request sees."""

    mode: str
    question: str
    context: Mapping[str, JsonValue]
    facts: Mapping[str, JsonValue]
    pattern: Pattern | None


@dataclass(frozen=True)
class Vote:
    advisor_id: str
    kind: str
    status: str  # ok | failed
    decision: str  # yes | no | review (review when failed)
    rationale: str
    evidence: tuple[str, ...] = ()
    error: str | None = None
    details: Mapping[str, Any] = field(default_factory=dict)

    def to_record(self) -> dict[str, JsonValue]:
        body: dict[str, JsonValue] = {"advisor_id": self.advisor_id, "kind": self.kind, "status": self.status,
                                "decision": self.decision, "rationale": self.rationale,
                                "evidence": list(self.evidence)}
        if self.error:
            body["error"] = self.error
        body.update(self.details)
        return body


class Advisor(Protocol):
    """The pluggable interface: `identity()` goes into the advisory policy hash (what answered),
    `advise()` answers one question and never raises for an upstream failure."""

    advisor_id: str

    def identity(self, question: AdvisoryQuestion) -> dict[str, str]: ...

    def advise(self, question: AdvisoryQuestion) -> Vote: ...


class PatternRulebookAdvisor:
    """The offline default: the matching policy pattern's rulebook, evaluated by the gate."""

    advisor_id = OFFLINE_ADVISOR_ID
    kind = "policy_pattern_rulebook"

    def __init__(self, patterns: PatternRegistry) -> None:
        self.patterns = patterns

    def identity(self, question: AdvisoryQuestion) -> dict[str, str]:
        pattern = question.pattern
        identity: dict[str, str] = {"advisor_id": self.advisor_id, "kind": self.kind,
                                    "evaluator_version": EVALUATOR_VERSION}
        if pattern is not None:
            identity.update(pattern_id=pattern.pattern_id, pattern_hash=pattern.body["pattern_hash"],
                            rulebook_hash=pattern.rulebook_hash)
        return identity

    def advise(self, question: AdvisoryQuestion) -> Vote:
        pattern = question.pattern
        if pattern is None:
            return Vote(self.advisor_id, self.kind, "ok", "review",
                        "No policy pattern matches this request (context.policy_pattern or context.workflow); "
                        "the offline advisor cannot judge it.", ("NO_MATCHING_POLICY_PATTERN",),
                        details={"policy_pattern": None})
        rulebook = pattern.rulebook
        # SECURITY: the same evaluation budget as rulebook mode (422 before evaluating).
        check_evaluation_cost(rulebook, pattern.rulebook_hash, dict(question.facts))
        evaluation = get_evaluator(rulebook, pattern.rulebook_hash).evaluate(dict(question.facts))
        lineage = {
            "pattern_id": pattern.pattern_id,
            "pattern_hash": pattern.body["pattern_hash"],
            "policy_id": pattern.policy_id,
            "rulebook_id": rulebook["rulebook_id"],
            "rulebook_version": rulebook["version"],
            "rulebook_hash": pattern.rulebook_hash,
            "evaluator_version": EVALUATOR_VERSION,
        }
        outcome: dict[str, JsonValue] = {
            "status": evaluation.status,
            "decision": evaluation.decision,
            "application_verdict": evaluation.application_verdict,
            "action": evaluation.action,
            "reason_code": evaluation.reason_code,
            "matched_rule_id": evaluation.matched_rule_id,
            "facts_hash": sha256_hex(dict(question.facts)),
        }
        if evaluation.status != "ok":
            outcome["missing_fields"] = list(evaluation.missing_fields)
            outcome["invalid_fields"] = list(evaluation.invalid_fields)
        rationale = (f"Offline advisor: policy pattern {pattern.pattern_id!r} evaluated rulebook "
                     f"{rulebook['rulebook_id']}@{rulebook['version']} over context.inputs: "
                     f"{evaluation.application_verdict} ({evaluation.reason_code}"
                     + (f", rule {evaluation.matched_rule_id}" if evaluation.matched_rule_id else "") + ").")
        return Vote(self.advisor_id, self.kind, "ok", evaluation.decision, rationale, (evaluation.reason_code,),
                    details={"policy_pattern": lineage, "evaluation": outcome})


@dataclass(frozen=True)
class Combined:
    rule: str
    decision: str
    tally: dict[str, int]


def combine(rule: str, votes: Sequence[Vote]) -> Combined:
    """Apply a combining rule (see `RULES`). The caller refuses when every vote failed."""
    tally = {"yes": 0, "no": 0, "review": 0, "failed": 0}
    for vote in votes:
        if vote.status != "ok":
            tally["failed"] += 1
        else:
            tally[vote.decision] += 1
    if rule == SINGLE_RULE:
        if len(votes) != 1:
            raise ValueError("single_advisor_v1 combines exactly one vote")
        return Combined(rule, votes[0].decision if votes[0].status == "ok" else "review", tally)
    if rule == MULTI_RULE:
        total = len(votes)
        if total and tally["yes"] == total:
            decision = "yes"
        elif tally["no"] * 2 > total:
            decision = "no"
        else:
            decision = "review"
        return Combined(rule, decision, tally)
    raise ValueError(f"unknown combining rule {rule!r}")


__all__ = [
    "DECISIONS",
    "MULTI_RULE",
    "OFFLINE_ADVISOR_ID",
    "RULES",
    "SINGLE_RULE",
    "Advisor",
    "AdvisoryQuestion",
    "Combined",
    "PatternRulebookAdvisor",
    "Vote",
    "combine",
]
