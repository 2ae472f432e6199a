"""The signed event chains (the hold chain, the release and governance chains, and the key chain) in the one
witnessed checkpoint log of the audit chain (`gate.chain.checkpoint_log`, docs/verification.md §7.4).

An event chain links each event to the hash of the one before (`seq` 1, 2, …, `event_hash`), and
its signed head is signed over whatever the ledger holds: deleting the newest events (and setting
a hold back to `open`) leaves a shorter chain that still verifies. Its checkpoints are written in
exactly the format of the audit chain's (`gate.chain.merkle.checkpoint_body`, signed by
`sign_checkpoint`): `tree_size` is the number of events and `root_hash` the RFC 6962 root over
their `event_hash` values, oldest first (each hash is a leaf's data, as a chain `leaf_hash` is).
So the same log holds them, the same `append_checkpoint` refuses one that does not extend the
one before, and the same `extension_failures` compares a chain with the newest one held; a
consistency proof between two sizes is computed from the events themselves.

The chain ids keep the kinds apart from each other and from the audit chain (`chain_` + 32 hex):
`hold_chain_<first 32 hex of the scope hash>`, `governance_chain_<…>`, `key_chain_<…>` (the
scope's key grants, gate.releases.key_grants) and
`release_chain_<32 hex of sha256(canon([scope_hash, rulebook_id]))>`.

A document or packet that states a signed time (`as_of`) is compared with the newest held
checkpoint of its chain made no later than that time (`held_at`): what the witness held when the
gate signed it, so an older document stays valid after the chain grew.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from gate.chain.checkpoint_log import extension_failures, latest_checkpoint
from gate.chain.merkle import consistency_proof, mth, verify_checkpoint
from gate.keys.anchors import TrustAnchors
from gate.protocol.canonical import sha256_hex
from gate.strict_json import JsonValue

__all__ = [
    "ChainWitness",
    "event_chain_failures",
    "event_tree_root",
    "governance_chain_id",
    "held_at",
    "held_checkpoint_problems",
    "hold_chain_id",
    "key_chain_id",
    "release_chain_id",
    "witness_problems",
]


class ChainWitness(Protocol):
    """What a ledger's event writer calls (`gate.services.chains.EventChainWitness`): `check`
    inside the write's transaction before the event (it raises to refuse a chain that does not
    extend its witnessed checkpoint, and returns the hashes it read), `publish` after it."""

    def check(self, chain_id: str, read_hashes: Callable[[], Sequence[str]]) -> list[str]: ...

    def publish(self, chain_id: str, hashes: Sequence[str]) -> None: ...


def hold_chain_id(scope_hash: str) -> str:
    """The checkpoint chain id of a scope's hold chain."""
    return "hold_chain_" + scope_hash[:32]


def governance_chain_id(scope_hash: str) -> str:
    """The checkpoint chain id of a scope's governance chain (its release-policy changes)."""
    return "governance_chain_" + scope_hash[:32]


def key_chain_id(scope_hash: str) -> str:
    """The checkpoint chain id of a scope's key chain (its grants of keys that act on production)."""
    return "key_chain_" + scope_hash[:32]


def release_chain_id(scope_hash: str, rulebook_id: str) -> str:
    """The checkpoint chain id of one rulebook's release chain in a scope."""
    return "release_chain_" + sha256_hex([scope_hash, rulebook_id])[:32]


def event_tree_root(event_hashes: Sequence[str]) -> str:
    """RFC 6962 root over the events' hashes, oldest first (the empty root for no event);
    ValueError when a hash is not even-length lowercase hex."""
    return mth(list(event_hashes))


def event_chain_failures(held: Mapping[str, JsonValue] | None, event_hashes: Sequence[str]) -> list[str]:
    """Named failures of a whole event chain (its events' hashes from seq 1, oldest first)
    against the `held` checkpoint: `checkpoint_log.size` when it has fewer events,
    `checkpoint_log.consistency` when its first `tree_size` events do not give the held root
    (an event edited, deleted, inserted or replaced). Empty when nothing is held. Never raises."""
    if held is None:
        return []
    hashes = list(event_hashes)
    size = held.get("tree_size")
    try:
        root = event_tree_root(hashes)
        proof = consistency_proof(size, len(hashes), hashes) if type(size) is int and 0 < size <= len(hashes) else None
    except (TypeError, ValueError):
        return ["checkpoint_log.consistency"]
    return extension_failures(dict(held), len(hashes), root, proof)


def held_at(entries: Sequence[Mapping[str, JsonValue]], chain_id: str, as_of: Any) -> Mapping[str, JsonValue] | None:
    """The newest checkpoint of `chain_id` among `entries` (a log, in append order) made no later
    than `as_of` (UTC milliseconds text; None when not text): what a witness held then."""
    if not isinstance(as_of, str):
        return None
    found: Mapping[str, JsonValue] | None = None
    for entry in entries:
        stamp = entry.get("created_at")
        if entry.get("chain_id") == chain_id and isinstance(stamp, str) and stamp <= as_of:
            found = entry
    return found


def held_checkpoint_problems(held: Mapping[str, JsonValue], anchors: TrustAnchors) -> list[str]:
    """A held checkpoint (of any chain) must carry a signature that a trusted key verifies: an
    edited log line is refused, not trusted."""
    stated = held.get("signature")
    signature: Mapping[str, JsonValue] = stated if isinstance(stated, Mapping) else {}
    key = anchors.select_ed25519(signature.get("key_id"), signature.get("public_key_fingerprint"))
    if key is None:
        return ["no trusted key for the held checkpoint's signature"]
    result = verify_checkpoint(dict(held), key.public_key_pem)
    return [] if result.valid else [f"the held checkpoint fails {', '.join(result.failed_checks)}"]


def witness_problems(chain_id: str, events: Sequence[Any], entries: Sequence[Mapping[str, JsonValue]],
                     anchors: TrustAnchors | None, as_of: Any = None) -> list[str]:
    """A whole served event chain (its events from seq 1, oldest first) against a checkpoint log:
    the newest checkpoint of `chain_id` (made no later than `as_of` when the document states a
    signed time), its signature checked with `anchors` (None: not checked), must be extended by
    the events (`event_chain_failures`). [] when nothing of the chain is held."""
    held = (held_at(entries, chain_id, as_of) if as_of is not None
            else latest_checkpoint([dict(entry) for entry in entries], chain_id))
    if held is None:
        return []
    problems = held_checkpoint_problems(held, anchors) if anchors is not None else []
    hashes = [str(event.get("event_hash")) if isinstance(event, Mapping) else "" for event in events]
    failures = event_chain_failures(held, hashes)
    where = f"checkpoint_log: the checkpoint of {held.get('tree_size')} events of {chain_id} witnessed at {held.get('created_at')}"
    if "checkpoint_log.size" in failures:
        problems.append(f"{where} is longer than the document's {len(hashes)} events (checkpoint_log.size: "
                        "the chain was cut back)")
    elif failures:
        problems.append(f"{where} has another root than the document's first events (checkpoint_log.consistency: "
                        "the chain was rewritten)")
    return problems

