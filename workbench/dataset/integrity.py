"""The dataset's integrity: every file listed with its digest, the manifest signed, readers checking.

The export lists every part file and rollup file it commits in `manifest.json` with its
`sha256`, `bytes` and `rows`, names the ledger's chain heads it was cut from (`chains`) and the
previous manifest's `dataset_hash` (`previous_dataset_hash`), and signs the whole:

    dataset_hash = sha256(canon(manifest without dataset_hash and signature))
    signature    = {algorithm, key_id, signed_field: "dataset_hash", value, public_key_fingerprint?}

where `value` signs canon({key_id, dataset_hash}) exactly as a dry-run's migration manifest is
signed (`ed25519:<base64url>` with the gate's keyring, or `hmac-sha256:<hex>`). Anyone holding the
gate's public keys (GET /api/decision/receipt-keys, a saved key registry) checks it offline.

Readers (`workbench.dataset.load`, the dry-run's `workbench.migration.history`, the rollups) read only
listed files, so a stray file is ignored, and `check_files` refuses, with one line, a listed file
that is missing, of another size, another digest, another row count, unreadable (truncated) or of
another schema. The full digest is computed at every open, in one pass that also keeps the
file's last bytes for its Parquet footer; on a local disk what a pass found is cached in the
process by the file's identity (device, inode, size, mtime and ctime: a rewrite or a restored
mtime changes the ctime), so a long-lived process (the workbench, a notebook) reads a file once;
the CLI keeps it in GATE_HOME too (`use_digest_store`), so a later run only stats the files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import ReceiptSigner, b64url_decode, ed25519_verify
from gate.protocol.canonical import canonical_bytes, sha256_hex
from gate.vocabulary import SIG_ED25519, SIG_HMAC_SHA256
from workbench.dataset.location import DatasetError, Location, partitioning
from workbench.dataset.manifest import DatasetManifest, FileDigest, ManifestSignature
from workbench.dataset.schema import ALL_TABLES, HOLD_TABLES, PARTITION_FIELDS, TABLES

__all__ = [
    "ListedFile",
    "build_on",
    "check_files",
    "checked_columns",
    "dataset_hash",
    "describe_file",
    "digest_store_of",
    "in_scopes",
    "iter_all",
    "listed_files",
    "save_digest_store",
    "seal",
    "signature_payload",
    "signature_problem",
    "stat_identity",
    "table_dataset",
    "unsigned",
    "use_digest_store",
]

CHUNK = 1 << 20


@dataclass(frozen=True)
class ListedFile:
    """One file the manifest lists: `kind` is a table name, `facts`, or `rollups`."""

    kind: str
    path: str
    rows: int
    sha256: str | None
    bytes: int | None


def describe_file(location: Location, path: str) -> FileDigest:
    """`{sha256, bytes}` of a file relative to the dataset root (read once, in 1 MiB chunks)."""
    digest, size = hashlib.sha256(), 0
    with location.fs.open_input_stream(location.path(path)) as stream:
        while True:
            chunk = stream.read(CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            size += len(chunk)
    return {"sha256": digest.hexdigest(), "bytes": size}


def _entry(kind: str, item: Any) -> ListedFile:
    if not isinstance(item, Mapping) or not isinstance(item.get("path"), str) \
            or not isinstance(item.get("rows"), int):
        raise DatasetError(f"the manifest's {kind} file list is malformed")
    sha, size = item.get("sha256"), item.get("bytes")
    return ListedFile(kind, item["path"], item["rows"], sha if isinstance(sha, str) else None,
                      size if isinstance(size, int) else None)


def listed_files(manifest: DatasetManifest, kind: str, name: str | None = None) -> list[ListedFile]:
    """The files the manifest lists for a table (`kind` = table), for one rulebook's facts
    (`kind` = "facts", `name` = rulebook id) or for the rollups (`kind` = "rollups"). The manifest
    is read from disk: each member's shape is checked, DatasetError when it is malformed."""
    if kind == "rollups":
        member = manifest.get("rollups")
        digests = member.get("file_digests") if isinstance(member, Mapping) else None
        files = member.get("files") if isinstance(member, Mapping) else None
        if not isinstance(files, Mapping):
            return []
        if not isinstance(digests, Mapping):
            digests = {}
        return [_entry("rollups", {"path": path, **(digests.get(state) or {})}) if state in digests
                else ListedFile("rollups", path, -1, None, None) for state, path in sorted(files.items())]
    if kind in TABLES and manifest.get("layout") == "iceberg":
        # Its rows are in Iceberg tables (`workbench.dataset.iceberg.table_files`): a reader that
        # does not know the layout must fail, never read an empty table.
        raise DatasetError(f"the {kind} table of this dataset is an Iceberg table: read it through "
                           "workbench.dataset.iceberg")
    holder = manifest.get("facts" if kind == "facts" else "tables")
    item = holder.get(name if kind == "facts" else kind) if isinstance(holder, Mapping) else None
    if item is None:
        return []
    files = item.get("files") if isinstance(item, Mapping) else None
    if not isinstance(files, list):
        raise DatasetError(f"the manifest's {kind} file list is malformed")
    return [_entry(kind, entry) for entry in files]


