"""The dataset follows the ledger's removals (issue 67, items 3 and 4; docs/dataset.md, "Removed
inputs"; docs/privacy.md, "Retention").

When the ledger removes decisions' inputs (`gate.services.removal.InputRemoval`, filed in
`decision_removals` with a cause), rows the export wrote before still hold them. Each export run
(`workbench.dataset.export.export_ledger`) first calls `apply`, which:

* reads each scope's removals filed since its watermark (`watermarks.<scope>.removals`: the keyset
  (`removed_at`, `decision_id`) of the last one applied and how many were; only removals filed
  before the run's cut, the receipts' settle window, so one stamped earlier cannot commit behind the
  mark). When the ledger counts more removals at or before the mark than the mark does (one
  committed late), every removal of the scope is applied again: a rewrite is idempotent;
* rewrites, one file at a time and one row group at a time, only the part files of those
  decisions' (scope, month) partitions that hold one of them with a value left: in the decisions
  table `REMOVED_COLUMNS` become null (exactly what an export of the ledger's remainder writes:
  ids, hashes, verdict, reason, policy identity kept), in each rulebook's facts table the row
  becomes `absent` (no typed value, no `facts_json`; the ids and the stored outcome kept);
* commits them as a run of their own: new files named by the new run, the manifest listing them
  instead of the old ones (its rollups recomputed for the partitions touched), sealed, written;
  then the old files are deleted. A crash before the manifest is written leaves the previous
  run's files and manifest as they were (the next run removes the new files as any failed run's,
  and applies the removals again); a crash after it leaves old files no manifest lists, which the
  next run deletes (`remove_unlisted`).

An Iceberg dataset's decisions table is rewritten through `workbench.dataset.iceberg.rewrite`
(an overwrite snapshot, then the older snapshots expired and every file they alone referenced
deleted, after the manifest names the new snapshot).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from gate.ledger import Ledger
from gate.ledger import removals as ledger_removals
from workbench.dataset import convert, integrity
from workbench.dataset.facts import FACTS_DIR, STORED_COLUMNS
from workbench.dataset.location import Location, partition_dir
from workbench.dataset.manifest import DatasetManifest, FileEntry, RemovalMark, RewriteSummary, TableEntry
from workbench.dataset.partwriter import GROUP_ROWS, WrittenFile, part_name, run_of
from workbench.dataset.schema import ALL_TABLES
from workbench.engines import fact_columns as fc

__all__ = ["REMOVED_COLUMNS", "Pending", "blank_decisions", "blank_facts", "pending", "remove_unlisted",
           "rewrite_parquet"]

# The decisions table's columns a removal empties: what the export reads from the request or from
# record members a remainder does not keep (`gate.privacy.removal.KEPT_MEMBERS`).
REMOVED_COLUMNS = ("action", "evidence", "binding_mode", "facts_json")
BATCH = 1_000
_FACTS_KEPT = ("decision_id", *STORED_COLUMNS)

Blank = Callable[[pa.Table, pa.Array], pa.Table]


@dataclass
class Pending:
    """The removals a run applies: per scope, the decision ids by month and their causes, and the
    watermark each scope moves to once they are applied."""

    by_partition: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    causes: dict[str, str] = field(default_factory=dict)  # decision id -> cause
    marks: dict[str, RemovalMark] = field(default_factory=dict)

    def ids(self, scope: str, month: str) -> set[str]:
        return self.by_partition.get((scope, month), set())


def pending(ledger: Ledger, scopes: Iterable[str], marks: Mapping[str, Mapping[str, object]],
            cutoff: str) -> Pending:
    """The removals filed since each scope's mark and before `cutoff`. A scope the dataset has not
    exported yet has nothing to rewrite (its rows will be written from the ledger's remainders)."""
    found = Pending()
    for scope in scopes:
        if scope not in marks:
            continue
        mark = marks[scope].get("removals")
        after: tuple[str, str] | None = None
        count = 0
        if isinstance(mark, dict):
            after, count = (mark["removed_at"], mark["decision_id"]), mark["count"]
            if ledger_removals.count_through(ledger, scope, after) != count:  # one committed behind the mark
                after, count = None, 0
        while rows := ledger_removals.filed_after(ledger, scope, after, cutoff, BATCH):
            for row in rows:
                found.by_partition.setdefault((scope, convert.month_of(row["created_at"])), set()).add(
                    row["decision_id"])
                found.causes[row["decision_id"]] = row["cause"]
            count += len(rows)
            after = (rows[-1]["removed_at"], rows[-1]["decision_id"])
            found.marks[scope] = {"removed_at": after[0], "decision_id": after[1], "count": count}
    return found


def _null_where(table: pa.Table, mask: pa.Array, names: Iterable[str]) -> pa.Table:
    for name in names:
        index = table.schema.get_field_index(name)
        column = table.column(index)
        table = table.set_column(index, table.schema.field(index),
                                 pc.if_else(mask, pa.scalar(None, column.type), column))
    return table


def blank_decisions(table: pa.Table, ids: pa.Array) -> pa.Table:
    """Decision rows of `ids` with `REMOVED_COLUMNS` null."""
    mask = pc.is_in(table.column("decision_id"), value_set=ids)
    return _null_where(table, mask, [name for name in REMOVED_COLUMNS if name in table.column_names])


def blank_facts(table: pa.Table, ids: pa.Array) -> pa.Table:
    """Facts rows of `ids` as an export of a remainder writes them: `absent`, every other column
    null but the decision id and its stored outcome."""
    mask = pc.is_in(table.column("decision_id"), value_set=ids)
    others = [name for name in table.column_names
              if name not in _FACTS_KEPT and name not in (fc.STATE_COLUMN, "scope", "month")]
    table = _null_where(table, mask, others)
    index = table.schema.get_field_index(fc.STATE_COLUMN)
    state = table.column(index)
    return table.set_column(index, table.schema.field(index),
                            pc.if_else(mask, pa.scalar(fc.STATE_ABSENT, state.type), state))


def holds_values(location: Location, path: str, ids: pa.Array, columns: Iterable[str]) -> bool:
    """Whether the file has a row of `ids` with a value in one of `columns` (read: those columns)."""
    with location.fs.open_input_file(location.path(path)) as handle:
        parquet = pq.ParquetFile(handle)
        names = [name for name in columns if name in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=GROUP_ROWS, columns=["decision_id", *names]):
            mask = pc.is_in(batch.column(0), value_set=ids)
            if not pc.any(mask).as_py():
                continue
            for index in range(1, batch.num_columns):
                if pc.any(pc.and_(mask, pc.is_valid(batch.column(index)))).as_py():
                    return True
    return False


def rewrite_parquet(location: Location, source: str, target: str, ids: pa.Array, blank: Blank) -> None:
    """Write `target` as `source` with `blank` applied, one row group at a time (same schema)."""
    location.fs.create_dir(location.path(target.rsplit("/", 1)[0]), recursive=True)
    with location.fs.open_input_file(location.path(source)) as handle:
        parquet = pq.ParquetFile(handle)
        schema = parquet.schema_arrow
        with pq.ParquetWriter(location.path(target), schema, filesystem=location.fs, compression="zstd") as out:
            for batch in parquet.iter_batches(batch_size=GROUP_ROWS):
                out.write_table(blank(pa.Table.from_batches([batch], schema=schema), ids),
                                row_group_size=GROUP_ROWS)


@dataclass
class ParquetRewrite:
    """The part files one run rewrote (`rewrite_tables`): entries to list, paths to delete after the
    commit, the decisions partitions touched (for the rollups), and what changed."""

    run: int
    replaced: list[str] = field(default_factory=list)
    decision_files: list[WrittenFile] = field(default_factory=list)
    decision_rows: int = 0
    facts_rows: int = 0
    files: int = 0


def rewrite_tables(location: Location, manifest: DatasetManifest, found: Pending, run: int,
                   *, decisions: bool) -> ParquetRewrite:
    """Rewrite the listed part files holding a value of a removed decision (the decisions table
    too when `decisions`, i.e. a Parquet layout) and list the new files in `manifest` instead."""
    done = ParquetRewrite(run)
    if decisions:
        entry = manifest["tables"]["decisions"]
        done.decision_rows += _rewrite_entry(location, entry, "decisions", found, done, blank_decisions,
                                             REMOVED_COLUMNS)
    for rulebook_id, entry in sorted(manifest["facts"].items()):
        table = f"{FACTS_DIR}/rulebook_id={_quote(rulebook_id)}"
        done.facts_rows += _rewrite_entry(location, entry, table, found, done, blank_facts, None)
    return done


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _rewrite_entry(location: Location, entry: TableEntry, table: str, found: Pending, done: ParquetRewrite,
                   blank: Blank, columns: Iterable[str] | None) -> int:
    """Rewrite the table's files that hold values of removed decisions; returns the rows changed."""
    changed = 0
    counters: dict[str, int] = {}
    files: list[FileEntry] = []
    for item in entry["files"]:
        partition = _ids_of(item["path"], table, found)
        if partition is None or not _needs(location, item["path"], partition[2], columns):
            files.append(item)
            continue
        scope, month, ids = partition
        folder = item["path"].rsplit("/", 1)[0]
        index = counters.get(folder, 0)
        counters[folder] = index + 1
        target = f"{folder}/{part_name(done.run, index)}"
        rewrite_parquet(location, item["path"], target, ids, blank)
        changed += matched(location, item["path"], ids)
        files.append({"path": target, "rows": item["rows"], "run": done.run,
                      **integrity.describe_file(location, target)})
        done.replaced.append(item["path"])
        done.files += 1
        if table == "decisions":
            done.decision_files.append({"path": target, "table": table, "scope": scope, "month": month,
                                        "rows": item["rows"], "run": done.run})
    entry["files"] = files
    return changed


def _ids_of(path: str, table: str, found: Pending) -> tuple[str, str, pa.Array] | None:
    """The file's partition and its removed decisions (None when it has none)."""
    for (scope, month), ids in found.by_partition.items():
        if path.startswith(partition_dir(table, scope, month) + "/") and ids:
            return scope, month, pa.array(sorted(ids), pa.string())
    return None


def _needs(location: Location, path: str, ids: pa.Array, columns: Iterable[str] | None) -> bool:
    if columns is not None:
        return holds_values(location, path, ids, columns)
    with location.fs.open_input_file(location.path(path)) as handle:
        parquet = pq.ParquetFile(handle)
        names = [name for name in parquet.schema_arrow.names if name not in _FACTS_KEPT]
        for batch in parquet.iter_batches(batch_size=GROUP_ROWS, columns=["decision_id", *names]):
            mask = pc.is_in(batch.column(0), value_set=ids)
            state = batch.column(names.index(fc.STATE_COLUMN) + 1)
            if pc.any(pc.and_(mask, pc.not_equal(state, fc.STATE_ABSENT))).as_py():
                return True
    return False


def matched(location: Location, path: str, ids: pa.Array) -> int:
    with location.fs.open_input_file(location.path(path)) as handle:
        column = pq.read_table(handle, columns=["decision_id"]).column(0)
    return int(pc.sum(pc.is_in(column, value_set=ids)).as_py() or 0)


def summary(found: Pending, done: ParquetRewrite, decision_rows: int) -> RewriteSummary:
    by_cause: dict[str, int] = {}
    for cause in found.causes.values():
        by_cause[cause] = by_cause.get(cause, 0) + 1
    return {"decisions": len(found.causes), "by_cause": dict(sorted(by_cause.items())),
            "decision_rows": decision_rows, "facts_rows": done.facts_rows, "files": done.files}


def delete_replaced(location: Location, paths: Iterable[str]) -> None:
    """Delete files a committed run replaced (best effort: the next run deletes what is left)."""
    for path in paths:
        with contextlib.suppress(OSError, pa.ArrowException):
            location.fs.delete_file(location.path(path))


def remove_unlisted(location: Location, manifest: DatasetManifest) -> int:
    """Delete part files of committed runs that the manifest no longer lists (files a rewrite
    replaced, left by a crash after its manifest was written). Returns how many."""
    listed = {item.path for item in integrity.iter_all(manifest)}
    removed = 0
    for table in (*ALL_TABLES, FACTS_DIR):
        if not location.exists(table):
            continue
        for info in location.fs.get_file_info(pafs.FileSelector(location.path(table), recursive=True)):
            if info.type != pafs.FileType.File:
                continue
            run = run_of(info.base_name)
            relative = info.path[len(location.root.rstrip("/")) + 1:]
            if run is not None and run <= manifest["runs"] and relative not in listed:
                location.fs.delete_file(info.path)
                removed += 1
    return removed
