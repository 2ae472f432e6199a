"""The history a dry-run replays: one rulebook's decisions, their typed facts and outcomes.

Two sources give the same `History` (LazyFrames in the dataset contract, plus the identity of
what was read, which the migration manifest names and signs):

- `from_dataset(location, rulebook_id, scope)`: an exported dataset (`gate export`). Its
  `manifest.json` must be of `DATASET_SCHEMA_VERSION`; the source identity is the sha256 of
  the manifest's raw bytes. The typed facts come from `facts/rulebook_id=<id>/…`
  (`workbench.dataset.facts`); a decision without a facts row is replayed from its `facts_json`.
  Scans are lazy: only the columns and partitions the dry-run needs are read.
- `from_ledger(ledger, rulebook_id, scope)`: the live ledger, read with the export's own
  streams and converters (`gate.ledger.stream`, `workbench.dataset.convert`, `workbench.dataset.facts`), so a
  number means the same thing on both paths. Held in memory (the rulebook's decisions only);
  the source identity is the sha256 of the chain heads read before the decisions.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from gate.privacy.removal import removal_causes
from gate.protocol.canonical import sha256_bytes_hex, sha256_hex
from workbench.dataset import iceberg
from workbench.dataset.convert import decisions_table, frame_of, holds_table, receipts_table
from workbench.dataset.facts import facts_tables
from workbench.dataset.integrity import (
    check_files,
    checked_columns,
    listed_files,
)
from workbench.dataset.location import DatasetError, open_location
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, DECISION_ANALYSIS_COLUMNS, DECISIONS, TABLES
from workbench.engines import fact_columns as fc
from workbench.migration.errors import DryRunError

if TYPE_CHECKING:  # the ledger (SQLAlchemy) is imported only for a live read
    from gate.keys.anchors import TrustAnchors
    from gate.ledger import Ledger
    from workbench.dataset.trust import DatasetTrust, Staleness, Trust

__all__ = ["DECISION_ANALYSIS_SCHEMA", "History", "HistorySource", "dataset_source", "from_dataset", "from_ledger", "history_of_files", "scans_of_files"]

MANIFEST = "manifest.json"
# The dataset's analysis columns of a decision with their Polars types (from the Arrow schema).
DECISION_ANALYSIS_SCHEMA: dict[str, pl.DataType] = dict(
    frame_of(pa.schema([DECISIONS.field(name) for name in DECISION_ANALYSIS_COLUMNS]).empty_table()).schema)
OUTCOME_COLUMNS: dict[str, pl.DataType] = {"receipt_id": pl.String(), "decision_id": pl.String(),
                                           "reported_at": pl.Datetime("ms", "UTC"), "status": pl.String()}
_HIVE: dict[str, pl.DataType] = {"scope": pl.String(), "month": pl.String()}


class ScopeHead(TypedDict):
    """The scope's audit chain head a ledger dry-run of one scope read (issue 64): the history it
    covered, which an activation that requires the dry-run checks against the ledger's."""

    chain_id: str
    size: int
    head_link_hash: str | None


class HistorySource(TypedDict):
    """What a history was read from (a dry-run's `dry_run.source`, signed with it): `kind`, where,
    and `hash`, the identity of what was read. A dataset's (`dataset_source`) names its manifest's
    `dataset_hash`, the key that signed it, the dataset before it, the ledger head it was cut at and
    `stale` when it lags the live ledger; the ledger's (`from_ledger`) counts the chain heads read
    and, for one scope, states that scope's chain head (`scope_head`, issue 64: the history an
    activation that requires the dry-run binds it to)."""

    kind: Literal["dataset", "ledger"]
    location: str
    hash: str
    dataset_schema_version: str
    dataset_hash: NotRequired[str]
    dataset_key_id: NotRequired[str | None]
    previous_dataset_hash: NotRequired[str | None]
    ledger_head_hash: NotRequired[str | None]
    stale: NotRequired[Staleness]
    chain_heads: NotRequired[int]
    scope_head: NotRequired[ScopeHead | None]


