"""The Iceberg layout of the dataset: the record tables as Apache Iceberg tables (pyiceberg).

`gate export --format iceberg` writes `decisions`, `executions`, `outcomes`, `crm_syncs` and
`chain_links` as Iceberg tables in a SQL catalog (SQLite by default, PostgreSQL in production),
with the Arrow schemas of `workbench.dataset.schema` plus `scope` and `month` as identity
partitions. The dataset location keeps `manifest.json` (signed as ever) and the typed `facts`
Parquet files; the manifest's `layout` is `"iceberg"` and its `iceberg` member names the catalog,
the warehouse, the namespace and, per table, the snapshot the dataset was cut at and every data
file of that snapshot with its `sha256`, `bytes` and `rows` (docs/dataset.md, "Iceberg layout").

Writing (`IcebergWriter`): batches are buffered per table (bounded like the Parquet writer),
written as data files into the warehouse when a table's buffer fills, and committed at the end
of the run as ONE fast-append snapshot per table that got new rows (snapshot summary
`gate.export.run`). A run that dies before its manifest is written leaves at most snapshots the
manifest does not name: the next run sets each table back to the manifest's snapshot first.

Removals (`rewrite_files`, `record_rewrite`, `expire_unlisted`; `workbench.dataset.rewrite` says when):
the data files holding a removed decision's values are written anew and swapped in by one
overwrite snapshot, then an empty fast append drops the overwrite's manifest of deleted entries
(it keeps the old files' column bounds); once the manifest names the new snapshot as the table's
only one, every snapshot it does not list is expired and every file no snapshot references is
deleted, so time travel cannot reach the old values.

Reading (`table_files`): the catalog gives the manifest's snapshot of each table; its planned
data files must be exactly the files the manifest lists (path and rows), and each is checked
against its listed size, sha256 and row count (`workbench.dataset.integrity.check_files`), then
read by the gate's Polars readers. A missing snapshot, another set of files or a changed file
refuses the dataset with one line.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import threading
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from workbench.dataset import integrity
from workbench.dataset.location import DatasetError, Location, open_location
from workbench.dataset.manifest import (
    DatasetManifest,
    IcebergFileEntry,
    IcebergLocation,
    IcebergMember,
    IcebergTableEntry,
)
from workbench.dataset.partwriter import BUFFER_ROWS, GROUP_ROWS
from workbench.dataset.schema import TABLES, with_partitions

LAYOUT: Final = "iceberg"
ICEBERG_DIR = "iceberg"  # the default catalog file and warehouse, inside a local dataset location
CATALOG_NAME = "gate"
DEFAULT_NAMESPACE = "gate"
CATALOG_ENV = "GATE_ICEBERG_CATALOG_URI"  # readers: the catalog URI with its credentials
RUN_PROPERTY = "gate.export.run"
LOCATION_PROPERTY = "gate.dataset.location"
_LOCK = threading.Lock()

__all__ = [
    "CATALOG_ENV",
    "LAYOUT",
    "IcebergTarget",
    "IcebergWriter",
    "check_tables",
    "default_target",
    "is_iceberg",
    "table_files",
    "target_of",
]


@dataclass(frozen=True)
class IcebergTarget:
    """Where an export writes its Iceberg tables: a SQL catalog, a warehouse, a namespace."""

    catalog_uri: str
    warehouse: str
    namespace: str = DEFAULT_NAMESPACE

    def member(self) -> IcebergLocation:
        """The manifest's `iceberg` member (without tables): the catalog URI without a password, the
        catalog's name (a SQL catalog keys its tables by it), the warehouse and the namespace."""
        return {"catalog": public_uri(self.catalog_uri), "catalog_name": CATALOG_NAME, "warehouse": self.warehouse,
                "namespace": self.namespace}


def is_iceberg(manifest: DatasetManifest) -> bool:
    return manifest.get("layout") == LAYOUT


def _as_url(path_or_url: str) -> str:
    return path_or_url if "://" in path_or_url else "file://" + os.path.abspath(path_or_url)


