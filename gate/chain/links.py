"""The caller-scoped audit chain `decision_chain_v1`, strategy `rolling_sha256_pair_v1`.

Every stored record becomes one *link* of its caller's chain (reference facts §6). With
``H(x)`` = lowercase hex sha256 of the canonical JSON bytes of ``x``:

* ``leaf_hash = H({decision_chain_version, entry_type: "decision", decision_id, record_hash,
  receipt_hash})``;
* ``merkle_root`` = ``leaf_hash`` at position 1, else ``H({strategy, previous_merkle_root,
  leaf_hash, chain_position})`` (note the member is called ``strategy`` here);
* ``link_hash = H({decision_chain_version, chain_id, chain_position, previous_link_hash,
  previous_merkle_root, leaf_hash, merkle_root, merkle_strategy, entry_type, decision_id,
  record_hash, receipt_hash, policy_id, policy_version, created_at})``, absent values as null.

Positions start at 1 and are contiguous per chain; the first link has null previous hashes.
The "rolling root" is a hash chain over the leaves, not a tree: it cannot give short proofs.
`gate.chain.merkle` builds an RFC 6962 tree over the same leaf hashes for that.

Everything here is pure: no clock, no I/O. Verification never raises on malformed links; it
reports named failures.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypedDict

from gate.protocol.canonical import CanonicalJSONError, sha256_bytes_hex, sha256_hex
from gate.protocol.types import AuditChainMember
from gate.strict_json import JsonValue
from gate.vocabulary import (
    CHAIN_ENTRY_TYPE_DECISION,
    CHAIN_MERKLE_STRATEGY,
    DECISION_CHAIN_VERSION,
)

__all__ = [
    "AUDIT_CHAIN_MEMBERS",
    "LINK_HASH_MEMBERS",
    "ChainCheck",
    "chain_head_failures",
    "chain_id_for",
    "leaf_hash",
    "link_hash",
    "new_link",
    "record_audit_chain",
    "rolling_root",
    "scope_hash",
    "stated_audit_chain",
    "verify_links",
]

# The members hashed into `link_hash`, in the order reference facts §6 lists them.
LINK_HASH_MEMBERS = (
    "decision_chain_version",
    "chain_id",
    "chain_position",
    "previous_link_hash",
    "previous_merkle_root",
    "leaf_hash",
    "merkle_root",
    "merkle_strategy",
    "entry_type",
    "decision_id",
    "record_hash",
    "receipt_hash",
    "policy_id",
    "policy_version",
    "created_at",
)

# The record's `audit_chain` member.
AUDIT_CHAIN_MEMBERS = ("chain_id", "chain_position", "leaf_hash", "link_hash", "merkle_root", "entry_type")


# --------------------------------------------------------------------------- hashes


def leaf_hash(
    decision_id: str, record_hash: str, receipt_hash: str, *, entry_type: str = CHAIN_ENTRY_TYPE_DECISION
) -> str:
    """H({decision_chain_version, entry_type, decision_id, record_hash, receipt_hash}).

    The leaf commits to the record only through its two hashes, so chaining never changes
    `record_hash`. `entry_type` is always "decision" today; verifiers pass the stated value.
    """
    return sha256_hex(
        {
            "decision_chain_version": DECISION_CHAIN_VERSION,
            "entry_type": entry_type,
            "decision_id": decision_id,
            "record_hash": record_hash,
            "receipt_hash": receipt_hash,
        }
    )


def rolling_root(previous_merkle_root: str | None, leaf_hash: str, chain_position: int) -> str:
    """The rolling root after appending `leaf_hash` at `chain_position`.

    Position 1: the leaf hash itself. Later positions: H({strategy: "rolling_sha256_pair_v1",
    previous_merkle_root, leaf_hash, chain_position}); a null previous root is hashed as null.
    """
    if chain_position == 1:
        return leaf_hash
    return sha256_hex(
        {
            "strategy": CHAIN_MERKLE_STRATEGY,
            "previous_merkle_root": previous_merkle_root,
            "leaf_hash": leaf_hash,
            "chain_position": chain_position,
        }
    )


class LinkBody(TypedDict):
    """A decision's chain link before its own hash (`LINK_HASH_MEMBERS`)."""

    decision_chain_version: str
    chain_id: str
    chain_position: int
    previous_link_hash: str | None
    previous_merkle_root: str | None
    leaf_hash: str
    merkle_root: str
    merkle_strategy: str
    entry_type: str
    decision_id: str
    record_hash: str
    receipt_hash: str
    policy_id: str | None
    policy_version: str | None
    created_at: str