# --------------------------------------------------------------------------- checking files


@dataclass(frozen=True)
class _Seen:
    """What one read of a file found: its digest and size, and its Parquet footer's row count
    and columns (None and `error` when the footer cannot be read)."""

    sha256: str
    bytes: int
    rows: int | None
    columns: dict[str, str] | None
    error: str | None = None


_SEEN: dict[str, tuple[tuple[int, ...], _Seen]] = {}  # full path -> (identity, what a pass found)
_LOCK = threading.Lock()
TAIL = 1 << 20  # the bytes kept from the end of a file while it is hashed: its Parquet footer


@dataclass
class _DigestStore:
    """Where this process keeps what its passes found (`use_digest_store`), and whether it read
    files the store does not hold yet."""

    path: Path | None = None
    dirty: bool = False


_STORE = _DigestStore()


def use_digest_store(path: Path | None) -> None:
    """Keep what each pass over a local file found in `path` too (a JSON file in GATE_HOME, never
    in the dataset), so the next process only stats a file whose identity is unchanged. The
    identity includes the ctime, which a writer of the dataset folder cannot set back: a file
    changed in any way is read again. None: this process's memory only."""
    with _LOCK:
        _STORE.path, _STORE.dirty = path, False
        if path is None:
            return
        try:
            stored = json.loads(Path(path).read_text(encoding="utf-8"))
            items = stored["files"] if isinstance(stored, dict) else []
            for item in items:
                seen = _Seen(item["sha256"], item["bytes"], item["rows"], item["columns"])
                _SEEN.setdefault(item["path"], (tuple(item["identity"]), seen))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a missing or unreadable store is only a cold cache


def save_digest_store() -> None:
    """Write the store (`use_digest_store`) when this process read files it did not hold."""
    with _LOCK:
        path = _STORE.path
        if path is None or not _STORE.dirty:
            return
        files = [{"path": key, "identity": list(identity), "sha256": seen.sha256, "bytes": seen.bytes,
                  "rows": seen.rows, "columns": seen.columns}
                 for key, (identity, seen) in _SEEN.items() if seen.error is None][-STORE_FILES:]
        _STORE.dirty = False
    try:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        temporary = Path(f"{path}.{os.getpid()}.tmp")
        temporary.write_text(json.dumps({"files": files}), encoding="utf-8")
        os.replace(temporary, path)
    except OSError:
        pass  # the store is a cache: a run that cannot write it only hashes again next time


STORE_FILES = 200_000  # files the store remembers (the most recently read kept)


def digest_store_of(home: Path) -> Path:
    """Where the CLI keeps the store: `$GATE_HOME/cache/dataset-digests.json`."""
    return Path(home) / "cache" / "dataset-digests.json"


def _identity(location: Location, path: str) -> tuple[int, ...] | None:
    """What changes whenever a local file is rewritten (None: not a local file, never cached)."""
    if not isinstance(location.fs, pafs.LocalFileSystem):
        return None
    try:
        st = os.stat(location.path(path))
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):  # not a file: `_problem` asks the filesystem (missing)
        return None
    return stat_identity(st)


