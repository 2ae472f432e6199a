"""Threshold sweeps to the exact value (issue 22, item 5): the sweep's own members (its leaf, the
history it read, each point's approvals with their rate and interval), the comparisons a sweep
accepts and how a threshold is written back into the draft, the even thresholds between two
bounds, and every refusal. `test_sweep.py` checks each point's figures against full dry-runs.
"""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from dryrun_support import T0, decide, rule, rulebook, write_dataset

from gate.protocol.canonical import sha256_hex
from workbench.migration import DryRunError, dry_run
from workbench.migration.impact import CostModel, wilson
from workbench.migration.sweep import (
    MAX_THRESHOLDS,
    SweepLeaf,
    _field_number,
    find_leaf,
    numeric_comparisons,
    sweep,
    thresholds_between,
    with_threshold,
)

OLD = rulebook([rule("fine", {"field": "amount", "operator": "lte", "value": 100}, "yes", "FINE")])
# amount > t is refused (`big`), anything else up to 200 approved (`small`), the rest reviewed.
DRAFT = rulebook([
    rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG", priority=10),
    rule("small", {"field": "amount", "operator": "lte", "value": 200}, "yes", "SMALL")], version="2.0.0")
AMOUNTS = [10, 60, 120, 80]  # old verdicts: yes, yes, review, yes; created 3 days apart from T0


@pytest.fixture
def root(tmp_path):
    decisions = decide(OLD, [{"amount": a} for a in AMOUNTS])
    outcomes = [{"decision_id": d["decision_id"], "status": s, "receipt_id": f"o{i}",
                 "reported_at": d["created_at"] + timedelta(hours=1)}
                for i, (d, s) in enumerate(zip(decisions, ["succeeded", "failed", "succeeded", "succeeded"],
                                               strict=True))]
    return write_dataset(tmp_path / "ds", decisions, outcomes)


def test_a_sweep_names_its_leaf_history_and_approvals(root):
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [70, 0, 1000], scope="acme", dataset=root)
    points = result.pop("points")
    assert result == {
        "sweep_version": "threshold_sweep_v1", "rulebook_id": "refunds", "scope": "acme",
        "draft_hash": sha256_hex(DRAFT),
        "leaf": {"rule_id": "big", "field": "amount", "operator": "gt", "draft_value": 50.0, "occurrence": 0},
        "decisions_replayed": 4, "scalar_rows": 0, "as_of": "2026-01-14T00:00:00.000Z",
        "cost_model": CostModel().to_dict(),
        "baseline": {"kind": "history", "description": "the verdicts stored when each decision was made, "
                                                      "by the version that ran then"}}
    assert [p["threshold"] for p in points] == [70, 0, 1000]
    # 70: 10 and 60 approved, 120 and 80 refused; 0: every amount refused; 1000: every amount approved.
    assert [p["approvals"] for p in points] == [
        {"count": 2, "rate": 0.5, "interval_95": wilson(2, 4)},
        {"count": 0, "rate": 0.0, "interval_95": wilson(0, 4)},
        {"count": 4, "rate": 1.0, "interval_95": wilson(4, 4)}]
    assert set(points[0]) == {"threshold", "approvals", "failures_caught", "successes_lost", "review_load_change",
                              "immature", "expected_net_effect"}
    # 70 withdraws 80 (yes, succeeded) and sends 120 from review to no; 0 also withdraws 10 and 60 (one failed).
    assert points[0]["review_load_change"]["out_of_review"] == 1 and points[0]["review_load_change"]["into_review"] == 0
    assert points[2]["review_load_change"]["out_of_review"] == 1


def test_a_sweep_under_another_cost_model_carries_it(root):
    cost = CostModel(failure=3.0, review=0.5, lost_success=2.0, outcome_horizon_days=1)
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [70], scope="acme", dataset=root, cost=cost)
    assert result["cost_model"] == {"failure": 3.0, "review": 0.5, "lost_success": 2.0, "outcome_horizon_days": 1}
    # a one-day horizon: the newest decision (80, day 9) is the only young approval; 80 is withdrawn at 70
    assert result["points"][0]["immature"]["count"] == 1


