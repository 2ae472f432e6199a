"""The ledger's at-rest encoding of its JSON documents (issue 23: bytes per decision).

`record_json`, `request_json` (decisions), `link_json` (chain_links) and `receipt_json`
(lifecycle_receipts) are stored through `AtRestText`, a column type: every statement built on
the `gate.ledger.tables` Table objects writes the encoded form and reads back the exact text that
was written, byte for byte. No reader outside the ledger sees the encoding; hashes, seals
(`gate.chain.rowseal`) and verification cover the text, never the stored bytes.

Encoded value (bytes; SQLite stores it as a BLOB, PostgreSQL in a `bytea` column):

    0xFF  dictionary id (1 byte)  zstd frame (content size and content checksum in its header/trailer)

0xFF never occurs in UTF-8 text, so the first byte tells an encoded value from plain text:

* a `str` value (SQLite rows written before this encoding, or with `GATE_LEDGER_AT_REST=plain`)
  and a bytes value not starting with 0xFF (PostgreSQL rows converted by migration 0011, plain
  writes) read as their UTF-8 text, strictly;
* dictionary id 0 is zstd without a dictionary; id 1 is `dictionaries/ledger-1.zdict` (trained
  once by `benchmarks/train_ledger_dictionary.py` on the sample requests' records, shipped with
  the code, its sha256 pinned below). A dictionary is never changed: a new one gets the next
  id, and the old files stay, so every row ever written names the dictionary it needs. An unknown
  id, a file whose hash differs, a frame that fails its checksum or does not decompress, a frame
  that declares (or yields) more than `MAX_TEXT_BYTES`, trailing bytes, or text that is not
  UTF-8 all raise `StoredValueUnreadable`: the ledger answers `LedgerUnavailable` (fail closed,
  a 503 naming no value), never a guess.

Writes: text longer than `MIN_PACK_BYTES` and at most `MAX_TEXT_BYTES` (UTF-8) is compressed at
level 3 with the newest dictionary; the encoded value is kept only when it is shorter than the
text. Everything else is stored plain, so any text the gate accepted stays storable and readable.
`GATE_LEDGER_AT_REST=plain` (read once, at import) writes plain text: the format before issue 23,
for measuring the difference (`benchmarks/bench_storage.py`) or an operator who needs it.
"""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path
from typing import Any, TypedDict

import zstandard
from sqlalchemy import Text
from sqlalchemy.dialects import postgresql
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine

from gate.errors import Signal

MARK = 0xFF
CURRENT_DICTIONARY = 1
DICTIONARY_DIR = Path(__file__).resolve().parent / "dictionaries"
# id -> (file name, sha256 of its bytes). Append only: a shipped dictionary never changes.
DICTIONARIES: dict[int, tuple[str, str]] = {
    1: ("ledger-1.zdict", "e6c507886a87438498d30ef583cdcdca0d411e6768c675e6a2fc8e592f3333ce"),
}
LEVEL = 3
MIN_PACK_BYTES = 64
MAX_TEXT_BYTES = 16 * 1024 * 1024  # a decode never yields more (decompression bombs stop here)

AT_REST_ENV = "GATE_LEDGER_AT_REST"
PLAIN, ZSTD = "plain", "zstd"


def _mode(value: str | None) -> str:
    mode = (value or ZSTD).strip().lower()
    if mode not in (PLAIN, ZSTD):
        raise ValueError(f"{AT_REST_ENV} must be {PLAIN} or {ZSTD}, not {value!r}")
    return mode


MODE = _mode(os.environ.get(AT_REST_ENV))


class StoredValueUnreadable(Signal, ValueError):
    """A stored value is neither plain UTF-8 text nor a well-formed encoded value (the ledger's
    read or write answers it as LedgerUnavailable)."""


_loaded: dict[int, zstandard.ZstdCompressionDict] = {}
_loading = threading.Lock()


def _dictionary(dictionary_id: int) -> zstandard.ZstdCompressionDict | None:
    """The shipped dictionary `dictionary_id` (None for 0), checked against its pinned hash and
    prepared for both directions once, under a lock: the prepared object is then shared, read
    only, by every thread's compressor and decompressor."""
    if dictionary_id == 0:
        return None
    found = _loaded.get(dictionary_id)
    if found is not None:
        return found
    with _loading:
        found = _loaded.get(dictionary_id)
        if found is None:
            found = _load(dictionary_id)
            _loaded[dictionary_id] = found
    return found


def _load(dictionary_id: int) -> zstandard.ZstdCompressionDict:
    known = DICTIONARIES.get(dictionary_id)
    if known is None:
        raise StoredValueUnreadable(f"unknown at-rest dictionary id {dictionary_id}")
    name, digest = known
    try:
        data = (DICTIONARY_DIR / name).read_bytes()
    except OSError as exc:
        raise StoredValueUnreadable(f"at-rest dictionary {dictionary_id} is missing") from exc
    if hashlib.sha256(data).hexdigest() != digest:
        raise StoredValueUnreadable(f"at-rest dictionary {dictionary_id} does not match its pinned hash")
    dictionary = zstandard.ZstdCompressionDict(data, dict_type=zstandard.DICT_TYPE_FULLDICT)
    dictionary.precompute_compress(level=LEVEL)
    probe = zstandard.ZstdCompressor(dict_data=dictionary).compress(b"{}")
    zstandard.ZstdDecompressor(dict_data=dictionary).decompress(probe)  # builds its decompression tables now
    return dictionary


