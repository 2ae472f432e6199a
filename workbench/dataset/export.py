"""Incremental export of the ledger into the Parquet dataset (`gate export`).

`export_ledger(ledger, uri)` streams what is new since the last export into new part files
and then rewrites `manifest.json`; a run that finds nothing new writes nothing at all, except a
location's first run, which commits run 1 with no rows (an empty ledger's dataset is a signed, empty
dataset every reader opens, not a location with no manifest).

What "new" means (the watermarks kept in the manifest, per scope):

* decisions and chain links: chain positions above the last exported one, up to the chain
  head read when the run starts. Positions are assigned under the chain's row lock, so this
  is exact: no decision is skipped or exported twice, whatever the timestamps say.
* execution receipts, outcomes and CRM syncs: the keyset `(reported_at, receipt_id)` above
  the last exported one, and only receipts reported more than `settle_seconds` before the run
  started. A receipt's `reported_at` is read from the clock just before its transaction
  commits; the settle window (120 s by default) leaves room for a slow commit, so a receipt
  with an older timestamp can never appear after its turn has been exported. A receipt that
  does (written with a clock far in the past) is detected by count and reported in
  `ExportResult.warnings`; a fresh export into a new location includes it.

Consistency: files are written first, the manifest last (atomically on a local disk). A run
that fails leaves its part files behind but not in the manifest; the next run deletes every
part file whose run number the manifest has not committed before it writes anything. Readers
that go through the manifest (`workbench.dataset.integrity.table_dataset`) see committed runs only.

Removals: before the new rows, a run applies the ledger's removals filed since its last run
(`workbench.dataset.rewrite`, `_apply_removals`) as a run of its own: the files holding a removed
decision's values are rewritten, listed, committed, and only then are the old ones deleted.

Memory is bounded by one ledger batch plus the writer's buffers (`workbench.dataset.partwriter`),
whatever the size of the ledger.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Literal
from urllib.parse import quote, unquote

import pyarrow as pa
import pyarrow.fs as pafs

from gate.clock import iso_ms
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner
from gate.ledger import Ledger, holdstream, stream
from gate.protocol.canonical import sha256_hex
from gate.receipts.values import OUTCOME_EFFECTIVENESS_CLASS
from gate.services.governance import SafeguardSettings
from gate.services.privacy import PrivacyService, key_from_env
from workbench.dataset import convert, iceberg, integrity, rewrite, rollups
from workbench.dataset.facts import FACTS_DIR, facts_tables
from workbench.dataset.iceberg import IcebergTarget, IcebergWriter
from workbench.dataset.location import (
    MANIFEST,
    DatasetError,
    Location,
    open_location,
    read_manifest,
    write_manifest,
)
from workbench.dataset.manifest import (
    ChainEntry,
    DatasetManifest,
    FileEntry,
    HoldChainEntry,
    LedgerHead,
    NewRows,
    RewriteSummary,
    TableEntry,
    Watermark,
    new_rows_of,
)
from workbench.dataset.partwriter import BUFFER_ROWS, PartitionedWriter, WrittenFile, run_of
from workbench.dataset.schema import ALL_TABLES, DATASET_SCHEMA_VERSION, RECEIPT_TABLE_KIND, TABLES

SETTLE_SECONDS = 120

__all__ = [
    "SETTLE_SECONDS",
    "ExportResult",
    "export_ledger",
    "facts_table_name",
    "ledger_head",
    "new_manifest",
    "record_files",
]

Progress = Callable[[int, int], None]  # (rows done, rows to do)


@dataclass
class ExportResult:
    """What one run did: `run` is None when there was nothing new (and nothing was written)."""

    uri: str
    run: int | None
    new_rows: NewRows  # rows written per table; "facts": rows per rulebook id
    files: list[WrittenFile]
    manifest: DatasetManifest
    warnings: list[str] = field(default_factory=list)
    inputs_removed: RewriteSummary | None = None  # the removals this export applied (its own run)


@dataclass(frozen=True)
class _HeadDecision:
    """The last decision a run exported of a scope (its chain entry names it when it is the head)."""

    chain_position: int
    decision_id: str
    record_hash: str
    receipt_hash: str


@dataclass
class _ScopePlan:
    """One scope's share of a run (`_plan`): the chain head to export up to (None: no chain), the
    watermark it starts from, how many decisions, receipts (per kind) and hold rows are new, the
    receipts stored behind the watermark (`late`, per kind); then, as the run goes, the run's time
    (`as_of`), the last decision written and the hold chain head the hold tables were cut at."""

    head: ChainEntry | None
    mark: Watermark
    decisions: int
    receipts: dict[str, int]
    late: dict[str, int]
    holds: int
    as_of: str = ""
    last_decision: _HeadDecision | None = None
    hold_head: HoldChainEntry | None = None


@dataclass
class _RunRows:
    """The rows a run wrote per table and per rulebook's facts (`new_rows` once committed)."""

    tables: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ALL_TABLES, 0))
    facts: dict[str, int] = field(default_factory=dict)

    def member(self) -> NewRows:
        return new_rows_of(self.tables, self.facts)


