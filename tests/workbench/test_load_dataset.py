"""Loading a Parquet dataset: exactly the contract's columns, scope / policy / limit filters,
refusal of another schema version."""

from __future__ import annotations

import pytest
from workbench_support import CLASSES, frames, random_ledger, write_dataset

from workbench.dataset.load import DatasetError, from_dataset, polars_schema
from workbench.engines import effectiveness


@pytest.fixture
def ledger_rows():
    decisions, outcomes = random_ledger(5, n=300, scopes=("tenant a/1", "tenant_b"))
    return decisions, outcomes


def test_dataset_frames_have_exactly_the_schema_and_match_in_memory_frames(tmp_path, ledger_rows):
    write_dataset(tmp_path, *ledger_rows)
    loaded = from_dataset(tmp_path, scopes=["tenant a/1"])
    assert loaded.decisions.collect_schema() == polars_schema("decisions")
    assert loaded.outcomes.collect_schema() == polars_schema("outcomes")
    decisions = loaded.decisions.collect()
    assert set(decisions["scope"].unique()) == {"tenant a/1"}  # the escaped directory name comes back decoded
    memory = frames([d for d in ledger_rows[0] if d["scope"] == "tenant a/1"],
                    [o for o in ledger_rows[1] if o["scope"] == "tenant a/1"])
    assert effectiveness.effectiveness(loaded.decisions, loaded.outcomes, CLASSES, min_sample=10) == \
        effectiveness.effectiveness(memory.decisions, memory.outcomes, CLASSES, min_sample=10)


def test_limit_keeps_the_most_recent_decisions_and_their_outcomes(tmp_path, ledger_rows):
    write_dataset(tmp_path, *ledger_rows)
    loaded = from_dataset(tmp_path, scopes=["tenant_b"], policy_id="pricing", limit=25)
    decisions = loaded.decisions.collect()
    own = sorted((d for d in ledger_rows[0] if d["scope"] == "tenant_b"),
                 key=lambda d: (d["created_at"], d["decision_id"]), reverse=True)[:25]
    assert sorted(decisions["decision_id"].to_list()) == sorted(d["decision_id"] for d in own)
    assert set(loaded.outcomes.collect()["decision_id"].to_list()) <= set(decisions["decision_id"].to_list())
    assert from_dataset(tmp_path, scopes=["tenant_b"], policy_id="other").decisions.collect().height == 0
    assert from_dataset(tmp_path, scopes=["nobody"]).decisions.collect().height == 0


def test_another_schema_version_or_no_manifest_is_refused(tmp_path, ledger_rows):
    write_dataset(tmp_path / "old", *ledger_rows, version="decision_dataset_v0")
    with pytest.raises(DatasetError, match="decision_dataset_v0"):
        from_dataset(tmp_path / "old")
    with pytest.raises(DatasetError, match="manifest"):
        from_dataset(tmp_path / "missing")


def test_limit_applies_per_scope(tmp_path, ledger_rows):
    write_dataset(tmp_path, *ledger_rows)
    decisions = from_dataset(tmp_path, limit=7).decisions.collect()
    assert sorted(decisions.group_by("scope").len().rows()) == [("tenant a/1", 7), ("tenant_b", 7)]