def test_a_partial_row_is_replayed_by_the_scalar_evaluator(tmp_path):
    # 2^60 cannot be held exactly by the typed columns: the scalar evaluator replays it.
    decisions = decide(OLD, [{"amount": 10}, {"amount": 2**60}])
    root = write_dataset(tmp_path / "ds", decisions, [])
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [2.0**61, 5], scope="acme", dataset=root)
    assert result["scalar_rows"] == 1 and result["decisions_replayed"] == 2
    # 2^61: 2^60 is not above it but not up to 200 either (the default, review); 5: both refused
    assert [p["approvals"]["count"] for p in result["points"]] == [1, 0]


@pytest.mark.parametrize("thresholds", [[], [float("inf")], [1, float("nan")], [0.0] * (MAX_THRESHOLDS + 1)])
def test_a_sweep_refuses_bad_thresholds(root, thresholds):
    with pytest.raises(DryRunError) as raised:
        sweep(DRAFT, "refunds", ("big", "amount", 0), thresholds, scope="acme", dataset=root)
    assert raised.value.code == "SWEEP_INVALID"


def test_a_sweep_takes_the_most_thresholds_allowed(root):
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [70.0] * MAX_THRESHOLDS, scope="acme", dataset=root)
    assert len(result["points"]) == MAX_THRESHOLDS == 1000
    assert result["points"][-1]["approvals"]["count"] == 2


def test_a_sweep_without_decisions_is_refused(root):
    with pytest.raises(DryRunError) as raised:
        sweep(DRAFT, "refunds", ("big", "amount", 0), [1], scope="nobody", dataset=root)
    assert raised.value.code == "HISTORY_EMPTY"


def test_find_leaf_gives_the_path_operator_and_value():
    book = rulebook([rule("r", {"any": [{"field": "x", "operator": "eq", "value": 1},
                                        {"all": [{"field": "x", "operator": "lt", "value": 7},
                                                 {"field": "x", "operator": "gte", "value": 2}]}]}, "no", "R")])
    assert find_leaf(book, "r", "x") == SweepLeaf("r", ("any", 1, "all", 0), "x", "lt", 7.0)
    assert find_leaf(book, "r", "x", 1) == SweepLeaf("r", ("any", 1, "all", 1), "x", "gte", 2.0)
    plain = rulebook([rule("r", {"field": "x", "operator": "lte", "value": 3}, "no", "R")])
    assert find_leaf(plain, "r", "x") == SweepLeaf("r", (), "x", "lte", 3.0)
    with pytest.raises(DryRunError, match="occurrence -1 does not exist"):
        find_leaf(plain, "r", "x", -1)
    with pytest.raises(DryRunError, match="occurrence 1 does not exist"):
        find_leaf(plain, "r", "x", 1)


@pytest.mark.parametrize("negated", [{"not": {"field": "x", "operator": "gt", "value": 5}},
                                     {"not": [{"field": "x", "operator": "gt", "value": 5}]},
                                     {"all": [{"not": {"any": [{"field": "x", "operator": "gt", "value": 5}]}}]}])
def test_a_leaf_under_not_is_refused_in_either_form(negated):
    with pytest.raises(DryRunError, match="under a `not`") as raised:
        find_leaf(rulebook([rule("r", negated, "no", "R")]), "r", "x")
    assert raised.value.code == "SWEEP_INVALID"


@pytest.mark.parametrize("value", [True, "5", None])
def test_a_leaf_whose_value_is_not_a_number_is_refused(value):
    book = rulebook([rule("r", {"field": "x", "operator": "gt", "value": 5}, "no", "R")])
    book["rules"][0]["condition"]["value"] = value
    with pytest.raises(DryRunError, match="not a number"):
        find_leaf(book, "r", "x")


