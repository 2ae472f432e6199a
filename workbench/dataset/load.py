"""LazyFrames in the dataset contract, from a Parquet dataset or from the live ledger.

Both sources yield exactly the same columns and types (`workbench.dataset.schema` plus the `scope`
and `month` partition keys, as strings), so the engines cannot tell them apart:

* `from_dataset(DIR, …)` scans the Hive-partitioned dataset lazily (only the partitions of the
  requested scope are read) and refuses a dataset whose manifest names another schema version;
* `from_ledger(ledger, scope, …)` reads one scope's most recent decisions (optionally of one
  policy) and their receipts from the ledger, bounded by `limit`.

`Frames.decisions` / `Frames.outcomes` are what the engines take. The hold report reads
`Frames.holds` (one row per hold, its latest state) with the outcomes of the held decisions, from
`holds_from_dataset` or `holds_from_ledger`; a dataset exported before the hold tables existed
gives an empty `holds` frame.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import polars as pl
import pyarrow as pa
import pyarrow.fs as pafs

from gate.keys.anchors import TrustAnchors
from gate.privacy.removal import removal_causes
from workbench.dataset import iceberg, integrity
from workbench.dataset import location as dataset
from workbench.dataset.convert import decisions_table, frame_of, holds_table, receipts_table
from workbench.dataset.facts import facts_rows_of
from workbench.dataset.location import (
    DatasetError as DatasetError,  # the readers raise the dataset's one error
)
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.rollups import RollupView
from workbench.dataset.schema import ALL_TABLES, DATASET_SCHEMA_VERSION, PARTITION_KEYS, TABLES
from workbench.dataset.trust import DatasetTrust, Trust, Untrusted, trust_of, verdict

if TYPE_CHECKING:  # the ledger (SQLAlchemy) is imported only for a live read
    from gate.ledger import Ledger

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class Frames:
    """`facts`, when the source has it: the typed facts table of exactly `decisions` (one row
    each; a decision the table lacks comes as a `partial` row with its `facts_json`), which the
    anomaly engine reads instead of flattening every decision's JSON."""

    decisions: pl.LazyFrame
    outcomes: pl.LazyFrame
    # The facts table, or a function that gives it (or None) the first time `facts` is read: a
    # dataset's check that the table is the decisions' own reads every decision, and a report
    # that never reads the facts (benchmarks, confidence) should not pay for it.
    facts_of: pl.LazyFrame | Callable[[], pl.LazyFrame | None] | None = None
    # The dataset's report rollups of exactly this selection (a whole-history read of one
    # policy), when current: `workbench.dataset.rollups.RollupView`. The policy reports merge them
    # instead of scanning the rows; everything else reads the frames.
    rollup: Any = None
    # Where the frames came from, for a dataset: its trust status (`open_dataset`: dataset_hash,
    # key_id only when the signature verified, trust "signed" or "unsigned", stale when behind the
    # live ledger), which each report names (and so seals) in its `source` member. None for the ledger.
    source: DatasetTrust | None = None
    # The hold report's frames (`holds_from_dataset`, `holds_from_ledger`): one row per hold in
    # its latest state (None: not loaded, as for every other report), and the instant the holds
    # were read at (a dataset's cut, the ledger's read), from which open holds' ages are counted.
    holds: pl.LazyFrame | None = None
    as_of: datetime | None = None
    # Of the ledger's decisions of the report's scope in `decisions`, how many had their inputs
    # removed, per cause (`gate.privacy.removal.removal_causes` of the rows read), which each report
    # states (and so seals) as `inputs_removed`. None where the source cannot say by what: a
    # dataset's rows carry no cause (docs/dataset.md, "Removed inputs"), and the holds' frames.
    removed: Mapping[str, int] | None = None

    @property
    def facts(self) -> pl.LazyFrame | None:
        """The typed facts table of exactly `decisions` (`facts_of`, given or computed once). Not a
        `functools.cached_property`: on Python 3.11 its lock is one for every instance, so the
        first read of one selection's facts would hold up another's."""
        known = self.__dict__.get("_facts", _UNREAD)
        if known is _UNREAD:  # two threads reading at once may both compute it: the same table
            known = self.facts_of() if callable(self.facts_of) else self.facts_of
            object.__setattr__(self, "_facts", known)
        return known  # type: ignore[no-any-return]


_UNREAD = object()


def polars_schema(table: str) -> pl.Schema:
    """The Polars schema of a table: its Arrow columns, then `scope` and `month`."""
    empty = frame_of(ALL_TABLES[table].empty_table())
    return pl.Schema({**empty.schema, **dict.fromkeys(PARTITION_KEYS, pl.String())})


