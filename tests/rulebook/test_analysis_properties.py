"""Property tests: the rulebook analysis never contradicts the scalar evaluator.

Random rulebooks (every operator and combinator, typed inputs, nested paths; the strategies of
`test_rulebook_properties`) and random or targeted facts:
- every diff witness evaluates to the claimed old and new results;
- a fact set on which the two versions disagree lies in a difference region with exactly those
  results, and one on which they agree lies in none ("equivalent" means they never disagree);
- lint witnesses are real (overlaps match both rules, fall-through matches none) and rules
  reported dead never match;
- every flip's fact set evaluates to the claimed new result, and no value between the old
  value and a numeric flip's value changes the result to another valid one.
"""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rulebook_properties import facts_strategy, rulebooks, targeted_facts

from gate.rulebook.analysis import lint, minimal_flips, semantic_diff
from gate.rulebook.analysis.common import evaluator, label_of
from gate.rulebook.analysis.space import is_number
from gate.rulebook.compile import rule_order

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _mutated(book, data):
    """A nearby version: a changed leaf value, outcome, priority, or a dropped rule."""
    new = copy.deepcopy(book)
    new["version"] = "2"
    rule = data.draw(st.sampled_from(new["rules"]))
    choice = data.draw(st.integers(0, 3))
    if choice == 0:
        rule["priority"] = data.draw(st.sampled_from([-2, 0, 3, 9]))
    elif choice == 1:
        rule["outcome"] = dict(rule["outcome"], verdict=data.draw(st.sampled_from(["APPROVE", "BLOCK", "OTHER"])))
    elif choice == 2 and len(new["rules"]) > 1:
        new["rules"].remove(rule)
    else:
        node = rule["condition"]
        while "field" not in node:
            node = node.get("not") or (node.get("all") or node.get("any"))[0]
            node = node[0] if isinstance(node, list) else node
        if "value" in node:
            node["value"] = data.draw(st.sampled_from([0, 1, 2.5, "a", "vip", True, None, [1, "a"]]))
    return new


def _facts(data, *books):
    out = data.draw(st.lists(facts_strategy, max_size=3))
    for book in books:
        out += data.draw(st.lists(targeted_facts(book), min_size=2, max_size=6))
    return out


@SETTINGS
@given(rulebooks(), st.data())
def test_diff_regions_agree_with_the_evaluator(old, data):
    new = data.draw(st.one_of(rulebooks(), st.just(None)))
    new = new if new is not None else _mutated(old, data)
    report = semantic_diff(old, new)
    run_old, run_new = evaluator(old), evaluator(new)
    for difference in report.differences:
        assert label_of(run_old, difference.witness) == difference.old
        assert label_of(run_new, difference.witness) == difference.new
        assert difference.old.outcome_key() != difference.new.outcome_key()
    if not report.exact:
        assert report.inexact and report.verdict in ("different", "no_difference_found")
        return
    assert report.equivalent == (not report.differences)
    for difference in report.differences:
        assert difference.contains(difference.witness)
    for facts in _facts(data, old, new):
        before, after = label_of(run_old, facts), label_of(run_new, facts)
        found = report.region_of(facts)
        if before.outcome_key() == after.outcome_key():
            assert found is None, facts
        else:
            assert not report.equivalent
            assert found is not None and (found.old, found.new) == (before, after), facts


@SETTINGS
@given(rulebooks(), st.data())
def test_diff_of_a_rulebook_with_itself_is_equivalent(book, data):
    report = semantic_diff(book, copy.deepcopy(book), compare=data.draw(st.sampled_from(["outcome", "rule"])))
    assert report.differences == []
    assert report.verdict == ("equivalent" if report.exact else "no_difference_found")


@SETTINGS
@given(rulebooks(), st.data())
def test_lint_findings_are_witnessed(book, data):
    report = lint(book)
    run = evaluator(book)
    by_id = {rule["rule_id"]: rule for rule in book["rules"]}
    order = [rule["rule_id"] for rule in rule_order(book["rules"])]
    for finding in report.findings:
        if finding.get("witness") is None:
            continue
        result = run(finding["witness"])
        assert result.status == "ok"
        if finding["code"] == "overlap":
            first, second = finding["rule_ids"]
            assert finding["winner"] == first
            for rule_id in (first, second):  # both match; the evaluator takes first (or a rule before it)
                assert evaluator(dict(book, rules=[by_id[rule_id]]))(finding["witness"]).matched
            assert order.index(result.matched_rule_id) <= order.index(first)
        elif finding["code"] == "falls_through":
            assert not result.matched
    if report.exact:
        dead = {f["rule_id"] for f in report.findings if f["code"] in ("shadowed", "unsatisfiable")}
        for facts in _facts(data, book):
            assert run(facts).matched_rule_id not in dead


@SETTINGS
@given(rulebooks(), st.data())
def test_flips_are_real_and_minimal(book, data):
    run = evaluator(book)
    for facts in data.draw(st.lists(targeted_facts(book), min_size=1, max_size=3)):
        current = label_of(run, facts)
        for flip in minimal_flips(book, facts):
            assert flip.old == current
            assert label_of(run, flip.facts) == flip.new
            assert flip.new.outcome_key() != current.outcome_key()
            if flip.distance is None or not flip.exact:
                continue
            x, v = flip.old_value, flip.new_value
            assert is_number(x) and is_number(v) and flip.distance == abs(v - x)
            for fraction in (0.25, 0.5, 0.999):
                between = x + (v - x) * fraction
                if between in (x, v):
                    continue
                moved = copy.deepcopy(facts)
                target = moved
                parts = flip.field.split(".")
                for part in parts[:-1]:
                    target = target[part]
                target[parts[-1]] = between
                label = label_of(run, moved)
                assert label.outcome_key() == current.outcome_key() or label.status != "ok", (flip.field, between)
