"""The audit-chain material of one packet: `chain_window` (which links are exported) and
`ChainExcerpt` (the links, inclusion proof and checkpoint read under one chain head)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from gate.chain.links import ChainLink
from gate.chain.merkle import Checkpoint, GetNode, inclusion_proof_from_nodes
from gate.packets.common import _is_int


def chain_window(record_position: int, chain_size: int, chain_limit: int) -> tuple[int, int]:
    """(first, last) positions of the exported links: `chain_limit` links (fewer in a shorter
    chain) that contain `record_position` and reach as far toward the head as the limit allows:
    last = min(chain_size, record_position + chain_limit - 1), first = max(1, last - chain_limit + 1).
    """
    if not (_is_int(record_position) and _is_int(chain_size) and _is_int(chain_limit)):
        raise ValueError("positions, size and limit must be integers")
    if not (1 <= record_position <= chain_size and chain_limit >= 1):
        raise ValueError("need 1 <= record_position <= chain_size and chain_limit >= 1")
    last = min(chain_size, record_position + chain_limit - 1)
    return max(1, last - chain_limit + 1), last


@dataclass(frozen=True)
class ChainExcerpt:
    """The audit-chain material of one packet, as read under one chain head.

    * `chain_id`, `chain_size`, `head_link_hash`, `merkle_root` (the rolling root): the head;
    * `record_position`: the record's chain position;
    * `links`: the stored links of `chain_window(record_position, chain_size, chain_limit)`,
      ascending (extra store columns are dropped by the builder);
    * `inclusion_proof`: the RFC 6962 audit path of leaf `record_position - 1` in the tree of
      `chain_size` leaves;
    * `checkpoint`: a checkpoint signed with `gate.chain.merkle.sign_checkpoint` for
      (`chain_id`, `chain_size`).
    """

    chain_id: str
    chain_size: int
    head_link_hash: str
    merkle_root: str
    record_position: int
    links: tuple[ChainLink, ...]
    inclusion_proof: tuple[str, ...]
    checkpoint: Checkpoint

    @classmethod
    def from_store(
        cls,
        *,
        chain_id: str,
        chain_size: int,
        head_link_hash: str,
        merkle_root: str,
        record_position: int,
        links: Iterable[ChainLink],
        get_node: GetNode,
        checkpoint: Checkpoint,
    ) -> ChainExcerpt:
        """Build the excerpt, reading the audit path from a node store (`get_node(level, index)`;
        the nodes needed are `gate.chain.merkle.nodes_needed_for_inclusion(record_position - 1, chain_size)`)."""
        proof = inclusion_proof_from_nodes(record_position - 1, chain_size, get_node)
        return cls(chain_id, chain_size, head_link_hash, merkle_root, record_position,
                   tuple(links), tuple(proof), checkpoint)