def stat_identity(st: os.stat_result) -> tuple[int, ...]:
    """What says a local file is still the one read before: device, inode, size, modification
    and change times (the digest cache's key; `workbench.dataset.load` keys schemas on it too)."""
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _footer(read: Callable[[], pq.FileMetaData]) -> tuple[int | None, dict[str, str] | None, str | None]:
    try:
        metadata = read()
        return metadata.num_rows, _columns(metadata.schema.to_arrow_schema()), None
    except (OSError, pa.ArrowException) as exc:
        return None, None, (str(exc).splitlines() or [type(exc).__name__])[0]


def _read_local(location: Location, path: str) -> _Seen:
    """One pass over a local file: sha256 and size, and the footer parsed from its last bytes."""
    digest, size, previous, last = hashlib.sha256(), 0, b"", b""
    with open(location.path(path), "rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
            previous, last = last, chunk
    tail = (previous + last)[-TAIL:]
    footer = int.from_bytes(tail[-8:-4], "little") if len(tail) >= 12 and tail[-4:] == b"PAR1" else -1
    if 0 <= footer <= len(tail) - 8:
        rows, columns, error = _footer(lambda: pq.read_metadata(pa.BufferReader(tail)))
    else:  # not Parquet (the reader says why) or a footer larger than the kept tail
        rows, columns, error = _footer(lambda: pq.read_metadata(location.path(path)))
    return _Seen(digest.hexdigest(), size, rows, columns, error)


def _read_remote(location: Location, path: str) -> _Seen:
    described = describe_file(location, path)

    def metadata() -> pq.FileMetaData:
        with location.fs.open_input_file(location.path(path)) as handle:
            return pq.ParquetFile(handle).metadata

    return _Seen(described["sha256"], described["bytes"], *_footer(metadata))


def _seen(location: Location, path: str, identity: tuple[int, ...] | None = None) -> _Seen:
    """The file as read now, or as read before in this process when its identity is unchanged
    (`identity`: `_identity` of the file when the caller has just taken it)."""
    identity = _identity(location, path) if identity is None else identity
    if identity is None:
        return _read_remote(location, path) if not isinstance(location.fs, pafs.LocalFileSystem) \
            else _read_local(location, path)
    key = location.path(path)
    with _LOCK:
        known = _SEEN.get(key)
    if known is not None and known[0] == identity:
        return known[1]
    seen = _read_local(location, path)
    with _LOCK:
        _SEEN[key] = (identity, seen)
        _STORE.dirty = True
    return seen


def checked_columns(path: str) -> dict[str, str] | None:
    """The columns of a local file as its check found them (`check_files`, this process or the
    digest store), when the file is unchanged since (same identity); None otherwise (not checked,
    not local, changed): the caller reads its schema itself."""
    with _LOCK:
        known = _SEEN.get(path)
    if known is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if known[0] != stat_identity(st) or known[1].error is not None:
        return None
    return known[1].columns


def _size(location: Location, path: str) -> int | None:
    info = location.fs.get_file_info(location.path(path))
    return info.size if info.type == pafs.FileType.File else None


def _plain(kind: pa.DataType) -> str:
    """A column type with Arrow's physical variants folded (a Polars writer stores `large_string`
    or `string_view` where pyarrow stores `string`; both read as the same column)."""
    if pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_large_list(kind) or pa.types.is_list_view(kind) or pa.types.is_list(kind):
        return f"list<{_plain(kind.value_type)}>"
    return str(kind)


def _columns(schema: pa.Schema) -> dict[str, str]:
    return {field.name: _plain(field.type) for field in schema}


_TABLE_COLUMNS = {name: _columns(schema) for name, schema in ALL_TABLES.items()}  # what `_problem` compares to


def _problem(location: Location, entry: ListedFile) -> str | None:
    """Why the file disagrees with its entry (presence, size, sha256, rows, schema), or None."""
    if entry.sha256 is None or entry.bytes is None:
        return ("has no digest in the manifest (a dataset written before file digests: export it again "
                "into a new location)")
    identity = _identity(location, entry.path)  # a local file's stat gives its size too
    size = identity[2] if identity is not None else _size(location, entry.path)
    if size is None:
        return "is missing"
    if size != entry.bytes:
        return f"has {size} bytes, the manifest lists {entry.bytes}"
    seen = _seen(location, entry.path, identity)
    if not hmac.compare_digest(seen.sha256, entry.sha256):
        return "does not match its sha256 in the manifest (it was changed after the export)"
    if seen.error is not None or seen.columns is None:
        return f"is not a readable Parquet file ({seen.error})"
    if entry.rows >= 0 and seen.rows != entry.rows:
        return f"holds {seen.rows} rows, the manifest lists {entry.rows}"
    expected = _TABLE_COLUMNS.get(entry.kind)
    if expected is not None and seen.columns != expected:
        return f"does not have the {entry.kind} table's schema"
    table = entry.kind.removeprefix("iceberg:")  # an Iceberg data file holds its partition columns too
    if table != entry.kind and list(seen.columns) != [*TABLES[table].names, *(f.name for f in PARTITION_FIELDS)]:
        return f"does not have the {table} table's columns"
    if entry.kind == "facts" and "decision_id" not in seen.columns:
        return "does not have the facts table's schema"
    return None


CHECK_THREADS = max(1, min(4, os.cpu_count() or 1))  # files read and hashed side by side (`check_files`)
_CHECK_WINDOW = 64  # files checked before the first bad one among them is reported


def _problem_or_error(location: Location, entry: ListedFile) -> str | None:
    try:
        return _problem(location, entry)
    except (OSError, pa.ArrowException) as exc:
        return f"cannot be read ({exc})"


def check_files(location: Location, entries: Iterable[ListedFile]) -> list[str]:
    """Refuse (DatasetError, one line naming the first bad file) unless every entry's file is
    there with its listed size, digest, row count and schema. Returns the files' full paths.

    Files are read and hashed by CHECK_THREADS threads side by side (sha256 and the file reads
    release the GIL), a window of them at a time: the first bad file in the entries' order is
    the one reported, and no window after it is read."""
    entries = list(entries)
    paths = []
    threads = min(CHECK_THREADS, len(entries))
    pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="check-files") if threads > 1 else None
    try:
        for start in range(0, len(entries), _CHECK_WINDOW):
            window = entries[start:start + _CHECK_WINDOW]
            problems = (pool.map(lambda entry: _problem_or_error(location, entry), window) if pool is not None
                        else (_problem_or_error(location, entry) for entry in window))
            for entry, problem in zip(window, problems, strict=True):
                if problem is not None:
                    raise DatasetError(f"dataset {location.uri}: {entry.path} {problem}; the dataset does not "
                                       "match its manifest")
                paths.append(location.path(entry.path))
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
    save_digest_store()
    return paths


