"""Audit chain reads: head checks, signed checkpoints and their witness log, and proofs.

Everything here recomputes from storage; nothing is trusted because it was stored. Every read
that builds proof material (packet export, inclusion and consistency proofs, published
checkpoints) first checks the head row against the stored links and Merkle nodes and against
the gate's checkpoint log (`AuditChainService.consistent_head`). The chain view and its
verification of the retained links are `gate.services.chain_view`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from gate import vocabulary as C
from gate.chain.checkpoint_log import (
    CheckpointLogError,
    HeldCheckpoints,
    append_checkpoint,
    extension_failures,
)
from gate.chain.event_witness import event_chain_failures, event_tree_root
from gate.chain.links import ChainLink, chain_head_failures, chain_id_for, verify_links
from gate.chain.merkle import (
    Checkpoint,
    CompactRange,
    checkpoint_body,
    checkpoint_hash,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof_from_nodes,
    nodes_needed_for_consistency,
    nodes_needed_for_inclusion,
    nodes_needed_for_root,
    root_from_nodes,
    sign_checkpoint,
)
from gate.clock import Clock, iso_ms
from gate.errors import GateError, LedgerUnavailable
from gate.keys.config import LiveSigning, SigningSetup
from gate.ledger import Ledger, StoredSnapshot
from gate.ledger.chains import ChainHeadRow
from gate.packets import ChainExcerpt, chain_window
from gate.packets.members import ChainConsistency
from gate.protocol.canonical import CanonicalJSONError, canonical_text, sha256_hex

log = logging.getLogger(__name__)


class SnapshotCheck(TypedDict):
    """`rulebook_snapshot_check`: the record's rulebook hash (`expected`) against the hash of the
    stored snapshot's body (`actual`, None when it is missing or unreadable)."""

    rulebook_id: str
    version: str
    expected: str
    actual: str | None
    valid: bool


class PublishedCheckpoint(TypedDict):
    """`AuditChainService.publish_checkpoint`: the head's checkpoint, and the consistency proof
    from the size asked for (None when none was)."""

    chain_id: str
    checkpoint: Checkpoint
    consistency: ChainConsistency | None


class InclusionAnswer(TypedDict):
    """`inclusion_for`: a decision's RFC 6962 inclusion proof with the checkpoint of its size."""

    ok: bool
    chain_id: str
    decision_id: str
    tree_algorithm: str
    leaf_index: int
    leaf_hash: str
    tree_size: int
    proof: list[str]
    root_hash: str
    checkpoint: Checkpoint


class ConsistencyAnswer(TypedDict):
    """`consistency_for`: an RFC 6962 consistency proof with both roots and both checkpoints."""

    ok: bool
    chain_id: str
    tree_algorithm: str
    first: int
    second: int
    first_root: str
    second_root: str
    proof: list[str]
    first_checkpoint: Checkpoint
    second_checkpoint: Checkpoint


def _made_checkpoint(signing: SigningSetup | LiveSigning, chain_id: str, size: int, root: str,
                     at: str) -> Checkpoint:
    """The checkpoint of (chain, size, root) at `at`, signed with the gate's Ed25519 key; stated
    but unsigned (`signature: null`, with its hash) in HMAC-only setups."""
    body = checkpoint_body(chain_id, size, root, at)
    key = signing.attestation_key()
    return sign_checkpoint(body, key) if key is not None else {**body, "checkpoint_hash": checkpoint_hash(body),
                                                                 "signature": None}


