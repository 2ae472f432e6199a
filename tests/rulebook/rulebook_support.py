"""Builders and fixtures for the Rulebook v1 tests.

Test modules import the builders (`Build`, ...); the fixtures (`build`, `evaluate`, `matches`)
reach every test module here through `tests/rulebook/conftest.py`.
"""

from __future__ import annotations

import pytest

from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator

_UNSET = object()


class Build:
    """Builders for rulebook parts; every call returns fresh dicts."""

    @staticmethod
    def outcome(decision="yes", verdict="APPROVE", action="proceed", reason_code="RULE_MATCHED"):
        return {"decision": decision, "verdict": verdict, "action": action, "reason_code": reason_code}

    @staticmethod
    def leaf(field, operator, value=_UNSET):
        node = {"field": field, "operator": operator}
        if value is not _UNSET:
            node["value"] = value
        return node

    @staticmethod
    def rule(rule_id, condition, priority=None, **outcome):
        rule = {"rule_id": rule_id, "condition": condition, "outcome": Build.outcome(**outcome)}
        if priority is not None:
            rule["priority"] = priority
        return rule

    @staticmethod
    def rulebook(rules, default=None, input_schema=None, **extra):
        book = {
            "schema_version": "rulebook_v1",
            "rulebook_id": "test_rulebook",
            "version": "1.0.0",
            "rules": rules,
            "default_outcome": default
            or Build.outcome("review", "REVIEW", "hold_for_review", "NO_RULE_MATCHED"),
        }
        if input_schema is not None:
            book["input_schema"] = input_schema
        book.update(extra)
        return book

    @staticmethod
    def single(condition, **outcome):
        """A one-rule rulebook whose rule `r_one` has `condition`."""
        return Build.rulebook([Build.rule("r_one", condition, **outcome)])


def evaluate_rulebook(rulebook, facts):
    """Evaluate through the public interface: get_evaluator(rulebook, hash).evaluate(facts)."""
    return get_evaluator(rulebook, sha256_hex(rulebook)).evaluate(facts)


@pytest.fixture(scope="session")
def build():
    return Build


@pytest.fixture(scope="session")
def evaluate():
    """evaluate(rulebook, facts) -> Evaluation, through get_evaluator."""
    return evaluate_rulebook


@pytest.fixture(scope="session")
def matches():
    """matches(condition, facts) -> bool: does a one-rule rulebook match?"""

    def run(condition, facts):
        return evaluate_rulebook(Build.single(condition), facts).matched

    return run