def clear_dictionaries() -> None:
    """Forget the loaded dictionaries and this thread's (de)compressors (tests)."""
    with _loading:
        _loaded.clear()
    _local.__dict__.clear()


class _FrameOptions(TypedDict):
    """What every compressed value's frame carries: a checksum and its size, never the dictionary id."""

    write_checksum: bool
    write_content_size: bool
    write_dict_id: bool


# Compressor and decompressor objects are not thread-safe: one per thread and dictionary.
_local = threading.local()


def _compressor(dictionary_id: int) -> zstandard.ZstdCompressor:
    cache: dict[int, zstandard.ZstdCompressor] = _local.__dict__.setdefault("compressors", {})
    compressor = cache.get(dictionary_id)
    if compressor is None:
        dictionary = _dictionary(dictionary_id)
        options: _FrameOptions = {"write_checksum": True, "write_content_size": True, "write_dict_id": False}
        compressor = (zstandard.ZstdCompressor(dict_data=dictionary, **options) if dictionary is not None
                      else zstandard.ZstdCompressor(level=LEVEL, **options))
        cache[dictionary_id] = compressor
    return compressor


def _decompressor(dictionary_id: int) -> zstandard.ZstdDecompressor:
    cache: dict[int, zstandard.ZstdDecompressor] = _local.__dict__.setdefault("decompressors", {})
    decompressor = cache.get(dictionary_id)
    if decompressor is None:
        dictionary = _dictionary(dictionary_id)
        decompressor = (zstandard.ZstdDecompressor(dict_data=dictionary) if dictionary is not None
                        else zstandard.ZstdDecompressor())
        cache[dictionary_id] = decompressor
    return decompressor


def pack(text: str, *, dictionary_id: int = CURRENT_DICTIONARY) -> bytes:
    """The encoded value of `text` (always encoded; `encode` decides whether it is worth it)."""
    frame = _compressor(dictionary_id).compress(text.encode("utf-8"))
    return bytes((MARK, dictionary_id)) + frame


def encode(text: str, mode: str | None = None) -> str | bytes:
    """What to store for `text`: the encoded value when it is shorter, else the text itself."""
    if (mode or MODE) == PLAIN or len(text) < MIN_PACK_BYTES:
        return text
    data = text.encode("utf-8")
    if len(data) > MAX_TEXT_BYTES:
        return text
    packed = pack(text)
    return packed if len(packed) < len(data) else text


def decode(value: str | bytes | bytearray | memoryview) -> str:
    """The text of a stored value (see the module docstring); raises StoredValueUnreadable."""
    if isinstance(value, str):
        return value
    data = bytes(value)
    if not data or data[0] != MARK:
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise StoredValueUnreadable("a stored value is neither UTF-8 text nor an encoded value") from exc
    if len(data) < 2:
        raise StoredValueUnreadable("an encoded value is truncated")
    frame = data[2:]
    try:
        declared = zstandard.frame_content_size(frame)
    except zstandard.ZstdError as exc:
        raise StoredValueUnreadable("an encoded value's frame header is corrupt") from exc
    if declared < 0 or declared > MAX_TEXT_BYTES:  # unknown (-1) or above the bound: never allocated
        raise StoredValueUnreadable("an encoded value declares no size or more than the bound")
    try:
        decompressor = _decompressor(data[1])
        text_bytes = decompressor.decompress(frame, max_output_size=MAX_TEXT_BYTES,
                                             read_across_frames=False, allow_extra_data=False)
    except zstandard.ZstdError as exc:
        raise StoredValueUnreadable("an encoded value does not decompress (corrupt or another dictionary)") from exc
    if len(text_bytes) != declared:
        raise StoredValueUnreadable("an encoded value's size does not match its header")
    try:
        return text_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StoredValueUnreadable("an encoded value does not hold UTF-8 text") from exc


class AtRestText(TypeDecorator[str]):
    """A JSON document column: text to the code, the at-rest encoding in the database.

    SQLite keeps the declared TEXT column (a BLOB value is stored as a BLOB); PostgreSQL stores
    `bytea`, so plain text there is its UTF-8 bytes."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        if dialect.name == "postgresql":
            return dialect.type_descriptor(postgresql.BYTEA())
        return dialect.type_descriptor(Text())

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        if value is None:
            return None
        if not isinstance(value, str):
            raise TypeError(f"an at-rest JSON column takes text, not {type(value).__name__}")
        stored = encode(value)
        if dialect.name == "postgresql" and isinstance(stored, str):
            return stored.encode("utf-8")
        return stored

    def process_result_value(self, value: Any, dialect: Dialect) -> str | None:
        return None if value is None else decode(value)