class EventChainWitness:
    """The signed event chains (hold, release, governance) in the gate's own checkpoint log
    (`gate.chain.event_witness`): `check` before an event is written or a chain is served,
    `publish` after an event is written. Without a log (`GATE_CHECKPOINT_LOG=off`) both do
    nothing."""

    def __init__(self, signing: SigningSetup | LiveSigning, clock: Clock, checkpoint_log: Path | None) -> None:
        self.signing = signing
        self.clock = clock
        self.checkpoint_log = checkpoint_log
        self._held = HeldCheckpoints(checkpoint_log) if checkpoint_log is not None else None

    def held(self, chain_id: str) -> dict[str, Any] | None:
        """The newest checkpoint of the chain in the gate's log (None: no log, or none held);
        CheckpointLogError when the log cannot be read."""
        return self._held.latest(chain_id) if self._held is not None else None

    def held_for_proof(self, chain_id: str) -> dict[str, Any] | None:
        """`held`, for proof material served now: 503 `LEDGER_UNAVAILABLE` when the log cannot be read."""
        try:
            return self.held(chain_id)
        except CheckpointLogError as error:
            raise LedgerUnavailable("the gate's checkpoint log cannot be read") from error

    def check(self, chain_id: str, read_hashes: Callable[[], Sequence[str]]) -> list[str]:
        """The chain's event hashes (`read_hashes()`, oldest first), after checking that they
        extend the newest checkpoint the log holds of it. The log is read first: a checkpoint
        is appended only after its event committed, so the hashes read next include it.
        `CHAIN_INTEGRITY_FAILED` (409) naming the failed checks otherwise: nothing is written
        on, signed or served from a chain cut back or rewritten since it was witnessed."""
        try:
            held = self.held(chain_id)
        except CheckpointLogError:
            hashes, failures = list(read_hashes()), ["checkpoint_log.unreadable"]
        else:
            hashes = list(read_hashes())
            failures = event_chain_failures(held, hashes)
        if failures:
            raise GateError("CHAIN_INTEGRITY_FAILED", "the stored event chain is shorter than or does not extend "
                            "the checkpoint witnessed outside the ledger; nothing is written on it or served "
                            "from it", chain_id=chain_id, failed_checks=failures)
        return hashes

    def publish(self, chain_id: str, hashes: Sequence[str]) -> None:
        """Append the signed checkpoint of the chain of `hashes` (oldest first, at least one) to
        the log, with the consistency proof from the newest held checkpoint. The events are
        already written: a log that cannot be written, or a concurrent newer checkpoint, is
        logged and left to the next event's checkpoint (which covers this one)."""
        if self.checkpoint_log is None or not hashes:
            return
        leaves = list(hashes)
        checkpoint = _made_checkpoint(self.signing, chain_id, len(leaves), event_tree_root(leaves),
                                      iso_ms(self.clock.now()))
        for attempt in range(2):
            try:
                held = self.held(chain_id)
                size = held["tree_size"] if held is not None else 0
                proof = consistency_proof(size, len(leaves), leaves) if 0 < size <= len(leaves) else None
                append_checkpoint(self.checkpoint_log, checkpoint, proof, skip_older=True)
                return
            except CheckpointLogError as error:
                if attempt or not error.details.get("failed_checks"):
                    log.warning("the checkpoint of %s (size %d) was not logged: %s", chain_id, len(leaves),
                                 error.message)
                    return


@dataclass(frozen=True, slots=True)
class RecordProof:
    """A decision's link, its window of retained links, and its inclusion proof at a checkpoint."""

    chain_id: str
    head: ChainHeadRow
    links: list[ChainLink]
    window_previous_link_hash: str | None
    window_previous_merkle_root: str | None
    record_position: int
    proof: list[str]
    checkpoint: Checkpoint


