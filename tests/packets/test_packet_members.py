"""The builder's TypedDicts (gate.packets.members) name exactly the members the verifier checks."""

from gate.packets.common import (
    _CHAIN_MEMBERS,
    _MANIFEST_MEMBERS,
    _PROOF_MEMBERS,
    _REQUIRED_MEMBERS,
    _WINDOW_MEMBERS,
    PACKET_MEMBERS,
    RECEIPT_HEAD_MEMBERS,
)
from gate.packets.members import (
    AuditChain,
    ChainConsistency,
    ChainWindow,
    DecisionPacket,
    InclusionProof,
    PacketManifest,
    ReceiptChainHead,
)
from gate.packets.witness import CONSISTENCY_MEMBERS


def test_typed_members_are_the_checked_members():
    assert set(PacketManifest.__required_keys__) == _MANIFEST_MEMBERS
    assert set(AuditChain.__required_keys__) == _CHAIN_MEMBERS
    assert set(ChainWindow.__required_keys__) == _WINDOW_MEMBERS
    assert set(InclusionProof.__required_keys__) == _PROOF_MEMBERS
    assert set(ReceiptChainHead.__required_keys__) == set(RECEIPT_HEAD_MEMBERS)
    assert set(ChainConsistency.__required_keys__) == CONSISTENCY_MEMBERS


def test_typed_packet_is_the_format():
    assert set(DecisionPacket.__required_keys__) | set(DecisionPacket.__optional_keys__) == PACKET_MEMBERS
    assert set(DecisionPacket.__required_keys__) == set(_REQUIRED_MEMBERS)
