"""The demo scenario's distributions carry the injected anomalies and the degrading policy,
and the column-wise rule evaluation equals the scalar evaluator on its facts."""

from __future__ import annotations

import numpy as np
import pytest

from gate.protocol.canonical import sha256_hex
from gate.rulebook import checked_rulebook, get_evaluator
from workbench.dataset.synth import decide_plan
from workbench.demo import scenario as S
from workbench.demo.seed import plan_verdicts

N = 60_000


@pytest.fixture(scope="module")
def drawn():
    plan = S.draw_decisions(N, 5)
    verdict, rule = decide_plan(plan)
    return plan, verdict, rule, S.draw_events(plan, verdict, rule, 5)


def test_draws_are_deterministic_and_time_ordered():
    a, b = S.draw_decisions(500, 9), S.draw_decisions(500, 9)
    assert np.array_equal(a.at_ms, b.at_ms) and a.facts_of(17) == b.facts_of(17)
    assert not np.array_equal(a.at_ms, S.draw_decisions(500, 10).at_ms)
    assert np.all(np.diff(a.at_ms) >= 0) and a.at_ms[0] >= S.START_MS and a.at_ms[-1] < S.END_MS


def test_vectorized_verdicts_equal_the_scalar_evaluator():
    plan = S.draw_decisions(3_000, 21)
    assert [list(x) for x in decide_plan(plan)] == [list(x) for x in plan_verdicts(plan)]


def test_every_rule_fires_and_refund_v2_approves_more(drawn):
    plan, verdict, rule, _ = drawn
    for key in S.RULEBOOK_FILES:
        book = S.load_rulebook(*key)
        mask = (plan.policy == S.POLICIES.index(key[0])) & (plan.version == key[1])
        assert set(rule[mask]) >= {r["rule_id"] for r in book["rules"]}, key
        assert get_evaluator(book, sha256_hex(book))  # the shipped rulebooks are valid
    refunds = plan.policy == S.POLICIES.index("refund_approval")
    v1, v2 = refunds & (plan.version == 1), refunds & (plan.version == 2)
    assert (verdict[v2] == "yes").mean() > (verdict[v1] == "yes").mean() + 0.15


def final_failure(plan, events, mask):
    """Share of failed/reverted among the final outcomes of the decisions in `mask`."""
    outcome = (events.kind == "outcome") & (events.status != "pending") & mask[events.decision]
    return np.isin(events.status[outcome], ["failed", "reverted"]).mean()


def test_injected_anomalies_show_in_the_outcomes(drawn):
    plan, verdict, rule, events = drawn
    demo = plan.scope == S.SCOPES.index("demo")
    owner = demo & (rule == "approve_owner_backed")
    spike = owner & (plan.at_ms >= S.SPIKE["start_ms"]) & (plan.at_ms < S.SPIKE["end_ms"])
    assert final_failure(plan, events, spike) > 0.3 > 0.12 > final_failure(plan, events, owner & ~spike)
    refunds_yes = (plan.policy == S.POLICIES.index("refund_approval")) & (verdict == "yes")
    assert final_failure(plan, events, refunds_yes & (plan.version == 2)) > \
        2 * final_failure(plan, events, refunds_yes & (plan.version == 1))
    agents = demo & (plan.policy == S.POLICIES.index("agent_action_gate"))
    risk = plan.facts["agent_action_gate"]["risk_score"]
    late = plan.at_ms >= S.DRIFT["from_ms"]
    assert risk[agents & late].mean() - risk[agents & ~late].mean() > 0.15


def test_lifecycle_is_consistent(drawn):
    plan, verdict, _, events = drawn
    assert np.all(events.at_ms > plan.at_ms[events.decision])
    no = verdict[events.decision] == "no"
    assert set(events.status[no]) == {"blocked"}
    outcome_of = set(events.decision[events.kind == "outcome"])
    executed = set(events.decision[(events.kind == "execution") & (events.status == "executed")])
    assert outcome_of == executed
    assert {"succeeded", "failed", "reverted", "cancelled", "pending"} <= set(events.status[events.kind == "outcome"])


@pytest.mark.parametrize("negated", [
    {"field": "amount", "operator": "gt", "value": 50},
    [{"field": "amount", "operator": "gt", "value": 50}],  # the one-element list Rulebook v1 accepts
])
def test_the_column_wise_not_equals_the_scalar_evaluator_in_both_spellings(negated):
    from workbench.demo.vector_rules import evaluate

    book = {"schema_version": "rulebook_v1", "rulebook_id": "not_spellings", "version": "1",
            "rules": [{"rule_id": "small", "priority": 1, "condition": {"not": negated},
                       "outcome": {"decision": "yes", "verdict": "APPROVE", "action": "go", "reason_code": "SMALL"}}],
            "default_outcome": {"decision": "review", "verdict": "REVIEW", "action": "hold", "reason_code": "BIG"}}
    amounts = np.array([10.0, 50.0, 50.5, 99.0])
    verdict, rule = evaluate(checked_rulebook(book), {"amount": amounts}, len(amounts))
    scalar = get_evaluator(book, sha256_hex(book))
    expected = [scalar.evaluate({"amount": float(a)}) for a in amounts]
    assert list(verdict) == [e.decision for e in expected] == ["yes", "yes", "review", "review"]
    assert list(rule) == [e.matched_rule_id or "" for e in expected]


def test_a_demo_rulebook_is_loaded_validated():
    for key in S.RULEBOOK_FILES:
        book = S.load_rulebook(*key)
        assert checked_rulebook(book) is book
