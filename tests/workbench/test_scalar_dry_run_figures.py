"""The vectorized dry-run against a one-by-one scalar replay, on every figure of migration.json,
at a small size so it runs in the normal suite (issue 22, item 5).

`benchmarks/bench_dry_run.py` makes the same comparison at a million decisions; here the same
synthetic generator (`benchmarks/dryrun_data.py`: every operator kind, type mismatches, decisions
without facts, integers beyond 2^53 that the scalar path replays) writes 2,000 decisions, the
dry-run writes a signed `migration.json`, and `benchmarks/scalar_dry_run.py` recomputes every
figure from the dataset one decision at a time with the scalar evaluator (the ground truth).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner
from workbench.engines import fact_columns as fc
from workbench.migration import dry_run, write_dry_run
from workbench.migration.draft import load_draft

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import dryrun_data
import scalar_dry_run

N = 2_000
SEED = 10  # five partial rows (integers beyond 2^53) at this size; the default seed has none
NOW = "2026-11-22T00:00:00.000Z"


FIGURES = ["decisions_total", "transitions", "rule_transitions", "drift_by_rule", "drift_by_reason",
           "review_by_month", "field_changes", "unreplayable", "outcome_classes", "flips_listed", "counts",
           "review_load", "outcome_totals", "rules", "rules_never", "impact"]


def test_every_migration_figure_equals_the_scalar_replay(tmp_path):
    """One test on purpose (no shared fixture): mutmut maps a function to the tests that call it."""
    root = tmp_path / "ds"
    dryrun_data.generate(root, N, SEED)
    _, draft = dryrun_data.rulebooks()
    run = dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW, flips_limit=50)
    write_dry_run(tmp_path / "out", run.manifest, Ed25519ReceiptSigner(Ed25519Key.generate()))
    member = json.loads((tmp_path / "out" / "migration.json").read_text())["dry_run"]
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    one_by_one = scalar_dry_run.scalar_dry_run(root, dryrun_data.RULEBOOK_ID, compiled.scalar.evaluate,
                                               rule_ids=list(compiled.order), flips_limit=50)
    vectorized = scalar_dry_run.figures_of(member)
    assert set(vectorized) == set(one_by_one) == set(FIGURES)
    differing = {name: (vectorized[name], one_by_one[name]) for name in FIGURES if vectorized[name] != one_by_one[name]}
    assert differing == {}

    # The sample is not degenerate: the figures compared say something.
    assert member["decisions_total"] == N
    counts = one_by_one["counts"]
    assert counts["decisions_changed"] > 50 and counts["decisions_unreplayable"] > 0
    assert len(one_by_one["flips_listed"]) == 50
    assert len({cls for (_, _, cls) in one_by_one["outcome_classes"]}) >= 4
    assert one_by_one["review_load"]["before"] != one_by_one["review_load"]["after"]

    # The integers beyond 2^53 make partial facts rows; the dry-run replays exactly those one by
    # one (and the figures above agree with the scalar replay on them too).
    partial = pl.scan_parquet(str(root / "facts" / "**" / "*.parquet"), hive_partitioning=True).filter(
        (pl.col(fc.STATE_COLUMN) == fc.STATE_PARTIAL) & pl.col("facts_json").is_not_null()).collect()
    assert partial.height == 5
    assert member["decisions_scalar"] == partial.height
