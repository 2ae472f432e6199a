"""Hypothesis properties of the RFC 6962 functions over random tree sizes."""

from __future__ import annotations

from chain_support import flip_hex, leaves_hex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.chain.merkle import (
    CompactRange,
    complete_subtrees,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    mth,
    root_from_nodes,
    verify_consistency,
    verify_inclusion,
)

LEAVES = leaves_hex(300, "prop")
STORE = {(n.level, n.index): n.hash for n in complete_subtrees(LEAVES)}
ROOTS = [mth(LEAVES[:n]) for n in range(301)]
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def get_node(level, index):
    return STORE[(level, index)]


@SETTINGS
@given(size=st.integers(1, 300), data=st.data())
def test_inclusion_from_nodes_verifies_and_any_flip_breaks_it(size, data):
    index = data.draw(st.integers(0, size - 1))
    proof = inclusion_proof_from_nodes(index, size, get_node)
    assert proof == inclusion_proof(index, LEAVES[:size])
    assert verify_inclusion(index, size, LEAVES[index], proof, ROOTS[size])
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = flip_hex(proof[at])
        assert not verify_inclusion(index, size, LEAVES[index], proof, ROOTS[size])


@SETTINGS
@given(n=st.integers(1, 300), data=st.data())
def test_consistency_from_nodes_verifies_and_any_flip_breaks_it(n, data):
    m = data.draw(st.integers(1, n))
    proof = consistency_proof_from_nodes(m, n, get_node)
    assert proof == consistency_proof(m, n, LEAVES)
    assert verify_consistency(m, n, ROOTS[m], ROOTS[n], proof)
    if proof:
        at = data.draw(st.integers(0, len(proof) - 1))
        proof[at] = flip_hex(proof[at])
        assert not verify_consistency(m, n, ROOTS[m], ROOTS[n], proof)


@SETTINGS
@given(m=st.integers(1, 299), n=st.integers(2, 300), other=st.integers(1, 300))
def test_a_proof_never_links_a_tree_head_to_a_different_tree(m, n, other):
    if m < n and other != m:
        assert not verify_consistency(m, n, ROOTS[other], ROOTS[n], consistency_proof(m, n, LEAVES))


@SETTINGS
@given(size=st.integers(0, 300))
def test_root_from_nodes_and_compact_range_agree_with_mth(size):
    assert root_from_nodes(size, get_node) == ROOTS[size]
    assert CompactRange.from_nodes(size, get_node).root() == ROOTS[size]


@settings(max_examples=100, deadline=None)
@given(leaves=st.lists(st.binary(min_size=0, max_size=40).map(bytes.hex), max_size=40), data=st.data())
def test_arbitrary_leaf_data(leaves, data):
    root = mth(leaves)
    if leaves:
        index = data.draw(st.integers(0, len(leaves) - 1))
        assert verify_inclusion(index, len(leaves), leaves[index], inclusion_proof(index, leaves), root)
