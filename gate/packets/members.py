"""The packet `build_packet` writes (`decision_packet_v1`) and its members, as TypedDicts.

They are wire objects: the builder fills them in the order given here and the packet hash
covers them byte for byte, so they stay plain dicts (a TypedDict adds no runtime type). Their
member names are the sets the verifier checks exactly (`gate.packets.common`);
`tests/packets/test_packet_members.py` holds the two in step. The verifier reads packets as
untrusted `Mapping`s, never as these types.
"""

# No `from __future__ import annotations` here: with evaluated annotations TypedDict tells the
# NotRequired members apart at runtime (tests/packets/test_packet_members.py reads them).
from typing import Any, NotRequired, TypedDict

from gate.chain.links import ChainLink
from gate.chain.merkle import Checkpoint
from gate.holds.events import HoldCommitment, HoldEvent
from gate.strict_json import JsonValue


class PacketOptionsJSON(TypedDict):
    """`packet_manifest.options`: the export options (`PacketOptions.to_dict()`), in `_OPTION_NAMES` order."""

    include_input: bool
    include_chain: bool
    include_intelligence: bool
    execution_limit: int
    outcome_limit: int
    chain_limit: int


class PacketManifest(TypedDict):
    """`packet_manifest`: how the packet was written and what it holds."""

    canonicalization: str
    hash_algorithm: str
    options: PacketOptionsJSON
    components: dict[str, int]       # count per component name
    totals: dict[str, int]           # stored count per listed part
    truncated: dict[str, bool]       # fewer exported than stored, per listed part


class ChainWindow(TypedDict):
    """`audit_chain.window`: the exported positions and the rolling state before the first."""

    first_position: int
    last_position: int
    previous_link_hash: str | None
    previous_merkle_root: str | None


class InclusionProof(TypedDict):
    """`audit_chain.inclusion_proof`: the record's RFC 6962 audit path."""

    tree_algorithm: str
    leaf_index: int
    tree_size: int
    leaf_hash: str
    proof: list[str]


class ChainIdentity(TypedDict):
    """Which decision chain, its versions and its size, as the packet's `audit_chain` and the chain
    view of `GET /api/decision/chains/{id}` both state them."""

    chain_id: str
    decision_chain_version: str
    merkle_strategy: str
    chain_size: int


class ChainState(ChainIdentity):
    """A decision chain as of its head: its identity, its Merkle root and its head link (the chain
    view states them as stored, where a tampered head may hold nulls)."""

    merkle_root: str
    head_link_hash: str


class AuditChain(ChainState):
    """`audit_chain`: the window of links around the record, its proof and the checkpoint."""

    links: list[ChainLink]
    window: ChainWindow
    record_position: int
    inclusion_proof: InclusionProof
    checkpoint: Checkpoint
    verification_hints: dict[str, str]


class ReceiptChainHead(TypedDict):
    """`receipt_chain_head`: the decision's signed receipt head, as stored."""

    receipt_chain_version: str
    decision_id: Any
    count: Any
    head_row_hash: Any
    key_id: Any
    signature: Any


class ChainConsistency(TypedDict):
    """`chain_consistency`: an RFC 6962 consistency proof to the packet's checkpoint."""

    tree_algorithm: str
    first: int
    second: int
    first_root: str
    proof: list[str]


class ConsistencyFrom(TypedDict):
    """What `build_packet` exports as `chain_consistency`, as read from the store: a witness's
    tree size, its root, the proof."""

    first: int
    first_root: str
    proof: list[str]


class UnsealedPacket(TypedDict):
    """Every member of the packet but `packet_hash`, in the order the builder writes them."""

    decision_packet_version: str
    decision_id: str
    record_hash: str
    receipt_hash: str
    exported_at: str
    packet_manifest: PacketManifest
    decision_record: dict[str, JsonValue]
    original_input: NotRequired[Any]
    execution_receipts: list[dict[str, JsonValue]]
    outcome_records: list[dict[str, JsonValue]]
    crm_sync_records: list[dict[str, JsonValue]]
    policy_intelligence: NotRequired[dict[str, dict[str, JsonValue]]]
    audit_chain: NotRequired[AuditChain]
    receipt_chain_head: NotRequired[ReceiptChainHead]
    chain_consistency: NotRequired[ChainConsistency]
    hold_events: NotRequired[list[HoldEvent]]  # the decision's hold_event_v1 events, oldest first
    hold_commitment: NotRequired[HoldCommitment]  # a held decision's signed hold_commitment_v1


class DecisionPacket(UnsealedPacket):
    """The packet: `packet_hash` = sha256(canonical(the unsealed packet)), written last."""

    packet_hash: str
