"""The chain view (GET /api/decision/chains/{chain_id}): the caller's retained links, head, roots
and checkpoint, with a verification recomputed from storage.

The verification re-derives each retained link (leaf, rolling root, link hash, linkage), checks
the links against the decisions they name (their stored record and receipt hashes, and the record
hash recomputed from the stored record), the rulebook snapshots those decisions were made under,
the outcome links to execution receipts, and the head row and the RFC 6962 tree root against the
stored Merkle nodes and the gate's checkpoint log. It reads through an `AuditChainService` (the
head checks, the witness and the checkpoints) and changes nothing but the checkpoint it serves.
"""

from __future__ import annotations

import json
from typing import NotRequired, TypedDict

from gate import vocabulary as C
from gate.chain.links import ChainLink, verify_links
from gate.chain.merkle import Checkpoint, leaf_node
from gate.ledger import Ledger
from gate.ledger.chains import ChainHeadRow, ChainLinkRow
from gate.ledger.lifecycle import LifecycleStore
from gate.ledger.records import DecisionHashes
from gate.packets.members import ChainIdentity
from gate.privacy.removal import remainder_receipt_hash, removed
from gate.protocol.records import record_hash
from gate.services.chains import (
    AuditChainService,
    SnapshotCheck,
    chain_tree_root,
    owns_chain,
    rulebook_ref,
    rulebook_snapshot_check,
)
from gate.strict_json import JsonValue

MAX_CHAIN_LIMIT = 1000


class ExecutionLink(TypedDict):
    """An Outcome Record of the chain view's window that names the execution receipt it follows."""

    chain_position: object  # as the stored link states it
    decision_id: str
    outcome_id: str
    outcome_hash: str
    execution_receipt_id: str | None
    execution_hash: str | None
    valid: bool


class ChainTree(TypedDict):
    tree_algorithm: str
    tree_size: int
    root_hash: str | None


class CheckpointLogState(TypedDict):
    """Whether the gate keeps a checkpoint log, and the newest checkpoint of the chain it holds."""

    enabled: bool
    tree_size: int | None
    root_hash: str | None


class ChainViewWindow(TypedDict):
    """The retained links' positions and the rolling state before the first, as stored."""

    first_position: object
    last_position: object
    previous_link_hash: object
    previous_merkle_root: object


class ViewFailure(TypedDict):
    """One failed check of the chain view: `verify_links`'s (gate.chain.links.ChainFailure), or
    one of storage (a check of the whole window states no `chain_position`; a rulebook snapshot's
    names its rulebook and version), with the recomputed or required value and the stated one."""

    chain_position: NotRequired[object]
    check: str
    rulebook_id: NotRequired[str]
    version: NotRequired[str]
    expected: object
    actual: object


class ChainVerification(TypedDict):
    valid: bool
    checked_links: int
    checks: dict[str, bool]
    failures: list[ViewFailure]


class ChainView(ChainIdentity):
    """`chain_view`: the caller's chain and its verification from storage. The head's root and
    link as stored: a packet's `audit_chain` states them as strings (`ChainState`), but here a
    tampered head may hold nulls, which the view shows and names."""

    ok: bool
    merkle_root: str | None
    head_link_hash: str | None
    tree: ChainTree
    checkpoint: Checkpoint | None
    checkpoint_log: CheckpointLogState
    links: list[ChainLink]
    execution_links: list[ExecutionLink]
    window: ChainViewWindow
    verification: ChainVerification