def new_manifest(*, synthetic: bool, generator: str, created_at: str) -> DatasetManifest:
    """An empty manifest of the current schema version (see docs/dataset.md for each member)."""
    return {
        "dataset_schema_version": DATASET_SCHEMA_VERSION,
        "synthetic": synthetic,
        "generator": generator,
        "created_at": created_at,
        "updated_at": created_at,
        "runs": 0,
        "tables": {name: {"rows": 0, "files": []} for name in ALL_TABLES},
        "facts": {},
        "chains": {},
        "watermarks": {},
        "ledger_head": ledger_head({}, dict.fromkeys(TABLES, 0)),
    }


def facts_table_name(rulebook_id: str) -> str:
    """The writer's table name of one rulebook's typed facts (`facts/rulebook_id=<id>`)."""
    return f"{FACTS_DIR}/rulebook_id={quote(rulebook_id, safe='')}"


def record_files(manifest: DatasetManifest, files: list[WrittenFile], run: int, location: Location) -> None:
    """Add a run's written files to the manifest (facts files under `facts.<rulebook id>`), each
    with its `sha256` and `bytes` (`workbench.dataset.integrity`): only this run's files are read, the
    entries of earlier runs' files keep the digests listed when they were written."""
    for entry in files:
        item: FileEntry = {"path": entry["path"], "rows": entry["rows"], "run": run,
                           **integrity.describe_file(location, entry["path"])}
        if entry["table"] in ALL_TABLES:  # a dataset written before the hold tables lists none of them
            manifest["tables"].setdefault(entry["table"], {"rows": 0, "files": []})["files"].append(item)
        else:
            rulebook_id = unquote(entry["table"].split("rulebook_id=", 1)[1])
            manifest["facts"].setdefault(rulebook_id, {"rows": 0, "files": []})["files"].append(item)


def ledger_head(chains: Mapping[str, ChainEntry], rows: Mapping[str, int]) -> LedgerHead:
    """The exported state of the ledger in one hash: every scope's chain (id, size, root, head
    link) and the row counts, so two datasets exported from the same ledger state compare equal."""
    return {
        "decisions": sum(chain["size"] for chain in chains.values()),
        "scopes": len(chains),
        "rows": dict(rows),
        "head_hash": sha256_hex({"chains": chains, "rows": rows}),
    }


def _prepare(location: Location) -> DatasetManifest | None:
    """Check the target: a manifest of our version, or an empty/new directory we can write."""
    manifest = read_manifest(location, required=False)
    if manifest is None:
        try:
            info = location.fs.get_file_info(location.root)
            if info.type == pafs.FileType.File:
                raise DatasetError(f"{location.uri} is a file, not a directory")
            entries = location.fs.get_file_info(pafs.FileSelector(location.root)) \
                if info.type == pafs.FileType.Directory else []
            # Only table directories (a first run that died before its manifest) may be there.
            if any(entry.base_name not in (*ALL_TABLES, FACTS_DIR, rollups.ROLLUPS_DIR, iceberg.ICEBERG_DIR)
                   for entry in entries):
                raise DatasetError(f"{location.uri} is not empty and has no {MANIFEST}: "
                                   "export into a new or empty location")
        except (OSError, pa.ArrowException) as exc:
            raise DatasetError(f"cannot read {location.uri}: {exc}") from exc
    elif manifest.get("synthetic"):
        raise DatasetError(f"{location.uri} holds a synthetic dataset; export the ledger into another location")
    try:  # fail before any work when the location cannot be written
        location.fs.create_dir(location.root, recursive=True)
        probe = location.path(".gate-export-probe")
        with location.fs.open_output_stream(probe) as out:
            out.write(b"probe")
        location.fs.delete_file(probe)
    except (OSError, pa.ArrowException) as exc:
        raise DatasetError(f"cannot write to {location.uri}: {exc}") from exc
    return manifest