def in_scopes(entries: Sequence[ListedFile], scopes: Sequence[str] | None) -> list[ListedFile]:
    """The entries of some scopes' partitions (every entry when `scopes` is None)."""
    if scopes is None:
        return list(entries)
    wanted = {f"scope={quote(scope, safe='')}" for scope in scopes}
    return [entry for entry in entries if wanted & set(entry.path.split("/"))]


def table_dataset(location: Location, table: str, manifest: DatasetManifest | None = None) -> ds.Dataset:
    """One table of the dataset as a `pyarrow.dataset.Dataset` (schema + partition columns).

    With a manifest, exactly the files it lists (a consistent snapshot, even while an export
    is adding files), each checked against its listed size, sha256, rows and schema first
    (`check_files`, DatasetError on a mismatch); without, every Parquet file
    under `<table>/`, unchecked."""
    if table not in ALL_TABLES:
        raise DatasetError(f"unknown table {table!r}; tables: {', '.join(ALL_TABLES)}")
    schema = pa.schema(list(ALL_TABLES[table]) + PARTITION_FIELDS)
    if manifest is not None:
        files = check_files(location, listed_files(manifest, table))
        return ds.dataset(files, schema=schema, format="parquet", filesystem=location.fs,
                          partitioning=partitioning(), partition_base_dir=location.root)
    base = location.path(table)
    if not location.exists(table):
        return ds.dataset([], schema=schema, format="parquet", filesystem=location.fs)
    return ds.dataset(base, schema=schema, format="parquet", filesystem=location.fs,
                      partitioning=partitioning())


# --------------------------------------------------------------------------- signing


def unsigned(manifest: DatasetManifest) -> DatasetManifest:
    """A copy without the seal (`dataset_hash`, `signature`): what `dataset_hash` hashes."""
    body = manifest.copy()
    body.pop("dataset_hash", None)
    body.pop("signature", None)
    return body


