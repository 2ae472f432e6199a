"""The dry-run's baseline (workbench/migration/baseline.py): the draft against a version replayed
over the same history, not against the mixed history of every past version."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from dryrun_support import T0, decide, rule, rulebook, write_dataset

from gate.protocol.canonical import sha256_hex
from gate.rulebook import get_evaluator
from workbench.migration import DryRunError, dry_run
from workbench.migration.manifest import migration_schema

NOW = "2026-11-22T00:00:00.000Z"
V1 = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 100}, "no", "TOO_BIG"),
               rule("small", {"field": "amount", "operator": "lte", "value": 20}, "yes", "SMALL")])
V2 = rulebook([rule("big", {"field": "amount", "operator": "gt", "value": 50}, "no", "TOO_BIG"),
               rule("small", {"field": "amount", "operator": "lte", "value": 30}, "yes", "SMALL"),
               rule("vip", {"field": "tier", "operator": "eq", "value": "vip"}, "yes", "VIP", priority=5)],
              version="2.0.0")
FACTS = [{"amount": a, "tier": t} for a in (10, 25, 60, 120, 45) for t in ("vip", "std")] + [{"amount": "70"}]


@pytest.fixture
def mixed(tmp_path):
    """A history of two versions: V1's decisions, then V2's (what runs today)."""
    decisions = decide(V1, FACTS, prefix="a") + decide(V2, FACTS, prefix="b", start=T0 + timedelta(days=60))
    outcomes = [{"decision_id": row["decision_id"], "status": ("failed", "succeeded", "pending")[index % 3],
                 "receipt_id": f"r{index}", "reported_at": row["created_at"] + timedelta(days=1)}
                for index, row in enumerate(decisions)]
    return write_dataset(tmp_path / "ds", decisions, outcomes), decisions


def test_an_unchanged_draft_changes_nothing_against_the_version_it_is(mixed):
    root, _ = mixed
    run = dry_run(V2, "refunds", dataset=root, created_at=NOW, baseline=V2, baseline_source="active release")
    result = run.result
    assert result["decisions_evaluated"] == 2 * len(FACTS)
    assert result["decisions_changed"] == 0 and result["flips"]["listed"] == []
    assert result["decisions_rule_changed"] == result["decisions_reason_changed"] == 0
    assert result["review_load"]["before"] == result["review_load"]["after"]
    impact = result["impact"]
    assert impact["failures_caught"]["count"] == impact["successes_lost"]["count"] == 0
    assert impact["review_load_change"]["count"] == 0 and impact["expected_net_effect"]["per_decision"] == 0
    assert result["baseline"] == {"kind": "version", "version": "2.0.0", "rulebook_hash": sha256_hex(V2),
                                  "source": "active release",
                                  "description": "version 2.0.0 (active release) replayed over the same history"}
    assert run.manifest["dry_run"]["baseline"] == result["baseline"]
    # The historical view of the same draft counts V1's decisions that V2 decides otherwise.
    historical = dry_run(V2, "refunds", dataset=root, created_at=NOW).result
    assert historical["baseline"]["kind"] == "history" and historical["decisions_changed"] > 0


def test_against_a_version_every_transition_is_that_version_versus_the_draft(mixed):
    root, _ = mixed
    result = dry_run(V2, "refunds", dataset=root, created_at=NOW, baseline=V1).result
    old, new = get_evaluator(V1, sha256_hex(V1)), get_evaluator(V2, sha256_hex(V2))
    expected = Counter((old.evaluate(f).decision, new.evaluate(f).decision) for f in FACTS * 2)
    got = Counter({(t["from"], t["to"]): t["count"] for t in result["transitions"]})
    assert got == +expected
    assert result["decisions_changed"] == sum(n for (a, b), n in expected.items() if a != b)


def test_the_baseline_is_signed_into_the_manifest_and_names_another_migration(mixed):
    root, _ = mixed
    against_v1 = dry_run(V2, "refunds", dataset=root, created_at=NOW, baseline=V1).manifest
    historical = dry_run(V2, "refunds", dataset=root, created_at=NOW).manifest
    import jsonschema
    jsonschema.validate(against_v1, migration_schema())
    assert against_v1["migration_id"] != historical["migration_id"]
    assert against_v1["dry_run"]["result_hash"] != historical["dry_run"]["result_hash"]


def test_a_baseline_that_is_not_a_version_of_the_rulebook_is_refused(mixed):
    root, _ = mixed
    with pytest.raises(DryRunError) as caught:
        dry_run(V2, "refunds", dataset=root, created_at=NOW, baseline={**V1, "rulebook_id": "other"})
    assert caught.value.code == "BASELINE_INVALID" and "baseline" in caught.value.message
    with pytest.raises(DryRunError) as caught:
        dry_run(V2, "refunds", dataset=root, created_at=NOW, baseline={"rules": []})
    assert caught.value.code == "BASELINE_INVALID" and caught.value.errors


def test_the_sweep_compares_with_the_same_baseline(mixed):
    from workbench.migration.sweep import sweep

    root, _ = mixed
    swept = sweep(V2, "refunds", ("big", "amount", 0), [50.0, 100.0], dataset=root, baseline=V2,
                  baseline_source="active release")
    assert swept["baseline"]["kind"] == "version" and swept["baseline"]["version"] == "2.0.0"
    unchanged, moved = swept["points"]
    assert unchanged["failures_caught"]["count"] == unchanged["successes_lost"]["count"] == 0
    assert unchanged["review_load_change"]["count"] == 0
    at_100 = dry_run({**V2, "rules": [{**V2["rules"][0], "condition": {**V2["rules"][0]["condition"], "value": 100}},
                                      *V2["rules"][1:]]},
                     "refunds", dataset=root, created_at=NOW, baseline=V2).result
    assert moved["failures_caught"] == at_100["impact"]["failures_caught"]
    assert moved["review_load_change"]["count"] == at_100["impact"]["review_load_change"]["count"]
