"""Witnessed checkpoints: an append-only JSONL log of signed chain checkpoints kept outside the
ledger, in the spirit of transparency-log witnesses.

The audit chain, its Merkle nodes, its head and the checkpoints the ledger stores can all be
rewritten together by anyone who can write the database: deleting the newest decisions and
rebuilding nodes, peaks and head needs no key, and every check recomputed from storage still
holds. A checkpoint (`gate.chain.merkle`, signed with the gate's key) copied out of the ledger when it
was published cannot be rewritten that way. Whoever holds one can later demand that the chain
they are shown is at least that long and extends it (an RFC 6962 / RFC 9162 consistency proof
from the held size to the shown size).

The log is one checkpoint per line (canonical JSON), appended only: `append_checkpoint` refuses
a checkpoint that is not consistent with the newest one held for its chain (shorter, the same
size with another root, or longer without a consistency proof that verifies) and takes an
exclusive lock on the file while it reads (backwards, up to that newest checkpoint) and
appends, so concurrent writers on one host serialise. `HeldCheckpoints` keeps the newest
checkpoint per chain of a log current by parsing only what was appended since its last look. `extension_failures` is the one comparison every reader uses (`gate checkpoint
save`, `gate verify --checkpoints`, the chain view against the server's own log).

Signatures are not checked here: the caller verifies a checkpoint with a key it trusts
(`gate.chain.merkle.verify_checkpoint`) before it appends or relies on one.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from gate.chain.merkle import verify_consistency
from gate.errors import CodedError
from gate.protocol.canonical import CanonicalJSONError, canonical_text, parse_strict
from gate.strict_json import JsonValue

__all__ = [
    "CHECKPOINT_LOG_CHECKS",
    "CheckpointLogError",
    "HeldCheckpoints",
    "append_checkpoint",
    "extension_failures",
    "latest_checkpoint",
    "read_checkpoint_log",
]

# Named failures of a chain (size, root, proof) against the newest held checkpoint.
CHECKPOINT_LOG_CHECKS = ("checkpoint_log.size", "checkpoint_log.consistency")

MAX_LOG_LINE = 64 * 1024  # a checkpoint is under 1 KiB; a longer line is not one
_HEX64 = re.compile(r"[0-9a-f]{64}")


class CheckpointLogError(CodedError):
    """The log cannot be read, or refuses a checkpoint (details: `failed_checks`)."""

    CODE = "CHECKPOINT_LOG_REFUSED"


def _is_checkpoint(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("chain_id"), str)
            and type(value.get("tree_size")) is int and value["tree_size"] >= 1
            and isinstance(value.get("root_hash"), str) and bool(_HEX64.fullmatch(value["root_hash"])))


def _parse_lines(text: str, where: str) -> list[dict[str, JsonValue]]:
    entries: list[dict[str, JsonValue]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                entries.append(_entry(line.encode("utf-8"), where))
            except CheckpointLogError:
                raise CheckpointLogError(f"line {number} of the checkpoint log {where} is not a checkpoint") from None
    return entries


def read_checkpoint_log(path: str | Path) -> list[dict[str, JsonValue]]:
    """Every checkpoint in the log, in append order ([] when the file does not exist yet).
    CheckpointLogError when it cannot be read or a line is not a checkpoint."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    except (OSError, UnicodeDecodeError) as exc:
        raise CheckpointLogError(f"cannot read the checkpoint log {path}: {exc}") from exc
    return _parse_lines(text, str(path))


def latest_checkpoint(entries: list[dict[str, JsonValue]], chain_id: str) -> dict[str, JsonValue] | None:
    """The newest (last appended) checkpoint of `chain_id`, or None."""
    entry: dict[str, JsonValue]  # (mypy reads reversed() of this list as Any)
    for entry in reversed(entries):
        if entry.get("chain_id") == chain_id:
            return entry
    return None


_BLOCK = 64 * 1024


def _entry(raw: bytes, where: str) -> dict[str, JsonValue]:
    """One log line as a checkpoint; CheckpointLogError otherwise."""
    try:
        entry = parse_strict(raw) if len(raw) <= MAX_LOG_LINE else None
    except CanonicalJSONError:
        entry = None
    if not isinstance(entry, dict) or not _is_checkpoint(entry):
        raise CheckpointLogError(f"a line of the checkpoint log {where} is not a checkpoint")
    return entry


def _latest_from_end(handle: BinaryIO, chain_id: str, where: str) -> dict[str, JsonValue] | None:
    """The newest checkpoint of `chain_id`, reading the open log backwards block by block: an
    append reads the lines after the chain's newest checkpoint, not the whole log. Lines before
    that one are not read (nor validated)."""
    position = handle.seek(0, os.SEEK_END)
    carry = b""
    while position > 0:
        step = min(_BLOCK, position)
        position -= step
        handle.seek(position)
        lines = (handle.read(step) + carry).split(b"\n")
        carry = lines.pop(0) if position > 0 else b""  # the first line may continue in the block before
        if len(carry) > MAX_LOG_LINE:
            raise CheckpointLogError(f"a line of the checkpoint log {where} is not a checkpoint")
        for raw in reversed(lines):
            if raw.strip():
                entry = _entry(raw, where)
                if entry["chain_id"] == chain_id:
                    return entry
    return None


