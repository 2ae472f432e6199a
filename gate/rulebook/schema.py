"""The published Rulebook v1 JSON Schema file: its raw bytes and their hash.

The file `gate/schemas/rulebook-v1.schema.json` (package data, `gate.resources`) is served
unchanged at `{schema_url}` and `rulebook_contract.schema_hash` is the sha256 of its raw bytes
(reference facts §2), so the bytes are read once and never re-serialised. `GATE_SCHEMAS_DIR`
overrides the directory (read at import time, by `gate.resources`).
"""

from __future__ import annotations

import functools

from gate.protocol.canonical import sha256_bytes_hex
from gate.resources import schemas_path
from gate.vocabulary import RULEBOOK_SCHEMA_FILE

__all__ = ["SCHEMA_PATH", "schema_bytes", "schema_hash"]

SCHEMA_PATH = schemas_path(RULEBOOK_SCHEMA_FILE)


@functools.lru_cache(maxsize=1)
def schema_bytes() -> bytes:
    """The raw bytes of the Rulebook v1 JSON Schema file (read once)."""
    return SCHEMA_PATH.read_bytes()


@functools.lru_cache(maxsize=1)
def schema_hash() -> str:
    """Bare lowercase hex sha256 of `schema_bytes()`."""
    return sha256_bytes_hex(schema_bytes())