def chain_view(audit: AuditChainService, scope: str, chain_id: str, limit: int) -> ChainView | None:
    """The caller's chain: retained links (newest `limit`), head, roots, checkpoint and a
    verification recomputed from storage. None when the chain is not the caller's. A head
    that contradicts its links or nodes is named (`chain_head`) and gets no checkpoint."""
    with audit.ledger.one_snapshot():  # head, links, nodes as of one instant (see `AuditChainService.consistent_head`)
        head = audit.ledger.chain_head(chain_id)
        if head is None or not owns_chain(head, scope, chain_id):
            return None
        head_failures = audit.head_failures(chain_id, head)
        size = head["size"] if type(head["size"]) is int and head["size"] >= 0 else 0
        first = max(1, size - limit + 1)
        rows = audit.ledger.chain_links_window(chain_id, max(1, first - 1), size)
        # Each as `new_link` wrote it to our own ledger; `_verify_window` re-derives every member.
        stored_links: list[ChainLink] = [json.loads(row["link_json"]) for row in rows]
        previous = stored_links.pop(0) if first > 1 and stored_links else None
        rows = rows[1:] if previous is not None else rows
        checks, failures = _verify_window(audit.ledger, chain_id, head, rows, stored_links, previous)
        execution_links = _execution_links(audit.ledger, stored_links, checks, failures)
        checks["chain_head"] = not head_failures
        failures += [{"check": name, "expected": "the head names the newest stored link and the stored tree",
                      "actual": "differs"} for name in head_failures]
        peaks_root = _root_or_none(head)
        checks["tree_root"] = _tree_root_matches(audit, chain_id, size, peaks_root, failures)
        held, witnessed = (audit.witness_failures(chain_id, size, peaks_root)
                           if not head_failures and peaks_root is not None else (None, []))
        checks["checkpoint_log"] = not witnessed
        failures += [{"check": name, "expected": {"tree_size": held["tree_size"], "root_hash": held["root_hash"]}
                      if held else None, "actual": {"tree_size": size, "root_hash": peaks_root}}
                     for name in witnessed]
    signable = size and not head_failures and not witnessed
    checkpoint = audit.checkpoint(chain_id, size, peaks_root) if signable and peaks_root else None
    return {
        "ok": True,
        "chain_id": chain_id,
        "decision_chain_version": C.DECISION_CHAIN_VERSION,
        "merkle_strategy": C.CHAIN_MERKLE_STRATEGY,
        "chain_size": head["size"],
        "merkle_root": head["merkle_root"],
        "head_link_hash": head["head_link_hash"],
        "tree": {"tree_algorithm": C.CHAIN_TREE_ALGORITHM, "tree_size": size, "root_hash": peaks_root},
        "checkpoint": checkpoint,
        "checkpoint_log": {"enabled": audit.checkpoint_log is not None,
                           "tree_size": held["tree_size"] if held else None,
                           "root_hash": held["root_hash"] if held else None},
        "links": stored_links,
        "execution_links": execution_links,
        "window": {
            "first_position": stored_links[0]["chain_position"] if stored_links else None,
            "last_position": stored_links[-1]["chain_position"] if stored_links else None,
            "previous_link_hash": previous["link_hash"] if previous else None,
            "previous_merkle_root": previous["merkle_root"] if previous else None,
        },
        "verification": {
            "valid": all(checks.values()),
            "checked_links": len(stored_links),
            "checks": checks,
            "failures": failures,
        },
    }


def _execution_links(ledger: Ledger, links: list[ChainLink], checks: dict[str, bool],
                     failures: list[ViewFailure]) -> list[ExecutionLink]:
    """The window's Outcome Records that name the execution receipt they follow (oldest
    first, at most MAX_CHAIN_LIMIT), each `valid` when its link columns name a stored
    execution receipt of the same decision with that hash; `execution_links` check: all are.
    (The row seal and hosted verify bind the columns to the stored receipt.)"""
    positions = {link.get("decision_id"): link.get("chain_position") for link in links}
    rows = LifecycleStore(ledger).execution_links([str(name) for name in positions], limit=MAX_CHAIN_LIMIT)
    shown: list[ExecutionLink] = []
    for row in rows:
        valid = (row["named_kind"] == "execution" and row["named_decision_id"] == row["decision_id"]
                 and row["execution_hash"] is not None and row["named_hash"] == row["execution_hash"])
        position = positions.get(row["decision_id"])
        shown.append({"chain_position": position, "decision_id": row["decision_id"],
                      "outcome_id": row["outcome_id"], "outcome_hash": row["outcome_hash"],
                      "execution_receipt_id": row["execution_receipt_id"],
                      "execution_hash": row["execution_hash"], "valid": valid})
        if not valid:
            failures.append({"chain_position": position, "check": "execution_links",
                             "expected": "an execution receipt of the same decision with this hash",
                             "actual": {"execution_receipt_id": row["execution_receipt_id"],
                                        "execution_hash": row["execution_hash"]}})
    checks["execution_links"] = all(item["valid"] for item in shown)
    return shown


def _tree_root_matches(audit: AuditChainService, chain_id: str, size: int, peaks_root: str | None,
                       failures: list[ViewFailure]) -> bool:
    """The root of the stored Merkle nodes equals the root of the head's peaks (else named)."""
    try:
        nodes_root: str | None = audit.tree_root(chain_id, size)
    except LookupError:
        nodes_root = None
    matches = peaks_root is not None and nodes_root == peaks_root
    if not matches:
        failures.append({"check": "tree_root", "expected": peaks_root, "actual": nodes_root})
    return matches