@dataclass(frozen=True)
class History:
    """`decisions` (DECISION_ANALYSIS_SCHEMA + scope, month; only this rulebook's), `base` (one row per
    decision: `REPLAY_COLUMNS` and the typed fact columns, what the replay reads), `outcomes`
    (OUTCOME_COLUMNS), `source` (JSON-ready: kind, location, `hash` of what was read) and
    `versions` (`summarize_decisions`: the rulebook's decisions per scope, version and rulebook
    hash in every scope, read once; `per_scope` and `versions_in_scope` derive from it) and
    `holds`: the rulebook's holds of `scope` in their latest state (`workbench.dataset.schema.HOLDS`;
    empty for a dataset without hold tables, None when the source was not asked for them), from
    which the review forecast measures what a hold costs (`workbench.migration.holdcost`)."""

    rulebook_id: str
    scope: str | None
    decisions: pl.LazyFrame
    base: pl.LazyFrame
    outcomes: pl.LazyFrame
    # None: a cluster worker's share of a dataset (`workbench.migration.on_cluster`), whose source
    # the client names.
    source: HistorySource | None
    versions: pl.DataFrame
    holds: pl.LazyFrame | None = None
    # Decisions of the history whose inputs were removed, per cause (retention, erasure; docs/privacy.md
    # "Retention"): read from the ledger's remainders; a dataset's history states none.
    removed: Mapping[str, int] = field(default_factory=dict)

    def per_scope(self) -> dict[str, int]:
        """Decisions of the rulebook per scope, every scope."""
        return dict(self.versions.group_by("scope").agg(pl.col("decisions").sum()).iter_rows())

    def versions_in_scope(self) -> pl.DataFrame:
        """`policy_version`, `rulebook_hash`, `decisions`, `first`, `last` of the history's scope
        (every scope when it has none)."""
        rows = self.versions if self.scope is None else self.versions.filter(pl.col("scope") == self.scope)
        return rows.group_by(["policy_version", "rulebook_hash"]).agg(
            pl.col("decisions").sum(), pl.col("first").min(), pl.col("last").max())


def summarize_decisions(decisions: pl.LazyFrame) -> pl.LazyFrame:
    """`scope`, `policy_version`, `rulebook_hash`, `decisions`, `first`, `last`: the decisions per
    scope, version and rulebook hash, with the first and last decision time."""
    return decisions.group_by(["scope", "policy_version", "rulebook_hash"]).agg(
        pl.len().cast(pl.Int64).alias("decisions"), pl.col("created_at").min().alias("first"),
        pl.col("created_at").max().alias("last"))


VERSIONS_SCHEMA: dict[str, pl.DataType] = {
    "scope": pl.String(), "policy_version": pl.String(), "rulebook_hash": pl.String(), "decisions": pl.Int64(),
    "first": pl.Datetime("ms", "UTC"), "last": pl.Datetime("ms", "UTC")}
_SETTLED = ("policy_id", "policy_version", "rulebook_hash")  # constant in a row group for its statistics to count it


