"""Writing Arrow batches into the Hive-partitioned dataset in bounded memory.

`PartitionedWriter` receives tables in `with_partitions(<schema>)` shape (any number of
scopes and months per batch), splits them by (scope, month), buffers each partition until it
holds a row group's worth of rows, and appends the row group to that partition's open Parquet
file. Memory is bounded by `buffer_rows` in total: when the buffers hold more, the largest is
written out early. Files are named `part-<run>-<n>.parquet` (run = the export run's number,
n = the file's number within its partition and run), so the files of a run are recognisable
and a failed run's leftovers can be removed by the next one.

Files are written without the partition columns (they are in the directory names), Zstandard
compressed, with the exact schema of `workbench.dataset.schema`. A table outside `workbench.dataset.schema`
(the typed `facts` tables, `facts/rulebook_id=<id>`, whose columns depend on the facts seen)
is written flexibly: buffers are concatenated with missing columns filled with nulls and every
flush writes a file of its own.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import TypedDict

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workbench.dataset.location import Location, partition_dir
from workbench.dataset.schema import ALL_TABLES

GROUP_ROWS = 32_000
BUFFER_ROWS = 96_000
FILE_ROWS = 4_000_000

__all__ = ["PartitionedWriter", "part_name", "run_of"]


def part_name(run: int, index: int) -> str:
    return f"part-{run:06d}-{index:04d}.parquet"


def run_of(name: str) -> int | None:
    """The run number in a part file's name (None for a file this writer did not name)."""
    parts = name.split("-")
    if len(parts) == 3 and parts[0] == "part" and parts[2].endswith(".parquet") and parts[1].isdigit():
        return int(parts[1])
    return None


@dataclass
class _Partition:
    table: str
    scope: str
    month: str
    buffered: list[pa.Table] = field(default_factory=list)
    buffered_rows: int = 0
    writer: pq.ParquetWriter | None = None
    file_rows: int = 0
    file_index: int = 0
    path: str = ""


class WrittenFile(TypedDict):
    """A part file a run wrote: its path (under the dataset), table, partition, rows and run."""

    path: str
    table: str
    scope: str
    month: str
    rows: int
    run: int


class PartitionedWriter:
    def __init__(self, location: Location, run: int, *, group_rows: int = GROUP_ROWS,
                 buffer_rows: int = BUFFER_ROWS, file_rows: int = FILE_ROWS) -> None:
        self.location = location
        self.run = run
        self.group_rows = group_rows
        self.buffer_rows = buffer_rows
        self.file_rows = file_rows
        self._partitions: dict[tuple[str, str, str], _Partition] = {}
        self._buffered = 0
        self.files: list[WrittenFile] = []

    def add(self, table: str, batch: pa.Table) -> None:
        """Queue `batch` (schema `with_partitions(ALL_TABLES[table])`, or a facts table) for writing."""
        if batch.num_rows == 0:
            return
        keys = batch.select(["scope", "month"])
        pairs = keys.group_by(["scope", "month"]).aggregate([([], "count_all")]) \
            .sort_by([("scope", "ascending"), ("month", "ascending")]).to_pylist()
        data = batch.drop_columns(["scope", "month"])
        if len(pairs) == 1:
            self._queue(table, pairs[0]["scope"], pairs[0]["month"], data)
        else:
            # One sort, then each partition takes its contiguous run of row indices: a copy of
            # its own rows. (A slice of the sorted batch would keep the whole batch's buffers
            # alive until every partition holding a slice of it is written, so the buffers would
            # hold far more than `buffer_rows` rows' worth of memory.)
            order = pc.sort_indices(keys, sort_keys=[("scope", "ascending"), ("month", "ascending")])
            offset = 0
            for pair in pairs:
                count = pair["count_all"]
                self._queue(table, pair["scope"], pair["month"], data.take(order.slice(offset, count)))
                offset += count
        while self._buffered > self.buffer_rows:
            largest = max(self._partitions.values(), key=lambda p: p.buffered_rows)
            self._flush(largest)

    def _queue(self, table: str, scope: str, month: str, part: pa.Table) -> None:
        key = (table, scope, month)
        partition = self._partitions.get(key)
        if partition is None:
            partition = self._partitions[key] = _Partition(table, scope, month)
        partition.buffered.append(part)
        partition.buffered_rows += part.num_rows
        self._buffered += part.num_rows
        if partition.buffered_rows >= self.group_rows:
            self._flush(partition)

    def _flush(self, partition: _Partition) -> None:
        if not partition.buffered_rows:
            return
        schema = ALL_TABLES.get(partition.table)
        if schema is None:
            data = pa.concat_tables(partition.buffered, promote_options="default")
            if partition.writer is not None:
                self._close_file(partition)
            schema = data.schema
        else:
            data = pa.concat_tables(partition.buffered).cast(schema)
        self._buffered -= partition.buffered_rows
        partition.buffered, partition.buffered_rows = [], 0
        if partition.writer is not None and partition.file_rows + data.num_rows > self.file_rows:
            self._close_file(partition)
        if partition.writer is None:
            relative = (f"{partition_dir(partition.table, partition.scope, partition.month)}/"
                        f"{part_name(self.run, partition.file_index)}")
            self.location.fs.create_dir(self.location.path(relative.rsplit('/', 1)[0]), recursive=True)
            partition.path = relative
            partition.writer = pq.ParquetWriter(self.location.path(relative), schema,
                                                filesystem=self.location.fs, compression="zstd")
        partition.writer.write_table(data, row_group_size=max(self.group_rows, data.num_rows))
        partition.file_rows += data.num_rows

    def _close_file(self, partition: _Partition) -> None:
        """Close the partition's open file (every caller has one) and list it."""
        if partition.writer is not None:
            partition.writer.close()
        self.files.append({"path": partition.path, "table": partition.table, "scope": partition.scope,
                           "month": partition.month, "rows": partition.file_rows, "run": self.run})
        partition.writer, partition.file_rows = None, 0
        partition.file_index += 1

    def close(self) -> list[WrittenFile]:
        """Write every buffer, close every file; returns the files written (sorted by path)."""
        for partition in self._partitions.values():
            self._flush(partition)
            if partition.writer is not None:
                self._close_file(partition)
        self._partitions.clear()
        return sorted(self.files, key=lambda entry: entry["path"])

    def abort(self) -> None:
        """Close open files after a failure (the caller removes the run's files)."""
        for partition in self._partitions.values():
            if partition.writer is not None:
                with contextlib.suppress(Exception):  # best effort on an already failing path
                    partition.writer.close()
        self._partitions.clear()
