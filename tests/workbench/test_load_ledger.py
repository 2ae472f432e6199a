"""The live-ledger loader yields exactly the dataset contract: the engines give the same
reports from it as from a Parquet dataset of the same decisions (SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest
from ledger_support import LedgerWriter, at
from workbench_support import CLASSES, write_dataset

from workbench.dataset.load import from_dataset, from_ledger, polars_schema
from workbench.engines import anomalies, effectiveness

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def writer(database_url, tmp_path):
    w = LedgerWriter(database_url, tmp_path / "keys.json")
    yield w
    w.close()


def _seed(writer):
    outcomes = ["succeeded", "failed", "pending", "succeeded", "reverted"]
    for i in range(12):
        for scope in ("tenant_a", "tenant_b"):
            record = writer.decide(scope, at(1 + i % 3, 1 + i, ms=i), discount=10 + i, margin=20 + i % 5)
            if i % 4:
                writer.receipt("outcome", scope, record, at(4, 1 + i), outcomes[i % 5])
            if i % 3 == 0:
                writer.receipt("outcome", scope, record, at(4, 1 + i, minute=5), "succeeded")
    writer.decide("tenant_a", at(2, 2), rulebook_id="other_policy")


def test_ledger_frames_have_the_schema_and_the_engines_cannot_tell_them_apart(writer, tmp_path):
    _seed(writer)
    live = from_ledger(writer.ledger, "tenant_a", "pricing_exception", limit=1000)
    assert live.decisions.collect_schema() == polars_schema("decisions")
    assert live.outcomes.collect_schema() == polars_schema("outcomes")
    decisions, outcomes = live.decisions.collect(), live.outcomes.collect()
    assert decisions.height == 12 and set(decisions["scope"]) == {"tenant_a"}
    assert decisions["facts_json"].null_count() == 0 and outcomes.height == 13
    write_dataset(tmp_path / "ds", decisions.to_dicts(), outcomes.to_dicts())
    stored = from_dataset(tmp_path / "ds", scopes=["tenant_a"], policy_id="pricing_exception")
    for engine, kw in ((effectiveness.effectiveness, {"min_sample": 2}),
                       (anomalies.anomalies, {"min_sample": 2, "threshold": 0.0, "max_items": 50})):
        assert engine(live.decisions, live.outcomes, CLASSES, **kw) == \
            engine(stored.decisions, stored.outcomes, CLASSES, **kw)


def test_ledger_limit_keeps_the_most_recent_decisions(writer):
    _seed(writer)
    live = from_ledger(writer.ledger, "tenant_b", "pricing_exception", limit=5).decisions.collect()
    every = from_ledger(writer.ledger, "tenant_b", "pricing_exception", limit=1000).decisions.collect()
    newest = every.sort(["created_at", "decision_id"], descending=True).head(5)
    assert sorted(live["decision_id"]) == sorted(newest["decision_id"])
    both = from_ledger(writer.ledger, "tenant_a", "pricing_exception", limit=3, cohort_scopes=["tenant_b"])
    assert sorted(both.decisions.collect().group_by("scope").len().rows()) == [("tenant_a", 3), ("tenant_b", 3)]
    assert from_ledger(writer.ledger, "tenant_c", "pricing_exception", limit=5).decisions.collect().height == 0