def test_numeric_comparisons_count_occurrences_as_find_leaf():
    book = rulebook([
        rule("a", {"all": [{"field": "x", "operator": "gt", "value": 1},
                           {"field": "x", "operator": "eq", "value": 3},          # not numeric: not counted
                           {"not": {"field": "x", "operator": "lt", "value": 9}},  # counted, not offered
                           {"field": "y", "operator": "gte", "value": 2.5},
                           {"field": "x", "operator": "lte", "value": 7}]}, "no", "A"),
        rule("b", {"any": [{"field": "x", "operator": "gt", "value": True},           # a boolean: not offered
                           {"field": "x", "operator": "lt", "value": 4}]}, "yes", "B")])
    assert numeric_comparisons(book) == [
        {"rule_id": "a", "field": "x", "occurrence": 0, "operator": "gt", "value": 1},
        {"rule_id": "a", "field": "y", "occurrence": 0, "operator": "gte", "value": 2.5},
        {"rule_id": "a", "field": "x", "occurrence": 2, "operator": "lte", "value": 7},
        {"rule_id": "b", "field": "x", "occurrence": 1, "operator": "lt", "value": 4}]
    for found in numeric_comparisons(book):
        leaf = find_leaf(book, found["rule_id"], found["field"], found["occurrence"])
        assert (leaf.operator, leaf.value) == (found["operator"], found["value"])
    assert numeric_comparisons({"rules": []}) == [] and numeric_comparisons({}) == []


def test_with_threshold_writes_the_number_to_twelve_digits_into_a_copy():
    book = rulebook([rule("r", {"all": [{"field": "x", "operator": "gt", "value": 1},
                                        {"field": "x", "operator": "lte", "value": 7}]}, "no", "R")])
    before = json.dumps(book)
    edited = with_threshold(book, "r", "x", 1, 0.1 + 0.2)
    assert edited["rules"][0]["condition"]["all"][1] == {"field": "x", "operator": "lte", "value": 0.3}
    assert json.dumps(book) == before  # the caller's draft is untouched
    assert list(edited) == list(book) and edited["rules"][0]["condition"]["all"][0]["value"] == 1
    whole = with_threshold(book, "r", "x", 0, 60.0)["rules"][0]["condition"]["all"][0]["value"]
    assert whole == 60 and type(whole) is int
    half = with_threshold(book, "r", "x", 0, 1234.5)["rules"][0]["condition"]["all"][0]["value"]
    assert half == 1234.5 and type(half) is float
    # twelve significant digits: an even step's float noise is dropped
    assert with_threshold(book, "r", "x", 0, 10 / 6)["rules"][0]["condition"]["all"][0]["value"] == 1.66666666667


def test_thresholds_between_are_even_and_include_both_bounds():
    assert thresholds_between(0, 10, 3) == [0.0, 5.0, 10.0]
    assert thresholds_between(-1, 1, 5) == [-1.0, -0.5, 0.0, 0.5, 1.0]
    assert thresholds_between(4, 9, 1) == [4]
    assert thresholds_between(2, 2, 2) == [2.0, 2.0]
    assert len(thresholds_between(0, 1, MAX_THRESHOLDS)) == 1000
    with pytest.raises(DryRunError, match="steps must be from 1 to 1000"):
        thresholds_between(0, 1, 1001)
    with pytest.raises(DryRunError, match="finite bounds"):
        thresholds_between(float("-inf"), 1, 2)
    with pytest.raises(DryRunError, match="finite bounds"):
        thresholds_between(float("nan"), 1, 2)


def test_field_number_reads_plain_numbers_only():
    facts = {"a": {"b": 5, "t": True, "s": "5", "f": 2.5}, "n": None}
    assert _field_number(facts, "a.b") == 5 and _field_number(facts, "a.f") == 2.5
    assert [_field_number(facts, p) for p in ("a.t", "a.s", "n", "a", "a.b.c", "z", "a.z")] == [None] * 7