class AuditChainService:
    """Chain reads over one ledger. `checkpoint_log`: the gate's own witness log (a file outside
    the database, `gate.chain.checkpoint_log`); when set, every chain read compares the chain with the
    newest checkpoint it holds, and `publish_checkpoint` appends to it."""

    def __init__(self, ledger: Ledger, signing: SigningSetup | LiveSigning, clock: Clock, *,
                 checkpoint_log: Path | None = None) -> None:
        self.ledger = ledger
        self.signing = signing
        self.clock = clock
        self.checkpoint_log = checkpoint_log
        self._held = HeldCheckpoints(checkpoint_log) if checkpoint_log is not None else None

    def owns(self, scope: str, chain_id: str) -> bool:
        """Whether `chain_id` names a stored chain of `scope` (another scope's chain reads as absent)."""
        return owns_chain(self.ledger.chain_head(chain_id), scope, chain_id)

    # ------------------------------------------------------------------ checkpoints

    def checkpoint(self, chain_id: str, tree_size: int, root_hash: str) -> Checkpoint:
        """The signed checkpoint for (chain, size), made once and then served as stored."""
        stored = self.ledger.checkpoint(chain_id, tree_size)
        if stored is None:
            made = _made_checkpoint(self.signing, chain_id, tree_size, root_hash, iso_ms(self.clock.now()))
            stored = self.ledger.store_checkpoint(chain_id, tree_size, canonical_text(made))
        checkpoint: Checkpoint = json.loads(stored)
        return checkpoint

    # ------------------------------------------------------------------ reads

    def _node_getter(self, chain_id: str, refs: list[tuple[int, int]]) -> Callable[[int, int], str]:
        nodes = self.ledger.merkle_nodes(chain_id, refs)
        return lambda level, idx: nodes[(level, idx)]

    def head_failures(self, chain_id: str, head: ChainHeadRow) -> list[str]:
        """`chain_head_integrity` of this service's ledger."""
        return chain_head_integrity(self.ledger, chain_id, head)

    def witness_failures(self, chain_id: str, size: int, root: str) -> tuple[dict[str, Any] | None, list[str]]:
        """(the newest checkpoint of the chain the gate's checkpoint log holds, named failures of
        the stored tree of `size` leaves with `root` against it). The consistency proof from the
        held size is read from the stored nodes. No log, or nothing held: (None, [])."""
        held, _, failures = self._witness(chain_id, size, root)
        return held, failures

    def _witness(self, chain_id: str, size: int, root: str) -> tuple[dict[str, Any] | None, list[str] | None, list[str]]:
        """`witness_failures` plus the consistency proof it checked (None when not computed)."""
        if self.checkpoint_log is None:
            return None, None, []
        try:
            held = self._held_checkpoint(chain_id)
        except CheckpointLogError:
            return None, None, ["checkpoint_log.unreadable"]
        if held is None:
            return None, None, []
        proof: list[str] | None = None
        if type(size) is int and held["tree_size"] <= size:
            try:
                proof = self.consistency_proof(chain_id, held["tree_size"], size)
            except (LookupError, ValueError):
                proof = None
        return held, proof, extension_failures(held, size, root, proof)

    def _held_checkpoint(self, chain_id: str) -> dict[str, Any] | None:
        """The newest checkpoint of the chain in the gate's log (read incrementally)."""
        if self._held is None:  # pragma: no cover - only called when the gate keeps a log
            raise RuntimeError("no checkpoint log is configured")
        return self._held.latest(chain_id)

    def consistency_proof(self, chain_id: str, first: int, second: int) -> list[str]:
        """RFC 6962 consistency proof between two sizes, from the stored nodes."""
        refs = [(level, index) for level, index in nodes_needed_for_consistency(first, second)]
        return consistency_proof_from_nodes(first, second, self._node_getter(chain_id, refs))

    def consistent_head(self, chain_id: str) -> ChainHeadRow | None:
        """The chain head row, or None when the chain has none; `CHAIN_INTEGRITY_FAILED` (409)
        naming the failed checks when the head contradicts the stored links or nodes, or the
        stored tree is shorter than or does not extend the newest checkpoint the gate's
        checkpoint log holds. Every read that builds proof material (packet export, inclusion
        and consistency proofs, published checkpoints) goes through this: a tampered head is
        named, never signed and never a 500."""
        return self._checked_head(chain_id)[0]

    def _checked_head(self, chain_id: str) -> tuple[ChainHeadRow | None, list[str] | None]:
        """`consistent_head`, with the consistency proof from the held checkpoint it checked. The
        head, its newest link and the nodes are read in one snapshot: decides committed between
        those reads would otherwise read as a head that contradicts its links."""
        with self.ledger.one_snapshot():
            head = self.ledger.chain_head(chain_id)
            if head is None:
                return None, None
            failures, proof = self.head_failures(chain_id, head), None
            if not failures:
                _, proof, failures = self._witness(chain_id, head["size"], _peaks_root(head))
        if failures:
            raise GateError("CHAIN_INTEGRITY_FAILED", "the stored audit chain contradicts its own links or "
                            "Merkle nodes, or a checkpoint witnessed outside the ledger; no proof material is "
                            "served from it", chain_id=chain_id, failed_checks=failures)
        return head, proof

    def witness_after_answer(self, chain_id: str, position: int) -> None:
        """`publish_checkpoint` run once a decide was answered (its cadence checkpoint): a refusal
        or fault is logged, never raised, since there is no answer left to give it to."""
        try:
            self.publish_checkpoint(chain_id)
        except GateError as error:
            log.error("checkpoint of chain %s at %s not witnessed: %s %s", chain_id, position,
                      error.code, error.details.get("failed_checks", ""))
        except Exception:
            log.exception("checkpoint of chain %s at %s not witnessed", chain_id, position)

    def publish_checkpoint(self, chain_id: str, first: int | None = None) -> PublishedCheckpoint | None:
        """The signed checkpoint of the chain's current (consistent) head, appended to the gate's
        checkpoint log, with the consistency proof from tree size `first` when asked. None for a
        chain without decisions. `CHAIN_INTEGRITY_FAILED` as `consistent_head`."""
        head, held_proof = self._checked_head(chain_id)
        if head is None or head["size"] < 1:
            return None
        size, root = head["size"], _peaks_root(head)
        if first is not None and not 1 <= first <= size:
            raise GateError("REQUEST_INVALID", f"first must be between 1 and {size}",
                            errors=[{"field": "first", "code": "out_of_range", "message": f"1 to {size}"}])
        checkpoint = self.checkpoint(chain_id, size, root)
        if checkpoint.get("root_hash") != root:  # the ledger's stored checkpoint of this size names another tree
            raise GateError("CHAIN_INTEGRITY_FAILED", "the stored checkpoint of this size names another tree root",
                            chain_id=chain_id, failed_checks=["chain_checkpoints.root_hash"])
        if self.checkpoint_log is not None:
            self._log_checkpoint(checkpoint, held_proof)
        consistency: ChainConsistency | None = None
        if first is not None:
            consistency = {"tree_algorithm": C.CHAIN_TREE_ALGORITHM, "first": first, "second": size,
                           "first_root": self.tree_root(chain_id, first),
                           "proof": self.consistency_proof(chain_id, first, size)}
        return {"chain_id": chain_id, "checkpoint": checkpoint, "consistency": consistency}

    def _log_checkpoint(self, checkpoint: Checkpoint, proof: list[str] | None) -> None:
        """Append to the gate's log. The proof from the held checkpoint was checked just before;
        a concurrent worker's append in between makes it stale, so a refusal is checked once more
        against the log as it now is. Still refused: `CHAIN_INTEGRITY_FAILED`; a log that cannot
        be written: `LEDGER_UNAVAILABLE` (503), nothing published."""
        if self.checkpoint_log is None:  # pragma: no cover - only called when the gate keeps a log
            raise RuntimeError("no checkpoint log is configured")
        chain_id, size, root = checkpoint["chain_id"], checkpoint["tree_size"], checkpoint["root_hash"]
        for attempt in range(2):
            try:
                append_checkpoint(self.checkpoint_log, checkpoint, proof, skip_older=True)
                return
            except CheckpointLogError as error:
                failures = error.details.get("failed_checks")
                if not failures:
                    raise GateError("LEDGER_UNAVAILABLE", "the checkpoint log cannot be written") from error
                _, proof, failures = self._witness(chain_id, size, root)
                if failures or attempt:
                    raise GateError("CHAIN_INTEGRITY_FAILED", "the chain does not extend the checkpoint log",
                                    chain_id=chain_id, failed_checks=failures or error.details["failed_checks"]) \
                        from error

    def tree_root(self, chain_id: str, size: int) -> str:
        return stored_tree_root(self.ledger, chain_id, size)

    def record_proof(self, decision_id: str, chain_limit: int) -> RecordProof | None:
        """Inclusion proof of a decision's leaf at the current head, with a link window of at
        most `chain_limit` links ending at the decision's own link."""
        link_row = self.ledger.chain_link_for(decision_id)
        if link_row is None:
            return None
        chain_id = link_row["chain_id"]
        head = self.consistent_head(chain_id)
        if head is None:
            return None
        position = link_row["chain_position"]
        first = max(1, position - chain_limit + 1)
        rows = self.ledger.chain_links_window(chain_id, max(1, first - 1), position)
        links: list[ChainLink] = [json.loads(row["link_json"]) for row in rows]
        previous = links.pop(0) if first > 1 and links and links[0]["chain_position"] == first - 1 else None
        size = head["size"]
        refs = [(level, index) for level, index in nodes_needed_for_inclusion(position - 1, size)]
        proof = inclusion_proof_from_nodes(position - 1, size, self._node_getter(chain_id, refs))
        root = _peaks_root(head)
        return RecordProof(
            chain_id=chain_id,
            head=head,
            links=links,
            window_previous_link_hash=previous["link_hash"] if previous else None,
            window_previous_merkle_root=previous["merkle_root"] if previous else None,
            record_position=position,
            proof=proof,
            checkpoint=self.checkpoint(chain_id, size, root),
        )


