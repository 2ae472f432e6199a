"""Writes tests/chain/vectors/decision-chain-golden.json from the naive reference code only.

Run: .venv/bin/python tests/chain/make_chain_vectors.py
The links, rolling roots, RFC 6962 roots and proofs come from `chain_support` (not from
`gate.chain.links` or `gate.chain.merkle`); the checkpoint signature is made with PyNaCl directly. Key id
and fingerprint use `gate.keys.signing`, whose formats are pinned by the crypto tests.
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import nacl.signing
from chain_support import (
    SEED,
    VECTORS,
    naive_chain,
    naive_h,
    naive_mth,
    naive_path,
    naive_proof,
)

from gate.keys.signing import Ed25519Key

SIZE = 7
CREATED_AT = "2026-05-21T00:01:00.000Z"


def tree_vectors(leaves: list[str]) -> dict:
    data = [bytes.fromhex(leaf) for leaf in leaves]
    return {
        "leaves": leaves,
        "roots": {str(n): naive_mth(data[:n]).hex() for n in range(len(data) + 1)},
        "inclusion_proofs": [
            {"index": i, "tree_size": n, "path": [p.hex() for p in naive_path(i, data[:n])]}
            for n in range(1, len(data) + 1) for i in range(n)
        ],
        "consistency_proofs": [
            {"m": m, "n": n, "proof": [p.hex() for p in naive_proof(m, data[:n])]}
            for n in range(len(data) + 1) for m in range(n + 1)
        ],
    }


def checkpoint(chain_id: str, size: int, root: str) -> dict:
    key = Ed25519Key.from_seed(SEED)
    body = {
        "checkpoint_version": "decision_chain_checkpoint_v1", "chain_id": chain_id,
        "tree_size": size, "root_hash": root, "hash_algorithm": "sha256",
        "tree_algorithm": "rfc6962_sha256", "created_at": CREATED_AT,
    }
    digest = naive_h(body)
    raw = nacl.signing.SigningKey(SEED).sign(digest.encode("utf-8")).signature
    signature = base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")
    return {**body, "checkpoint_hash": digest, "signature": {
        "algorithm": "ed25519", "key_id": key.key_id,
        "public_key_fingerprint": key.fingerprint, "signature": signature}}


def main() -> None:
    links = naive_chain(SIZE, chain_id="chain_golden")
    tree = tree_vectors([link["leaf_hash"] for link in links])
    document = {
        "description": "A 7-link decision_chain_v1 chain (rolling_sha256_pair_v1), the RFC 6962 tree "
                       "over its leaf hashes (every root, inclusion and consistency proof) and a signed "
                       "decision_chain_checkpoint_v1 of the full tree. Made by make_chain_vectors.py.",
        "checkpoint_seed_hex": SEED.hex(),
        "checkpoint_public_key_pem": Ed25519Key.from_seed(SEED).public_key_pem,
        "links": links,
        "chain_size": SIZE,
        "head_link_hash": links[-1]["link_hash"],
        "rolling_merkle_root": links[-1]["merkle_root"],
        "tree": tree,
        "checkpoint": checkpoint("chain_golden", SIZE, tree["roots"][str(SIZE)]),
    }
    path = VECTORS / "decision-chain-golden.json"
    path.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