def _remove_uncommitted(location: Location, committed_runs: int) -> int:
    """Delete part files and rollups of runs the manifest has not committed (a failed run's leftovers)."""
    removed = 0
    rollups.remove_runs(location, newer_than=committed_runs)
    for table in (*ALL_TABLES, FACTS_DIR):
        if not location.exists(table):
            continue
        selector = pafs.FileSelector(location.path(table), recursive=True)
        for info in location.fs.get_file_info(selector):
            run = run_of(info.base_name) if info.type == pafs.FileType.File else None
            if run is not None and run > committed_runs:
                location.fs.delete_file(info.path)
                removed += 1
    return removed


def _plan(ledger: Ledger, scopes: list[str], marks: Mapping[str, Watermark],
          cutoff: str) -> tuple[dict[str, _ScopePlan], int]:
    """Per scope: the chain head to export up to, and how many rows are new (for progress)."""
    plan: dict[str, _ScopePlan] = {}
    total = 0
    for scope in scopes:
        heads = stream.chain_heads_of(ledger, scope)
        head: ChainEntry | None = None
        if heads:
            head = {"chain_id": heads[0]["chain_id"], "size": heads[0]["size"],
                    "merkle_root": heads[0]["merkle_root"], "head_link_hash": heads[0]["head_link_hash"]}
        mark: Watermark = marks.get(scope, {"chain_position": 0, "receipts": {}})
        new_decisions = max(0, (head["size"] if head else 0) - mark["chain_position"])
        receipts: dict[str, int] = {}
        late: dict[str, int] = {}
        for kind in RECEIPT_TABLE_KIND.values():
            after = mark["receipts"].get(kind)
            receipts[kind] = stream.count_receipts(
                ledger, kind, scope=scope, reported_before=cutoff,
                after=(scope, after["reported_at"], after["receipt_id"]) if after else None)
            if after:  # receipts stamped before the watermark but stored after it was taken
                behind = stream.count_receipts(ledger, kind, scope=scope, reported_before=cutoff) \
                    - receipts[kind] - after["count"]
                if behind > 0:
                    late[kind] = behind
        holds = _pending_holds(ledger, scope, head, mark)
        plan[scope] = _ScopePlan(head, mark, new_decisions, receipts, late, holds)
        total += new_decisions + sum(receipts.values()) + holds
    return plan, total


def _pending_holds(ledger: Ledger, scope: str, head: ChainEntry | None, mark: Watermark) -> int:
    """The hold rows a run would count as progress for the scope: its hold events after the
    watermark (`hold_seq`), and, when the dataset has not exported the scope's holds yet (a
    dataset of an earlier release, or a new one), every hold of its exported decisions too."""
    if head is None:
        return 0
    seq, _ = holdstream.hold_head(ledger, scope)
    known = mark.get("hold_seq")
    backfill = holdstream.count_holds(ledger, scope, upto_position=head["size"]) if known is None else 0
    return max(0, seq - (known or 0)) + backfill