def stored_tree_root(ledger: Ledger, chain_id: str, size: int) -> str:
    """RFC 6962 root of the first `size` leaves from the stored Merkle nodes (LookupError when
    a node is missing)."""
    refs = [(level, index) for level, index in nodes_needed_for_root(size)]
    nodes = ledger.merkle_nodes(chain_id, refs)
    return root_from_nodes(size, lambda level, idx: nodes[(level, idx)])


def chain_head_integrity(ledger: Ledger, chain_id: str, head: ChainHeadRow) -> list[str]:
    """Named failures of a chain's head row, recomputed from storage: against its newest stored
    link (`gate.chain.links.chain_head_failures`) and, when its size and peaks are well formed,
    `chain_head.tree_root` (the peaks' root is the root the stored nodes give for `size`
    leaves). Empty when the head is the one the links and nodes imply."""
    failures = chain_head_failures(head, ledger.chain_last_link(chain_id))
    if "chain_head.tree_peaks" not in failures and "chain_head.size" not in failures:
        try:
            if stored_tree_root(ledger, chain_id, head["size"]) != _peaks_root(head):
                failures.append("chain_head.tree_root")
        except (LookupError, ValueError):
            failures.append("chain_head.tree_root")
    return failures


def rulebook_ref(record: Any) -> tuple[str, str, str] | None:
    """(id, version, hash) of the rulebook a record was decided under, or None (no rulebook)."""
    ref = record.get("rulebook") if isinstance(record, dict) else None
    if not isinstance(ref, dict) or not all(isinstance(ref.get(name), str) for name in ("id", "version", "hash")):
        return None
    return ref["id"], ref["version"], ref["hash"]