def default_target(uri: str, home: Path, *, catalog_uri: str | None = None, warehouse: str | None = None,
                   namespace: str = DEFAULT_NAMESPACE) -> IcebergTarget:
    """The target of `gate export --format iceberg --out URI`: by default a SQLite catalog and
    the warehouse in `URI/iceberg/` for a local location; for an object-store location the
    warehouse is `URI/iceberg/warehouse` and the SQLite catalog lives in `GATE_HOME/iceberg/`."""
    local = "://" not in uri or uri.startswith("file://")
    base = _as_url(uri).rstrip("/") + f"/{ICEBERG_DIR}"
    if catalog_uri is None:
        folder = (open_location(uri).root + f"/{ICEBERG_DIR}") if local else str(Path(home) / ICEBERG_DIR)
        catalog_uri = f"sqlite:///{folder}/catalog.db"
    return IcebergTarget(catalog_uri, _as_url(warehouse) if warehouse else f"{base}/warehouse", namespace)


def public_uri(uri: str) -> str:
    """The catalog URI without its password (never a secret in a manifest)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def open_catalog(catalog_uri: str, warehouse: str) -> Any:
    """The SQL catalog (its tables created when new); DatasetError when it cannot be reached or
    pyiceberg is not installed (the `lakehouse` extra)."""
    try:
        from pyiceberg.catalog.sql import SqlCatalog
    except ImportError:
        raise DatasetError("the Iceberg layout needs pyiceberg: pip install 'decision-gate[lakehouse]'") from None

    if catalog_uri.startswith("sqlite:///"):
        with contextlib.suppress(OSError):
            Path(catalog_uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    try:
        return SqlCatalog(CATALOG_NAME, uri=catalog_uri, warehouse=warehouse, **object_store_properties(os.environ))
    except Exception as exc:  # SQLAlchemy, the driver: each raises its own kind
        raise DatasetError(f"cannot open the Iceberg catalog {public_uri(catalog_uri)}: {_first_line(exc)}") from exc


def object_store_properties(env: Mapping[str, str]) -> dict[str, str]:
    """The S3 endpoint and region of the environment, as pyiceberg's file IO properties.

    Arrow, which reads and writes the Parquet layout, takes an S3-compatible store's endpoint and
    region from the standard `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL` and `AWS_REGION` /
    `AWS_DEFAULT_REGION`; pyiceberg's file IO passes its own (unset) endpoint and asks AWS for a
    bucket's region instead. Handing them over keeps one configuration for both layouts.
    Credentials are not copied: both read them from the environment's usual chain."""
    properties = {}
    if endpoint := env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"):
        properties["s3.endpoint"] = endpoint
    if region := env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"):
        properties["s3.region"] = region
    return properties


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def target_of(manifest: DatasetManifest) -> IcebergTarget:
    """The target an Iceberg dataset's manifest names (the catalog URI from `GATE_ICEBERG_CATALOG_URI`
    when set: the manifest's has no password)."""
    member = manifest["iceberg"]
    return IcebergTarget(os.environ.get(CATALOG_ENV) or member["catalog"], member["warehouse"], member["namespace"])


_CATALOGS: dict[tuple[str, str], Any] = {}  # readers: one catalog (one connection pool) per process


def _catalog_of(member: IcebergMember) -> Any:
    """The catalog a manifest names; `GATE_ICEBERG_CATALOG_URI` gives it with its credentials. Kept
    for the process: a catalog holds only a connection pool; every table is loaded anew."""
    key = (os.environ.get(CATALOG_ENV) or member["catalog"], member["warehouse"])
    with _LOCK:
        catalog = _CATALOGS.get(key)
    if catalog is None:
        catalog = open_catalog(*key)
        with _LOCK:
            _CATALOGS[key] = catalog
    return catalog


def warehouse_location(warehouse: str) -> Location:
    """The warehouse as a `Location`, so data files are checked by the dataset's own code."""
    if warehouse.startswith("file://"):
        return Location(warehouse, pafs.LocalFileSystem(), warehouse.removeprefix("file://").rstrip("/") or "/")
    return open_location(warehouse)


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True)
class Committed:
    """One table's snapshot a run committed (`IcebergWriter.commit`) and its new files' entries."""

    snapshot_id: int
    files: list[IcebergFileEntry]