def conform(frame: pl.LazyFrame | pl.DataFrame, table: str) -> pl.LazyFrame:
    """Exactly the table's columns, in order, cast to their types (extra columns dropped)."""
    schema = polars_schema(table)
    return frame.lazy().select([pl.col(name).cast(dtype) for name, dtype in schema.items()])


def empty(table: str) -> pl.LazyFrame:
    return pl.LazyFrame(schema=polars_schema(table))


def most_recent(decisions: pl.LazyFrame, limit: int | None) -> pl.LazyFrame:
    """Per scope, the `limit` most recent decisions (by created_at, then decision_id), or all."""
    if limit is None:
        return decisions
    return (decisions.sort(["created_at", "decision_id"], descending=True)
            .group_by("scope", maintain_order=True).head(limit).select(decisions.collect_schema().names()))


def select(decisions: pl.LazyFrame, outcomes: pl.LazyFrame, *, scopes: Sequence[str] | None,
           policy_id: str | None, policy_version: str | None, limit: int | None) -> Frames:
    """Filter to some scopes / one policy / one version and keep each scope's `limit` most
    recent decisions with only their outcomes (with no limit: the scopes' outcomes)."""
    if scopes is not None:
        decisions = decisions.filter(pl.col("scope").is_in(list(scopes)))
        outcomes = outcomes.filter(pl.col("scope").is_in(list(scopes)))
    if policy_id is not None:
        decisions = decisions.filter(pl.col("policy_id") == policy_id)
    if policy_version is not None:
        decisions = decisions.filter(pl.col("policy_version") == policy_version)
    if limit is not None:
        decisions = most_recent(decisions, limit)
        outcomes = outcomes.join(decisions.select("decision_id"), on="decision_id", how="semi")
    # Without a limit the outcomes stay those of the selected scopes: the engines join them to
    # the decisions by decision_id, so records of other decisions never count, and skipping the
    # semi-join saves a second pass over the decisions.
    return Frames(decisions, outcomes)


# --------------------------------------------------------------------------- dataset


def read_manifest(root: str | Path) -> DatasetManifest:
    """The dataset's manifest, of this schema version, as stored (unchecked: `open_dataset` is
    what readers call). `root` is a local folder or an object-store URL (`workbench.dataset.location`)."""
    return _read(root)[0]


def _read(root: str | Path) -> tuple[DatasetManifest, bytes]:
    try:
        location = dataset.open_location(str(root))
        found = location.read_bytes(MANIFEST)
    except (OSError, pa.ArrowException) as error:
        raise DatasetError(f"{root}/{MANIFEST}: unreadable manifest ({error})") from None
    if found is None:
        raise DatasetError(f"{root}: no {MANIFEST}; not a decision dataset")
    raw = found
    try:
        manifest: DatasetManifest = json.loads(raw.decode("utf-8"))
    except ValueError as error:
        raise DatasetError(f"{root}/{MANIFEST}: unreadable manifest ({error})") from None
    version = manifest.get("dataset_schema_version") if isinstance(manifest, dict) else None
    if version != DATASET_SCHEMA_VERSION:
        raise DatasetError(
            f"{root}: dataset schema version {version!r}; this reader needs {DATASET_SCHEMA_VERSION!r}")
    return manifest, raw


@dataclass(frozen=True)
class Opened:
    """A dataset as a reader may use it: its manifest and its trust status (`source`: what every
    report names; `workbench.dataset.trust.verdict`)."""

    manifest: DatasetManifest
    source: DatasetTrust
    raw: bytes  # the manifest's bytes as read (a dry-run names their sha256)


def open_dataset(root: str | Path, trust: Trust | TrustAnchors | None = None) -> Opened:
    """The one opening of a dataset every reader goes through: the manifest (`read_manifest`) and
    its trust status under `trust` (`workbench.dataset.trust`): signed by a key of the trusted
    registry, or unsigned by the reader's opt-in; DatasetError (one line) otherwise: a changed
    manifest, a signature that does not verify, a missing one without the opt-in, a rollback."""
    manifest, raw = _read(root)
    location = dataset.open_location(str(root))
    uri = location.root if isinstance(location.fs, pafs.LocalFileSystem) else location.uri
    try:
        source = verdict(manifest, uri, trust_of(trust))
    except Untrusted as why:
        raise DatasetError(f"{location.url(location.path(MANIFEST))}: {why}") from None
    return Opened(manifest, source, raw)


