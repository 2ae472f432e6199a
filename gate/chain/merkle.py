"""RFC 6962 / RFC 9162 Merkle trees over the audit chain's leaf hashes, and signed checkpoints.

The rolling root of `gate.chain.links` proves nothing about one entry without every entry before it.
This module builds the standard append-only Merkle tree (Certificate Transparency) over the
*same* leaves, so a verifier can check one decision's inclusion, or that a later chain extends
an earlier one, with O(log n) hashes.

Hashing (RFC 6962 §2.1, SHA-256):

* leaf data = the raw bytes of the chain `leaf_hash` (32 bytes; any byte string is accepted);
* leaf node = SHA-256(0x00 || leaf data); interior node = SHA-256(0x01 || left || right);
* MTH of n > 1 leaves splits at k, the largest power of two < n: the left subtree holds the
  first k leaves. MTH of no leaves is SHA-256 of the empty string.

Leaf index i is chain position i + 1; tree size n is the chain size. Everything crosses the API
as lowercase hex: leaf data of even length, node hashes and roots of exactly 64 characters.
Producers raise ValueError on malformed input (LookupError for a node missing from a store);
verifiers return False and never raise.

Node store (for a ledger). Only hashes of *complete aligned subtrees* are stored: node
``(level, index)`` is the MTH of leaves ``[index * 2**level, (index + 1) * 2**level)``; level 0
holds leaf nodes. Such a node never changes once complete, so rows are insert-only. Appending
leaf number s completes the level-0 node s and one parent per trailing one-bit of s
(`subtrees_completed_by_append`, reading only the left siblings `nodes_needed_for_append`).
Any root or proof of any tree size is a fold of O(log n) stored nodes (`nodes_needed_for_*`
list them so a caller can fetch them in one query; `*_from_nodes` take a
``get_node(level, index) -> hex`` callable).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypedDict

from gate.keys.signing import (
    Ed25519Key,
    KeyMaterialError,
    canonical_public_key_pem,
    iso_timestamp,
    public_key_fingerprint,
    raw_public_key_from_pem,
)
from gate.protocol.attestation import sign_hash_text, verify_hash_text_signature
from gate.protocol.canonical import CanonicalJSONError, sha256_hex
from gate.vocabulary import (
    CHAIN_CHECKPOINT_VERSION,
    CHAIN_TREE_ALGORITHM,
    HASH_ALGORITHM,
    SIG_ED25519,
)

__all__ = [
    "CHECKPOINT_BODY_MEMBERS",
    "EMPTY_ROOT",
    "CheckpointCheck",
    "CompactRange",
    "GetNode",
    "Node",
    "NodeRef",
    "checkpoint_body",
    "checkpoint_hash",
    "complete_subtrees",
    "consistency_proof",
    "consistency_proof_from_nodes",
    "inclusion_proof",
    "inclusion_proof_from_nodes",
    "interior_node",
    "leaf_node",
    "mth",
    "nodes_needed_for_append",
    "nodes_needed_for_consistency",
    "nodes_needed_for_inclusion",
    "nodes_needed_for_root",
    "root_from_nodes",
    "sign_checkpoint",
    "subtrees_completed_by_append",
    "verify_checkpoint",
    "verify_consistency",
    "verify_inclusion",
]

EMPTY_ROOT = hashlib.sha256(b"").hexdigest()

NodeRef = tuple[int, int]  # (level, index) of a complete aligned subtree
GetNode = Callable[[int, int], str]


class Node(NamedTuple):
    """A complete aligned subtree: MTH of leaves [index * 2**level, (index + 1) * 2**level)."""

    level: int
    index: int  # type: ignore[assignment]  # the field shadows tuple.index by design (level, index, hash)
    hash: str


# --------------------------------------------------------------------------- hashing steps

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_HEX_DATA = re.compile(r"(?:[0-9a-f]{2})*")


def _digest(text: Any) -> bytes:
    """The 32 bytes of a 64-character lowercase hex hash; ValueError otherwise."""
    if not isinstance(text, str) or not _HEX_DIGEST.fullmatch(text):
        raise ValueError("expected a 64-character lowercase hex sha256")
    return bytes.fromhex(text)


def _leaf_data(text: Any) -> bytes:
    """Leaf data from even-length lowercase hex (a chain leaf_hash is 64 characters)."""
    if not isinstance(text, str) or not _HEX_DATA.fullmatch(text):
        raise ValueError("leaf data must be even-length lowercase hex")
    return bytes.fromhex(text)


def _hash_leaf(data: bytes) -> bytes:
    """SHA-256(0x00 || data): the 0x00 prefix keeps leaves apart from interior nodes."""
    return hashlib.sha256(b"\x00" + data).digest()


def _hash_children(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right)."""
    return hashlib.sha256(b"\x01" + left + right).digest()