class ChainLink(LinkBody):
    """A decision's chain link as `new_link` makes it: its members, then `link_hash` over them."""

    link_hash: str


def link_hash(link: Mapping[str, Any]) -> str:
    """H of exactly the `LINK_HASH_MEMBERS` of `link`; a missing member is hashed as null.

    Members outside the list (`link_hash` itself, anything a store adds) are not hashed.
    """
    return sha256_hex({name: link.get(name) for name in LINK_HASH_MEMBERS})


# --------------------------------------------------------------------------- identity


def scope_hash(scope: str) -> str:
    """Public, non-reversible handle of a tenant scope: sha256 of its UTF-8 name."""
    return sha256_bytes_hex(scope.encode("utf-8"))


def chain_id_for(scope: str) -> str:
    """A scope's audit chain id: derived from the scope hash, so it reveals no tenant name."""
    return "chain_" + scope_hash(scope)[:32]


# --------------------------------------------------------------------------- building


def new_link(
    *,
    chain_id: str,
    chain_position: int,
    previous_link_hash: str | None,
    previous_merkle_root: str | None,
    decision_id: str,
    record_hash: str,
    receipt_hash: str,
    policy_id: str | None,
    policy_version: str | None,
    created_at: str,
) -> ChainLink:
    """The complete link for one decision appended at `chain_position`.

    The caller (the ledger, holding the per-chain lock) supplies the head's `link_hash` and
    `merkle_root` as the previous values; both are null at position 1. Raises ValueError when
    the position is not a positive integer or the previous values contradict the position.
    """
    _check_position(chain_position, previous_link_hash, previous_merkle_root)
    leaf = leaf_hash(decision_id, record_hash, receipt_hash)
    link: LinkBody = {
        "decision_chain_version": DECISION_CHAIN_VERSION,
        "chain_id": chain_id,
        "chain_position": chain_position,
        "previous_link_hash": previous_link_hash,
        "previous_merkle_root": previous_merkle_root,
        "leaf_hash": leaf,
        "merkle_root": rolling_root(previous_merkle_root, leaf, chain_position),
        "merkle_strategy": CHAIN_MERKLE_STRATEGY,
        "entry_type": CHAIN_ENTRY_TYPE_DECISION,
        "decision_id": decision_id,
        "record_hash": record_hash,
        "receipt_hash": receipt_hash,
        "policy_id": policy_id,
        "policy_version": policy_version,
        "created_at": created_at,
    }
    return {**link, "link_hash": link_hash(link)}


def _check_position(position: Any, previous_link: str | None, previous_root: str | None) -> None:
    """SECURITY: never build a link that no verifier would accept (spec: contiguous from 1)."""
    if type(position) is not int or position < 1:
        raise ValueError("chain_position must be an integer >= 1")
    is_genesis = position == 1
    if is_genesis != (previous_link is None) or is_genesis != (previous_root is None):
        raise ValueError("previous hashes must be null exactly at chain_position 1")


def record_audit_chain(link: ChainLink) -> AuditChainMember:
    """The record's `audit_chain` member: {chain_id, chain_position, leaf_hash, link_hash,
    merkle_root, entry_type} (`AUDIT_CHAIN_MEMBERS`) copied from the link `new_link` made."""
    return {
        "chain_id": link["chain_id"],
        "chain_position": link["chain_position"],
        "leaf_hash": link["leaf_hash"],
        "link_hash": link["link_hash"],
        "merkle_root": link["merkle_root"],
        "entry_type": link["entry_type"],
    }


def stated_audit_chain(link: Mapping[str, object]) -> dict[str, object]:
    """The `audit_chain` member a stated (stored or exported) link implies: its
    `AUDIT_CHAIN_MEMBERS`, null where it has none. Checks compare a record's member with it."""
    return {name: link.get(name) for name in AUDIT_CHAIN_MEMBERS}


