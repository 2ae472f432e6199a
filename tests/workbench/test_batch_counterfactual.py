"""Batch counterfactuals of a draft rulebook: the vectorized replay equals replaying every
decision through the gate's scalar evaluator, and an invalid draft is refused with its paths."""

from __future__ import annotations

import json

import pytest
from workbench_support import CLASSES, frames, random_ledger

from gate.errors import RulebookInvalid
from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator
from workbench.migration.draft_replay import batch_counterfactual

DRAFT = {
    "schema_version": "rulebook_v1", "rulebook_id": "pricing", "version": "draft-2",
    "rules": [
        {"rule_id": "block_big", "priority": 10, "condition": {"field": "amount", "operator": "gt", "value": 700},
         "outcome": {"decision": "no", "verdict": "BLOCK", "action": "hold", "reason_code": "TOO_BIG"}},
        {"rule_id": "review_eu", "condition": {"all": [{"field": "region", "operator": "eq", "value": "eu"},
                                                        {"field": "customer.tier", "operator": "gte", "value": 2}]},
         "outcome": {"decision": "review", "verdict": "REVIEW", "action": "route", "reason_code": "EU_TIER"}},
    ],
    "default_outcome": {"decision": "yes", "verdict": "APPROVE", "action": "apply_discount", "reason_code": "OK"},
}


def test_vectorized_batch_equals_scalar_replay():
    decisions, outcomes = random_ledger(11, n=400)
    decisions[0]["facts_json"] = json.dumps({"amount": 2**60, "region": "us", "customer": {"tier": 1}})  # not exact in typed columns
    report = batch_counterfactual(frames(decisions, outcomes), DRAFT)
    evaluator = get_evaluator(DRAFT, sha256_hex(DRAFT))
    latest: dict[str, tuple] = {}
    for o in outcomes:
        key = (o["reported_at"], o["receipt_id"])
        if o["decision_id"] not in latest or key > latest[o["decision_id"]][0]:
            latest[o["decision_id"]] = (key, o["status"])
    pairs: dict[tuple[str, str], int] = {}
    caught = unreplayable = 0
    for d in decisions:
        if d["facts_json"] is None:
            unreplayable += 1
            continue
        new = evaluator.evaluate(json.loads(d["facts_json"])).decision
        pairs[(d["verdict"], new)] = pairs.get((d["verdict"], new), 0) + 1
        status = latest.get(d["decision_id"], (None, None))[1]
        if d["verdict"] == "yes" and new != "yes" and status and CLASSES[status] == "failure":
            caught += 1
    assert {(t["from"], t["to"]): t["count"] for t in report["transitions"]} == pairs
    assert report["not_replayable"] == unreplayable and report["outcome_impact"]["caught_failures"] == caught
    assert report["decisions_evaluated"] == sum(pairs.values())
    assert report["draft"] == {"rulebook_id": "pricing", "version": "draft-2", "rulebook_hash": sha256_hex(DRAFT)}


def test_invalid_draft_is_refused_with_its_paths():
    bad = json.loads(json.dumps(DRAFT))
    bad["rules"][0]["condition"]["operator"] = "matches"
    with pytest.raises(RulebookInvalid) as raised:
        batch_counterfactual(frames(*random_ledger(1, n=10)), bad)
    assert any("rules[0]" in e["field"] for e in raised.value.details["errors"])