def listed(root: str | Path, manifest: DatasetManifest, kind: str, name: str | None = None,
           scopes: Sequence[str] | None = None) -> list[str]:
    """The files the manifest lists for a table (`kind`), a rulebook's facts (`kind` "facts",
    `name` the rulebook id) or the rollups, in `scopes` (all when None), each checked against
    its listed size, sha256, row count and schema (`workbench.dataset.integrity.check_files`): a stray
    file is never read, and a changed, missing or truncated one refuses the dataset. A record table
    of an Iceberg dataset: the data files of the manifest's snapshot (`workbench.dataset.iceberg`)."""
    if kind in TABLES and iceberg.is_iceberg(manifest):
        return iceberg.table_files(manifest, kind, scopes)
    entries = integrity.in_scopes(integrity.listed_files(manifest, kind, name), scopes)
    location = dataset.open_location(str(root))
    return [location.url(path) for path in integrity.check_files(location, entries)]


def scan_table(root: str | Path, table: str, scopes: Sequence[str] | None = None,
               manifest: DatasetManifest | None = None) -> pl.LazyFrame:
    """One table of the dataset as a LazyFrame in the contract (empty when it has no files):
    the files the manifest lists, checked (`listed`); with `scopes`, only those scopes' files.
    An Iceberg table's data files hold `scope` and `month` as columns (identity partitions)."""
    manifest = open_dataset(root).manifest if manifest is None else manifest
    files = listed(root, manifest, table, scopes=scopes)
    if not files:
        return empty(table)
    if iceberg.is_iceberg(manifest) and table in TABLES:  # the hold tables are part files in either layout
        return conform(pl.scan_parquet(files), table)
    scanned = pl.scan_parquet(files, hive_partitioning=True, hive_schema=dict.fromkeys(PARTITION_KEYS, pl.String))
    return conform(scanned, table)


def scan_facts(root: str | Path, rulebook_id: str, scopes: Sequence[str] | None = None,
               manifest: DatasetManifest | None = None) -> pl.LazyFrame | None:
    """The typed facts table of one rulebook (`workbench.dataset.facts`), None when the dataset has no
    facts file for it. Files of different export batches hold different paths: the scan reads
    the union of their columns, a column a file lacks as null (as the table's contract says)."""
    files = listed(root, open_dataset(root).manifest if manifest is None else manifest, "facts", rulebook_id, scopes)
    if not files:
        return None
    schema: dict[str, pl.DataType] = {}
    for path in files:
        schema.update(_file_schema(path))
    hive = {"rulebook_id": pl.String, **dict.fromkeys(PARTITION_KEYS, pl.String)}
    return pl.scan_parquet(files, schema=schema, hive_partitioning=True, hive_schema=hive,
                           try_parse_hive_dates=False, missing_columns="insert", extra_columns="ignore"
                           ).drop("rulebook_id")


_SCHEMAS: dict[str, tuple[tuple[int, ...], dict[str, pl.DataType]]] = {}