def export_ledger(
    ledger: Ledger,
    uri: str,
    *,
    scope: str | None = None,
    batch_size: int = stream.DEFAULT_BATCH,
    settle_seconds: int = SETTLE_SECONDS,
    now: datetime | None = None,
    progress: Progress | None = None,
    rollup_progress: Progress | None = None,
    signer: ReceiptSigner | None = None,
    lakehouse: IcebergTarget | None = None,
    layout: str | None = None,
    anchors: TrustAnchors | None = None,
    privacy_key: bytes | None = None,
) -> ExportResult:
    """Export what is new in the ledger (one scope, or all) to the dataset at `uri`.

    `progress(rows done, rows to do)` follows the rows; `rollup_progress(partitions done,
    partitions to do)` the report rollups recomputed before the commit (`workbench.dataset.rollups`).
    `signer` signs the committed manifest's `dataset_hash` (`workbench.dataset.integrity.seal`); without
    one the manifest lists every file's digest but carries no signature. `lakehouse`: write the
    record tables as Iceberg tables there (`workbench.dataset.iceberg`; the location keeps the
    manifest and the facts files), one snapshot per table and run. A dataset keeps its layout:
    without `lakehouse` an Iceberg dataset is continued in the catalog its manifest names
    (`GATE_ICEBERG_CATALOG_URI` gives it with credentials); `layout="parquet"` refuses one.
    `anchors` (the gate's keys): with a signer, a committed manifest is built on only when its
    signature verifies with them (`integrity.build_on`). `privacy_key`: the gate's privacy key
    (default: as the environment names it, `gate.services.privacy.key_from_env`); every decision
    row is masked by its scope's `dataset` rule before it is written (docs/privacy.md).

    Raises DatasetError (nothing written) when the location cannot be written, is not empty
    and has no manifest, holds another schema version or a synthetic dataset."""
    if settle_seconds < 0:
        raise DatasetError("settle_seconds must be 0 or more")
    now = now or datetime.now(UTC)
    location = open_location(uri)
    manifest, lakehouse = _open_target(location, now, signer, anchors, lakehouse, layout)
    scopes = [scope] if scope is not None else stream.scopes(ledger)
    cutoff = iso_ms(now - timedelta(seconds=settle_seconds))
    manifest, removed = _apply_removals(ledger, location, manifest, scopes, cutoff, now, signer, lakehouse)
    plan, total = _plan(ledger, scopes, manifest["watermarks"], cutoff)
    for item in plan.values():  # the instant the manifest names for the scope's hold states
        item.as_of = iso_ms(now)
    warnings = _late_receipt_warnings(plan)
    counts = _RunRows()
    if total == 0 and manifest["runs"] > 0:
        return ExportResult(uri, None if removed is None else manifest["runs"], counts.member(), [], manifest,
                            warnings, removed)

    run = manifest["runs"] + 1
    counter = _Progress(progress, total)
    privacy = PrivacyService(ledger, SafeguardSettings(ledger), privacy_key or key_from_env)
    files = _write_run(ledger, location, manifest, run, plan, cutoff, batch_size, counts, counter,
                       rollup_progress, lakehouse, privacy)
    manifest = _commit_run(location, manifest, run, plan, counts, cutoff, now, signer)
    return ExportResult(uri, run, counts.member(), files, manifest, warnings, removed)


