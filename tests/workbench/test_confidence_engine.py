"""Differential test: the decide-time `decision_confidence` block (counters kept in the outcome
transactions) equals the Polars engine's batch result over the same ledger, for seeded random
lifecycles with several scopes, policy versions, verdicts, superseding and out-of-order outcomes
and same-millisecond ties."""

from __future__ import annotations

import copy
import random
from datetime import timedelta

import polars as pl
import pytest

from gate.ledger import stream
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS, OUTCOME_STATUSES
from gate.services.decide import Caller
from tests.workbench.ledger_support import REQUEST, LedgerWriter, at
from workbench.dataset import convert
from workbench.engines.confidence import confidence_report

VERSIONS = ("2026-11-01", "2026-12-01")
# (discount, margin) → verdict / action of the sample rulebook.
SHAPES = {"yes": (15, 31), "no": (40, 31), "review": (15, 10)}
ACTIONS = {"yes": "apply_discount", "no": "reject_discount", "review": "route_to_finance"}


@pytest.fixture
def writer(database_url, tmp_path):
    writer = LedgerWriter(database_url, tmp_path / "keys.json")
    yield writer
    writer.close()


def decide(writer, scope, when, version, shape):
    writer.clock.set(when)
    body = copy.deepcopy(REQUEST)
    body["rulebook"]["version"] = version
    discount, margin = SHAPES[shape]
    body["context"]["inputs"].update(discount_percent=discount, margin_percent=margin)
    return writer.service.decide(Caller("key_test", scope, "starter", 1000, 10_000_000), body).record


def frames(writer, scope):
    decisions = convert.decisions_table(
        [row for batch in stream.iter_decisions(writer.ledger, scope=scope) for row in batch])
    outcomes = convert.receipts_table(
        [row for batch in stream.iter_receipts(writer.ledger, "outcome", scope=scope) for row in batch])
    return pl.from_arrow(decisions).lazy(), pl.from_arrow(outcomes).lazy()


def random_lifecycles(writer, rng):
    start = at(1, 5)
    records = []
    for index in range(rng.randint(15, 30)):
        scope = rng.choice(("acme", "globex"))
        version = VERSIONS[0] if index < 10 or rng.random() < 0.3 else VERSIONS[1]
        records.append((scope, decide(writer, scope, start + timedelta(minutes=index), version,
                                      rng.choice(tuple(SHAPES)))))
    instants = [start + timedelta(days=day) for day in range(1, 6)]  # few instants: ties happen
    plan = [(scope, record, rng.choice(instants), rng.choice(OUTCOME_STATUSES))
            for scope, record in records for _ in range(rng.choice((0, 1, 1, 2, 3)))]
    rng.shuffle(plan)  # outcomes arrive out of order; older ones must not override newer
    for scope, record, when, status in plan:
        writer.receipt("outcome", scope, record, when, status)
    return records


@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("seed", [7, 23])
def test_decide_time_block_equals_the_engine(writer, seed):
    rng = random.Random(seed)
    random_lifecycles(writer, rng)
    compared = 0
    for scope in ("acme", "globex"):
        decisions, outcomes = frames(writer, scope)
        has_outcomes = outcomes.select(pl.len()).collect().item() > 0
        for version in VERSIONS:
            for shape in SHAPES:
                record = decide(writer, scope, at(3, 1), version, shape)
                block = record.get("decision_confidence")
                assert (block is not None) == has_outcomes
                if block is None:
                    continue
                report = confidence_report(decisions, outcomes, policy_id=record["policy_id"],
                                           classes=OUTCOME_EFFECTIVENESS_CLASS, policy_version=version,
                                           verdict=record["verdict"], action=record["action"])
                assert record["action"] == ACTIONS[shape]
                for name in ("score", "level", "similar_decisions", "policy_stability", "recommendation"):
                    assert block[name] == report[name], (name, block, report)
                for name in ("successes", "failures", "current_version_successes", "current_version_failures",
                             "min_sample", "policy_version"):
                    assert block["based_on"][name] == report["based_on"][name], name
                compared += 1
    assert compared >= 6


def test_sample_statement_and_buckets(writer):
    old = decide(writer, "acme", at(1, 1), VERSIONS[0], "yes")
    new = decide(writer, "acme", at(1, 2), VERSIONS[0], "yes")
    writer.receipt("outcome", "acme", old, at(2, 1), "failed")
    writer.receipt("outcome", "acme", new, at(2, 1), "succeeded")
    decide(writer, "acme", at(1, 3), VERSIONS[1], "no")  # no outcome yet: considered, not similar
    decisions, outcomes = frames(writer, "acme")
    kwargs = {"policy_id": old["policy_id"], "classes": OUTCOME_EFFECTIVENESS_CLASS}
    full = confidence_report(decisions, outcomes, **kwargs)
    assert (full["based_on"]["successes"], full["based_on"]["failures"]) == (1, 1)
    assert full["sample"]["latest_outcome_counts"] == {"failed": 1, "succeeded": 1}
    assert full["sample"]["decisions_considered"] == 3 and full["sample"]["decisions_with_outcome"] == 2
    assert full["based_on"]["policy_version"] == VERSIONS[1]  # the newest decision's version
    assert full["based_on"]["current_version_successes"] == 0  # all evidence is from the older version
    assert [(b["verdict"], b["similar_decisions"]) for b in full["buckets"]] == [("yes", 2)]
    only_no = confidence_report(decisions, outcomes, verdict="no", **kwargs)
    assert only_no["similar_decisions"] == 0 and only_no["level"] == "insufficient_data"
    assert only_no["sample"]["decisions_considered"] == 1