def test_a_sweep_starts_from_the_history_of_the_rulebook_asked(tmp_path):
    other = rulebook([rule("fine", {"field": "amount", "operator": "lte", "value": 100}, "yes", "FINE")],
                     rulebook_id="other")
    decisions = decide(OLD, [{"amount": 10}]) + decide(other, [{"amount": 60}], prefix="e", start=T0 + timedelta(days=30))
    root = write_dataset(tmp_path / "ds", decisions, [])
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [5], scope="acme", dataset=root)
    assert result["decisions_replayed"] == 1 and result["as_of"] == "2026-01-05T00:00:00.000Z"


# An approving rule swept inside `all` then `any`, a mature approval without an outcome, one exactly at
# the horizon's cutoff: every point equals a full dry-run of the draft with that threshold.
APPROVING = rulebook([
    rule("ok_small", {"all": [{"field": "country", "operator": "neq", "value": "XX"},
                              {"any": [{"field": "amount", "operator": "lte", "value": 100},
                                       {"field": "tier", "operator": "eq", "value": "vip"}]}]}, "yes", "SMALL")],
    version="3.0.0")
ROWS = [(10, "std", "US", "failed"), (60, "std", "US", None), (120, "vip", "US", "succeeded"),
        (80, "std", "US", "succeeded"), (95, "std", "XX", "failed"), (30, "std", "US", "failed"),
        (150, "std", "US", None), (70, "std", "US", "succeeded")]


def _approving_dataset(path):
    decisions = decide(OLD, [{"amount": a, "tier": t, "country": c} for a, t, c, _ in ROWS])
    # Older decisions whose amount is no number (missing, a string, a boolean): the swept leaf never holds
    # for them, at any threshold, though the rule would take them with it forced true.
    decisions += decide(OLD, [{"tier": "std", "country": "US"}, {"amount": "n/a", "tier": "std", "country": "US"},
                              {"amount": True, "tier": "std", "country": "US"},
                              # the same, partial (2^60 elsewhere): the scalar evaluator replays them
                              {"tier": "std", "country": "US", "big": 2**60},
                              {"amount": "n/a", "tier": "std", "country": "US", "big": 2**60},
                              # a partial approval that failed: withdrawn below 50 (its low pick is review)
                              {"amount": 50, "tier": "std", "country": "US", "big": 2**60}],
                        prefix="e", start=T0 - timedelta(days=30))
    outcomes = [{"decision_id": d["decision_id"], "status": s, "receipt_id": f"o{i}",
                 "reported_at": d["created_at"] + timedelta(hours=1)}
                for i, (d, (*_, s)) in enumerate(zip(decisions[:len(ROWS)], ROWS, strict=True)) if s is not None]
    outcomes.append({"decision_id": decisions[-1]["decision_id"], "status": "failed", "receipt_id": "o-e",
                     "reported_at": decisions[-1]["created_at"] + timedelta(hours=1)})
    return write_dataset(path, decisions, outcomes)


def _each_point_is_a_full_dry_run(draft, result, root, cost, *label):
    """Every point of a sweep of the approving rule's `amount` leaf has the impact figures and the
    approvals of a full dry-run of `draft` with that threshold written in."""
    for point in result["points"]:
        variant = json.loads(json.dumps(draft))
        variant["rules"][0]["condition"]["all"][1]["any"][0]["value"] = point["threshold"]
        full = dry_run(variant, "refunds", scope="acme", dataset=root, created_at="2026-11-24T00:00:00.000Z",
                       cost=cost).result
        for name in ("failures_caught", "successes_lost", "review_load_change", "immature", "expected_net_effect"):
            assert point[name] == full["impact"][name], (*label, point["threshold"], name)
        assert point["approvals"]["count"] == sum(t["count"] for t in full["transitions"] if t["to"] == "yes")