def _apply_removals(ledger: Ledger, location: Location, manifest: DatasetManifest, scopes: list[str], cutoff: str,
                    now: datetime, signer: ReceiptSigner | None, lakehouse: IcebergTarget | None,
                    ) -> tuple[DatasetManifest, RewriteSummary | None]:
    """Apply the ledger's removals filed since the last run (`workbench.dataset.rewrite`) as a run of
    their own, committed before the export's new rows; then delete what it replaced and, for
    Iceberg, expire the snapshots the manifest no longer lists. Returns the manifest and what was
    done (None: no new removal)."""
    rewrite.remove_unlisted(location, manifest)
    if lakehouse is not None and manifest["runs"] > 0:  # a crash after a rewrite's manifest: finish it
        iceberg.expire_unlisted(lakehouse, manifest)
    found = rewrite.pending(ledger, scopes, manifest["watermarks"], cutoff)
    if not found.marks:
        return manifest, None
    run = manifest["runs"] + 1
    try:
        done = rewrite.rewrite_tables(location, manifest, found, run, decisions=lakehouse is None)
        decision_rows = _rewrite_lake(location, manifest, found, run, lakehouse) if lakehouse is not None \
            else done.decision_rows
        if lakehouse is None and done.decision_files:
            manifest["rollups"] = rollups.update(location, manifest, run, done.decision_files,
                                                 OUTCOME_EFFECTIVENESS_CLASS, outcome_partitions=())
    except BaseException as exc:
        with contextlib.suppress(OSError, pa.ArrowException):  # else the next run removes them
            _remove_uncommitted(location, manifest["runs"])
        if isinstance(exc, (OSError, pa.ArrowException)):
            raise DatasetError(f"rewriting {location.uri} failed: {exc}") from exc
        raise
    for name, mark in found.marks.items():
        manifest["watermarks"][name]["removals"] = mark
    summary = rewrite.summary(found, done, decision_rows)
    manifest["runs"] = run
    manifest["updated_at"] = iso_ms(now)
    manifest["last_run"] = {"run": run, "at": iso_ms(now), "new_rows": _RunRows().member(),
                            "scopes": sorted(found.marks), "receipts_reported_before": cutoff,
                            "inputs_removed": summary}
    manifest["previous_dataset_hash"] = manifest.get("dataset_hash")
    manifest = integrity.seal(manifest, signer)
    write_manifest(location, manifest)
    rewrite.delete_replaced(location, done.replaced)
    with contextlib.suppress(OSError, pa.ArrowException):
        rollups.remove_runs(location, older_than=run)
    if lakehouse is not None:
        iceberg.expire_unlisted(lakehouse, manifest)
    return manifest, summary


def _rewrite_lake(location: Location, manifest: DatasetManifest, found: rewrite.Pending, run: int,
                  lakehouse: IcebergTarget) -> int:
    """Rewrite the Iceberg decisions table's data files holding a removed decision's value; returns
    the decision rows emptied."""
    warehouse = iceberg.warehouse_location(lakehouse.warehouse)
    chosen: dict[str, Callable[[pa.Table], pa.Table]] = {}
    rows = 0
    for item in manifest["iceberg"]["tables"]["decisions"]["files"]:
        ids = found.ids(item["scope"], item["month"])
        if not ids:
            continue
        wanted = pa.array(sorted(ids), pa.string())
        if rewrite.holds_values(warehouse, item["path"], wanted, rewrite.REMOVED_COLUMNS):
            chosen[item["path"]] = functools.partial(_blank_with, wanted)
            rows += rewrite.matched(warehouse, item["path"], wanted)
    done = iceberg.rewrite_files(lakehouse, location, manifest, "decisions", run, chosen)
    if done is not None:
        iceberg.record_rewrite(manifest, "decisions", run, done)
    return rows


def _open_target(location: Location, now: datetime, signer: ReceiptSigner | None, anchors: TrustAnchors | None,
                 lakehouse: IcebergTarget | None, layout: str | None,
                 ) -> tuple[DatasetManifest, IcebergTarget | None]:
    """The location's manifest (a new one for a new location) checked to be built on, its layout's
    target, and a failed run's leftovers removed."""
    manifest = _prepare(location) or new_manifest(synthetic=False, generator="gate export",
                                                  created_at=iso_ms(now))
    integrity.build_on(manifest, signer, anchors, location.uri)
    lakehouse = _layout_target(location, manifest, lakehouse, layout)
    _remove_uncommitted(location, manifest["runs"])
    return manifest, lakehouse


def _layout_target(location: Location, manifest: DatasetManifest, lakehouse: IcebergTarget | None,
                   layout: str | None) -> IcebergTarget | None:
    """The run's Iceberg target (None: Parquet). A dataset keeps the layout (and the Iceberg catalog,
    warehouse and namespace) of its first run: another one asked for is refused."""
    if manifest["runs"] == 0:
        return lakehouse
    held = iceberg.is_iceberg(manifest)
    if (held and layout == "parquet") or (not held and lakehouse is not None):
        raise DatasetError(f"{location.uri} holds {'an Iceberg' if held else 'a Parquet'} dataset: export it with "
                           f"--format {'iceberg' if held else 'parquet'}")
    if not held:
        return None
    target = lakehouse or iceberg.target_of(manifest)
    member = manifest["iceberg"]
    named = {key: member.get(key) for key in ("catalog", "catalog_name", "warehouse", "namespace")}
    if named != target.member():
        raise DatasetError(f"{location.uri} has its Iceberg tables in catalog {named['catalog']}, warehouse "
                           f"{named['warehouse']}, namespace {named['namespace']}: export with those")
    return target