# --------------------------------------------------------------------------- verification


class ChainFailure(TypedDict):
    """One failed check of `verify_links`: the link's stated position, the check's name, the
    recomputed (or required) value and the stated one."""

    chain_position: object
    check: str
    expected: object
    actual: object


class ChainCheckJSON(TypedDict):
    """`ChainCheck.to_dict()`."""

    valid: bool
    checked: int
    anchored: bool
    failures: list[ChainFailure]


@dataclass(frozen=True)
class ChainCheck:
    """Result of `verify_links`: `valid` iff `failures` is empty.

    Each failure is ``{chain_position, check, expected, actual}`` where `chain_position` is
    the stated position of the failing link, `expected` the recomputed (or required) value and
    `actual` the stated one. `anchored` is False when the run starts after position 1 and the
    caller did not supply the previous hashes to check its start against.
    """

    valid: bool
    checked: int
    failures: list[ChainFailure] = field(default_factory=list)
    anchored: bool = True  # False: a window after position 1 whose start hashes were not given

    @property
    def failed_checks(self) -> list[str]:
        """Sorted distinct check names that failed."""
        return sorted({failure["check"] for failure in self.failures})

    def to_dict(self) -> ChainCheckJSON:
        return {
            "valid": self.valid,
            "checked": self.checked,
            "anchored": self.anchored,
            "failures": [failure.copy() for failure in self.failures],
        }


class _Failures:
    """Collects named failures for one verification run."""

    def __init__(self) -> None:
        self.items: list[ChainFailure] = []

    def expect(self, position: Any, check: str, expected: Any, actual: Any) -> None:
        if expected != actual or type(expected) is not type(actual):
            self.items.append({"chain_position": position, "check": check, "expected": expected, "actual": actual})


def _hash_or_none(function: Callable[..., str], *args: Any, **kwargs: Any) -> str | None:
    """A recomputed hash, or None when the stated members cannot be canonicalised."""
    try:
        return function(*args, **kwargs)
    except (CanonicalJSONError, TypeError, ValueError):
        return None


def _check_own_hashes(link: Mapping[str, JsonValue], failures: _Failures) -> None:
    """The three equations inside one link, each over the link's *stated* members.

    Using stated (not recomputed) inputs localises a tampered member to the checks whose
    preimage contains it; the run is valid only when every equation holds, which is the same
    as recomputing the whole link from its content.
    """
    position = link.get("chain_position")
    expected_leaf = _hash_or_none(
        leaf_hash, link.get("decision_id"), link.get("record_hash"), link.get("receipt_hash"),
        entry_type=link.get("entry_type"),
    )
    failures.expect(position, "leaf_hash", expected_leaf, link.get("leaf_hash"))
    expected_root = _hash_or_none(rolling_root, link.get("previous_merkle_root"), link.get("leaf_hash"), position)
    failures.expect(position, "merkle_root", expected_root, link.get("merkle_root"))
    failures.expect(position, "link_hash", _hash_or_none(link_hash, link), link.get("link_hash"))


def _check_labels(link: Mapping[str, JsonValue], chain_id: Any, failures: _Failures) -> None:
    """SECURITY: a link of another chain, version or strategy cannot be verified by this code."""
    position = link.get("chain_position")
    failures.expect(position, "chain_id", chain_id, link.get("chain_id"))
    failures.expect(position, "decision_chain_version", DECISION_CHAIN_VERSION, link.get("decision_chain_version"))
    failures.expect(position, "merkle_strategy", CHAIN_MERKLE_STRATEGY, link.get("merkle_strategy"))


def _check_linkage(link: Mapping[str, JsonValue], position: int, prev_link: Any, prev_root: Any, failures: _Failures) -> None:
    """The link's position and previous hashes against what the run so far requires."""
    stated = link.get("chain_position")
    failures.expect(stated, "position_gap", position, stated)
    failures.expect(stated, "previous_link_hash", prev_link, link.get("previous_link_hash"))
    failures.expect(stated, "previous_merkle_root", prev_root, link.get("previous_merkle_root"))