def merge_versions(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """`summarize_decisions` rows of parts of a history added up: per scope, version and rulebook hash."""
    return pl.concat(parts, how="vertical_relaxed").group_by(["scope", "policy_version", "rulebook_hash"]).agg(
        pl.col("decisions").sum(), pl.col("first").min(), pl.col("last").max())


def _row_group_versions(group: pq.RowGroupMetaData, rulebook_id: str) -> tuple[str, str, int, int, int] | bool | None:
    """(version, rulebook hash, rows, first, last in epoch ms) of a row group whose statistics
    settle them, False for a row group of another rulebook, None when they do not settle it.

    A spec-abiding writer's minimum and maximum bound every non-null value of the chunk (a
    truncated maximum is rounded up), so a chunk without nulls whose minimum equals its maximum
    holds that one value in every row, exactly; `created_at`'s are its exact minimum and maximum
    (nulls set aside, as `min` and `max` do), in milliseconds as the scan reads it."""
    chunks = {group.column(i).path_in_schema: group.column(i) for i in range(group.num_columns)}
    values: list[str] = []
    for name in _SETTLED:
        chunk = chunks.get(name)
        stats = chunk.statistics if chunk is not None else None
        if (chunk is None or stats is None or chunk.physical_type != "BYTE_ARRAY" or not stats.has_min_max
                or not stats.has_null_count or stats.null_count != 0 or stats.min_raw != stats.max_raw
                or not isinstance(stats.min, str)):
            return None
        values.append(stats.min)
    if values[0] != rulebook_id:
        return False
    chunk = chunks.get("created_at")
    stats = chunk.statistics if chunk is not None else None
    if chunk is None or stats is None or chunk.physical_type != "INT64" or not stats.has_min_max:
        return None
    unit = json.loads(stats.logical_type.to_json()) if stats.logical_type is not None else {}
    if unit.get("Type") != "Timestamp" or unit.get("timeUnit") != "milliseconds":
        return None
    return values[1], values[2], group.num_rows, int(stats.min_raw), int(stats.max_raw)


def _file_versions(path: str, rulebook_id: str) -> list[tuple[str, str, str, int, int, int]] | None:
    """The `summarize_decisions` rows of one local decisions file from its footer alone, or None
    (its statistics do not settle it, its scope is not one plain hive folder, it is not local)."""
    scopes = [part[len("scope="):] for part in path.split("/") if part.startswith("scope=")]
    if len(scopes) != 1 or not scopes[0] or "%" in scopes[0] or not os.path.isabs(path):
        return None
    try:
        metadata = pq.read_metadata(path)
    except (OSError, pa.ArrowException):
        return None  # the read says why
    if "scope" in metadata.schema.names:
        return None  # a file that holds its partition column: read it
    rows = []
    for index in range(metadata.num_row_groups):
        group = metadata.row_group(index)
        if group.num_rows == 0:
            continue
        found = _row_group_versions(group, rulebook_id)
        if found is None:
            return None
        if isinstance(found, tuple):
            rows.append((scopes[0], *found))
    return rows


def footer_versions(rulebook_id: str, files: list[str]) -> tuple[pl.DataFrame, list[str]]:
    """`summarize_decisions` of the rulebook's decisions in `files` (checked, local), from the
    files' footers where their row-group statistics settle it (a file written by the export
    holds one version of one rulebook per row group), and the files whose rows must be read
    for it instead. No decision is read for the first: at 100M decisions the read was about a
    tenth of the dry-run's CPU."""
    rows, rest = [], []
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="footers") as pool:
        for path, found in zip(files, pool.map(lambda path: _file_versions(path, rulebook_id), files), strict=True):
            if found is None:
                rest.append(path)
            else:
                rows.extend(found)
    frame = pl.DataFrame(rows, schema={**VERSIONS_SCHEMA, "first": pl.Int64(), "last": pl.Int64()}, orient="row")
    return frame.with_columns(pl.col("first", "last").cast(pl.Datetime("ms", "UTC"))), rest


# The replay base: the stored (old) side of each decision and its facts state.
OLD_NAMES = {"verdict": "old_verdict", "matched_rule_id": "old_rule", "reason_code": "old_reason",
             "application_verdict": "old_application_verdict", "action": "old_action"}
REPLAY_COLUMNS = ["decision_id", "created_at", "scope", "month", *OLD_NAMES.values(), fc.STATE_COLUMN, "facts_json"]


def replay_base(decisions: pl.LazyFrame, facts: pl.LazyFrame, covered: bool) -> pl.LazyFrame:
    """The replay base. `covered`: every decision has a facts row, so the facts table (which
    repeats the stored outcome) is the base and no join is needed; otherwise the decisions are
    joined with their facts rows, and a decision without one is replayed from its `facts_json`
    by the scalar evaluator (`facts_state` partial) or is unreplayable (no facts at all).
    Its row order is defined either way: `compute` evaluates the rules in one pass and zips the
    picks with the stored columns of a second read."""
    if covered:
        return facts.rename(OLD_NAMES)
    typed = [name for name in facts.collect_schema().names() if "::" in name]
    # The base's row order must be defined (the dry-run reads it twice and zips the passes).
    joined = decisions.rename(OLD_NAMES).join(facts.select("decision_id", fc.STATE_COLUMN, *typed),
                                              on="decision_id", how="left", maintain_order="left")
    return joined.with_columns(pl.col(fc.STATE_COLUMN).fill_null(fc.STATE_PARTIAL))