def _late_receipt_warnings(plan: Mapping[str, _ScopePlan]) -> list[str]:
    """One warning per scope and receipt kind with receipts stored behind the last watermark."""
    return [f"scope {name!r}: {count} {kind} receipt(s) stamped before the last export's "
            "watermark were stored after it and are not in this dataset; export into a new "
            "location to include them"
            for name, item in plan.items() for kind, count in item.late.items()]


class _Sink:
    """Routes each batch: the record tables to the Iceberg writer when there is one, everything
    else (and every table of a Parquet export) to the Parquet writer."""

    def __init__(self, parquet: PartitionedWriter, lake: IcebergWriter | None) -> None:
        self.parquet, self.lake = parquet, lake

    def add(self, table: str, batch: pa.Table) -> None:
        if self.lake is not None and table in TABLES:
            self.lake.add(table, batch)
        else:
            self.parquet.add(table, batch)

    def abort(self) -> None:
        self.parquet.abort()
        if self.lake is not None:
            self.lake.abort()


class _Progress:
    """Counts the rows written and reports them to the caller's `progress`, if any."""

    def __init__(self, progress: Progress | None, total: int) -> None:
        self.progress, self.total, self.done = progress, total, 0
        if progress is not None:
            progress(0, total)

    def __call__(self, count: int) -> None:
        self.done += count
        # Hold events committed after the plan counted them are exported too (the holds' cut is
        # read later, in one snapshot with their rows): the total grows with them.
        self.total = max(self.total, self.done)
        if self.progress is not None:
            self.progress(self.done, self.total)


def _write_run(ledger: Ledger, location: Location, manifest: DatasetManifest, run: int,
               plan: Mapping[str, _ScopePlan], cutoff: str, batch_size: int, counts: _RunRows,
               advance: Callable[[int], None],
               rollup_progress: Progress | None, lakehouse: IcebergTarget | None,
               privacy: PrivacyService) -> list[WrittenFile]:
    """Write the run's part files and rollups and list them in `manifest` (not yet committed);
    with `lakehouse`, the record tables' data files and one snapshot per table instead of their
    part files and no rollups. On any failure the run's files are removed (or left for the next
    run to remove) and the error is raised, as DatasetError when it is one of writing."""
    # The Iceberg layout's two writers (record tables, facts files) share the one buffer budget.
    budget = BUFFER_ROWS if lakehouse is None else BUFFER_ROWS // 2
    writer = PartitionedWriter(location, run, buffer_rows=budget)
    lake = None
    if lakehouse is not None:
        lake = IcebergWriter(lakehouse, location, run, buffer_rows=budget)
        lake.prepare(manifest.get("iceberg"))
    # The (scope, month) decision partitions whose decisions get new outcome records: a late
    # outcome changes its decision's rollup (looked up in the ledger by id, batch by batch, when
    # the rollups are carried over; otherwise every partition is recomputed anyway).
    reopened: set[tuple[str, str]] | None = \
        set() if lake is None and rollups.current(manifest, OUTCOME_EFFECTIVENESS_CLASS) else None
    sink = _Sink(writer, lake)
    try:
        for name, item in plan.items():
            manifest["watermarks"][name] = _export_scope(ledger, sink, name, item, cutoff, batch_size,
                                                         counts, advance, reopened, privacy)
            if item.head is not None and item.hold_head is not None:
                manifest["chains"][name] = _chain_entry(item.head, item.last_decision, manifest["chains"].get(name))
                manifest.setdefault("hold_chains", {})[name] = item.hold_head
        files = writer.close()
        record_files(manifest, files, run, location)
        if lake is not None:  # one snapshot per table; the rows are read from the tables (no rollups)
            iceberg.record_run(manifest, lake.target, run, lake.commit())
        else:  # before the commit: the report rollups of every partition this run touched
            manifest["rollups"] = rollups.update(location, manifest, run, files, OUTCOME_EFFECTIVENESS_CLASS,
                                                 outcome_partitions=reopened or (), progress=rollup_progress)
    except BaseException as exc:
        sink.abort()
        with contextlib.suppress(OSError, pa.ArrowException):  # else the next run removes them
            _remove_uncommitted(location, manifest["runs"])
        if isinstance(exc, (OSError, pa.ArrowException)):
            raise DatasetError(f"writing {location.uri} failed: {exc}") from exc
        raise
    return files


