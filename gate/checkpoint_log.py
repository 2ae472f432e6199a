"""Witnessed checkpoints: an append-only JSONL log of signed chain checkpoints kept outside the
ledger, in the spirit of transparency-log witnesses.

The audit chain, its Merkle nodes, its head and the checkpoints the ledger stores can all be
rewritten together by anyone who can write the database: deleting the newest decisions and
rebuilding nodes, peaks and head needs no key, and every check recomputed from storage still
holds. A checkpoint (`gate.merkle`, signed with the gate's key) copied out of the ledger when it
was published cannot be rewritten that way. Whoever holds one can later demand that the chain
they are shown is at least that long and extends it (an RFC 6962 / RFC 9162 consistency proof
from the held size to the shown size).

The log is one checkpoint per line (canonical JSON), appended only: `append_checkpoint` refuses
a checkpoint that is not consistent with the newest one held for its chain (shorter, the same
size with another root, or longer without a consistency proof that verifies) and takes an
exclusive lock on the file while it reads and appends, so concurrent writers on one host
serialise. `extension_failures` is the one comparison every reader uses (`gate checkpoint
save`, `gate verify --checkpoints`, the chain view against the server's own log).

Signatures are not checked here: the caller verifies a checkpoint with a key it trusts
(`gate.merkle.verify_checkpoint`) before it appends or relies on one.
"""

from __future__ import annotations

import fcntl
import os
import re
from pathlib import Path
from typing import Any

from gate.canonical import CanonicalJSONError, canonical_text, parse_strict
from gate.errors import GateError
from gate.merkle import verify_consistency

__all__ = [
    "CHECKPOINT_LOG_CHECKS",
    "CheckpointLogError",
    "append_checkpoint",
    "extension_failures",
    "latest_checkpoint",
    "read_checkpoint_log",
]

# Named failures of a chain (size, root, proof) against the newest held checkpoint.
CHECKPOINT_LOG_CHECKS = ("checkpoint_log.size", "checkpoint_log.consistency")

MAX_LOG_LINE = 64 * 1024  # a checkpoint is under 1 KiB; a longer line is not one
_HEX64 = re.compile(r"[0-9a-f]{64}")


class CheckpointLogError(GateError):
    """The log cannot be read, or refuses a checkpoint (details: `failed_checks`)."""

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__("CHECKPOINT_LOG_REFUSED", message, **details)


def _is_checkpoint(value: Any) -> bool:
    return (isinstance(value, dict) and isinstance(value.get("chain_id"), str)
            and type(value.get("tree_size")) is int and value["tree_size"] >= 1
            and isinstance(value.get("root_hash"), str) and bool(_HEX64.fullmatch(value["root_hash"])))


def _parse_lines(text: str, where: str) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            entry = parse_strict(line.encode("utf-8")) if len(line) <= MAX_LOG_LINE else None
        except CanonicalJSONError:
            entry = None
        if not isinstance(entry, dict) or not _is_checkpoint(entry):
            raise CheckpointLogError(f"line {number} of the checkpoint log {where} is not a checkpoint")
        entries.append(entry)
    return entries


def read_checkpoint_log(path: str | Path) -> list[dict[str, Any]]:
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


def latest_checkpoint(entries: list[dict[str, Any]], chain_id: str) -> dict[str, Any] | None:
    """The newest (last appended) checkpoint of `chain_id`, or None."""
    for entry in reversed(entries):
        if entry.get("chain_id") == chain_id:
            return entry
    return None


def extension_failures(held: dict[str, Any] | None, size: Any, root: Any, proof: Any) -> list[str]:
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


def append_checkpoint(path: str | Path, checkpoint: dict[str, Any], proof: list[str] | None, *,
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
    with os.fdopen(descriptor, "r+", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        held = latest_checkpoint(_parse_lines(handle.read(), str(path)), checkpoint["chain_id"])
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
        handle.write(line)
        handle.flush()
        os.fsync(handle.fileno())
    return True