def _scan(files: list[str] | str, schema: dict[str, pl.DataType], hive: dict[str, pl.DataType] = _HIVE) -> pl.LazyFrame:
    # An Iceberg data file (`workbench.dataset.iceberg`) stores microseconds: read as the contract's ms.
    return pl.scan_parquet(files, schema=schema, hive_partitioning=True, hive_schema=hive,
                           try_parse_hive_dates=False, missing_columns="insert", extra_columns="ignore",
                           cast_options=pl.ScanCastOptions(datetime_cast="microsecond-downcast"))


def _listed(root: str, manifest: DatasetManifest, kind: str, name: str | None = None) -> list[str]:
    """The files the manifest lists (`workbench.dataset.integrity`), each checked against its listed
    size, sha256, row count and schema; a stray file is never read. DATASET_INVALID otherwise."""
    try:
        if kind in TABLES and iceberg.is_iceberg(manifest):  # a record table: its snapshot's data files
            return iceberg.table_files(manifest, kind)
        location = open_location(root)
        return [location.url(path) for path in check_files(location, listed_files(manifest, kind, name))]
    except DatasetError as exc:
        raise DryRunError("DATASET_INVALID", str(exc)) from None


def _scan_files(files: list[str], schema: dict[str, pl.DataType]) -> pl.LazyFrame:
    if not files:
        return pl.LazyFrame(schema={**schema, **_HIVE})
    return _scan(files, schema)


def _carry_stored_outcome(files: list[str]) -> bool:
    """Do all facts files repeat the decisions' stored outcome? (Files written before the facts
    table carried it are read joined with the decisions instead.)"""
    needed = {"facts_json", "created_at", *OLD_NAMES}
    # A file's columns as its check just read them from its footer (no second read), else its schema.
    return all(needed <= set(checked_columns(path) or pl.read_parquet_schema(path)) for path in files)


def read_manifest(root: str | Path, trust: Trust | TrustAnchors | None = None
                  ) -> tuple[DatasetManifest, bytes, DatasetTrust]:
    """The manifest, its raw bytes and its trust status as `workbench.dataset.load.open_dataset`
    gives them under `trust` (a `workbench.dataset.trust.Trust`, or anchors: signed by one of
    those keys); DATASET_INVALID with its one line otherwise."""
    from workbench.dataset.load import open_dataset

    try:
        opened = open_dataset(root, trust)
    except DatasetError as exc:
        raise DryRunError("DATASET_INVALID", str(exc)) from None
    return opened.manifest, opened.raw, opened.source


def from_dataset(location: str | Path, rulebook_id: str, scope: str | None = None,
                 paths: tuple[str, ...] = (), anchors: Trust | TrustAnchors | None = None) -> History:
    """The history of `rulebook_id` (in `scope`, or every scope) in an exported dataset.
    `paths`: the fact paths whose typed columns the caller will read. Reads the rulebook's
    decisions once for `History.versions` (every scope) and the facts files' row counts. Reads
    only the files the manifest lists, each checked first; `anchors`: the manifest must be
    signed by one of those keys. `source` names the manifest's bytes and its `dataset_hash`."""
    root = str(location)
    manifest, raw, trusted = read_manifest(root, anchors)
    history = history_of_files(rulebook_id, scope, paths, decision_files=_listed(root, manifest, "decisions"),
                               outcome_files=_listed(root, manifest, "outcomes"),
                               facts_files=_listed(root, manifest, "facts", rulebook_id),
                               source=dataset_source(location, manifest, raw, trusted))
    return replace(history, holds=holds_of_files(_listed(root, manifest, "holds"), rulebook_id, scope))


def holds_of_files(files: list[str], rulebook_id: str, scope: str | None) -> pl.LazyFrame:
    """The rulebook's holds of `scope` (every scope when None) in checked `holds` files of a
    dataset, one row each in its latest state (`workbench.dataset.load.latest_hold_states`)."""
    from workbench.dataset.load import latest_hold_states, polars_schema

    schema = {name: kind for name, kind in polars_schema("holds").items() if name not in _HIVE}
    holds = latest_hold_states(_scan_files(files, schema)).filter(pl.col("policy_id") == rulebook_id)
    return holds if scope is None else holds.filter(pl.col("scope") == scope)