def _commit_run(location: Location, manifest: DatasetManifest, run: int, plan: Mapping[str, _ScopePlan],
                counts: _RunRows, cutoff: str, now: datetime,
                signer: ReceiptSigner | None) -> DatasetManifest:
    """Count the run's rows into the manifest, seal it and write it: the run is committed.
    Returns the sealed manifest."""
    for name in ALL_TABLES:
        manifest["tables"].setdefault(name, _empty_entry())["rows"] += counts.tables[name]
    for rulebook_id, count in counts.facts.items():
        manifest["facts"].setdefault(rulebook_id, _empty_entry())["rows"] += count
    manifest["runs"] = run
    manifest["updated_at"] = iso_ms(now)
    manifest["last_run"] = {"run": run, "at": iso_ms(now), "new_rows": counts.member(),
                            "scopes": sorted(plan), "receipts_reported_before": cutoff}
    manifest["ledger_head"] = ledger_head(
        manifest["chains"], {name: manifest["tables"][name]["rows"] for name in TABLES})
    manifest["previous_dataset_hash"] = manifest.get("dataset_hash")
    manifest = integrity.seal(manifest, signer)
    write_manifest(location, manifest)
    # Superseded rollups only take room; when they cannot be removed the next run tries again.
    with contextlib.suppress(OSError, pa.ArrowException):
        rollups.remove_runs(location, older_than=run - 1)
    return manifest


def _empty_entry() -> TableEntry:
    return {"rows": 0, "files": []}


_HEAD_KEYS: tuple[Literal["head_decision_id", "head_record_hash", "head_receipt_hash"], ...] = (
    "head_decision_id", "head_record_hash", "head_receipt_hash")


def _chain_entry(head: ChainEntry, last: _HeadDecision | None, previous: ChainEntry | None) -> ChainEntry:
    """The scope's chain head the run was cut at: id, size, Merkle root and head link, and the
    head decision's record and receipt hashes (its receipt is signed by the gate's key, so
    `gate verify` checks the head's record offline). A run that exported no new decision of
    the scope keeps the previous entry's head decision."""
    entry: ChainEntry = {"chain_id": head["chain_id"], "size": head["size"], "merkle_root": head["merkle_root"],
                         "head_link_hash": head["head_link_hash"]}
    if last is not None and last.chain_position == head["size"]:
        entry["head_decision_id"] = last.decision_id
        entry["head_record_hash"] = last.record_hash
        entry["head_receipt_hash"] = last.receipt_hash
    elif previous is not None and previous.get("size") == head["size"]:
        for key in _HEAD_KEYS:
            if key in previous:
                entry[key] = previous[key]
    return entry