def snapshot_body_hash(row: StoredSnapshot | None) -> str | None:
    """sha256 of the canonical JSON of a stored snapshot's body, or None when it is missing or
    not JSON."""
    if row is None:
        return None
    try:
        return sha256_hex(json.loads(row["body_json"]))
    except (CanonicalJSONError, TypeError, ValueError, RecursionError):
        return None


def rulebook_snapshot_check(ledger: Ledger, scope: str, record: Any) -> SnapshotCheck | None:
    """The record's bound rulebook snapshot, re-hashed from its stored body: None for a record
    without a rulebook, else ``{rulebook_id, version, expected, actual, valid}`` where
    `expected` is the record's rulebook hash and `actual` the recomputed body hash (None when the
    snapshot is missing or unreadable). Read afresh, never from a cache."""
    ref = rulebook_ref(record)
    if ref is None:
        return None
    rulebook_id, version, expected = ref
    row = ledger.rulebook_snapshot(scope, rulebook_id=rulebook_id, version=version)
    actual = snapshot_body_hash(row)
    valid = row is not None and actual == expected == row["rulebook_hash"]
    return {"rulebook_id": rulebook_id, "version": version, "expected": expected, "actual": actual, "valid": valid}


def chain_tree_root(head: ChainHeadRow) -> str:
    """RFC 6962 root of a chain head row's stored peaks (ValueError when they do not fit its
    size): the root a checkpoint of the head signs."""
    return CompactRange(head["size"], tuple(json.loads(head["tree_peaks"]))).root()


