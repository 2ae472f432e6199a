"""The typed facts table: each rulebook's decision facts flattened into typed columns.

The `decisions` table keeps the facts as canonical JSON text (`facts_json`). To evaluate a
rulebook (a draft in a dry-run, a batch counterfactual) column-wise, the export also writes

    DIR/facts/rulebook_id=<id>/scope=<scope>/month=<YYYY-MM>/part-<name>.parquet

with one row per decision of that rulebook (its `policy_id`): `decision_id`, `facts_state`,
`facts_json` (partial rows only), the decision's stored outcome (`created_at`, `verdict`,
`application_verdict`, `action`, `reason_code`, `matched_rule_id`: a replay reads this one
table, no join) and, for every field path the decision's facts hold, the six typed columns of
`workbench.engines.fact_columns` (`<path>::t|b|n|s|j|e`). Every object path is flattened, not
only the paths the rulebook of the day read, because a draft may read any of them; a path
that no file holds is missing in every row (its columns are inserted as null on read).

`facts_state` says how far the row can be trusted:

- `typed`: every path a field path can reach is in the typed columns, exactly;
- `partial`: some value is not stored exactly (an integer beyond ±(2^53−1), a string with a
  lone surrogate, more than `MAX_PATHS` distinct paths in the batch): the dry-run evaluates
  this row with the scalar evaluator over its `facts_json` (kept in this table for such rows);
- `absent`: the record carries no facts (`facts_json` null): the decision cannot be replayed.

Column types never depend on the data (Int8, Boolean, Float64, String, String,
List(String)), so files written by different export batches concatenate; a batch that never
saw a path simply lacks its columns.

Use: `facts_tables(decisions)` (pure: a decisions batch in the export's schema, partition
columns included → one Arrow table per rulebook id) and `write_facts(root, decisions, name)`
(the export calls this once per batch of decisions it writes). Reading: `facts_rows_of(decisions,
facts)` matches a scanned facts table to some decisions (the loader and the rollups share it).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from workbench.dataset.schema import TS
from workbench.engines import fact_columns as fc

__all__ = ["FACTS_DIR", "MAX_PATHS", "facts_rows_of", "facts_table", "facts_tables", "flatten", "partition_dir",
           "write_facts"]

flatten = fc.flatten  # the path rules live with the column contract (the engines use them too)

FACTS_DIR = "facts"
MAX_PATHS = 512

_ARROW_TYPES = {"t": pa.int8(), "b": pa.bool_(), "n": pa.float64(), "s": pa.string(), "j": pa.string(),
                "e": pa.list_(pa.string())}
# A JSON escape of a UTF-16 surrogate: the text may decode to a string Arrow cannot hold.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF]")


def _cells(value: Any) -> tuple[Any, ...]:
    """(t, b, n, s, j, e) of one value."""
    if value is None:
        return fc.KIND_NULL, None, None, None, None, None
    if value is True or value is False:
        return fc.KIND_BOOL, value, None, None, None, None
    if isinstance(value, (int, float)):
        return fc.KIND_NUMBER, None, float(value) + 0.0, None, None, None  # + 0.0: no negative zero
    if isinstance(value, str):
        return fc.KIND_STRING, None, None, value, None, None
    if isinstance(value, list):
        return fc.KIND_ARRAY, None, None, None, fc.strict_key(value), [fc.strict_key(v) for v in value]
    return fc.KIND_OBJECT, None, None, None, fc.strict_key(value), None


STORED_COLUMNS = ("created_at", "verdict", "application_verdict", "action", "reason_code", "matched_rule_id")


def facts_table(decisions: pa.Table, max_paths: int = MAX_PATHS) -> pa.Table:
    """The typed facts rows of one rulebook's decisions.

    `decisions`: a table with `decision_id`, `facts_json`, `scope`, `month` and the stored
    outcome columns `STORED_COLUMNS` (null when absent), as in the decisions schema.
    Columns out: `decision_id`, `facts_state`, `facts_json` (only for `partial` rows, which a
    reader evaluates with the scalar evaluator), the decision's stored `created_at`, `verdict`,
    `application_verdict`, `action`, `reason_code`, `matched_rule_id` (so a replay reads one
    table), the typed columns of every path (sorted by path), then `scope` and `month`. Pure and
    deterministic. When the decisions hold more than `max_paths` distinct paths, the most
    frequent ones are kept (ties by path) and rows with another path are `partial`.
    """
    texts = decisions.column("facts_json").to_pylist()
    flat: list[tuple[dict[str, Any], str]] = []
    counts: Counter[str] = Counter()
    for text in texts:
        if text is None:
            flat.append(({}, fc.STATE_ABSENT))
            continue
        paths, exact = flatten(json.loads(text))
        if _SURROGATE_ESCAPE.search(text):
            exact = False
        flat.append((paths, fc.STATE_TYPED if exact else fc.STATE_PARTIAL))
        counts.update(paths.keys())
    kept = sorted(counts, key=lambda p: (-counts[p], p))[:max_paths]
    kept_set = set(kept)
    columns: dict[str, list[Any]] = {fc.column(p, part): [] for p in sorted(kept) for part in fc.PARTS}
    states, partial_json = [], []
    empty = (None,) * 6
    for (paths, exact_state), text in zip(flat, texts, strict=True):
        state = exact_state
        if state == fc.STATE_TYPED and not kept_set.issuperset(paths):
            state = fc.STATE_PARTIAL
        states.append(state)
        partial_json.append(text if state == fc.STATE_PARTIAL else None)
        for path in sorted(kept):
            cells = _cells(paths[path]) if state == fc.STATE_TYPED and path in paths else empty
            for part, cell in zip(fc.PARTS, cells, strict=True):
                columns[fc.column(path, part)].append(cell)
    rows = decisions.num_rows
    arrays = [decisions.column("decision_id").cast(pa.string()), pa.array(states, pa.string()),
              pa.array(partial_json, pa.string())]
    fields = [pa.field("decision_id", pa.string(), nullable=False), pa.field(fc.STATE_COLUMN, pa.string(), nullable=False),
              pa.field("facts_json", pa.string())]
    for name in STORED_COLUMNS:
        kind = TS if name == "created_at" else pa.string()
        values = decisions.column(name).cast(kind) if name in decisions.column_names else pa.nulls(rows, kind)
        arrays.append(values)
        fields.append(pa.field(name, kind))
    for name, values in columns.items():
        kind = _ARROW_TYPES[name.rsplit("::", 1)[1]]
        arrays.append(pa.array(values, kind))
        fields.append(pa.field(name, kind))
    arrays += [decisions.column("scope").cast(pa.string()), decisions.column("month").cast(pa.string())]
    fields += [pa.field("scope", pa.string(), nullable=False), pa.field("month", pa.string(), nullable=False)]
    return pa.Table.from_arrays([a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a for a in arrays],
                                schema=pa.schema(fields))


def facts_tables(decisions: pa.Table, max_paths: int = MAX_PATHS) -> dict[str, pa.Table]:
    """A decisions batch (the `decisions` schema plus `scope` and `month`) → one typed facts
    table per rulebook id (`policy_id`); decisions without a policy id are left out."""
    policy = decisions.column("policy_id").to_pylist()
    groups: dict[str, list[int]] = {}
    for index, policy_id in enumerate(policy):
        if policy_id is not None:
            groups.setdefault(policy_id, []).append(index)
    return {rulebook_id: facts_table(decisions.take(pa.array(groups[rulebook_id])), max_paths)
            for rulebook_id in sorted(groups)}


def partition_dir(root: str | Path, rulebook_id: str, scope: str, month: str) -> Path:
    """`root/facts/rulebook_id=<id>/scope=<scope>/month=<month>` (values percent-escaped)."""
    return (Path(root) / FACTS_DIR / f"rulebook_id={quote(rulebook_id, safe='')}"
            / f"scope={quote(scope, safe='')}" / f"month={quote(month, safe='')}")


def write_facts(root: str | Path, decisions: pa.Table, name: str, max_paths: int = MAX_PATHS) -> list[Path]:
    """Write the typed facts of a decisions batch under `root/facts/…` as `part-<name>.parquet`
    in each (rulebook_id, scope, month) partition; returns the files written. The partition
    columns live in the directory names, not in the files. Writing the same batch under the
    same `name` again replaces the same files with the same content."""
    written: list[Path] = []
    for rulebook_id, table in facts_tables(decisions, max_paths).items():
        keys = table.select(["scope", "month"]).to_pylist()
        groups: dict[tuple[str, str], list[int]] = {}
        for index, key in enumerate(keys):
            groups.setdefault((key["scope"], key["month"]), []).append(index)
        for (scope, month), rows in sorted(groups.items()):
            part = table.take(pa.array(rows)).drop_columns(["scope", "month"])
            folder = partition_dir(root, rulebook_id, scope, month)
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"part-{name}.parquet"
            pq.write_table(part, path)
            written.append(path)
    return written


def facts_rows_of(decisions: pl.LazyFrame, facts: pl.LazyFrame, *, every_decision: bool,
                  carry: Sequence[str] = ()) -> pl.LazyFrame:
    """The facts rows of exactly `decisions`. `every_decision`: the decisions are all of the
    rulebook's in the scanned scopes, so when the counts agree the table is theirs as it is (the
    export writes one facts row per decision); otherwise the rows are matched by decision id and
    a decision without a row joins as `partial` with its `facts_json`. `carry`: columns of the
    decisions each facts row gets too (matched by decision id; the rollups' partition keys)."""
    carry = list(carry)
    if every_decision and not carry:
        counts = pl.collect_all([decisions.select(pl.len()), facts.select(pl.len())])
        if counts[0].item() == counts[1].item():
            return facts
    ids = decisions.select("decision_id", *carry)
    missing = decisions.join(facts.select("decision_id"), on="decision_id", how="anti").select(
        "decision_id", "month", pl.lit(fc.STATE_PARTIAL).alias(fc.STATE_COLUMN), "facts_json", *carry)
    matched = facts.join(ids, on="decision_id", how="inner" if carry else "semi")
    return pl.concat([matched, missing], how="diagonal_relaxed")
