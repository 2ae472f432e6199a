"""The newest decisions of one policy from a Parquet dataset, read from only the rows they need.

`recent_frames(DIR, scopes=…, policy_id=…, limit=N)` returns, in memory, exactly what
`workbench.dataset.load.from_dataset(DIR, scopes=…, policy_id=…, limit=N)` describes lazily (the same
rows, columns, types and order; a test holds them equal), at a fraction of the cost:

1. the times (`scope`, `month`, `created_at`) of the policy's decisions are read and the
   oldest time among each scope's newest `limit` found;
2. only the month partitions holding a decision at least that new are read (Hive partition
   pruning), only such decisions (row-group statistics), and the newest `limit` per scope
   taken from them with `workbench.dataset.load.most_recent` itself, computed over the key columns
   (`scope`, `month`, `created_at`, `decision_id`) and the rows gathered in its order;
3. outcomes and typed facts are filtered by the chosen decision ids while they are scanned,
   instead of being joined to a plan that sorts every decision again.

The lazy path sorts every column of every decision of the policy (the facts text included) and
runs that sort once per frame it feeds; this one sorts four short columns once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import polars as pl

from gate.keys.anchors import TrustAnchors
from workbench.dataset.facts import facts_rows_of
from workbench.dataset.load import (
    Frames,
    most_recent,
    open_dataset,
    scan_facts,
    scan_table,
)
from workbench.dataset.trust import Trust

KEY_COLUMNS = ("scope", "month", "created_at", "decision_id")
ROW = "__row"

__all__ = ["recent_frames"]


def _in_scopes(frame: pl.LazyFrame, scopes: Sequence[str] | None) -> pl.LazyFrame:
    return frame if scopes is None else frame.filter(pl.col("scope").is_in(list(scopes)))


def _projected(frame: pl.LazyFrame, columns: Sequence[str] | None, keys: Sequence[str]) -> pl.LazyFrame:
    if columns is None:
        return frame
    wanted = {*columns, *keys}
    return frame.select([name for name in frame.collect_schema().names() if name in wanted])


def _candidates(decisions: pl.LazyFrame, limit: int) -> pl.LazyFrame:
    """The decisions at least as new as the oldest of each scope's newest `limit` (ties and
    null times included: a null `created_at` sorts first, as newest, in `most_recent`), read
    from only the month partitions that hold such a decision. They hold every decision
    `most_recent` chooses, whatever the tie-break by decision id."""
    times = decisions.select("scope", "month", "created_at").collect()
    newest = times.sort("created_at", descending=True).group_by("scope", maintain_order=True).head(limit)
    floor = newest["created_at"].min()
    keep = pl.col("created_at").is_null()
    if floor is not None:
        keep = keep | (pl.col("created_at") >= floor)
    months = times.filter(keep)["month"].unique().to_list()
    return decisions.filter(pl.col("month").is_in(months)).filter(keep)


def _chosen(decisions: pl.LazyFrame, limit: int) -> pl.DataFrame:
    """The newest `limit` decisions of each scope in `most_recent`'s order, computed on the
    key columns alone and the candidates' rows gathered in that order."""
    candidates = _candidates(decisions, limit).collect()
    order = most_recent(candidates.lazy().select(*KEY_COLUMNS).with_row_index(ROW), limit).collect()
    return candidates[order[ROW]]


def recent_frames(root: str | Path, *, scopes: Sequence[str] | None, policy_id: str, limit: int,
                  trust: Trust | TrustAnchors | None = None,
                  decision_columns: Sequence[str] | None = None,
                  outcome_columns: Sequence[str] | None = None,
                  facts_column: Callable[[str], bool] | None = None) -> Frames:
    """Frames (collected, as LazyFrames over memory) of the newest `limit` decisions of
    `policy_id` in each of `scopes` (every scope when None), with their outcome records and
    their typed facts rows; the same frames `from_dataset(…, limit=limit)` describes.
    `decision_columns` / `outcome_columns`: read only these columns of the tables (in the
    tables' order; the keys are always read), e.g. what the report engines read
    (`workbench.dataset.schema.DECISION_ANALYSIS_COLUMNS`): the record hashes and receipt bodies are most of
    the bytes and no figure reads them. `facts_column`: which columns of the typed facts table
    to read (`workbench.dataset.rollups.fact_moment_column`; the partition keys are always read)."""
    # The same refusals as from_dataset: another schema version, a manifest that is not trusted
    # (`open_dataset`), and (in scan_table/scan_facts) any listed file that does not match its entry.
    opened = open_dataset(root, trust)
    manifest = opened.manifest
    decisions = _projected(scan_table(root, "decisions", scopes, manifest), decision_columns, KEY_COLUMNS)
    decisions = _in_scopes(decisions, scopes).filter(pl.col("policy_id") == policy_id)
    chosen = _chosen(decisions, limit)
    ids = chosen["decision_id"].drop_nulls().unique().implode()
    outcomes = (_in_scopes(_projected(scan_table(root, "outcomes", scopes, manifest), outcome_columns, ("decision_id", "scope")),
                           scopes)
                .filter(pl.col("decision_id").is_in(ids)).collect())
    facts = scan_facts(root, policy_id, scopes, manifest)
    if facts is not None:
        if facts_column is not None:
            facts = facts.select([name for name in facts.collect_schema().names()
                                  if facts_column(name) or name in ("decision_id", "scope", "month")])
        facts = facts_rows_of(chosen.lazy(), facts.filter(pl.col("decision_id").is_in(ids)),
                         every_decision=False).collect().lazy()
    return Frames(chosen.lazy(), outcomes.lazy(), facts, None, opened.source)