def _check_snapshots(ledger: Ledger, scope: str, links: list[ChainLink],
                     decisions: dict[str | None, DecisionHashes], failures: list[ViewFailure]) -> bool:
    """Each rulebook snapshot a window decision was made under, re-hashed from its stored
    body once per (rulebook id, version); a mismatch is named at every position using it."""
    seen: dict[tuple[str, str, str], SnapshotCheck | None] = {}
    valid = True
    for link in links:
        stored = decisions.get(str(link.get("decision_id")))
        record = json.loads(stored["record_json"]) if stored else None
        ref = rulebook_ref(record)
        if ref is None:
            continue
        if ref not in seen:
            seen[ref] = rulebook_snapshot_check(ledger, scope, record)
        check = seen[ref]
        if check is not None and not check["valid"]:
            valid = False
            failures.append({"chain_position": link.get("chain_position"), "check": "rulebook_snapshot",
                             "rulebook_id": check["rulebook_id"], "version": check["version"],
                             "expected": check["expected"], "actual": check["actual"]})
    return valid


def _verify_window(ledger: Ledger, chain_id: str, head: ChainHeadRow, rows: list[ChainLinkRow],
                   links: list[ChainLink], previous: ChainLink | None,
                   ) -> tuple[dict[str, bool], list[ViewFailure]]:
    result = verify_links(
        links,
        expected_start_previous_link_hash=previous["link_hash"] if previous else None,
        expected_start_previous_root=previous["merkle_root"] if previous else None,
    )
    failures: list[ViewFailure] = [{"chain_position": failure["chain_position"], "check": failure["check"],
                                    "expected": failure["expected"], "actual": failure["actual"]}
                                   for failure in result.failures]
    checks = {"links": result.valid}
    # Row columns must agree with the link JSON they index.
    rows_ok = all(row["link_hash"] == link.get("link_hash") and row["leaf_hash"] == link.get("leaf_hash")
                  and row["decision_id"] == link.get("decision_id") and row["chain_position"] == link.get("chain_position")
                  for row, link in zip(rows, links, strict=False))
    checks["link_rows"] = rows_ok
    if not rows_ok:
        failures.append({"check": "link_rows", "expected": "row columns equal the stored link", "actual": "differ"})
    # Links must name the decisions as stored, and those decisions must still hash to it.
    decisions = ledger.decision_hashes([link.get("decision_id") for link in links])
    decisions_ok = True
    for link in links:
        stored = decisions.get(link.get("decision_id"))
        recomputed = _bound_record_hash(json.loads(stored["record_json"])) if stored else None
        # The decision's row must still be filed in this chain's scope (a row moved to
        # another scope leaves this chain, and the other scope would read it).
        if not stored or not (stored["record_hash"] == link.get("record_hash") == recomputed
                              and stored["receipt_hash"] == link.get("receipt_hash")
                              and stored["scope"] == head["scope"]):
            decisions_ok = False
            failures.append({"chain_position": link.get("chain_position"), "check": "decision_hashes",
                             "expected": link.get("record_hash"), "actual": recomputed})
    checks["decision_hashes"] = decisions_ok
    snapshots_ok = _check_snapshots(ledger, head["scope"], links, decisions, failures)
    checks["rulebook_snapshots"] = snapshots_ok
    # The head row must be the last link.
    last = links[-1] if links else None
    head_ok = (last is None and head["size"] == 0) or (
        last is not None and last.get("chain_position") == head["size"]
        and last.get("link_hash") == head["head_link_hash"] and last.get("merkle_root") == head["merkle_root"])
    checks["head"] = head_ok
    if not head_ok:
        failures.append({"check": "head", "expected": head["head_link_hash"],
                         "actual": last.get("link_hash") if last else None})
    # The stored leaf nodes must be the leaves of these links.
    refs = [(0, link["chain_position"] - 1) for link in links if isinstance(link.get("chain_position"), int)]
    nodes = ledger.merkle_nodes(chain_id, refs)
    leaves_ok = all(nodes.get((0, link["chain_position"] - 1)) == leaf_node(link.get("leaf_hash", ""))
                    for link in links if isinstance(link.get("chain_position"), int))
    checks["tree_leaves"] = leaves_ok
    if not leaves_ok:
        failures.append({"check": "tree_leaves", "expected": "leaf nodes equal the links' leaves", "actual": "differ"})
    return checks, failures


def _bound_record_hash(record: dict[str, JsonValue]) -> str | None:
    """The hash a stored record binds: recomputed from a whole record; a remainder's (its inputs
    removed, docs/privacy.md "Retention") stated hash when its `receipt_hash` recomputes from the
    kept hashes, so the chain still verifies its membership by hash."""
    if removed(record) is None:
        return record_hash(record)
    stated = record.get("record_hash")
    return stated if isinstance(stated, str) and remainder_receipt_hash(record) == record.get("receipt_hash") else None


def _root_or_none(head: ChainHeadRow) -> str | None:
    """`chain_tree_root`, or None when the head's peaks are not a compact range of its size."""
    try:
        return chain_tree_root(head)
    except (LookupError, ValueError, TypeError):
        return None