def _next_position(link: Mapping[str, JsonValue], position: int) -> int:
    """The position required of the following link; resynchronised after a gap so one
    missing or extra link is reported once, not at every later link."""
    stated = link.get("chain_position")
    return (stated if type(stated) is int else position) + 1


def _start_expectations(first: Mapping[str, JsonValue], start_link: str | None,
                        start_root: str | None) -> tuple[int, Any, Any, bool]:
    """(position, previous_link_hash, previous_merkle_root, anchored) for the first link.

    At position 1 both previous hashes must be null (any caller-supplied start hashes are
    ignored: nothing precedes the genesis link). A window starting later is anchored only when
    the caller supplies both hashes of the link before it (for example from an earlier,
    verified export); otherwise its stated previous hashes are taken as given.
    """
    position = first.get("chain_position")
    if type(position) is not int or position <= 1:
        return 1, None, None, True
    start = position
    return (
        start,
        first.get("previous_link_hash") if start_link is None else start_link,
        first.get("previous_merkle_root") if start_root is None else start_root,
        start_link is not None and start_root is not None,
    )


def verify_links(
    links: Sequence[object],
    *,
    expected_start_previous_link_hash: str | None = None,
    expected_start_previous_root: str | None = None,
) -> ChainCheck:
    """Verify a retained, contiguous run of links given in ascending position order.

    Checks, each named in the failures: `leaf_hash`, `merkle_root`, `link_hash` (the link's own
    equations); `chain_id`, `decision_chain_version`, `merkle_strategy` (one chain, the one
    supported algorithm); `position_gap` (positions contiguous, starting at 1 or later);
    `previous_link_hash`, `previous_merkle_root` (each link names its predecessor's hashes).
    An empty run is valid. Never raises: a non-object link is checked as an empty object.
    """
    failures = _Failures()
    items = [link if isinstance(link, dict) else {} for link in links]
    if not items:
        return ChainCheck(valid=True, checked=0)
    chain_id = items[0].get("chain_id")
    position, prev_link, prev_root, anchored = _start_expectations(
        items[0], expected_start_previous_link_hash, expected_start_previous_root
    )
    for link in items:
        _check_labels(link, chain_id, failures)
        _check_linkage(link, position, prev_link, prev_root, failures)
        _check_own_hashes(link, failures)
        position, prev_link, prev_root = _next_position(link, position), link.get("link_hash"), link.get("merkle_root")
    return ChainCheck(valid=not failures.items, checked=len(items), failures=failures.items, anchored=anchored)


def _stated_link(row: Mapping[str, object] | None) -> dict[str, JsonValue]:
    """The link JSON of a stored link row (an empty object when unreadable)."""
    link = _parsed_json(row.get("link_json")) if row is not None else None
    return link if isinstance(link, dict) else {}


def _parsed_json(value: object) -> object:
    """A stored JSON column, parsed; None when it is empty, not text, or not JSON."""
    if not value or not isinstance(value, (str, bytes, bytearray)):
        return None
    try:
        return json.loads(value)
    except ValueError:
        return None


def chain_head_failures(head: Mapping[str, object], last_link_row: Mapping[str, object] | None) -> list[str]:
    """Named failures of a chain head row against the newest stored link of its chain.

    A head names its chain's newest link: `size` is that link's position (0 without links),
    `head_link_hash` and `merkle_root` are its hashes, and `tree_peaks` holds exactly
    popcount(size) peaks (the compact range of a tree of `size` leaves). Each failure is
    ``chain_head.<member>``; empty when the head is consistent. Never raises.
    """
    failures: list[str] = []
    size = head.get("size")
    link = _stated_link(last_link_row)
    last_position = last_link_row.get("chain_position") if last_link_row is not None else 0
    if type(size) is not int or size < 0 or size != last_position or link.get("chain_position", 0) != size:
        failures.append("chain_head.size")
    if head.get("head_link_hash") != link.get("link_hash"):
        failures.append("chain_head.head_link_hash")
    if head.get("merkle_root") != link.get("merkle_root"):
        failures.append("chain_head.merkle_root")
    peaks = _parsed_json(head.get("tree_peaks"))
    if not isinstance(peaks, list) or type(size) is not int or size < 0 or len(peaks) != size.bit_count():
        failures.append("chain_head.tree_peaks")
    return failures
