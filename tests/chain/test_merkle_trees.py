"""RFC 6962 trees over all leaves: known answers, exhaustive small sizes, tampering."""

from __future__ import annotations

import json

import pytest
from chain_support import (
    VECTORS,
    flip_hex,
    leaves_hex,
    naive_mth,
    naive_path,
    naive_proof,
)

from gate.chain import merkle
from gate.chain.merkle import (
    EMPTY_ROOT,
    consistency_proof,
    inclusion_proof,
    mth,
    verify_consistency,
    verify_inclusion,
)

KAT = json.loads((VECTORS / "rfc6962-known-answers.json").read_text())
LEAVES_64 = leaves_hex(64)
DATA_64 = [bytes.fromhex(leaf) for leaf in LEAVES_64]
ROOTS_64 = [naive_mth(DATA_64[:n]).hex() for n in range(65)]


# ---------------------------------------------------------------- RFC 6962 reference data


@pytest.mark.parametrize("size", range(9))
def test_known_answer_roots(size):
    assert mth(KAT["leaves"][:size]) == KAT["roots"][str(size)]
    assert naive_mth([bytes.fromhex(x) for x in KAT["leaves"][:size]]).hex() == KAT["roots"][str(size)]


@pytest.mark.parametrize("case", KAT["inclusion_proofs"], ids=lambda c: f"{c['index']}-of-{c['tree_size']}")
def test_known_answer_inclusion_proofs(case):
    index, size = case["index"], case["tree_size"]
    assert inclusion_proof(index, KAT["leaves"][:size]) == case["path"]
    assert verify_inclusion(index, size, KAT["leaves"][index], case["path"], KAT["roots"][str(size)])


@pytest.mark.parametrize("case", KAT["consistency_proofs"], ids=lambda c: f"{c['m']}-to-{c['n']}")
def test_known_answer_consistency_proofs(case):
    m, n = case["m"], case["n"]
    assert consistency_proof(m, n, KAT["leaves"]) == case["proof"]
    assert verify_consistency(m, n, KAT["roots"][str(m)], KAT["roots"][str(n)], case["proof"])


def test_empty_tree_is_sha256_of_nothing():
    assert mth([]) == EMPTY_ROOT == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"


def test_leaf_and_interior_node_domain_separation():
    leaf = LEAVES_64[0]
    assert merkle.leaf_node(leaf) == naive_mth([DATA_64[0]]).hex() == mth([leaf])
    assert merkle.interior_node(merkle.leaf_node(LEAVES_64[0]), merkle.leaf_node(LEAVES_64[1])) == ROOTS_64[2]


# ---------------------------------------------------------------- exhaustive small trees


@pytest.mark.parametrize("size", range(65))
def test_mth_equals_the_recursive_definition(size):
    assert mth(LEAVES_64[:size]) == ROOTS_64[size]


@pytest.mark.parametrize("size", range(1, 65))
def test_every_inclusion_proof_up_to_64(size):
    leaves, root = LEAVES_64[:size], ROOTS_64[size]
    for index in range(size):
        proof = inclusion_proof(index, leaves)
        assert proof == [node.hex() for node in naive_path(index, DATA_64[:size])]
        assert verify_inclusion(index, size, leaves[index], proof, root)


@pytest.mark.parametrize("n", range(0, 41))
def test_every_consistency_proof_up_to_40(n):
    for m in range(0, n + 1):
        proof = consistency_proof(m, n, LEAVES_64)
        assert proof == [node.hex() for node in naive_proof(m, DATA_64[:n])]
        assert verify_consistency(m, n, ROOTS_64[m], ROOTS_64[n], proof)


# ---------------------------------------------------------------- tampering


@pytest.mark.parametrize("size", [2, 3, 5, 8, 13, 31, 33, 64])
def test_tampered_inclusion_inputs_fail(size):
    leaves, root = LEAVES_64[:size], ROOTS_64[size]
    for index in range(size):
        proof = inclusion_proof(index, leaves)
        for position in range(len(proof)):
            bad = list(proof)
            bad[position] = flip_hex(bad[position])
            assert not verify_inclusion(index, size, leaves[index], bad, root)
        assert not verify_inclusion(index, size, leaves[index], proof, flip_hex(root))
        assert not verify_inclusion(index, size, flip_hex(leaves[index]), proof, root)
        assert not verify_inclusion(index, size, leaves[index], proof[:-1], root)
        assert not verify_inclusion(index, size, leaves[index], proof + [root], root)
        assert not verify_inclusion((index + 1) % size, size, leaves[index], proof, root)