def _file_schema(path: str) -> dict[str, pl.DataType]:
    """A Parquet file's schema; a local file's is kept in this process for as long as it is the
    same file (device, inode, size, modification and change times: what the integrity check's
    digest cache keys on), so a report does not parse every facts file's footer again."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):  # not a local path (an object-store URL)
        return dict(pl.read_parquet_schema(path))
    identity = integrity.stat_identity(st)
    known = _SCHEMAS.get(path)
    if known is not None and known[0] == identity:
        return known[1]
    schema = dict(pl.read_parquet_schema(path))
    _SCHEMAS[path] = (identity, schema)
    return schema


def from_dataset(root: str | Path, *, scopes: Sequence[str] | None = None, policy_id: str | None = None,
                 policy_version: str | None = None, limit: int | None = None,
                 trust: Trust | TrustAnchors | None = None, rollups: bool = True) -> Frames:
    """Frames from an exported dataset (every scope when `scopes` is None); with a policy, its
    typed facts table too when the dataset has one, and for a whole-history read (`limit` None)
    the dataset's current report rollups of that selection (`Frames.rollup`, `workbench.dataset.rollups`).
    Only the files the manifest lists are read, each checked first (`listed`), once the manifest is
    trusted (`open_dataset` under `trust`). `Frames.source` is its trust status.
    `rollups` False: the rollups set aside (neither read nor checked), as for a dataset without
    current ones, so the reports compute from the rows."""
    opened = open_dataset(root, trust)
    manifest = opened.manifest
    frames = select(scan_table(root, "decisions", scopes, manifest), scan_table(root, "outcomes", scopes, manifest),
                    scopes=scopes, policy_id=policy_id, policy_version=policy_version, limit=limit)
    source = opened.source
    rollup = None
    if policy_id is not None and limit is None and rollups:
        rollup = RollupView.of(root, manifest, policy_id=policy_id, policy_version=policy_version, scopes=scopes)
        if rollup is not None:
            listed(root, manifest, "rollups")
    facts = scan_facts(root, policy_id, scopes, manifest) if policy_id is not None else None
    if facts is None:
        return Frames(frames.decisions, frames.outcomes, None, rollup, source)
    # The match of the facts rows to these decisions is made when a report first reads them
    # (`Frames.facts`): for a whole history, one count of each decides whether the table is the
    # decisions' own as it is; the reports that never read the facts never count.
    every = policy_version is None and limit is None and rollup is None
    return Frames(frames.decisions, frames.outcomes,
                  lambda: facts_rows_of(frames.decisions, facts, every_decision=every), rollup, source)


# --------------------------------------------------------------------------- holds


def latest_hold_states(holds: pl.LazyFrame) -> pl.LazyFrame:
    """One row per hold: of the states of a hold the export wrote (`workbench.dataset.schema.HOLDS`,
    one per run that saw it new or changed), the one with the greatest `last_event_seq`."""
    return holds.filter(pl.col("last_event_seq") == pl.col("last_event_seq").max().over("decision_id"))


def _policy_holds(holds: pl.LazyFrame, policy_id: str, policy_version: str | None) -> pl.LazyFrame:
    holds = holds.filter(pl.col("policy_id") == policy_id)
    return holds if policy_version is None else holds.filter(pl.col("policy_version") == policy_version)


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)


def holds_as_of(manifest: DatasetManifest, scopes: Sequence[str] | None) -> datetime:
    """The instant a dataset's hold states are as of: the earliest cut (`hold_chains.<scope>.as_of`)
    of the scopes read, else (no hold cut: a dataset without hold tables) its `updated_at`."""
    cuts = manifest.get("hold_chains") or {}
    times = [cut["as_of"] for scope, cut in sorted(cuts.items()) if scopes is None or scope in scopes]
    return _utc(min(times) if times else manifest["updated_at"])


def holds_from_dataset(root: str | Path, *, policy_id: str, scopes: Sequence[str] | None = None,
                       policy_version: str | None = None, trust: Trust | TrustAnchors | None = None) -> Frames:
    """The hold report's frames from a dataset: the policy's holds (of `policy_version` when
    given) in their latest state, the outcome records of the held decisions, and `as_of` the cut
    the holds were read at (`holds_as_of`). No decisions are read. A dataset without hold tables
    gives empty frames. The manifest is trusted and every file read is checked first, as `from_dataset`."""
    opened = open_dataset(root, trust)
    manifest = opened.manifest
    holds = _policy_holds(latest_hold_states(scan_table(root, "holds", scopes, manifest)), policy_id, policy_version)
    outcomes = scan_table(root, "outcomes", scopes, manifest).join(holds.select("decision_id"), on="decision_id",
                                                                  how="semi")
    return Frames(empty("decisions"), outcomes, source=opened.source, holds=holds,
                  as_of=holds_as_of(manifest, scopes))


# --------------------------------------------------------------------------- live ledger


def holds_from_ledger(ledger: Ledger, scope: str, policy_id: str, *, policy_version: str | None = None,
                      limit: int, as_of: datetime | None = None) -> Frames:
    """The hold report's frames from the live ledger: `scope`'s open holds of the policy and its
    `limit` most recently closed (`gate.ledger.holdstream.report_holds`), with their decisions'
    outcome records, converted into the dataset contract; `as_of` the read's time (now when None)."""
    from gate.ledger.holdstream import report_holds
    from gate.ledger.reports import receipts_of

    as_of = as_of or datetime.now(UTC)
    rows = report_holds(ledger, scope, policy_id, policy_version=policy_version, closed_limit=limit)
    outcomes = receipts_of(ledger, "outcome", rows)
    return Frames(empty("decisions"), conform(frame_of(receipts_table(outcomes)), "outcomes"),
                  holds=conform(frame_of(holds_table(rows)), "holds"), as_of=as_of)




def from_ledger(ledger: Ledger, scope: str, policy_id: str, *, policy_version: str | None = None, limit: int,
                cohort_scopes: Sequence[str] = ()) -> Frames:
    """Frames from the live ledger: `scope`'s `limit` most recent decisions of `policy_id`
    (and of each `cohort_scopes` scope, for benchmarks) with all their outcome records,
    converted by `workbench.dataset.convert` into exactly the dataset contract."""
    # The ledger (SQLAlchemy, about half a second) is imported only for a live read.
    from gate.ledger.reports import receipts_of, recent_decisions

    rows = recent_decisions(ledger, [scope, *cohort_scopes], policy_id, limit=limit,
                            policy_version=policy_version)
    outcomes = receipts_of(ledger, "outcome", rows)
    decisions = conform(frame_of(decisions_table(rows)), "decisions")
    removed = removal_causes(row for row in rows if row["scope"] == scope)
    return Frames(decisions, conform(frame_of(receipts_table(outcomes)), "outcomes"), removed=dict(removed))