def leaf_node(leaf_hash: str) -> str:
    """Hex leaf node hash of one chain leaf hash (the level-0 stored node)."""
    return _hash_leaf(_leaf_data(leaf_hash)).hex()


def interior_node(left: str, right: str) -> str:
    """Hex interior node hash of two child node hashes."""
    return _hash_children(_digest(left), _digest(right)).hex()


def _split(size: int) -> int:
    """k, the largest power of two strictly less than `size` (size >= 2)."""
    return 1 << ((size - 1).bit_length() - 1)


def _is_size(value: Any) -> bool:
    return type(value) is int and value >= 0


# --------------------------------------------------------------------------- over all leaves


def _mth(nodes: list[bytes]) -> bytes:
    """MTH over leaf nodes, bottom-up: pair neighbours, promote an unpaired last node.

    This equals the RFC's recursive split at the largest power of two < n: the first k nodes
    form a perfect subtree that pairs up completely before the remainder's root is joined.
    """
    if not nodes:
        return bytes.fromhex(EMPTY_ROOT)
    level = nodes
    while len(level) > 1:
        paired = [_hash_children(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


def _leaf_nodes(leaves: Iterable[str]) -> list[bytes]:
    return [_hash_leaf(_leaf_data(leaf)) for leaf in leaves]


def mth(leaves: list[str]) -> str:
    """Hex Merkle Tree Hash of the leaves (chain leaf hashes in position order)."""
    return _mth(_leaf_nodes(leaves)).hex()


def _path(index: int, nodes: list[bytes]) -> list[bytes]:
    """RFC 6962 §2.1.1 PATH(m, D[n]), deepest sibling first."""
    if len(nodes) <= 1:
        return []
    k = _split(len(nodes))
    if index < k:
        return _path(index, nodes[:k]) + [_mth(nodes[k:])]
    return _path(index - k, nodes[k:]) + [_mth(nodes[:k])]


def _subproof(m: int, nodes: list[bytes], complete: bool) -> list[bytes]:
    """RFC 6962 §2.1.2 SUBPROOF(m, D[n], b)."""
    if m == len(nodes):
        return [] if complete else [_mth(nodes)]
    k = _split(len(nodes))
    if m <= k:
        return _subproof(m, nodes[:k], complete) + [_mth(nodes[k:])]
    return _subproof(m - k, nodes[k:], False) + [_mth(nodes[:k])]


def inclusion_proof(index: int, leaves: list[str]) -> list[str]:
    """Audit path of leaf `index` in the tree of all `leaves`; ValueError when out of range."""
    if type(index) is not int or not 0 <= index < len(leaves):
        raise ValueError("leaf index out of range")
    return [node.hex() for node in _path(index, _leaf_nodes(leaves))]


def consistency_proof(m: int, n: int, leaves: list[str]) -> list[str]:
    """Proof that the tree of the first `m` leaves is a prefix of the tree of the first `n`.

    Empty when m is 0 or m == n. ValueError unless 0 <= m <= n <= len(leaves).
    """
    if not (_is_size(m) and _is_size(n) and m <= n <= len(leaves)):
        raise ValueError("need 0 <= m <= n <= number of leaves")
    if m == 0:
        return []
    return [node.hex() for node in _subproof(m, _leaf_nodes(leaves[:n]), True)]


# --------------------------------------------------------------------------- verification


def _shift_while_even(fn: int, sn: int) -> tuple[int, int]:
    """Right-shift both until LSB(fn) is set or fn is 0 (RFC 9162 §2.1.3.2 step 4b)."""
    while fn and not fn & 1:
        fn, sn = fn >> 1, sn >> 1
    return fn, sn


def _root_from_path(index: int, tree_size: int, node: bytes, path: list[bytes]) -> bytes | None:
    """RFC 9162 §2.1.3.2: fold the audit path; None when its length does not fit the tree."""
    fn, sn, r = index, tree_size - 1, node
    for p in path:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            r = _hash_children(p, r)
            fn, sn = _shift_while_even(fn, sn)
        else:
            r = _hash_children(r, p)
        fn, sn = fn >> 1, sn >> 1
    return r if sn == 0 else None


def verify_inclusion(index: int, tree_size: int, leaf_hash_hex: str, proof: list[str], root: str) -> bool:
    """True when `proof` shows chain leaf `leaf_hash_hex` at `index` of the tree with `root`.

    `leaf_hash_hex` is the leaf *data* (the chain's leaf_hash); its leaf node is computed here.
    """
    try:
        data, path, expected = _leaf_data(leaf_hash_hex), [_digest(p) for p in proof], _digest(root)
    except (TypeError, ValueError):
        return False
    if not (_is_size(index) and _is_size(tree_size) and index < tree_size):
        return False
    return _root_from_path(index, tree_size, _hash_leaf(data), path) == expected


def _fold_consistency(m: int, n: int, path: list[bytes]) -> tuple[bytes, bytes] | None:
    """RFC 9162 §2.1.4.2 steps 3-7: (first root, second root), or None when the path misfits."""
    fn, sn = m - 1, n - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            return None
        if fn & 1 or fn == sn:
            fr, sr = _hash_children(c, fr), _hash_children(c, sr)
            fn, sn = _shift_while_even(fn, sn)
        else:
            sr = _hash_children(sr, c)
        fn, sn = fn >> 1, sn >> 1
    return (fr, sr) if sn == 0 else None


def _trivial_consistency(m: int, n: int, first: bytes, second: bytes, path: list[bytes]) -> bool:
    """Sizes 0 and m == n need no proof: the proof must be empty and the roots must agree."""
    if path:
        return False
    return first == second if m == n else first == bytes.fromhex(EMPTY_ROOT)


def verify_consistency(m: int, n: int, root_m: str, root_n: str, proof: list[str]) -> bool:
    """True when `proof` shows the size-`m` tree with `root_m` is a prefix of the size-`n` one."""
    try:
        first, second, path = _digest(root_m), _digest(root_n), [_digest(c) for c in proof]
    except (TypeError, ValueError):
        return False
    if not (_is_size(m) and _is_size(n) and m <= n):
        return False
    if m == 0 or m == n:
        return _trivial_consistency(m, n, first, second, path)
    if not path:
        return False
    if m & (m - 1) == 0:  # m is a power of two: the old root is itself a node of the new tree
        path = [first] + path
    roots = _fold_consistency(m, n, path)
    return roots == (first, second)


# --------------------------------------------------------------------------- node arithmetic


def _range_refs(lo: int, hi: int) -> list[NodeRef]:
    """The complete aligned subtrees covering leaves [lo, hi), left to right, largest first.

    Every range the RFC recursion produces starts at a multiple of its largest part, so the
    binary decomposition of hi - lo laid out from lo is aligned.
    """
    refs: list[NodeRef] = []
    position, size = lo, hi - lo
    for level in range(size.bit_length() - 1, -1, -1):
        if size >> level & 1:
            refs.append((level, position >> level))
            position += 1 << level
    return refs


def _inclusion_ranges(index: int, tree_size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose MTHs form the audit path of `index`, deepest first (as PATH)."""
    ranges, lo, hi = [], 0, tree_size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo += k
    return ranges[::-1]


def _consistency_ranges(m: int, n: int) -> list[tuple[int, int]]:
    """The leaf ranges whose MTHs form the consistency proof (m, n), in SUBPROOF order."""
    if m == 0 or m == n:
        return []
    ranges, lo, hi, complete = [], 0, n, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            ranges.append((lo + k, hi))
            hi = lo + k
        else:
            ranges.append((lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        ranges.append((lo, hi))
    return ranges[::-1]


def _flatten(ranges: list[tuple[int, int]]) -> list[NodeRef]:
    return [ref for lo, hi in ranges for ref in _range_refs(lo, hi)]


def _require_sizes(*conditions: bool) -> None:
    if not all(conditions):
        raise ValueError("tree sizes or leaf index out of range")


def nodes_needed_for_root(tree_size: int) -> list[NodeRef]:
    """Stored nodes whose fold is the root of a tree of `tree_size` leaves (its peaks)."""
    _require_sizes(_is_size(tree_size))
    return _range_refs(0, tree_size)


def nodes_needed_for_inclusion(index: int, tree_size: int) -> list[NodeRef]:
    """Stored nodes that `inclusion_proof_from_nodes(index, tree_size, …)` reads (<= 2⌈log2 n⌉)."""
    _require_sizes(_is_size(index), _is_size(tree_size), index < tree_size)
    return _flatten(_inclusion_ranges(index, tree_size))


def nodes_needed_for_consistency(m: int, n: int) -> list[NodeRef]:
    """Stored nodes that `consistency_proof_from_nodes(m, n, …)` reads (<= 2⌈log2 n⌉)."""
    _require_sizes(_is_size(m), _is_size(n), m <= n)
    return _flatten(_consistency_ranges(m, n))


def nodes_needed_for_append(existing_size: int) -> list[NodeRef]:
    """Left siblings merged when leaf number `existing_size` is appended, lowest level first.

    One per trailing one-bit of `existing_size` (amortised one read per append).
    """
    _require_sizes(_is_size(existing_size))
    refs, level = [], 0
    while existing_size >> level & 1:
        refs.append((level, (existing_size >> level) - 1))
        level += 1
    return refs


# --------------------------------------------------------------------------- from stored nodes


def _stored(get_node: GetNode, ref: NodeRef) -> bytes:
    """One stored node; LookupError when the store has no valid hash for it."""
    value = get_node(*ref)
    if not isinstance(value, str) or not _HEX_DIGEST.fullmatch(value):
        raise LookupError(f"node store has no valid hash for (level, index) {ref}")
    return bytes.fromhex(value)


def _range_hash(lo: int, hi: int, get_node: GetNode) -> bytes:
    """MTH of leaves [lo, hi) from its aligned subtrees, folded right to left."""
    hashes = [_stored(get_node, ref) for ref in _range_refs(lo, hi)]
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = _hash_children(left, result)
    return result


def root_from_nodes(tree_size: int, get_node: GetNode) -> str:
    """Hex root of the first `tree_size` leaves from at most log2 n + 1 stored nodes."""
    _require_sizes(_is_size(tree_size))
    return _range_hash(0, tree_size, get_node).hex() if tree_size else EMPTY_ROOT


def inclusion_proof_from_nodes(index: int, tree_size: int, get_node: GetNode) -> list[str]:
    """The same audit path as `inclusion_proof`, read from stored nodes."""
    _require_sizes(_is_size(index), _is_size(tree_size), index < tree_size)
    return [_range_hash(lo, hi, get_node).hex() for lo, hi in _inclusion_ranges(index, tree_size)]


def consistency_proof_from_nodes(m: int, n: int, get_node: GetNode) -> list[str]:
    """The same proof as `consistency_proof`, read from stored nodes."""
    _require_sizes(_is_size(m), _is_size(n), m <= n)
    return [_range_hash(lo, hi, get_node).hex() for lo, hi in _consistency_ranges(m, n)]


def subtrees_completed_by_append(existing_size: int, leaf_hash: str, get_node: GetNode) -> list[Node]:
    """The nodes to store after appending chain leaf `leaf_hash` as leaf number `existing_size`.

    First the level-0 leaf node, then each parent it completes, bottom-up; the left siblings
    are read with `get_node` (exactly `nodes_needed_for_append(existing_size)`).
    """
    node, index = _hash_leaf(_leaf_data(leaf_hash)), existing_size
    completed = [Node(0, index, node.hex())]
    for level, sibling in nodes_needed_for_append(existing_size):
        node, index = _hash_children(_stored(get_node, (level, sibling)), node), index >> 1
        completed.append(Node(level + 1, index, node.hex()))
    return completed


def complete_subtrees(leaves: Iterable[str]) -> Iterator[Node]:
    """Every complete aligned subtree of `leaves`, in append order (backfills a node store)."""
    compact = CompactRange()
    for leaf in leaves:
        compact, completed = compact.append(leaf)
        yield from completed


@dataclass(frozen=True)
class CompactRange:
    """The O(log n) state needed to keep appending without a store: the tree's peaks.

    `peaks` are the hashes of `nodes_needed_for_root(size)`, left to right. Rebuild one from a
    store with `CompactRange.from_nodes(size, get_node)`.
    """

    size: int = 0
    peaks: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _is_size(self.size) or len(self.peaks) != self.size.bit_count():
            raise ValueError("a compact range of size n has exactly popcount(n) peaks")

    @classmethod
    def from_nodes(cls, size: int, get_node: GetNode) -> CompactRange:
        return cls(size, tuple(_stored(get_node, ref).hex() for ref in nodes_needed_for_root(size)))

    def _get(self, level: int, index: int) -> str:
        return dict(zip(_range_refs(0, self.size), self.peaks, strict=False))[(level, index)]

    def root(self) -> str:
        """Hex root of the `size` leaves appended so far."""
        return root_from_nodes(self.size, self._get)

    def append(self, leaf_hash: str) -> tuple[CompactRange, list[Node]]:
        """The range after appending chain leaf `leaf_hash`, and the nodes it completed."""
        completed = subtrees_completed_by_append(self.size, leaf_hash, self._get)
        kept = self.peaks[: len(self.peaks) - (len(completed) - 1)]
        return CompactRange(self.size + 1, kept + (completed[-1].hash,)), completed


# --------------------------------------------------------------------------- checkpoints

CHECKPOINT_BODY_MEMBERS = (
    "checkpoint_version",
    "chain_id",
    "tree_size",
    "root_hash",
    "hash_algorithm",
    "tree_algorithm",
    "created_at",
)
_CHECKPOINT_MEMBERS = frozenset(CHECKPOINT_BODY_MEMBERS) | {"checkpoint_hash", "signature"}


class CheckpointBody(TypedDict):
    """What a checkpoint states (`CHECKPOINT_BODY_MEMBERS`)."""

    checkpoint_version: str
    chain_id: str
    tree_size: int
    root_hash: str
    hash_algorithm: str
    tree_algorithm: str
    created_at: str


class CheckpointSignature(TypedDict):
    algorithm: str
    key_id: str
    public_key_fingerprint: str
    signature: str


class Checkpoint(CheckpointBody):
    """A checkpoint as the gate makes it: its body, `checkpoint_hash` and the Ed25519 signature
    (None where the gate holds no Ed25519 key: stated, not signed)."""

    checkpoint_hash: str
    signature: CheckpointSignature | None


def checkpoint_body(chain_id: str, tree_size: int, root_hash: str, timestamp: datetime | str) -> CheckpointBody:
    """The signed statement "chain `chain_id` had `tree_size` leaves with RFC 6962 root
    `root_hash` at `timestamp`" (a datetime or an ISO text, see `iso_timestamp`)."""
    _require_sizes(_is_size(tree_size))
    _digest(root_hash)
    return {
        "checkpoint_version": CHAIN_CHECKPOINT_VERSION,
        "chain_id": chain_id,
        "tree_size": tree_size,
        "root_hash": root_hash,
        "hash_algorithm": HASH_ALGORITHM,
        "tree_algorithm": CHAIN_TREE_ALGORITHM,
        "created_at": iso_timestamp(timestamp),
    }


def checkpoint_hash(body: Mapping[str, Any]) -> str:
    """sha256 hex of the canonical JSON of exactly the `CHECKPOINT_BODY_MEMBERS` (null if absent)."""
    return sha256_hex({name: body.get(name) for name in CHECKPOINT_BODY_MEMBERS})


def sign_checkpoint(body: CheckpointBody, key: Ed25519Key) -> Checkpoint:
    """The body plus `checkpoint_hash` and an Ed25519 `signature` over the UTF-8 bytes of that
    hex text (base64url, no padding): the same convention as attestation signatures."""
    if set(body) != set(CHECKPOINT_BODY_MEMBERS):
        raise ValueError("a checkpoint body has exactly the checkpoint_body members")
    digest = checkpoint_hash(body)
    signature: CheckpointSignature = {
        "algorithm": SIG_ED25519,
        "key_id": key.key_id,
        "public_key_fingerprint": key.fingerprint,
        "signature": sign_hash_text(digest, key),
    }
    return {**body, "checkpoint_hash": digest, "signature": signature}


@dataclass(frozen=True)
class CheckpointCheck:
    """Result of `verify_checkpoint`: named boolean `checks`; truthy iff all hold."""

    valid: bool
    checks: dict[str, bool]
    expected_checkpoint_hash: str | None = None

    def __bool__(self) -> bool:
        return self.valid

    @property
    def failed_checks(self) -> list[str]:
        return sorted(name for name, passed in self.checks.items() if not passed)


def _checkpoint_shape(checkpoint: dict[str, Any]) -> dict[str, bool]:
    """Members, labels and value types; an unlisted member would be unsigned, so it fails."""
    return {
        "members": set(checkpoint) == _CHECKPOINT_MEMBERS,
        "checkpoint_version": checkpoint.get("checkpoint_version") == CHAIN_CHECKPOINT_VERSION,
        "algorithms": checkpoint.get("hash_algorithm") == HASH_ALGORITHM
        and checkpoint.get("tree_algorithm") == CHAIN_TREE_ALGORITHM,
        "tree_size": _is_size(checkpoint.get("tree_size")),
        "root_hash": isinstance(checkpoint.get("root_hash"), str)
        and bool(_HEX_DIGEST.fullmatch(checkpoint["root_hash"])),
    }


def _trusted_key(public_key_pem: str) -> tuple[bytes, str] | None:
    """(raw key, fingerprint of its canonical PEM), or None when the text is not an Ed25519 key."""
    try:
        return raw_public_key_from_pem(public_key_pem), public_key_fingerprint(canonical_public_key_pem(public_key_pem))
    except (KeyMaterialError, TypeError, ValueError):
        return None


def _signature_checks(signature: Any, digest: str | None, key: tuple[bytes, str] | None) -> dict[str, bool]:
    """SECURITY: the signature is checked over the *recomputed* hash with the caller's key only;
    the fingerprint in the checkpoint selects nothing, it must merely match that key."""
    signature = signature if isinstance(signature, dict) else {}
    return {
        "public_key": key is not None,
        "signature_algorithm": signature.get("algorithm") == SIG_ED25519,
        "public_key_fingerprint": key is not None and signature.get("public_key_fingerprint") == key[1],
        "signature": key is not None
        and digest is not None
        and verify_hash_text_signature(digest, signature.get("signature"), key[0]),
    }


def verify_checkpoint(checkpoint: Any, public_key_pem: str) -> CheckpointCheck:
    """Check a signed checkpoint against a public key the caller already trusts.

    Checks: `members`, `checkpoint_version`, `algorithms`, `tree_size`, `root_hash` (shape);
    `checkpoint_hash` (recomputed over the body); `public_key`, `signature_algorithm`,
    `public_key_fingerprint`, `signature` (Ed25519 over the recomputed hash text). Never raises.
    """
    checkpoint = checkpoint if isinstance(checkpoint, dict) else {}
    try:
        digest = checkpoint_hash(checkpoint)
    except (CanonicalJSONError, TypeError, ValueError):
        digest = None
    checks = _checkpoint_shape(checkpoint)
    checks["checkpoint_hash"] = digest is not None and checkpoint.get("checkpoint_hash") == digest
    checks.update(_signature_checks(checkpoint.get("signature"), digest, _trusted_key(public_key_pem)))
    return CheckpointCheck(valid=all(checks.values()), checks=checks, expected_checkpoint_hash=digest)
