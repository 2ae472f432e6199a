"""Where a dataset lives and what its manifest says: the shared entry point of every reader
and writer of the Parquet dataset (export, synthetic generator, engines' loader, dry-run).

A dataset location is a local path or any URL `pyarrow.fs.FileSystem.from_uri` understands
(`file:///data/ds`, `s3://bucket/ds`, `gs://…`, `abfs://…`). `open_location` resolves it once
to a (filesystem, root path) pair; everything else goes through that filesystem, so the same
code writes to a local disk and to an object store.

`read_manifest` refuses a dataset of another schema version with `DatasetError` (a reader must
never guess at columns), and `partitioning` is the explicit partitioning of
`workbench.dataset.schema` (scope and month are strings, never inferred as numbers or dates) with
which `workbench.dataset.integrity.table_dataset` opens one table.
"""

from __future__ import annotations

import json
import os
import posixpath
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs

from gate.errors import CodedError
from workbench.dataset.manifest import DatasetManifest
from workbench.dataset.schema import DATASET_SCHEMA_VERSION, PARTITION_FIELDS

MANIFEST = "manifest.json"

__all__ = [
    "MANIFEST",
    "DatasetError",
    "Location",
    "open_location",
    "partition_dir",
    "partitioning",
    "read_manifest",
    "write_manifest",
]


class DatasetError(CodedError, ValueError):
    """A dataset cannot be read or written as asked (missing, another schema version, a file that
    does not match its manifest, a location that cannot be used); the message says why and what
    to do. The one error of the dataset: its writers and its readers (`workbench.dataset.load`) raise it."""

    CODE = "DATASET_INVALID"


@dataclass(frozen=True)
class Location:
    """A dataset root on a filesystem."""

    uri: str  # as the user gave it
    fs: pafs.FileSystem
    root: str  # path of the root inside `fs`

    def path(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    def exists(self, *parts: str) -> bool:
        return bool(self.fs.get_file_info(self.path(*parts)).type != pafs.FileType.NotFound)

    def url(self, path: str) -> str:
        """What Polars opens for `path` (a path in `fs`, as `path()` gives): the path itself on a
        local disk, with the location's scheme on an object store (`s3://bucket/...`; Polars reads
        the store's endpoint and credentials from the same AWS_* settings as Arrow)."""
        if isinstance(self.fs, pafs.LocalFileSystem):
            return path
        return f"{urlsplit(self.uri).scheme}://{path}"

    def read_bytes(self, *parts: str) -> bytes | None:
        """A file's bytes; None when there is no such file (other read failures raise)."""
        if not self.exists(*parts):
            return None
        with self.fs.open_input_stream(self.path(*parts)) as stream:
            data: bytes = stream.read()
        return data


def open_location(uri: str) -> Location:
    """Resolve a local path or URL to its filesystem and root path (DatasetError if unusable)."""
    if not uri:
        raise DatasetError("the dataset location is empty")
    try:
        if "://" in uri:
            fs, root = pafs.FileSystem.from_uri(uri)
        else:
            fs, root = pafs.LocalFileSystem(), os.path.abspath(uri)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise DatasetError(f"cannot open dataset location {uri!r}: {exc}") from exc
    return Location(uri, fs, root.rstrip("/") or "/")


def partition_dir(table: str, scope: str, month: str) -> str:
    """`<table>/scope=<uri-escaped scope>/month=<YYYY-MM>`: the Hive directory of one partition."""
    return f"{table}/scope={quote(scope, safe='')}/month={month}"


def partitioning() -> ds.Partitioning:
    """The dataset's Hive partitioning with explicit string types (segments are URI-decoded)."""
    return ds.partitioning(pa.schema(PARTITION_FIELDS), flavor="hive")


def read_manifest(location: Location, *, required: bool = True) -> DatasetManifest | None:
    """The dataset's manifest, checked to be of `DATASET_SCHEMA_VERSION`.

    Missing manifest: DatasetError when `required`, else None. Unreadable or of another
    version: DatasetError naming both versions."""
    try:
        raw = location.read_bytes(MANIFEST)
        if raw is None:
            if required:
                raise DatasetError(f"{location.uri} has no {MANIFEST}: it is not an exported dataset")
            return None
        manifest: DatasetManifest = json.loads(raw.decode("utf-8"))
    except (OSError, pa.ArrowException, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DatasetError(f"cannot read {location.uri}/{MANIFEST}: {exc}") from exc
    version = manifest.get("dataset_schema_version") if isinstance(manifest, dict) else None
    if version != DATASET_SCHEMA_VERSION:
        raise DatasetError(
            f"{location.uri} holds a dataset of schema version {version!r}; this gate reads and "
            f"writes {DATASET_SCHEMA_VERSION!r}: export into a new location")
    return manifest


def write_manifest(location: Location, manifest: DatasetManifest) -> None:
    """Write manifest.json last, so a reader never sees a manifest ahead of its files. On a
    local disk it is written to a temporary name and renamed over the old one (atomic)."""
    data = (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode("utf-8")
    target = location.path(MANIFEST)
    if isinstance(location.fs, pafs.LocalFileSystem):
        temporary = target + ".tmp"
        with location.fs.open_output_stream(temporary) as out:
            out.write(data)
        location.fs.move(temporary, target)
    else:  # object stores replace an object atomically on PUT
        with location.fs.open_output_stream(target) as out:
            out.write(data)
