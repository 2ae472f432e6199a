"""The rulebook lint's report to the exact finding (issue 22, item 5): which rules are dead and
why (unsatisfiable, shadowed and by which rules), which overlaps are reported (different outcomes
only) and who wins, the fall-through region, undeclared fields, the report's members and counts,
and the sampled report when the exact analysis runs out of budget.

The regions' texts come from `describe` (tests/rulebook/test_analysis_describe_exact.py); each
witness is checked against the scalar evaluator.
"""

from __future__ import annotations

import pytest
from rulebook_support import Build

from gate.rulebook.analysis import lint
from gate.rulebook.analysis.common import evaluator

leaf, rule = Build.leaf, Build.rule
BLOCK = {"decision": "no", "verdict": "BLOCK", "action": "block", "reason_code": "TOO_BIG"}
# block: amount > 100; dup: amount > 200 with block's outcome (shadowed by block, no overlap
# reported: same outcome); vip: tier vip, approve (overlaps block and dup); never: no integer is
# both below and above 0.
BOOK = Build.rulebook([
    rule("block", leaf("amount", "gt", 100), priority=30, **BLOCK),
    rule("dup", leaf("amount", "gt", 200), priority=20, **BLOCK),
    rule("vip", leaf("tier", "eq", "vip"), priority=10),
    rule("never", {"all": [leaf("amount", "lt", 0), leaf("amount", "gt", 0)]}, priority=5),
], input_schema={"required": ["amount"], "properties": {"amount": {"type": "integer"}}})
UNDECLARED = {"code": "undeclared_field", "severity": "warning", "rule_id": "vip", "field": "tier",
              "message": "rule vip reads tier, which input_schema does not declare"}


def _matched(book, witness):
    return evaluator(book)(witness).matched_rule_id


def test_the_exact_report_member_by_member():
    body = lint(BOOK).to_json()
    findings = body.pop("findings")
    assert body == {"kind": "rulebook_lint", "rulebook": {"rulebook_id": "test_rulebook", "version": "1.0.0"},
                    "exact": True, "method": "exact", "inexact": [], "samples": None,
                    "counts": {"warning": 3, "info": 3}}
    assert [{k: v for k, v in f.items() if k != "where"} for f in findings] == [
        UNDECLARED,
        {"code": "shadowed", "severity": "warning", "rule_id": "dup", "by": ["block"],
         "message": "rule dup can never match: higher-priority rules (block) take every input it matches"},
        {"code": "unsatisfiable", "severity": "warning", "rule_id": "never",
         "message": "rule never matches no input that passes input_schema"},
        {"code": "overlap", "severity": "info", "rule_ids": ["block", "vip"], "winner": "block",
         "message": "rules block and vip both match some inputs with different outcomes; block wins by evaluation order",
         "text": 'amount: number in (100, +inf) (integers); tier: string in ["vip"]',
         "witness": {"amount": 101, "tier": "vip"}},
        {"code": "overlap", "severity": "info", "rule_ids": ["dup", "vip"], "winner": "dup",
         "message": "rules dup and vip both match some inputs with different outcomes; dup wins by evaluation order",
         "text": 'amount: number in (200, +inf) (integers); tier: string in ["vip"]',
         "witness": {"amount": 201, "tier": "vip"}},
        {"code": "falls_through", "severity": "info",
         "outcome": {"status": "ok", "rule_id": None, "decision": "review", "verdict": "REVIEW",
                     "action": "hold_for_review", "reason_code": "NO_RULE_MATCHED"},
         "message": "inputs here match no rule and get the default outcome",
         "text": 'amount: number in (-inf, 100] (integers); tier: anything but (string in ["vip"])',
         "witness": {"amount": -1}},
    ]
    assert [w["field"] for w in findings[3]["where"]] == ["amount", "tier"]
    assert _matched(BOOK, {"amount": 101, "tier": "vip"}) == "block" and _matched(BOOK, {"amount": -1}) is None


def test_warnings_are_the_warning_findings():
    report = lint(BOOK)
    assert [(w["code"], w["rule_id"]) for w in report.warnings] == [
        ("undeclared_field", "vip"), ("shadowed", "dup"), ("unsatisfiable", "never")]


def test_a_rule_shadowed_by_several_names_them_all():
    book = Build.rulebook([
        rule("low", leaf("amount", "lte", 10), priority=30, **BLOCK),
        rule("high", leaf("amount", "gt", 10), priority=20),
        rule("any_amount", leaf("amount", "exists"), priority=10, **BLOCK),
    ], input_schema={"required": ["amount"], "properties": {"amount": {"type": "number"}}})
    findings = lint(book).findings
    shadowed = [f for f in findings if f["code"] == "shadowed"]
    assert [(f["rule_id"], f["by"]) for f in shadowed] == [("any_amount", ["low", "high"])]
    # any_amount overlaps high only (low has its outcome); nothing falls through: every valid input has an amount
    assert [(f["code"], f.get("rule_ids")) for f in findings] == [
        ("shadowed", None), ("overlap", ["high", "any_amount"])]


