"""Independent, naive reference implementations for the chain and Merkle tests.

Nothing here imports `gate.chain.links` or `gate.chain.merkle`: the rolling chain is recomputed from the
reference-facts §6 formulas with `json.dumps` (equal to canonical JSON for these all-ASCII,
lowercase-and-underscore member names, which a test pins), and the Merkle functions are the
RFC 6962 §2.1 recursive definitions written out literally over byte strings.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

VECTORS = Path(__file__).resolve().parent / "vectors"
SEED = bytes(range(7, 39))  # fixed Ed25519 seed of the golden checkpoint
OTHER_SEED = bytes(range(60, 92))


def naive_h(obj) -> str:
    """sha256 hex of json.dumps with sorted keys and no whitespace."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def hexhash(label: str) -> str:
    """A deterministic 64-hex value for test inputs."""
    return hashlib.sha256(label.encode()).hexdigest()


# ---------------------------------------------------------------- rolling chain


def naive_leaf(decision_id, record_hash, receipt_hash, entry_type="decision"):
    return naive_h({"decision_chain_version": "decision_chain_v1", "entry_type": entry_type,
                    "decision_id": decision_id, "record_hash": record_hash, "receipt_hash": receipt_hash})


def naive_root(previous_root, leaf, position):
    if position == 1:
        return leaf
    return naive_h({"strategy": "rolling_sha256_pair_v1", "previous_merkle_root": previous_root,
                    "leaf_hash": leaf, "chain_position": position})


def naive_chain(size: int, chain_id: str = "chain_test") -> list[dict]:
    """A valid chain of `size` links built only from the §6 formulas."""
    links, prev_link, prev_root = [], None, None
    for position in range(1, size + 1):
        decision_id = f"dec_{position:04d}"
        record, receipt = hexhash(f"record {position}"), hexhash(f"receipt {position}")
        leaf = naive_leaf(decision_id, record, receipt)
        root = naive_root(prev_root, leaf, position)
        link = {
            "decision_chain_version": "decision_chain_v1", "chain_id": chain_id,
            "chain_position": position, "previous_link_hash": prev_link,
            "previous_merkle_root": prev_root, "leaf_hash": leaf, "merkle_root": root,
            "merkle_strategy": "rolling_sha256_pair_v1", "entry_type": "decision",
            "decision_id": decision_id, "record_hash": record, "receipt_hash": receipt,
            "policy_id": "pricing_exception" if position % 3 else None,
            "policy_version": "2026.05.1" if position % 3 else None,
            "created_at": f"2026-05-21T00:00:{position % 60:02d}.000Z",
        }
        link["link_hash"] = naive_h(dict(link))
        links.append(link)
        prev_link, prev_root = link["link_hash"], root
    return links


# ---------------------------------------------------------------- RFC 6962 §2.1


def _h(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def naive_mth(data: list[bytes]) -> bytes:
    if len(data) == 0:
        return _h(b"")
    if len(data) == 1:
        return _h(b"\x00" + data[0])
    k = _k(len(data))
    return _h(b"\x01" + naive_mth(data[:k]) + naive_mth(data[k:]))


def naive_path(m: int, data: list[bytes]) -> list[bytes]:
    if len(data) == 1:
        return []
    k = _k(len(data))
    if m < k:
        return naive_path(m, data[:k]) + [naive_mth(data[k:])]
    return naive_path(m - k, data[k:]) + [naive_mth(data[:k])]


def naive_subproof(m: int, data: list[bytes], b: bool) -> list[bytes]:
    n = len(data)
    if m == n:
        return [] if b else [naive_mth(data)]
    k = _k(n)
    if m <= k:
        return naive_subproof(m, data[:k], b) + [naive_mth(data[k:])]
    return naive_subproof(m - k, data[k:], False) + [naive_mth(data[:k])]


def naive_proof(m: int, data: list[bytes]) -> list[bytes]:
    return naive_subproof(m, data, True) if 0 < m < len(data) else []


def leaves_hex(count: int, label: str = "leaf") -> list[str]:
    """`count` distinct 32-byte chain-like leaf hashes."""
    return [hexhash(f"{label} {i}") for i in range(count)]


def naive_store(leaves: list[str]) -> dict[tuple[int, int], str]:
    """Every complete aligned subtree (level, index) -> hex MTH, computed from scratch."""
    data = [bytes.fromhex(leaf) for leaf in leaves]
    store, level = {}, 0
    while (1 << level) <= len(data):
        width = 1 << level
        for index in range(len(data) // width):
            store[(level, index)] = naive_mth(data[index * width:(index + 1) * width]).hex()
        level += 1
    return store


def flip_hex(text: str) -> str:
    """The same text with its last hex digit changed (one flipped nibble)."""
    return text[:-1] + ("0" if text[-1] != "0" else "1")
