"""The node store form: append-completed subtrees, proofs and roots from O(log n) nodes."""

from __future__ import annotations

import math

import pytest
from chain_support import leaves_hex, naive_mth, naive_store

from gate.chain.merkle import (
    CompactRange,
    Node,
    complete_subtrees,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    mth,
    nodes_needed_for_append,
    nodes_needed_for_consistency,
    nodes_needed_for_inclusion,
    nodes_needed_for_root,
    root_from_nodes,
    subtrees_completed_by_append,
    verify_consistency,
    verify_inclusion,
)

LEAVES = leaves_hex(70)
STORE = naive_store(LEAVES)


class CountingStore:
    """A dict store that records every (level, index) read."""

    def __init__(self, nodes: dict):
        self.nodes, self.reads = nodes, []

    def __call__(self, level: int, index: int) -> str:
        self.reads.append((level, index))
        return self.nodes[(level, index)]


class AnyHashStore(CountingStore):
    """Answers every read with a fixed hash: counts reads of a huge tree without building it."""

    def __call__(self, level: int, index: int) -> str:
        self.reads.append((level, index))
        return "ab" * 32


def test_appending_one_leaf_at_a_time_stores_exactly_the_complete_subtrees():
    store = {}
    for size, leaf in enumerate(LEAVES):
        reader = CountingStore(store)
        completed = subtrees_completed_by_append(size, leaf, reader)
        assert reader.reads == nodes_needed_for_append(size)
        assert completed[0] == Node(0, size, naive_store([leaf])[(0, 0)])
        for node in completed:
            assert (node.level, node.index) not in store  # insert-only rows
            store[(node.level, node.index)] = node.hash
    assert store == STORE


def test_complete_subtrees_backfills_the_same_store():
    assert {(n.level, n.index): n.hash for n in complete_subtrees(LEAVES)} == STORE


def test_nodes_needed_for_append_follow_the_trailing_one_bits():
    assert nodes_needed_for_append(0) == []
    assert nodes_needed_for_append(6) == []
    assert nodes_needed_for_append(7) == [(0, 6), (1, 2), (2, 0)]
    assert nodes_needed_for_append(11) == [(0, 10), (1, 4)]


@pytest.mark.parametrize("size", range(0, 71))
def test_root_from_nodes_equals_mth(size):
    reader = CountingStore(STORE)
    assert root_from_nodes(size, reader) == mth(LEAVES[:size])
    assert reader.reads == nodes_needed_for_root(size)
    assert len(reader.reads) == bin(size).count("1")


@pytest.mark.parametrize("size", range(1, 71))
def test_inclusion_proofs_from_nodes_equal_list_based_proofs(size):
    for index in range(size):
        reader = CountingStore(STORE)
        proof = inclusion_proof_from_nodes(index, size, reader)
        assert proof == inclusion_proof(index, LEAVES[:size])
        assert reader.reads == nodes_needed_for_inclusion(index, size)


@pytest.mark.parametrize("n", range(0, 71))
def test_consistency_proofs_from_nodes_equal_list_based_proofs(n):
    for m in range(0, n + 1):
        reader = CountingStore(STORE)
        proof = consistency_proof_from_nodes(m, n, reader)
        assert proof == consistency_proof(m, n, LEAVES)
        assert reader.reads == nodes_needed_for_consistency(m, n)


@pytest.mark.parametrize("size", [100_000, 2**17 - 1, 2**17, 2**17 + 1, 999_999])
def test_a_large_tree_needs_only_logarithmically_many_node_reads(size):
    bound = 2 * math.ceil(math.log2(size))
    for index in {0, 1, size // 3, size // 2, size - 2, size - 1}:
        reader = AnyHashStore({})
        inclusion_proof_from_nodes(index, size, reader)
        assert len(reader.reads) <= bound
    for m in {1, 2, size // 3, size // 2 + 1, size - 1}:
        reader = AnyHashStore({})
        consistency_proof_from_nodes(m, size, reader)
        assert len(reader.reads) <= bound
    reader = AnyHashStore({})
    root_from_nodes(size, reader)
    assert len(reader.reads) <= math.ceil(math.log2(size)) + 1


def test_read_bound_holds_for_every_index_and_size_up_to_300():
    for size in range(1, 301):
        bound = 2 * math.ceil(math.log2(size)) if size > 1 else 0
        assert max(len(nodes_needed_for_inclusion(i, size)) for i in range(size)) <= bound
        assert max(len(nodes_needed_for_consistency(m, size)) for m in range(size + 1)) <= bound


def test_a_missing_or_malformed_node_is_a_lookup_error():
    with pytest.raises(LookupError):
        root_from_nodes(3, lambda level, index: None)
    with pytest.raises(LookupError):
        inclusion_proof_from_nodes(0, 3, lambda level, index: "XYZ")
    with pytest.raises(KeyError):  # the store's own error passes through unchanged
        consistency_proof_from_nodes(3, 7, lambda level, index: {}[(level, index)])


@pytest.mark.parametrize("call", [
    lambda: inclusion_proof_from_nodes(5, 5, STORE.get), lambda: consistency_proof_from_nodes(6, 5, STORE.get),
    lambda: root_from_nodes(-1, STORE.get), lambda: nodes_needed_for_inclusion(0, 0),
    lambda: nodes_needed_for_append(-1), lambda: subtrees_completed_by_append(0, "nothex", STORE.get),
])
def test_node_functions_raise_value_error_on_bad_sizes(call):
    with pytest.raises(ValueError):
        call()


# ---------------------------------------------------------------- compact range


def test_compact_range_tracks_the_root_and_emits_the_store():
    compact, store = CompactRange(), {}
    assert compact.root() == mth([])
    for size, leaf in enumerate(LEAVES, start=1):
        compact, completed = compact.append(leaf)
        store.update({(n.level, n.index): n.hash for n in completed})
        assert compact.size == size and compact.root() == naive_mth([bytes.fromhex(x) for x in LEAVES[:size]]).hex()
        assert CompactRange.from_nodes(size, lambda level, index: store[(level, index)]) == compact
    assert store == STORE


def test_compact_range_needs_one_peak_per_set_bit():
    with pytest.raises(ValueError):
        CompactRange(3, ("ab" * 32,))
    with pytest.raises(ValueError):
        CompactRange(-1, ())


def test_proofs_from_a_mid_size_store_verify_against_its_root():
    leaves = leaves_hex(5000, "mid")
    store = {(n.level, n.index): n.hash for n in complete_subtrees(leaves)}
    get = lambda level, index: store[(level, index)]  # noqa: E731
    root_5000, root_1234 = root_from_nodes(5000, get), root_from_nodes(1234, get)
    assert root_5000 == mth(leaves)
    for index in (0, 1, 1233, 2047, 2048, 4095, 4096, 4999):
        assert verify_inclusion(index, 5000, leaves[index], inclusion_proof_from_nodes(index, 5000, get), root_5000)
    assert verify_consistency(1234, 5000, root_1234, root_5000, consistency_proof_from_nodes(1234, 5000, get))