@dataclass
class _Table:
    table: Any  # pyiceberg Table
    buffered: list[pa.Table] = field(default_factory=list)
    rows: int = 0
    data_files: list[Any] = field(default_factory=list)
    counter: itertools.count[int] = field(default_factory=itertools.count)
    write_uuid: uuid.UUID = field(default_factory=uuid.uuid4)


class IcebergWriter:
    """Buffers each table's batches (at most `buffer_rows` in all), writes them as data files and
    commits one snapshot per table at `commit`. `prepare` opens (or creates) the tables and sets
    each back to the snapshot the manifest names (a failed run's snapshot is never built upon)."""

    def __init__(self, target: IcebergTarget, location: Location, run: int, *, flush_rows: int = GROUP_ROWS,
                 buffer_rows: int = BUFFER_ROWS) -> None:
        self.target, self.location, self.run = target, location, run
        self.flush_rows, self.buffer_rows = flush_rows, buffer_rows
        self.catalog = open_catalog(target.catalog_uri, target.warehouse)
        self.tables: dict[str, _Table] = {}

    def prepare(self, member: IcebergMember | None) -> None:
        """Open every table (creating the namespace and tables on a first run) and check it is this
        dataset's; set a table whose current snapshot is not the manifest's back to it."""
        try:
            self.catalog.create_namespace_if_not_exists(self.target.namespace)
            for name in TABLES:
                self.tables[name] = _Table(self._table(name, None if member is None else member["tables"].get(name)))
        except DatasetError:
            raise
        except Exception as exc:
            raise DatasetError(f"the Iceberg catalog {public_uri(self.target.catalog_uri)}: {_first_line(exc)}") from exc

    def _table(self, name: str, listed: IcebergTableEntry | None) -> Any:
        identifier = f"{self.target.namespace}.{name}"
        expected = None if listed is None else listed["snapshot_id"]
        if self.catalog.table_exists(identifier):
            table = self.catalog.load_table(identifier)
            if table.properties.get(LOCATION_PROPERTY) != self.location.uri:
                raise DatasetError(f"the Iceberg table {identifier} belongs to another dataset "
                                   f"({table.properties.get(LOCATION_PROPERTY)!r}): choose another --namespace")
            current = table.current_snapshot()
            if expected is None and current is not None:  # a first run that died after its commit
                self.catalog.drop_table(identifier)
            elif expected is not None and (current is None or current.snapshot_id != expected):
                if table.snapshot_by_id(expected) is None:
                    raise DatasetError(f"the Iceberg table {identifier} has no snapshot {expected}, which the "
                                       "manifest names: the catalog does not hold this dataset's tables")
                table.manage_snapshots().set_current_snapshot(snapshot_id=expected).commit()
                return table
            else:
                return table
        elif expected is not None:
            raise DatasetError(f"the Iceberg catalog has no table {identifier}, which the manifest names")
        return self._create(identifier)

    def _create(self, identifier: str) -> Any:
        table = self.catalog.create_table(identifier, schema=with_partitions(TABLES[identifier.rsplit(".", 1)[1]]),
                                          properties={LOCATION_PROPERTY: self.location.uri})
        with table.update_spec() as spec:
            spec.add_identity("scope")
            spec.add_identity("month")
        return table

    def add(self, name: str, batch: pa.Table) -> None:
        """Queue `batch` (shape `with_partitions(TABLES[name])`)."""
        if batch.num_rows == 0:
            return
        item = self.tables[name]
        item.buffered.append(batch.cast(with_partitions(TABLES[name])))
        item.rows += batch.num_rows
        if item.rows >= self.flush_rows:
            self._flush(item)
        while sum(entry.rows for entry in self.tables.values()) > self.buffer_rows:
            self._flush(max(self.tables.values(), key=lambda entry: entry.rows))

    def _flush(self, item: _Table) -> None:
        from pyiceberg.io.pyarrow import _dataframe_to_data_files

        if not item.rows:
            return
        data = pa.concat_tables(item.buffered)
        item.buffered, item.rows = [], 0
        # The counter and uuid are the table's for the whole run: file names never repeat.
        item.data_files.extend(_dataframe_to_data_files(item.table.metadata, data, item.table.io,
                                                        write_uuid=item.write_uuid, counter=item.counter))

    def commit(self) -> dict[str, Committed]:
        """Write what is buffered and commit one snapshot per table with new data files.
        Returns, per such table, its `snapshot_id` and its new files' manifest entries."""
        for item in self.tables.values():
            self._flush(item)
        committed: dict[str, Committed] = {}
        for name, item in self.tables.items():
            if not item.data_files:
                continue
            try:
                transaction = item.table.transaction()
                with transaction.update_snapshot(snapshot_properties={RUN_PROPERTY: str(self.run)}).fast_append() \
                        as append:
                    for data_file in item.data_files:
                        append.append_data_file(data_file)
                transaction.commit_transaction()
            except Exception as exc:  # the catalog's database or the warehouse failed: nothing is reported
                raise DatasetError(f"committing the Iceberg table {item.table.name()} failed: "
                                   f"{_first_line(exc)}") from exc
            snapshot = item.table.current_snapshot()
            committed[name] = Committed(snapshot.snapshot_id, self._entries(item.data_files))
            item.data_files = []  # committed: `abort` leaves them (the next run sets the table back)
        return committed

    def _entries(self, data_files: Sequence[Any]) -> list[IcebergFileEntry]:
        """The manifest entries of new data files: path (relative to the warehouse), rows, run,
        scope, month, and their sha256 and bytes (each file read once)."""
        warehouse = warehouse_location(self.target.warehouse)
        entries: list[IcebergFileEntry] = []
        for data_file in data_files:
            path = relative_path(self.target.warehouse, data_file.file_path)
            entries.append({"path": path, "rows": data_file.record_count, "run": self.run,
                            "scope": data_file.partition[0], "month": data_file.partition[1],
                            **integrity.describe_file(warehouse, path)})
        return sorted(entries, key=lambda entry: entry["path"])

    def abort(self) -> None:
        """Delete the data files this run wrote and did not commit (best effort: files no snapshot
        names are never read; an orphan left behind only takes room)."""
        warehouse = warehouse_location(self.target.warehouse)
        for item in self.tables.values():
            for data_file in item.data_files:
                with contextlib.suppress(Exception):
                    warehouse.fs.delete_file(warehouse.path(relative_path(self.target.warehouse, data_file.file_path)))
            item.data_files, item.buffered, item.rows = [], [], 0