_peaks_root = chain_tree_root


def owns_chain(head: ChainHeadRow | None, scope: str, chain_id: str) -> bool:
    """SECURITY: the chain is the caller's only when its head row names the caller's scope AND
    its id is the one derived from that scope, so editing a head's scope column hands the
    chain to nobody else."""
    return head is not None and head["scope"] == scope and chain_id == chain_id_for(scope)


def link_checks_for(ledger: Ledger, record: dict[str, Any]) -> dict[str, bool]:
    """Checks that the decision's stored chain link is intact and names this record.

    `chain_link`: the link recomputes (leaf, rolling root, link hash) and follows its stored
    predecessor; `chain_link_matches_record`: it names the record's decision id, record hash and
    receipt hash, and equals the record's own `audit_chain` member.
    """
    row = ledger.chain_link_for(record.get("decision_id", ""))
    if row is None:
        return {"chain_link": False, "chain_link_matches_record": False}
    link = json.loads(row["link_json"])
    position = row["chain_position"]
    previous = None
    if position > 1:
        before = ledger.chain_links_window(row["chain_id"], position - 1, position - 1)
        previous = json.loads(before[0]["link_json"]) if before else {}
    result = verify_links(
        [link],
        expected_start_previous_link_hash=previous.get("link_hash") if previous is not None else None,
        expected_start_previous_root=previous.get("merkle_root") if previous is not None else None,
    )
    row_ok = row["link_hash"] == link.get("link_hash") and row["leaf_hash"] == link.get("leaf_hash")
    own = record.get("audit_chain") or {}
    matches = (link.get("decision_id") == record.get("decision_id")
               and link.get("record_hash") == record.get("record_hash")
               and link.get("receipt_hash") == record.get("receipt_hash")
               and all(own.get(name) == link.get(name) for name in
                       ("chain_id", "chain_position", "leaf_hash", "link_hash", "merkle_root")))
    return {"chain_link": result.valid and row_ok, "chain_link_matches_record": matches}


def packet_chain_excerpt(service: AuditChainService, decision_id: str, chain_limit: int) -> ChainExcerpt | None:
    """The packet's chain part, read under one head: the window of `chain_window`, the audit
    path of the record's leaf at the head's tree size, and the signed checkpoint of that size."""
    ledger = service.ledger
    link_row = ledger.chain_link_for(decision_id)
    if link_row is None:
        return None
    chain_id = link_row["chain_id"]
    head = service.consistent_head(chain_id)
    if head is None:
        return None
    size, position = head["size"], link_row["chain_position"]
    head_link_hash, merkle_root = head["head_link_hash"], head["merkle_root"]
    if head_link_hash is None or merkle_root is None:
        # `consistent_head` already names such a head (chain_head.head_link_hash, .merkle_root):
        # this narrows the nullable columns' type and stays closed should that check ever change.
        raise GateError("CHAIN_INTEGRITY_FAILED", "the stored chain head does not cover this record's link; no "
                        "proof material is served from it", chain_id=chain_id, failed_checks=["head_covers_record"])
    first, last = chain_window(position, size, chain_limit)
    links = [json.loads(row["link_json"]) for row in ledger.chain_links_window(chain_id, first, last)]
    refs = [(level, index) for level, index in nodes_needed_for_inclusion(position - 1, size)]
    root = _peaks_root(head)
    return ChainExcerpt.from_store(
        chain_id=chain_id,
        chain_size=size,
        head_link_hash=head_link_hash,
        merkle_root=merkle_root,
        record_position=position,
        links=links,
        get_node=service._node_getter(chain_id, refs),
        checkpoint=service.checkpoint(chain_id, size, root),
    )