def dataset_hash(manifest: DatasetManifest) -> str:
    """sha256 of the canonical manifest without `dataset_hash` and `signature`."""
    return sha256_hex(unsigned(manifest))


def signature_payload(key_id: str, digest: str) -> bytes:
    return canonical_bytes({"key_id": key_id, "dataset_hash": digest})


def seal(manifest: DatasetManifest, signer: ReceiptSigner | None) -> DatasetManifest:
    """A copy with `dataset_hash` and, when a signer is given, its `signature`."""
    sealed = unsigned(manifest)
    digest = sha256_hex(sealed)
    sealed["dataset_hash"] = digest
    if signer is not None:
        signature: ManifestSignature = {"algorithm": signer.algorithm, "key_id": signer.key_id, "signed_field": "dataset_hash",
                     "value": signer.sign_payload(signature_payload(signer.key_id, digest))}
        if signer.algorithm == SIG_ED25519 and signer.public_key_fingerprint:
            signature["public_key_fingerprint"] = signer.public_key_fingerprint
        sealed["signature"] = signature
    return sealed


def signature_problem(manifest: DatasetManifest, anchors: TrustAnchors) -> str | None:
    """Why the manifest's `dataset_hash` or signature does not verify with `anchors`, or None."""
    digest = dataset_hash(manifest)
    if manifest.get("dataset_hash") != digest:
        return "its dataset_hash does not match its content (the manifest was changed after it was signed)"
    signature = manifest.get("signature")
    if not isinstance(signature, Mapping):
        return "it is not signed"
    algorithm, key_id, value = signature.get("algorithm"), signature.get("key_id"), signature.get("value")
    if algorithm not in (SIG_ED25519, SIG_HMAC_SHA256) or not isinstance(key_id, str) \
            or not isinstance(value, str) or not value.startswith(f"{algorithm}:"):
        return "its signature fields are malformed"
    payload, body = signature_payload(key_id, digest), value[len(algorithm) + 1:]
    if algorithm == SIG_HMAC_SHA256:
        secret = anchors.select_hmac(key_id)
        if secret is None:
            return f"no trusted HMAC secret for key id {key_id!r}"
        good = hmac.compare_digest(hmac.new(secret.secret, payload, "sha256").hexdigest(), body)
        return None if good else "its signature does not verify"
    key = anchors.select_ed25519(key_id, signature.get("public_key_fingerprint"))
    if key is None:
        return f"no trusted Ed25519 key for key id {key_id!r}"
    try:
        raw = b64url_decode(body)
    except (ValueError, TypeError):
        return "its signature is not base64url"
    good = len(raw) == 64 and ed25519_verify(key.public_key_raw, payload, raw)
    return None if good else "its signature does not verify"


def build_on(manifest: DatasetManifest, signer: ReceiptSigner | None, anchors: TrustAnchors | None,
             uri: str) -> None:
    """Refuse (DatasetError) to sign a new run over a committed manifest that does not verify with
    `anchors` (the gate's keys): a signed export, incremental or a rollup rebuild, reads back the
    files the manifest lists and would otherwise vouch for a forged or unsigned dataset. Nothing to
    check without a signer (the output is unsigned), without anchors (a library caller) or before
    the first run; a synthetic dataset is never signed."""
    if signer is None or anchors is None or not manifest.get("runs") or manifest.get("synthetic"):
        return
    problem = signature_problem(manifest, anchors)
    if problem is not None:
        raise DatasetError(f"{uri}: the committed manifest cannot be built on: {problem}; a signed export "
                           "vouches only for a dataset this gate signed (export into a new location)")


def iter_all(manifest: DatasetManifest) -> Iterator[ListedFile]:
    """Every file the manifest lists in the dataset location: tables, every rulebook's facts,
    rollups (an Iceberg dataset's record tables are checked by `workbench.dataset.iceberg.check_tables`;
    its hold tables are part files in the location, as in the Parquet layout)."""
    for table in ALL_TABLES if manifest.get("layout") != "iceberg" else HOLD_TABLES:
        yield from listed_files(manifest, table)
    facts = manifest.get("facts")
    for rulebook_id in sorted(facts) if isinstance(facts, Mapping) else ():
        yield from listed_files(manifest, "facts", rulebook_id)
    yield from listed_files(manifest, "rollups")