def relative_path(warehouse: str, file_path: str) -> str:
    prefix = warehouse.rstrip("/") + "/"
    if not file_path.startswith(prefix):
        raise DatasetError(f"the Iceberg data file {file_path} is outside the warehouse {warehouse}")
    return file_path[len(prefix):]


def record_run(manifest: DatasetManifest, target: IcebergTarget, run: int,
               committed: Mapping[str, Committed]) -> None:
    """Name the run's snapshots and list its data files in the manifest's `iceberg` member."""
    member = manifest.setdefault("iceberg", {**target.member(), "tables": {}})
    for name in TABLES:
        entry = member["tables"].setdefault(name, {"identifier": f"{target.namespace}.{name}", "snapshot_id": None,
                                                   "snapshots": [], "files": []})
        if name in committed:
            entry["snapshot_id"] = committed[name].snapshot_id
            entry["snapshots"].append({"run": run, "snapshot_id": committed[name].snapshot_id})
            entry["files"].extend(committed[name].files)
    manifest["layout"] = LAYOUT


# --------------------------------------------------------------------------- reading


def _listed(member: IcebergMember, table: str, scopes: Sequence[str] | None) -> list[integrity.ListedFile]:
    item = member["tables"].get(table) if isinstance(member.get("tables"), dict) else None
    files = (item.get("files") if item else None) or []
    wanted = None if scopes is None else set(scopes)
    return [integrity.ListedFile(f"{LAYOUT}:{table}", entry["path"], entry["rows"], entry.get("sha256"),
                                 entry.get("bytes"))
            for entry in files if wanted is None or entry.get("scope") in wanted]