def dataset_source(location: str | Path, manifest: DatasetManifest, raw: bytes,
                   trusted: DatasetTrust) -> HistorySource:
    """What a dry-run of a dataset names and signs: the manifest's bytes, its `dataset_hash`,
    the key that signed it (only when its signature verified: `trusted` is the trust status of
    `open_dataset`), the previous dataset and the ledger head it was cut at, and `stale` when
    the dataset lags the live ledger past the bound."""
    source: HistorySource = {
        "kind": "dataset", "location": str(location), "hash": sha256_bytes_hex(raw),
        "dataset_schema_version": DATASET_SCHEMA_VERSION, "dataset_hash": manifest["dataset_hash"],
        "dataset_key_id": trusted.get("key_id"), "previous_dataset_hash": manifest.get("previous_dataset_hash"),
        "ledger_head_hash": (manifest.get("ledger_head") or {}).get("head_hash")}
    if "stale" in trusted:
        source["stale"] = trusted["stale"]
    return source


def scans_of_files(rulebook_id: str, scope: str | None, paths: tuple[str, ...], *, decision_files: list[str],
                   outcome_files: list[str], facts_files: list[str]
                   ) -> tuple[pl.LazyFrame, pl.LazyFrame, pl.LazyFrame, pl.LazyFrame]:
    """Lazy scans of checked files (nothing read yet): the rulebook's decisions of every scope
    (unfiltered by `scope`), and its decisions, outcomes and typed facts of `scope`."""
    decisions = _scan_files(decision_files, DECISION_ANALYSIS_SCHEMA).filter(pl.col("policy_id") == rulebook_id)
    outcomes = _scan_files(outcome_files, OUTCOME_COLUMNS)
    facts_schema: dict[str, pl.DataType] = {
        "decision_id": pl.String(), fc.STATE_COLUMN: pl.String(), "facts_json": pl.String(),
        "created_at": pl.Datetime("ms", "UTC"), **dict.fromkeys(OLD_NAMES, pl.String()),
        **fc.path_schema(list(paths))}
    facts_hive: dict[str, pl.DataType] = {"rulebook_id": pl.String(), **_HIVE}
    facts = (_scan(facts_files, facts_schema, facts_hive).drop("rulebook_id") if facts_files
             else pl.LazyFrame(schema={**facts_schema, **_HIVE}))
    facts = facts.with_columns(pl.col("created_at").cast(pl.Datetime("ms", "UTC")))
    every_scope = decisions
    if scope is not None:
        decisions = decisions.filter(pl.col("scope") == scope)
        outcomes = outcomes.filter(pl.col("scope") == scope)
        facts = facts.filter(pl.col("scope") == scope)
    return every_scope, decisions, outcomes, facts


def history_of_files(rulebook_id: str, scope: str | None, paths: tuple[str, ...], *, decision_files: list[str],
                     outcome_files: list[str], facts_files: list[str], source: HistorySource | None) -> History:
    """The history of `rulebook_id` in some checked files of a dataset (all of it, or one
    partition's on a cluster's worker: `workbench.migration.on_cluster`); `versions` of every scope
    the files hold, the frames of `scope` (all when None)."""
    every_scope, decisions, outcomes, facts = scans_of_files(
        rulebook_id, scope, paths, decision_files=decision_files, outcome_files=outcome_files, facts_files=facts_files)
    # The rulebook's decisions in every scope (the versions, the per-scope counts load_history
    # checks): from the files' row-group statistics where they settle it (`footer_versions`), a
    # read of the other files' decisions otherwise; the facts rows of the selection are counted
    # from the files' metadata.
    known, rest = footer_versions(rulebook_id, decision_files)
    if rest:
        read = (scans_of_files(rulebook_id, None, (), decision_files=rest, outcome_files=[], facts_files=[])[0]
                if len(rest) < len(decision_files) else every_scope)
        counted, facts_rows = pl.collect_all([summarize_decisions(read), facts.select(pl.len())])
        versions = merge_versions([known, counted]) if known.height else counted
    else:
        versions, facts_rows = merge_versions([known]), facts.select(pl.len()).collect()
    selected = versions if scope is None else versions.filter(pl.col("scope") == scope)
    covered = int(selected["decisions"].sum()) == facts_rows.item() and _carry_stored_outcome(facts_files)
    return History(rulebook_id, scope, decisions, replay_base(decisions, facts, covered), outcomes, source, versions)