class HeldCheckpoints:
    """The newest checkpoint of each chain in one log file, kept current by parsing only the
    lines appended since the last look (a rewritten or replaced file is read again whole).
    Thread-safe; one per process (the gate's own log)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._seen: tuple[int, int, int] | None = None  # inode, size, mtime of what was parsed
        self._offset = 0
        self._latest: dict[str, dict[str, JsonValue]] = {}

    def latest(self, chain_id: str) -> dict[str, JsonValue] | None:
        """The newest checkpoint of `chain_id` (None when none is held); CheckpointLogError when
        the log cannot be read or an appended line is not a checkpoint."""
        with self._lock:
            try:
                stat = self.path.stat()
            except FileNotFoundError:
                self._seen, self._offset, self._latest = None, 0, {}
                return None
            except OSError as exc:
                raise CheckpointLogError(f"cannot read the checkpoint log {self.path}: {exc.strerror}") from exc
            seen = self._seen
            if seen is None or seen[0] != stat.st_ino or stat.st_size < self._offset or (
                    stat.st_size == seen[1] and stat.st_mtime_ns != seen[2]):
                self._offset, self._latest = 0, {}
            if stat.st_size > self._offset:
                self._read_from_offset(stat.st_size)
            self._seen = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
            return self._latest.get(chain_id)

    def _read_from_offset(self, size: int) -> None:
        try:
            with self.path.open("rb") as handle:
                handle.seek(self._offset)
                data = handle.read(size - self._offset)
        except OSError as exc:
            raise CheckpointLogError(f"cannot read the checkpoint log {self.path}: {exc.strerror}") from exc
        complete = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
        for raw in complete.split(b"\n"):
            if raw.strip():
                entry = _entry(raw, str(self.path))
                self._latest[str(entry["chain_id"])] = entry  # text: `_entry` checked it
        self._offset += len(complete)


def extension_failures(held: dict[str, JsonValue] | None, size: Any, root: Any, proof: Any) -> list[str]:
    """Named failures of a chain of `size` leaves with RFC 6962 `root` against the `held`
    checkpoint: `checkpoint_log.size` when it is shorter than the held tree;
    `checkpoint_log.consistency` when it has the held size but another root, or is longer and
    `proof` (the consistency proof from the held size to `size`, None when not available) does
    not show that it extends the held tree. Empty when nothing is held. Never raises."""
    if held is None:
        return []
    held_size, held_root = held.get("tree_size"), held.get("root_hash")
    if type(size) is not int or type(held_size) is not int or size < held_size:
        return ["checkpoint_log.size"]
    if not isinstance(held_root, str) or not isinstance(root, str):
        return ["checkpoint_log.consistency"]
    if not isinstance(proof, list):
        proof = None if size > held_size else []
    if proof is None or not verify_consistency(held_size, size, held_root, root, proof):
        return ["checkpoint_log.consistency"]
    return []


def append_checkpoint(path: str | Path, checkpoint: Mapping[str, Any], proof: list[str] | None, *,
                      skip_older: bool = False) -> bool:
    """Append a (verified) checkpoint to the log unless it is already held. True when appended.

    Under an exclusive lock: the newest held checkpoint of the chain is read and
    `extension_failures` must be empty, else CheckpointLogError (with `failed_checks`) and
    nothing is written. `skip_older`: a checkpoint older than the held one is not appended and
    not an error (the gate's own log, where a concurrent worker may have logged a newer one;
    consistency is checked when the chain is read).
    """
    if not _is_checkpoint(checkpoint):
        raise CheckpointLogError("not a checkpoint: chain_id, tree_size >= 1 and a sha256 root_hash are required")
    path = Path(path)
    line = canonical_text(checkpoint) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError as exc:
        raise CheckpointLogError(f"cannot open the checkpoint log {path}: {exc.strerror}") from exc
    import fcntl  # POSIX only; imported here so that reading a log (gate verify) works everywhere

    with os.fdopen(descriptor, "rb+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        held = _latest_from_end(handle, checkpoint["chain_id"], str(path))
        size = checkpoint["tree_size"]
        if held is not None and size == held["tree_size"] and checkpoint["root_hash"] == held["root_hash"]:
            return False
        if skip_older and held is not None and size < held["tree_size"]:
            return False
        failures = extension_failures(held, size, checkpoint["root_hash"], proof)
        if failures:
            raise CheckpointLogError(
                f"refused: the checkpoint of size {size} is not consistent with the held checkpoint of size "
                f"{held['tree_size'] if held else None} ({', '.join(failures)})", failed_checks=failures)
        handle.write(line.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    return True