def _check_snapshot(catalog: Any, member: IcebergMember, table: str) -> None:
    """The manifest's snapshot of `table` is in the catalog and its data files are exactly the
    files the manifest lists (path and rows); DatasetError otherwise."""
    item = member["tables"][table]
    identifier, snapshot_id = item["identifier"], item["snapshot_id"]
    try:
        loaded = catalog.load_table(identifier)
        if loaded.snapshot_by_id(snapshot_id) is None:
            raise DatasetError(f"the Iceberg table {identifier} has no snapshot {snapshot_id}, which the manifest names")
        planned = {(relative_path(member["warehouse"], task.file.file_path), task.file.record_count)
                   for task in loaded.scan(snapshot_id=snapshot_id).plan_files()}
    except DatasetError:
        raise
    except Exception as exc:
        raise DatasetError(f"the Iceberg table {identifier}: {_first_line(exc)}") from exc
    if planned != {(entry["path"], entry["rows"]) for entry in item["files"]}:
        raise DatasetError(f"snapshot {snapshot_id} of the Iceberg table {identifier} does not hold the data files "
                           "the manifest lists")


def table_files(manifest: DatasetManifest, table: str, scopes: Sequence[str] | None = None) -> list[str]:
    """The checked data files of one table at the manifest's snapshot (of `scopes`, or all):
    the snapshot and its file set checked through the catalog, each file's size, sha256 and rows
    against its entry. DatasetError (one line) otherwise. Full paths, for the Polars readers."""
    member = manifest.get("iceberg")
    if not isinstance(member, dict) or table not in member.get("tables", {}):
        raise DatasetError(f"the manifest's iceberg member names no table {table!r}")
    if member["tables"][table].get("snapshot_id") is None:
        return []
    _check_snapshot(_catalog_of(member), member, table)
    location = warehouse_location(member["warehouse"])
    return [location.url(path) for path in integrity.check_files(location, _listed(member, table, scopes))]


def check_tables(manifest: DatasetManifest) -> None:
    """Every table's snapshot and every data file it lists (`table_files`); DatasetError otherwise."""
    for table in TABLES:
        table_files(manifest, table)


# --------------------------------------------------------------------------- removals


@dataclass(frozen=True)
class Rewritten:
    """What `rewrite_files` committed: the table's new snapshot, its new files' entries, the
    replaced files' entries (paths relative to the warehouse) and the rows they held of removed
    decisions."""

    snapshot_id: int
    added: list[IcebergFileEntry]
    replaced: list[str]


def rewrite_files(target: IcebergTarget, location: Location, manifest: DatasetManifest, table_name: str,
                  run: int, chosen: Mapping[str, Any]) -> Rewritten | None:
    """Replace the table's data files in `chosen` (path relative to the warehouse → a function giving
    a file's new rows from its old ones) in one overwrite snapshot, then an empty fast append that
    carries only live manifests (the overwrite's manifest of deleted entries keeps the old files'
    column bounds; the append drops it). The manifest's snapshot is made current first (a failed
    run's is never built on). Older snapshots are expired only once the manifest names the new one
    (`expire_unlisted`). One file is read at a time."""
    from pyiceberg.io.pyarrow import _dataframe_to_data_files

    if not chosen:
        return None
    writer = IcebergWriter(target, location, run)
    writer.prepare(manifest.get("iceberg"))
    table = writer.tables[table_name].table
    warehouse = warehouse_location(target.warehouse)
    current = table.current_snapshot()
    old = {relative_path(target.warehouse, task.file.file_path): task.file
           for task in table.scan(snapshot_id=current.snapshot_id).plan_files()}
    added: list[Any] = []
    counter, write_uuid = itertools.count(), uuid.uuid4()
    try:
        for path, change in sorted(chosen.items()):
            with warehouse.fs.open_input_file(warehouse.path(path)) as handle:
                rows = change(pq.read_table(handle).cast(with_partitions(TABLES[table_name])))
            added.extend(_dataframe_to_data_files(table.metadata, rows, table.io, write_uuid=write_uuid,
                                                  counter=counter))
        transaction = table.transaction()
        with transaction.update_snapshot(snapshot_properties={RUN_PROPERTY: str(run)}).overwrite() as overwrite:
            for path in chosen:
                overwrite.delete_data_file(old[path])
            for data_file in added:
                overwrite.append_data_file(data_file)
        transaction.commit_transaction()
        transaction = table.transaction()
        with transaction.update_snapshot(snapshot_properties={RUN_PROPERTY: str(run)}).fast_append():
            pass
        transaction.commit_transaction()
    except Exception as exc:
        for data_file in added:
            with contextlib.suppress(Exception):
                warehouse.fs.delete_file(warehouse.path(relative_path(target.warehouse, data_file.file_path)))
        raise DatasetError(f"rewriting the Iceberg table {table.name()} failed: {_first_line(exc)}") from exc
    writer.tables[table_name].data_files = added
    return Rewritten(table.current_snapshot().snapshot_id, writer._entries(added), sorted(chosen))