def inclusion_for(service: AuditChainService, scope: str, chain_id: str, decision_id: str,
                  tree_size: int | None) -> InclusionAnswer | None:
    """RFC 6962 inclusion proof of a decision's leaf in the tree of `tree_size` leaves (default:
    the current head), with the signed checkpoint of that size. None when not in scope."""
    head = service.ledger.chain_head(chain_id)
    link = service.ledger.chain_link_for(decision_id)
    if not owns_chain(head, scope, chain_id) or link is None or link["chain_id"] != chain_id:
        return None
    head = service.consistent_head(chain_id)
    if head is None:
        return None
    size = head["size"] if tree_size is None else tree_size
    position = link["chain_position"]
    if not position <= size <= head["size"]:
        raise GateError("REQUEST_INVALID", f"tree_size must be between {position} and {head['size']}",
                        errors=[{"field": "tree_size", "code": "out_of_range",
                                 "message": f"{position} to {head['size']}"}])
    refs = [(level, index) for level, index in nodes_needed_for_inclusion(position - 1, size)]
    proof = inclusion_proof_from_nodes(position - 1, size, service._node_getter(chain_id, refs))
    root = service.tree_root(chain_id, size)
    return {
        "ok": True,
        "chain_id": chain_id,
        "decision_id": decision_id,
        "tree_algorithm": C.CHAIN_TREE_ALGORITHM,
        "leaf_index": position - 1,
        "leaf_hash": link["leaf_hash"],
        "tree_size": size,
        "proof": proof,
        "root_hash": root,
        "checkpoint": service.checkpoint(chain_id, size, root),
    }


def consistency_for(service: AuditChainService, scope: str, chain_id: str, first: int,
                    second: int | None) -> ConsistencyAnswer | None:
    """RFC 6962 consistency proof between tree sizes `first` and `second` (default: the head),
    with both roots recomputed from stored nodes and both signed checkpoints."""
    head = service.ledger.chain_head(chain_id)
    if not owns_chain(head, scope, chain_id):
        return None
    head = service.consistent_head(chain_id)
    if head is None:
        return None
    second = head["size"] if second is None else second
    if not 1 <= first <= second <= head["size"]:
        raise GateError("REQUEST_INVALID", f"need 1 <= first <= second <= {head['size']}",
                        errors=[{"field": "first", "code": "out_of_range",
                                 "message": f"1 <= first <= second <= {head['size']}"}])
    refs = [(level, index) for level, index in nodes_needed_for_consistency(first, second)]
    proof = consistency_proof_from_nodes(first, second, service._node_getter(chain_id, refs))
    first_root, second_root = service.tree_root(chain_id, first), service.tree_root(chain_id, second)
    return {
        "ok": True,
        "chain_id": chain_id,
        "tree_algorithm": C.CHAIN_TREE_ALGORITHM,
        "first": first,
        "second": second,
        "first_root": first_root,
        "second_root": second_root,
        "proof": proof,
        "first_checkpoint": service.checkpoint(chain_id, first, first_root),
        "second_checkpoint": service.checkpoint(chain_id, second, second_root),
    }
