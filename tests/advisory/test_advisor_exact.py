"""The offline advisor's identity (it enters the advisory policy hash) and its vote, member by
member (issue 22, item 5: a mutation pass found the identity unpinned)."""

from __future__ import annotations

import uuid

import pytest

from gate.advisory.advisors import (
    OFFLINE_ADVISOR_ID,
    AdvisoryQuestion,
    PatternRulebookAdvisor,
)
from gate.errors import GateError
from gate.protocol.canonical import sha256_hex
from gate.rulebook.patterns import Pattern, load_patterns
from gate.vocabulary import EVALUATOR_VERSION

REGISTRY = load_patterns()
PATTERN = REGISTRY.find("pricing_exception")
APPROVED = {"discount_percent": 15, "margin_percent": 31, "owner_approved": True, "account_tier": "annual"}


def _question(pattern, facts):
    return AdvisoryQuestion("advisory", "Approve?", {"inputs": facts}, facts, pattern)


def test_identity_names_the_advisor_and_the_pattern_lineage():
    advisor = PatternRulebookAdvisor(REGISTRY)
    assert advisor.identity(_question(PATTERN, APPROVED)) == {
        "advisor_id": OFFLINE_ADVISOR_ID, "kind": "policy_pattern_rulebook", "evaluator_version": EVALUATOR_VERSION,
        "pattern_id": "pricing_exception", "pattern_hash": PATTERN.body["pattern_hash"],
        "rulebook_hash": PATTERN.rulebook_hash,
    }
    assert advisor.identity(_question(None, APPROVED)) == {
        "advisor_id": OFFLINE_ADVISOR_ID, "kind": "policy_pattern_rulebook", "evaluator_version": EVALUATOR_VERSION,
    }


def test_vote_without_a_pattern_is_review():
    vote = PatternRulebookAdvisor(REGISTRY).advise(_question(None, APPROVED))
    assert (vote.advisor_id, vote.kind, vote.status, vote.decision) == \
        (OFFLINE_ADVISOR_ID, "policy_pattern_rulebook", "ok", "review")
    assert vote.evidence == ("NO_MATCHING_POLICY_PATTERN",) and vote.error is None
    assert dict(vote.details) == {"policy_pattern": None}


def test_vote_is_the_patterns_rulebook_with_its_lineage():
    vote = PatternRulebookAdvisor(REGISTRY).advise(_question(PATTERN, APPROVED))
    assert (vote.status, vote.decision, vote.evidence) == ("ok", "yes", ("WITHIN_DISCOUNT_POLICY",))
    assert vote.details["policy_pattern"] == {
        "pattern_id": "pricing_exception", "pattern_hash": PATTERN.body["pattern_hash"],
        "policy_id": "pricing_exception", "rulebook_id": "pricing_exception", "rulebook_version": "2026-11-01",
        "rulebook_hash": PATTERN.rulebook_hash, "evaluator_version": EVALUATOR_VERSION,
    }
    assert vote.details["evaluation"] == {
        "status": "ok", "decision": "yes", "application_verdict": "APPROVE", "action": "apply_discount",
        "reason_code": "WITHIN_DISCOUNT_POLICY", "matched_rule_id": "approve_owner_backed",
        "facts_hash": sha256_hex(APPROVED),
    }
    assert (vote.advisor_id, vote.kind) == (OFFLINE_ADVISOR_ID, "policy_pattern_rulebook")
    assert vote.rationale == ("Offline advisor: policy pattern 'pricing_exception' evaluated rulebook "
                              "pricing_exception@2026-11-01 over context.inputs: APPROVE (WITHIN_DISCOUNT_POLICY, "
                              "rule approve_owner_backed).")


def test_vote_on_missing_inputs_names_them():
    facts = {"discount_percent": "15"}
    vote = PatternRulebookAdvisor(REGISTRY).advise(_question(PATTERN, facts))
    evaluation = vote.details["evaluation"]
    assert (evaluation["status"], vote.decision, evaluation["matched_rule_id"]) == ("needs_input", "review", None)
    assert evaluation["missing_fields"] == ["margin_percent", "owner_approved"]
    assert evaluation["invalid_fields"] == ["discount_percent"]
    assert vote.rationale == ("Offline advisor: policy pattern 'pricing_exception' evaluated rulebook "
                              "pricing_exception@2026-11-01 over context.inputs: NEEDS_INPUT (INPUT_SCHEMA_FAILED).")


def test_the_advisor_keeps_its_registry():
    assert PatternRulebookAdvisor(REGISTRY).patterns is REGISTRY


def test_a_costly_evaluation_is_refused_before_it_runs():
    """The same evaluation budget as rulebook mode: EVALUATION_TOO_COSTLY (422) before evaluating,
    judged on this pattern's own rulebook (after another pattern's evaluation was costed)."""
    advisor = PatternRulebookAdvisor(REGISTRY)
    assert advisor.advise(_question(PATTERN, APPROVED)).decision == "yes"
    # A version never seen in this process: its cost profile is computed here, from this rulebook.
    rulebook = {"schema_version": "rulebook_v1", "rulebook_id": "tagged", "version": uuid.uuid4().hex,
                "rules": [{"rule_id": "flagged", "condition": {"field": "tags", "operator": "contains", "value": "x"},
                           "outcome": {"decision": "no", "verdict": "BLOCK", "action": "stop", "reason_code": "FLAG"}}],
                "default_outcome": {"decision": "yes", "verdict": "OK", "action": "go", "reason_code": "FINE"}}
    costly = Pattern({"pattern_id": "tagged", "policy_id": "tagged", "pattern_hash": "0" * 64}, rulebook,
                     sha256_hex(rulebook))
    assert advisor.advise(_question(costly, {"tags": ["y"] * 10})).decision == "yes"
    with pytest.raises(GateError) as refused:
        advisor.advise(_question(costly, {"tags": ["y"] * 300_000}))
    assert refused.value.code == "EVALUATION_TOO_COSTLY"