def record_rewrite(manifest: DatasetManifest, table_name: str, run: int, done: Rewritten) -> None:
    """The manifest names the rewrite's snapshot as the table's only one, its files instead of the
    replaced ones."""
    entry = manifest["iceberg"]["tables"][table_name]
    replaced = set(done.replaced)
    entry["files"] = sorted([item for item in entry["files"] if item["path"] not in replaced] + done.added,
                            key=lambda item: item["path"])
    entry["snapshot_id"] = done.snapshot_id
    entry["snapshots"] = [{"run": run, "snapshot_id": done.snapshot_id}]


def expire_unlisted(target: IcebergTarget, manifest: DatasetManifest) -> int:
    """Expire every snapshot of the dataset's tables that the manifest does not list (those a rewrite
    superseded, a failed run's), then delete every data, manifest and manifest-list file no remaining
    snapshot references, so a removed value is not reachable by time travel. Returns the snapshots
    expired."""
    member = manifest.get("iceberg")
    if not isinstance(member, dict):
        return 0
    catalog = open_catalog(target.catalog_uri, target.warehouse)
    try:
        return sum(_expire_table(catalog, entry, target.warehouse) for entry in member["tables"].values())
    except Exception as exc:  # the catalog's database or the warehouse failed: the next run tries again
        raise DatasetError(f"expiring the Iceberg snapshots in {public_uri(target.catalog_uri)} failed: "
                           f"{_first_line(exc)}") from exc


def _expire_table(catalog: Any, entry: IcebergTableEntry, warehouse: str) -> int:
    """Expire the table's snapshots `entry` does not list (not its current one); returns how many."""
    table = catalog.load_table(entry["identifier"])
    current = table.current_snapshot()
    listed = {item["snapshot_id"] for item in entry["snapshots"]}
    stale = [snapshot.snapshot_id for snapshot in table.snapshots()
             if snapshot.snapshot_id not in listed and (current is None or snapshot.snapshot_id != current.snapshot_id)]
    if not stale:
        return 0
    table.maintenance.expire_snapshots().by_ids(stale).commit()
    _delete_unreferenced(catalog.load_table(entry["identifier"]), warehouse)
    return len(stale)


def _delete_unreferenced(table: Any, warehouse: str) -> None:
    """Delete the table's `.parquet` and `.avro` files that no snapshot references."""
    referenced: set[str] = set()
    for snapshot in table.snapshots():
        referenced.add(snapshot.manifest_list)
        for manifest_file in snapshot.manifests(table.io):
            referenced.add(manifest_file.manifest_path)
            referenced.update(entry.data_file.file_path
                              for entry in manifest_file.fetch_manifest_entry(table.io, discard_deleted=False))
    location = warehouse_location(warehouse)
    base = relative_path(warehouse, table.location())
    for info in location.fs.get_file_info(pafs.FileSelector(location.path(base), recursive=True)):
        if info.type != pafs.FileType.File or not info.base_name.endswith((".parquet", ".avro")):
            continue
        full = warehouse.rstrip("/") + "/" + info.path[len(location.root.rstrip("/")) + 1:]
        if full not in referenced:
            location.fs.delete_file(info.path)