def test_an_approving_rule_swept_inside_all_and_any_equals_full_dry_runs(tmp_path):
    root = _approving_dataset(tmp_path / "ds")
    # days 0 to 21, three apart: a six-day horizon makes day 15 the cutoff (not young) and 18, 21 young
    cost = CostModel(outcome_horizon_days=6)
    thresholds = [0, 50, 65, 100, 200]
    result = sweep(APPROVING, "refunds", ("ok_small", "amount", 0), thresholds, scope="acme", dataset=root,
                   cost=cost)
    assert result["leaf"] == {"rule_id": "ok_small", "field": "amount", "operator": "lte", "draft_value": 100.0,
                              "occurrence": 0}
    _each_point_is_a_full_dry_run(APPROVING, result, root, cost)
    # at 0: 10, 60, 80, 95, 30, 70 withdrawn (95 is XX: sent to review at every threshold)
    zero = result["points"][0]
    assert zero["approvals"] == {"count": 1, "rate": 0.071429, "interval_95": wilson(1, 14)}  # 120, vip; of 14
    # mature (days 0 to 15): 10, 95 and 30 failed (30 on day 15, exactly the cutoff), 80 succeeded, 60 no outcome;
    # and the older partial approval of 50, failed
    assert zero["failures_caught"]["count"] == 4 and zero["successes_lost"]["count"] == 1
    assert zero["immature"]["count"] == 2  # 60 without an outcome, and 70 (day 21) young
    assert result["points"][3]["approvals"]["count"] == 7  # up to 100: all but 95 (XX), 150 and those without a number
    assert result["decisions_replayed"] == 14 and result["scalar_rows"] == 3  # those without a number stay in review


def test_the_range_refusals_name_their_code():
    for low, high, steps in ((5, 1, 10), (0, 1, 0)):
        with pytest.raises(DryRunError) as raised:
            thresholds_between(low, high, steps)
        assert raised.value.code == "SWEEP_INVALID"


def test_a_sweep_without_any_facts_replays_nothing(tmp_path):
    decisions = decide(OLD, [{"amount": 10}, {"amount": 60}], no_facts=(0, 1))
    root = write_dataset(tmp_path / "ds", decisions, [], facts=False)
    result = sweep(DRAFT, "refunds", ("big", "amount", 0), [70], scope="acme", dataset=root)
    assert result["decisions_replayed"] == 0 and result["scalar_rows"] == 0
    assert result["points"][0]["approvals"] == {"count": 0, "rate": None, "interval_95": wilson(0, 0)}


@pytest.mark.parametrize(("spec", "message"), [
    (("nope", "amount", 0), "no rule"), (("vip", "tier", 0), "not a numeric comparison"),
    (("big", "weight", 0), "does not compare field"), (("big", "amount", 3), "occurrence 3 does not exist"),
])
def test_each_leaf_refusal_names_its_code(spec, message):
    book = rulebook([rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP"),
                     rule("big", {"field": "amount", "operator": "gt", "value": 5}, "no", "BIG")])
    with pytest.raises(DryRunError, match=message) as raised:
        find_leaf(book, *spec)
    assert raised.value.code == "SWEEP_INVALID"
    book["rules"][1]["condition"]["value"] = "5"
    with pytest.raises(DryRunError, match="not a number") as raised:
        find_leaf(book, "big", "amount")
    assert raised.value.code == "SWEEP_INVALID"



@pytest.mark.parametrize("operator", ["gt", "gte", "lt"])
def test_every_operator_of_the_approving_rule_equals_full_dry_runs(tmp_path, operator):
    root = _approving_dataset(tmp_path / "ds")
    draft = json.loads(json.dumps(APPROVING))
    draft["rules"][0]["condition"]["all"][1]["any"][0]["operator"] = operator
    cost = CostModel(outcome_horizon_days=6)
    result = sweep(draft, "refunds", ("ok_small", "amount", 0), [0, 65, 100, 200], scope="acme", dataset=root,
                   cost=cost)
    _each_point_is_a_full_dry_run(draft, result, root, cost, operator)