def test_without_an_input_schema_it_says_so_and_checks_no_declarations():
    book = Build.rulebook([rule("aa", leaf("x", "gt", 1))])
    report = lint(book)
    assert report.findings[0] == {
        "code": "no_input_schema", "severity": "info",
        "message": "the rulebook declares no input_schema, so no input is checked before evaluation"}
    assert [f["code"] for f in report.findings] == ["no_input_schema", "falls_through"]
    assert report.to_json()["counts"] == {"warning": 0, "info": 2}
    # with a schema that declares x through `required` only, x is declared
    declared = Build.rulebook([rule("aa", leaf("x", "gt", 1))], input_schema={"required": ["x"]})
    assert [f["code"] for f in lint(declared).findings] == ["falls_through"]
    both = Build.rulebook([rule("aa", {"all": [leaf("b", "gt", 1), leaf("a", "gt", 1), leaf("b", "lt", 9)]})],
                          input_schema={"properties": {"c": {"type": "number"}}})
    assert [(f["code"], f.get("field")) for f in lint(both).findings if f["severity"] == "warning"] == [
        ("undeclared_field", "a"), ("undeclared_field", "b")]


def test_without_budget_the_report_is_sampled():
    report = lint(BOOK, budget=1, sample_count=300)
    body = report.to_json()
    findings = body.pop("findings")
    assert body == {"kind": "rulebook_lint", "rulebook": {"rulebook_id": "test_rulebook", "version": "1.0.0"},
                    "exact": False, "method": "sampling",
                    "inexact": [{"field": None, "operators": [],
                                 "reason": "the exact analysis exceeded its budget of cube operations"}],
                    "samples": 300, "counts": {"warning": 1, "info": 5}}
    assert [(f["code"], f.get("rule_id"), f.get("rule_ids"), f.get("winner")) for f in findings] == [
        ("undeclared_field", "vip", None, None),
        ("not_observed", "dup", None, None),  # never the first match: block is
        ("not_observed", "never", None, None),
        ("overlap", None, ["block", "vip"], "block"),
        ("overlap", None, ["dup", "vip"], "dup"),
        ("falls_through", None, None, None)]
    assert findings[1]["message"] == "no sample matched rule dup (sampling cannot prove it unreachable)"
    for overlap in findings[3:5]:
        assert overlap["where"] is None and overlap["text"] is None
        assert overlap["message"].endswith("both match a sample with different outcomes; "
                                           f"{overlap['winner']} wins by evaluation order")
        witness = overlap["witness"]
        # both rules of the pair match it (block, first of all, decides it)
        assert witness["tier"] == "vip" and witness["amount"] > {"block": 100, "dup": 200}[overlap["winner"]]
        assert _matched(BOOK, witness) == "block"
    falls = findings[5]
    assert (falls["where"], falls["text"]) == (None, None) and _matched(BOOK, falls["witness"]) is None
    assert evaluator(BOOK)(falls["witness"]).status == "ok"
    assert falls["message"] == "a sample matched no rule and got the default outcome"


def test_a_sampled_report_skips_inputs_that_need_input():
    # Every sample without an integer amount needs input: none of them may be a fall-through witness.
    report = lint(BOOK, budget=1, sample_count=50)
    falls = [f for f in report.findings if f["code"] == "falls_through"]
    assert all(isinstance(f["witness"].get("amount"), int) for f in falls)
    assert report.samples == 50


@pytest.mark.parametrize("budget", [1, 10])
def test_a_rulebook_whose_rules_all_fire_falls_through_nowhere_when_sampled(budget):
    book = Build.rulebook([rule("aa", leaf("x", "exists"), **BLOCK), rule("bb", leaf("x", "not_exists"))])
    findings = lint(book, budget=budget, sample_count=100).findings
    assert [f["code"] for f in findings] == ["no_input_schema"]


def test_an_overlap_after_a_rule_it_does_not_meet_is_still_found():
    book = Build.rulebook([
        rule("one", leaf("x", "eq", 1), priority=30, **BLOCK),
        rule("above_five", leaf("x", "gt", 5), priority=20),
        rule("above_three", leaf("x", "gt", 3), priority=10, **BLOCK),
    ], input_schema={"required": ["x"], "properties": {"x": {"type": "number"}}})
    # above_three meets no input of one, then overlaps above_five with another outcome
    assert [(f["rule_ids"], f["winner"], f["witness"]) for f in lint(book).findings if f["code"] == "overlap"] == [
        (["above_five", "above_three"], "above_five", {"x": 6})]


def test_an_inexact_space_is_reported_with_its_reasons():
    needles = [f"w{i:02d}" for i in range(12)]
    book = Build.rulebook([rule("aa", {"any": [leaf("note", "contains", n) for n in needles]})])
    body = lint(book, sample_count=10).to_json()
    assert (body["exact"], body["method"], body["samples"]) == (False, "sampling", 10)
    assert body["inexact"] == [
        {"field": "note", "operators": ["contains", "not_contains"],
         "reason": "12 distinct contains values on strings (exact analysis handles at most 10)"},
        {"field": "note", "operators": ["contains", "not_contains"],
         "reason": "12 distinct contains values on arrays (exact analysis handles at most 10)"}]


def test_a_sampled_report_reads_only_the_samples_asked_for():
    # One sample matches at most one rule first: at least three of the four are not observed (the
    # default 4,000 samples observe all but dup and never).
    findings = lint(BOOK, budget=1, sample_count=1).findings
    assert len([f for f in findings if f["code"] == "not_observed"]) >= 3
