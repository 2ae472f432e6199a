"""The batch counterfactual's replay of a draft, decision by decision (issue 22, item 5): the
verdict and rule each decision gets from the vectorized pass, from the scalar evaluator (a value
the typed columns cannot hold), or none (no facts), and the replay of no decisions."""

from __future__ import annotations

import polars as pl
from workbench_support import T0, decision, frames

from gate.protocol.canonical import sha256_hex
from workbench.migration.draft_replay import batch_counterfactual, draft_replay

DRAFT = {
    "schema_version": "rulebook_v1", "rulebook_id": "pricing", "version": "draft-3",
    "rules": [
        {"rule_id": "block_big", "priority": 10, "condition": {"field": "amount", "operator": "gt", "value": 700},
         "outcome": {"decision": "no", "verdict": "BLOCK", "action": "hold", "reason_code": "TOO_BIG"}},
        {"rule_id": "review_mid", "condition": {"field": "amount", "operator": "gt", "value": 300},
         "outcome": {"decision": "review", "verdict": "REVIEW", "action": "route", "reason_code": "MID"}},
    ],
    "default_outcome": {"decision": "yes", "verdict": "APPROVE", "action": "apply_discount", "reason_code": "OK"},
}


def _decisions():
    return [decision("d1", at=T0, facts={"amount": 100}),
            decision("d2", at=T0, facts={"amount": 500}),
            decision("d3", at=T0, facts={"amount": 900}, verdict="no", rule="block"),
            decision("d4", at=T0, facts={"amount": 2**60}),  # beyond the typed columns: the scalar evaluator
            decision("d5", at=T0, facts=None)]


def test_each_decision_gets_the_drafts_verdict_and_rule():
    replayed = draft_replay(DRAFT)(frames(_decisions(), []).decisions).collect().sort("decision_id")
    assert replayed.select("decision_id", "new_verdict", "new_rule_id").rows() == [
        ("d1", "yes", None), ("d2", "review", "review_mid"), ("d3", "no", "block_big"), ("d4", "no", "block_big"),
        ("d5", None, None)]
    assert replayed.height == 5 and replayed["verdict"].to_list() == ["yes", "yes", "no", "yes", "yes"]


def test_without_a_scalar_row_the_vector_verdicts_stand_alone():
    rows = [d for d in _decisions() if d["decision_id"] != "d4"]
    replayed = draft_replay(DRAFT)(frames(rows, []).decisions).collect().sort("decision_id")
    assert replayed.select("decision_id", "new_verdict", "new_rule_id").rows() == [
        ("d1", "yes", None), ("d2", "review", "review_mid"), ("d3", "no", "block_big"), ("d5", None, None)]


def test_no_decisions_replay_to_no_rows_with_the_new_columns():
    empty = frames([], []).decisions
    replayed = draft_replay(DRAFT)(empty).collect()
    assert replayed.height == 0
    assert replayed.schema["new_verdict"] == pl.String and replayed.schema["new_rule_id"] == pl.String
    assert replayed.columns == [*empty.collect_schema().names(), "new_verdict", "new_rule_id"]


def test_the_report_names_the_draft_and_counts_each_transition():
    report = batch_counterfactual(frames(_decisions(), []), DRAFT)
    assert report["draft"] == {"rulebook_id": "pricing", "version": "draft-3", "rulebook_hash": sha256_hex(DRAFT)}
    assert {(t["from"], t["to"]): t["count"] for t in report["transitions"]} == {
        ("yes", "yes"): 1, ("yes", "review"): 1, ("no", "no"): 1, ("yes", "no"): 1}
    assert report["not_replayable"] == 1 and report["decisions_evaluated"] == 4


def test_three_scalar_rows_keep_their_own_verdicts():
    # Three rows the columns cannot hold: three fixes of three members each, read row by row.
    rows = [decision("s1", at=T0, facts={"amount": 2**60}), decision("s2", at=T0, facts={"amount": -(2**60)}),
            decision("s3", at=T0, facts={"amount": 2**61}), decision("v1", at=T0, facts={"amount": 500})]
    replayed = draft_replay(DRAFT)(frames(rows, []).decisions).collect().sort("decision_id")
    assert replayed.select("decision_id", "new_verdict", "new_rule_id").rows() == [
        ("s1", "no", "block_big"), ("s2", "yes", None), ("s3", "no", "block_big"), ("v1", "review", "review_mid")]