@pytest.mark.parametrize("n", [2, 3, 7, 8, 9, 16, 21, 40])
def test_tampered_consistency_inputs_fail(n):
    for m in range(1, n):
        proof = consistency_proof(m, n, LEAVES_64)
        for position in range(len(proof)):
            bad = list(proof)
            bad[position] = flip_hex(bad[position])
            assert not verify_consistency(m, n, ROOTS_64[m], ROOTS_64[n], bad)
        assert not verify_consistency(m, n, flip_hex(ROOTS_64[m]), ROOTS_64[n], proof)
        assert not verify_consistency(m, n, ROOTS_64[m], flip_hex(ROOTS_64[n]), proof)
        assert not verify_consistency(m, n, ROOTS_64[m], ROOTS_64[n], proof[:-1])
        assert not verify_consistency(m, n, ROOTS_64[m], ROOTS_64[n], proof + [ROOTS_64[n]])
        assert not verify_consistency(m, n, ROOTS_64[m], ROOTS_64[n], [])


def test_a_proof_verifies_against_another_tree_head_only_where_it_is_that_heads_proof():
    """The root, not the proof, binds the tree size: a size-3 path of leaf 0 is also its
    size-4 path shape, so (size, root) must come together from one signed checkpoint."""
    for size in range(1, 34):
        for index in range(size):
            proof = inclusion_proof(index, LEAVES_64[:size])
            for other in range(index + 1, 34):
                accepted = verify_inclusion(index, other, LEAVES_64[index], proof, ROOTS_64[other])
                assert accepted == (proof == inclusion_proof(index, LEAVES_64[:other]))


def test_trivial_consistency_cases():
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert verify_consistency(0, 9, EMPTY_ROOT, ROOTS_64[9], [])
    assert not verify_consistency(0, 9, ROOTS_64[1], ROOTS_64[9], [])
    assert verify_consistency(9, 9, ROOTS_64[9], ROOTS_64[9], [])
    assert not verify_consistency(9, 9, ROOTS_64[9], ROOTS_64[8], [])
    assert not verify_consistency(9, 9, ROOTS_64[9], ROOTS_64[9], [ROOTS_64[9]])
    assert not verify_consistency(9, 8, ROOTS_64[9], ROOTS_64[8], consistency_proof(8, 9, LEAVES_64))


@pytest.mark.parametrize("args", [
    (0, 1, None, [], ROOTS_64[1]), (0, 1, LEAVES_64[0], None, ROOTS_64[1]),
    (0, 1, LEAVES_64[0], [], ROOTS_64[1].upper()), (0, 1, LEAVES_64[0].upper(), [], ROOTS_64[1]),
    (0, 1, "abc", [], ROOTS_64[1]), (True, 2, LEAVES_64[1], [], ROOTS_64[2]),
    (-1, 1, LEAVES_64[0], [], ROOTS_64[1]), (1, 1, LEAVES_64[0], [], ROOTS_64[1]),
    (0, 0, LEAVES_64[0], [], EMPTY_ROOT), ("0", 1, LEAVES_64[0], [], ROOTS_64[1]),
    (0, 2, LEAVES_64[0], "ab" * 32, ROOTS_64[2]), (0, 2, LEAVES_64[0], [7], ROOTS_64[2]),
])
def test_verify_inclusion_rejects_malformed_input_without_raising(args):
    assert verify_inclusion(*args) is False


@pytest.mark.parametrize("args", [
    (1, 2, None, ROOTS_64[2], []), (1, 2, ROOTS_64[1], ROOTS_64[2], None),
    (1.0, 2, ROOTS_64[1], ROOTS_64[2], consistency_proof(1, 2, LEAVES_64)),
    (-1, 2, ROOTS_64[1], ROOTS_64[2], []), (1, 2, ROOTS_64[1], ROOTS_64[2], [b"x"]),
])
def test_verify_consistency_rejects_malformed_input_without_raising(args):
    assert verify_consistency(*args) is False


@pytest.mark.parametrize("call", [
    lambda: inclusion_proof(3, LEAVES_64[:3]), lambda: inclusion_proof(-1, LEAVES_64[:3]),
    lambda: inclusion_proof(0, []), lambda: inclusion_proof(0, ["XYZ"]),
    lambda: consistency_proof(4, 3, LEAVES_64), lambda: consistency_proof(1, 65, LEAVES_64),
    lambda: mth(["0"]), lambda: mth([None]),
])
def test_producers_raise_value_error_on_bad_input(call):
    with pytest.raises(ValueError):
        call()