def _export_scope(ledger: Ledger, writer: _Sink, scope: str, item: _ScopePlan, cutoff: str,
                  batch_size: int, counts: _RunRows, advance: Callable[[int], None],
                  reopened: set[tuple[str, str]] | None, privacy: PrivacyService) -> Watermark:
    """Write one scope's new decisions (with their facts and chain links) and receipts, counting
    them into `counts` and, for outcomes, their decisions' partitions into `reopened`.
    Decision rows are masked by the scope's `dataset` rule first (`privacy.dataset_row`).
    Returns the scope's new watermark."""
    mark: Watermark = {"chain_position": item.mark["chain_position"], "receipts": dict(item.mark["receipts"])}
    if "hold_seq" in item.mark:
        mark["hold_seq"] = item.mark["hold_seq"]
    if "removals" in item.mark:
        mark["removals"] = item.mark["removals"]
    head = item.head
    if head is not None and item.decisions:
        for stored in stream.iter_chain_decisions(ledger, scope, after_position=mark["chain_position"],
                                                  upto_position=head["size"], batch_size=batch_size):
            masked = [privacy.dataset_row(scope, row) for row in stored]
            decisions = convert.decisions_table(masked)
            writer.add("decisions", decisions)
            for rulebook_id, facts in facts_tables(decisions).items():
                writer.add(facts_table_name(rulebook_id), facts)
                counts.facts[rulebook_id] = counts.facts.get(rulebook_id, 0) + facts.num_rows
            writer.add("chain_links", convert.chain_links_table(stored))
            counts.tables["decisions"] += len(stored)
            counts.tables["chain_links"] += len(stored)
            mark["chain_position"] = stored[-1]["chain_position"]
            item.last_decision = _HeadDecision(stored[-1]["chain_position"], stored[-1]["decision_id"],
                                               stored[-1]["record_hash"], stored[-1]["receipt_hash"])
            advance(len(stored))
    for table, kind in RECEIPT_TABLE_KIND.items():
        if not item.receipts[kind]:
            continue
        after = mark["receipts"].get(kind)
        for rows in stream.iter_receipts(
                ledger, kind, scope=scope, reported_before=cutoff, batch_size=batch_size,
                after=(scope, after["reported_at"], after["receipt_id"]) if after else None):
            writer.add(table, convert.receipts_table(rows))
            if table == "outcomes" and reopened is not None:
                found = stream.decisions_created_at(ledger, [row["decision_id"] for row in rows])
                reopened.update((owner, convert.month_of(created_at)) for owner, created_at in found.values())
            counts.tables[table] += len(rows)
            previous = mark["receipts"][kind]["count"] if kind in mark["receipts"] else 0
            mark["receipts"][kind] = {"reported_at": rows[-1]["reported_at"], "receipt_id": rows[-1]["receipt_id"],
                                      "count": previous + len(rows)}
            advance(len(rows))
    if head is not None:
        _export_holds(ledger, writer, scope, item, head, mark, batch_size, counts, advance)
    return mark


def _export_holds(ledger: Ledger, writer: _Sink, scope: str, item: _ScopePlan, head: ChainEntry, mark: Watermark,
                  batch_size: int, counts: _RunRows, advance: Callable[[int], None]) -> None:
    """Write the scope's hold states and hold events that are new since `mark` (`hold_seq`, the
    hold chain's watermark) and move it to the head read in the snapshot of the states.

    Hold states: the holds of this run's decisions (chain positions after the old decision
    watermark, up to the run's head) and the holds of earlier decisions that an event after the
    watermark moved, read in one snapshot with the hold chain's head, so each row is its hold as
    of that head (`gate.ledger.holdstream`); a scope whose holds this dataset has not exported yet
    gets every hold of its exported decisions. Hold events: the chain after the watermark up to
    that head (gap-free and committed in order, so exact). `item.as_of`: the run's time, which the
    manifest names as the instant of the cut (`hold_chains.<scope>.as_of`; the states are read
    just after it)."""
    known = item.mark.get("hold_seq")
    new_after = 0 if known is None else item.mark["chain_position"]
    with ledger.one_snapshot():
        seq, event_hash = holdstream.hold_head(ledger, scope)
        for rows in holdstream.iter_hold_states(ledger, scope, upto_position=head["size"],
                                                new_after_position=new_after, changed_after_seq=known or 0,
                                                batch_size=batch_size):
            writer.add("holds", convert.holds_table(rows))
            counts.tables["holds"] += len(rows)
            if known is None:  # the backfill is counted in the plan; later states come with their events
                advance(len(rows))
    for rows in holdstream.iter_hold_events(ledger, scope, after_seq=known or 0, upto_seq=seq,
                                            batch_size=batch_size):
        writer.add("hold_events", convert.hold_events_table(rows))
        counts.tables["hold_events"] += len(rows)
        advance(len(rows))
    mark["hold_seq"] = seq
    item.hold_head = {"seq": seq, "head_event_hash": event_hash, "as_of": item.as_of}


def _blank_with(ids: pa.Array, table: pa.Table) -> pa.Table:
    return rewrite.blank_decisions(table, ids)
