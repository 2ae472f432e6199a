"""A packet against witnessed checkpoints: the optional `chain_consistency` member (an RFC 6962
consistency proof from an earlier tree size to the packet's checkpoint) and the
`checkpoint_log` check of `gate verify --checkpoints FILE`.

A packet's checkpoint proves the record's leaf is in the signed tree of `chain_size` leaves. It
cannot show that the chain was not cut back and regrown before the export: the gate signs
whatever head its ledger holds. A checkpoint copied out of the gate earlier (a witness's log,
`gate.chain.checkpoint_log`) can: the packet's tree must be at least as large as the held one and
extend it. When it is larger, the packet has to carry the proof (`GET …/packet?
consistency_from=<held tree_size>`); the held checkpoint's own signature is checked again with
the verifier's trusted keys, so an edited log line is refused, not trusted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gate.chain.checkpoint_log import extension_failures, latest_checkpoint
from gate.chain.event_witness import held_checkpoint_problems
from gate.chain.merkle import Checkpoint, verify_consistency
from gate.packets.common import PacketSourceError, _exact_members, _is_hex64, _is_int
from gate.packets.members import ChainConsistency, ConsistencyFrom
from gate.packets.result import _State
from gate.strict_json import JsonValue
from gate.verify import TrustAnchors
from gate.vocabulary import CHAIN_TREE_ALGORITHM

CONSISTENCY_MEMBERS = frozenset({"tree_algorithm", "first", "second", "first_root", "proof"})


def consistency_member(consistency: ConsistencyFrom, checkpoint: Checkpoint) -> ChainConsistency:
    """The packet's `chain_consistency` from ``{first, first_root, proof}`` read from the store;
    PacketSourceError unless the proof leads from `first_root` to the checkpoint's root."""
    first, first_root, proof = consistency.get("first"), consistency.get("first_root"), list(consistency.get("proof", ()))
    second, root = checkpoint.get("tree_size"), checkpoint.get("root_hash")
    if not (isinstance(first, int) and isinstance(second, int) and isinstance(first_root, str)
            and isinstance(root, str) and verify_consistency(first, second, first_root, root, proof)):
        raise PacketSourceError("the consistency proof does not lead to the checkpoint root")
    return {"tree_algorithm": CHAIN_TREE_ALGORITHM, "first": first, "second": second,
            "first_root": first_root, "proof": proof}


def _checkpoint(packet: Mapping[str, Any]) -> Mapping[str, Any]:
    chain = packet.get("audit_chain")
    checkpoint = chain.get("checkpoint") if isinstance(chain, Mapping) else None
    return checkpoint if isinstance(checkpoint, Mapping) else {}


def check_chain_consistency(state: _State, packet: Mapping[str, Any]) -> None:
    """`chain_consistency`, when present: exactly its members, the tree algorithm, `second` the
    checkpoint's tree size and `verify_consistency(first, second, first_root,
    checkpoint.root_hash, proof)`. `first_root` itself is proven only against a held checkpoint."""
    if "chain_consistency" not in packet:
        return
    member = packet["chain_consistency"]
    problems: list[str] = []
    if not _exact_members(problems, "chain_consistency", member, CONSISTENCY_MEMBERS):
        state.conclude("chain_consistency", problems)
        return
    checkpoint = _checkpoint(packet)
    if "audit_chain" not in packet:
        problems.append("chain_consistency needs the packet's audit_chain")
    if member.get("tree_algorithm") != CHAIN_TREE_ALGORITHM:
        problems.append(f"tree_algorithm must be {CHAIN_TREE_ALGORITHM}")
    if member.get("second") != checkpoint.get("tree_size") or not _is_int(member.get("second")):
        problems.append("second must be audit_chain.checkpoint.tree_size")
    first, second, first_root, proof = (member.get("first"), member.get("second"), member.get("first_root"),
                                        member.get("proof"))
    root = checkpoint.get("root_hash")
    if not (_is_int(first) and _is_int(second) and _is_hex64(first_root) and isinstance(root, str)
            and isinstance(proof, list) and verify_consistency(first, second, first_root, root, proof)):
        problems.append("the proof does not show the tree of `first` leaves is a prefix of the checkpoint's tree")
    state.conclude("chain_consistency", problems)


def check_checkpoint_log(state: _State, packet: Mapping[str, JsonValue], log: Sequence[Mapping[str, JsonValue]],
                         anchors: TrustAnchors) -> None:
    """`checkpoint_log`: the packet's signed tree is at least the newest held checkpoint of its
    chain and extends it (`gate.chain.checkpoint_log.extension_failures`, with the packet's
    `chain_consistency` proof when it starts at the held size). `null` with a note when the log
    holds nothing of this chain; `false` for a packet without an audit chain."""
    if "audit_chain" not in packet:
        state.fail("checkpoint_log", "the packet carries no audit chain to compare with the held checkpoints")
        return
    checkpoint = _checkpoint(packet)
    chain_id = checkpoint.get("chain_id")
    held = latest_checkpoint([dict(entry) for entry in log], chain_id) if isinstance(chain_id, str) else None
    if held is None:
        state.notes.append("the checkpoint log holds no checkpoint of this chain: nothing to compare")
        return
    problems: list[str] = held_checkpoint_problems(held, anchors)
    size, root = checkpoint.get("tree_size"), checkpoint.get("root_hash")
    member = packet.get("chain_consistency")
    proof = None
    if isinstance(member, Mapping) and member.get("first") == held.get("tree_size") \
            and member.get("first_root") == held.get("root_hash") and state.checks.get("chain_consistency") is True:
        proof = member.get("proof")
    state.value("checkpoint_log.tree_size", held.get("tree_size"), size)
    for name in extension_failures(dict(held), size, root, proof):
        state.fail(name, None)
        problems.append({
            "checkpoint_log.size": f"the packet's chain has {size!r} leaves, fewer than the {held['tree_size']} "
                                   "of the held checkpoint: the chain was cut back",
            "checkpoint_log.consistency": "the packet's tree does not extend the held checkpoint's (or carries no "
                                          f"proof: export it with consistency_from={held['tree_size']})",
        }[name])
    state.conclude("checkpoint_log", problems)
