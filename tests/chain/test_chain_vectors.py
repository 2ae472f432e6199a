"""The golden chain file (tests/chain/vectors/decision-chain-golden.json) is reproduced exactly."""

from __future__ import annotations

import json

import pytest
from chain_support import SEED, VECTORS

from gate.chain.links import new_link, verify_links
from gate.chain.merkle import (
    checkpoint_body,
    complete_subtrees,
    consistency_proof,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    mth,
    sign_checkpoint,
    verify_checkpoint,
    verify_consistency,
    verify_inclusion,
)
from gate.keys.signing import Ed25519Key

GOLDEN = json.loads((VECTORS / "decision-chain-golden.json").read_text())
TREE = GOLDEN["tree"]
LEAVES = TREE["leaves"]
STORE = {(n.level, n.index): n.hash for n in complete_subtrees(LEAVES)}


def get_node(level, index):
    return STORE[(level, index)]


def test_links_are_rebuilt_by_new_link():
    rebuilt, prev = [], None
    for stated in GOLDEN["links"]:
        link = new_link(**{k: stated[k] for k in (
            "chain_id", "chain_position", "previous_link_hash", "previous_merkle_root", "decision_id",
            "record_hash", "receipt_hash", "policy_id", "policy_version", "created_at")})
        assert link["previous_link_hash"] == (prev["link_hash"] if prev else None)
        rebuilt.append(link)
        prev = link
    assert rebuilt == GOLDEN["links"]
    assert rebuilt[-1]["link_hash"] == GOLDEN["head_link_hash"]
    assert rebuilt[-1]["merkle_root"] == GOLDEN["rolling_merkle_root"]


def test_golden_links_verify_and_the_tree_is_over_their_leaf_hashes():
    assert verify_links(GOLDEN["links"]).valid
    assert [link["leaf_hash"] for link in GOLDEN["links"]] == LEAVES


@pytest.mark.parametrize("size", range(len(LEAVES) + 1))
def test_golden_roots(size):
    assert mth(LEAVES[:size]) == TREE["roots"][str(size)]


def test_golden_inclusion_proofs():
    for case in TREE["inclusion_proofs"]:
        index, size, path = case["index"], case["tree_size"], case["path"]
        assert inclusion_proof(index, LEAVES[:size]) == path
        assert inclusion_proof_from_nodes(index, size, get_node) == path
        assert verify_inclusion(index, size, LEAVES[index], path, TREE["roots"][str(size)])


def test_golden_consistency_proofs():
    for case in TREE["consistency_proofs"]:
        m, n, proof = case["m"], case["n"], case["proof"]
        assert consistency_proof(m, n, LEAVES) == proof
        assert consistency_proof_from_nodes(m, n, get_node) == proof
        assert verify_consistency(m, n, TREE["roots"][str(m)], TREE["roots"][str(n)], proof)


def test_golden_checkpoint_is_reproduced_and_verifies():
    stated = GOLDEN["checkpoint"]
    body = checkpoint_body(stated["chain_id"], stated["tree_size"], stated["root_hash"], stated["created_at"])
    assert sign_checkpoint(body, Ed25519Key.from_seed(SEED)) == stated
    assert bytes.fromhex(GOLDEN["checkpoint_seed_hex"]) == SEED
    assert verify_checkpoint(stated, GOLDEN["checkpoint_public_key_pem"]).valid