def scope_head_of(heads: list[dict[str, Any]]) -> ScopeHead | None:
    """A scope's chain head as a dry-run's source states it (`chain_heads_of(ledger, scope)`:
    one chain per scope; None when the scope has none yet)."""
    for h in heads:
        head: ScopeHead = {"chain_id": h["chain_id"], "size": int(h["size"]), "head_link_hash": h["head_link_hash"]}
        return head
    return None


def from_ledger(ledger: Ledger, rulebook_id: str, scope: str | None = None,
                batch_size: int = 5_000) -> History:
    """The history of `rulebook_id` read from the live ledger (every scope when `scope` is None)."""
    # The ledger (SQLAlchemy, about half a second) is imported only for a live read.
    from gate.ledger import stream

    heads = stream.chain_heads_of(ledger, scope)
    decision_frames, fact_frames, outcome_frames = [], [], []
    removed: Counter[str] = Counter()
    for rows in stream.iter_decisions(ledger, scope=scope, policy_id=rulebook_id, batch_size=batch_size):
        removed.update(removal_causes(rows))
        table = decisions_table(rows)
        decision_frames.append(frame_of(table).select([*DECISION_ANALYSIS_SCHEMA, "scope", "month"]))
        facts = facts_tables(table).get(rulebook_id)
        if facts is not None:
            fact_frames.append(frame_of(facts))
    for rows in stream.iter_receipts(ledger, "outcome", scope=scope, policy_id=rulebook_id, batch_size=batch_size):
        outcome_frames.append(frame_of(receipts_table(rows)).select([*OUTCOME_COLUMNS, "scope", "month"]))
    holds = _ledger_holds(ledger, rulebook_id, scope, batch_size)
    empty_facts = pl.DataFrame(schema={"decision_id": pl.String(), fc.STATE_COLUMN: pl.String(),
                                       "facts_json": pl.String(), "created_at": pl.Datetime("ms", "UTC"),
                                       **dict.fromkeys(OLD_NAMES, pl.String()), **_HIVE})
    decisions = (pl.concat(decision_frames) if decision_frames
                 else pl.DataFrame(schema={**DECISION_ANALYSIS_SCHEMA, **_HIVE}))
    outcomes = (pl.concat(outcome_frames) if outcome_frames
                else pl.DataFrame(schema={**OUTCOME_COLUMNS, **_HIVE}))
    facts = pl.concat(fact_frames, how="diagonal") if fact_frames else empty_facts
    source: HistorySource = {"kind": "ledger", "location": ledger_location(ledger),
              "hash": sha256_hex({"chain_heads": heads}), "chain_heads": len(heads),
              "dataset_schema_version": DATASET_SCHEMA_VERSION}
    if scope is not None:  # the history it covered: the scope's one chain, at the head read before the decisions
        source["scope_head"] = scope_head_of(heads)
    # Every decision of the rulebook got a facts row from the same batch: the base is covered.
    return History(rulebook_id, scope, decisions.lazy(), replay_base(decisions.lazy(), facts.lazy(), True),
                   outcomes.lazy(), source, summarize_decisions(decisions.lazy()).collect(), holds,
                   dict(sorted(removed.items())))


def _ledger_holds(ledger: Ledger, rulebook_id: str, scope: str | None, batch_size: int) -> pl.LazyFrame:
    """The rulebook's holds as they are now in the ledger, in the dataset contract."""
    from gate.ledger.holdstream import iter_policy_holds
    from workbench.dataset.load import conform, empty

    frames = [frame_of(holds_table(rows)) for rows in iter_policy_holds(ledger, rulebook_id, scope=scope,
                                                                         batch_size=batch_size)]
    return conform(pl.concat(frames), "holds") if frames else empty("holds")


def ledger_location(ledger: object) -> str:
    """The ledger's URL without credentials (never a password in a manifest)."""
    url = getattr(getattr(ledger, "engine", None), "url", None)
    if url is None:
        return "ledger"
    return url.render_as_string(hide_password=True) if hasattr(url, "render_as_string") else str(url)
