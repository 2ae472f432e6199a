"""Packet verification of the audit chain: the record's own `audit_chain` member (step 2) and the
packet's chain excerpt (step 4): window, links, record link, head, inclusion proof, checkpoint."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gate.chain.links import (
    AUDIT_CHAIN_MEMBERS,
    leaf_hash,
    stated_audit_chain,
    verify_links,
)
from gate.chain.merkle import verify_checkpoint, verify_inclusion
from gate.packets.common import (
    _CHAIN_MEMBERS,
    _CHECKPOINT_AUTHENTICITY,
    _CHECKPOINT_INTEGRITY,
    _CHECKPOINT_SIGNATURE_MEMBERS,
    _LINK_MEMBERS,
    _PROOF_MEMBERS,
    _WINDOW_MEMBERS,
    PACKET_CHECKS,
    VERIFICATION_HINTS,
    _canon_equal,
    _digest_equal,
    _exact_members,
    _is_hex64,
    _is_int,
    _is_iso_ms,
    _object,
)
from gate.packets.excerpt import chain_window
from gate.packets.result import _State
from gate.protocol.canonical import CanonicalJSONError
from gate.strict_json import JsonValue
from gate.verify import TrustAnchors
from gate.vocabulary import (
    CHAIN_ENTRY_TYPE_DECISION,
    CHAIN_MERKLE_STRATEGY,
    CHAIN_TREE_ALGORITHM,
    DECISION_CHAIN_VERSION,
)


def _stated_leaf(record: Mapping[str, Any]) -> str | None:
    """The chain leaf of the record's stated `decision_id`, `record_hash` and `receipt_hash`
    (None when they cannot be canonicalised). Untrusted members pass as stated: a member that is
    not a string gives a leaf that no chain holds."""
    stated: list[Any] = [record.get(name) for name in ("decision_id", "record_hash", "receipt_hash")]
    try:
        return leaf_hash(*stated)
    except (CanonicalJSONError, TypeError, ValueError):
        return None


def _check_record_audit_chain(state: _State, record: Mapping[str, Any]) -> None:
    member = record.get("audit_chain")
    if member is None:
        return
    problems: list[str] = []
    if _exact_members(problems, "decision_record.audit_chain", member, frozenset(AUDIT_CHAIN_MEMBERS)):
        expected = _stated_leaf(record)
        if not _digest_equal(expected, member.get("leaf_hash")):
            problems.append("audit_chain.leaf_hash is not the leaf of this record")
        if member.get("entry_type") != CHAIN_ENTRY_TYPE_DECISION:
            problems.append("audit_chain.entry_type must be 'decision'")
        position = member.get("chain_position")
        if not _is_int(position) or position < 1:
            problems.append("audit_chain.chain_position must be a positive integer")
        elif position == 1 and member.get("merkle_root") != member.get("leaf_hash"):
            problems.append("at position 1 the rolling merkle_root is the leaf hash")
        for name in ("link_hash", "merkle_root"):
            if not _is_hex64(member.get(name)):
                problems.append(f"audit_chain.{name} must be a sha256 hex")
        if not isinstance(member.get("chain_id"), str) or not member.get("chain_id"):
            problems.append("audit_chain.chain_id must be a non-empty string")
    state.conclude("record_audit_chain", problems)


# ---- step 4


def _check_chain(state: _State, packet: Mapping[str, JsonValue], record: Mapping[str, JsonValue],
                 anchors: TrustAnchors) -> str | None:
    chain = packet["audit_chain"]
    problems: list[str] = []
    _exact_members(problems, "audit_chain", chain, _CHAIN_MEMBERS)
    if not isinstance(chain, Mapping):
        for name in PACKET_CHECKS:
            if name.startswith("audit_chain"):
                state.fail(name, "audit_chain is not an object")
        return None
    if chain.get("decision_chain_version") != DECISION_CHAIN_VERSION:
        problems.append(f"decision_chain_version must be {DECISION_CHAIN_VERSION}")
    if chain.get("merkle_strategy") != CHAIN_MERKLE_STRATEGY:
        problems.append(f"merkle_strategy must be {CHAIN_MERKLE_STRATEGY}")
    if not isinstance(chain.get("chain_id"), str) or not chain.get("chain_id"):
        problems.append("chain_id must be a non-empty string")
    size, position = chain.get("chain_size"), chain.get("record_position")
    if not _is_int(size) or size < 1:
        problems.append("chain_size must be a positive integer")
    if not _is_int(position) or not _is_int(size) or not 1 <= position <= size:
        problems.append("record_position must be an integer in 1..chain_size")
    for name in ("merkle_root", "head_link_hash"):
        if not _is_hex64(chain.get(name)):
            problems.append(f"{name} must be a sha256 hex")
    if chain.get("verification_hints") != VERIFICATION_HINTS:
        problems.append("verification_hints are not the decision_packet_v1 hints")
    state.conclude("audit_chain", problems)

    links = chain.get("links")
    links = links if isinstance(links, list) else None
    state.guard("audit_chain.window", _check_window, state, packet, chain, links)
    state.guard("audit_chain.links", _check_chain_links, state, chain, links)
    state.guard("audit_chain.record_link", _check_record_link, state, chain, links, record)
    state.guard("audit_chain.head", _check_head, state, chain, links)
    state.guard("audit_chain.inclusion_proof", _check_inclusion, state, chain, record)
    source: list[str | None] = [None]
    state.guard("audit_chain.checkpoint", _check_checkpoint, state, chain, anchors, source)
    return source[0]


def _limit_window(position: Any, size: Any, limit: Any) -> tuple[int, int] | None:
    """The window the stated chain limit gives (None when the stated values give none:
    `chain_window` refuses anything but integers)."""
    try:
        return chain_window(position, size, limit)
    except (ValueError, TypeError):
        return None


def _check_window(state: _State, packet: Mapping[str, JsonValue], chain: Mapping[str, JsonValue], links: list[Any] | None) -> None:
    problems: list[str] = []
    window = chain.get("window")
    members_ok = _exact_members(problems, "window", window, _WINDOW_MEMBERS)
    if not members_ok or not links or not isinstance(window, Mapping):
        if not links:
            problems.append("links must be a non-empty array")
        state.conclude("audit_chain.window", problems)
        return
    first, last = window.get("first_position"), window.get("last_position")
    stated = [link.get("chain_position") if isinstance(link, Mapping) else None for link in links]
    if not _is_int(first) or not _is_int(last) or stated != list(range(first, last + 1)):
        problems.append(f"window {first!r}..{last!r} does not match the link positions")
    limit = _object(_object(packet.get("packet_manifest")).get("options")).get("chain_limit")
    rule = _limit_window(chain.get("record_position"), chain.get("chain_size"), limit)
    if rule != (first, last):
        problems.append(f"window {first!r}..{last!r} is not the chain_limit window {rule}")
    previous = (window.get("previous_link_hash"), window.get("previous_merkle_root"))
    if first == 1:
        if previous != (None, None):
            problems.append("a window starting at position 1 has null previous hashes")
    elif not all(_is_hex64(value) for value in previous):
        problems.append("a window starting after position 1 states both previous hashes")
    state.conclude("audit_chain.window", problems)


def _check_chain_links(state: _State, chain: Mapping[str, JsonValue], links: list[Any] | None) -> None:
    if not links:
        state.fail("audit_chain.links", "links must be a non-empty array")
        return
    problems: list[str] = []
    for index, link in enumerate(links):
        _exact_members(problems, f"links[{index}]", link, _LINK_MEMBERS)
        if isinstance(link, Mapping) and link.get("chain_id") != chain.get("chain_id"):
            problems.append(f"links[{index}].chain_id is not audit_chain.chain_id")
    window = _object(chain.get("window"))
    start_link, start_root = window.get("previous_link_hash"), window.get("previous_merkle_root")
    result = verify_links(
        [dict(link) if isinstance(link, Mapping) else link for link in links],
        expected_start_previous_link_hash=start_link if isinstance(start_link, str) else None,
        expected_start_previous_root=start_root if isinstance(start_root, str) else None,
    )
    for failure in result.failures:
        name = f"audit_chain.links[{failure['chain_position']}].{failure['check']}"
        problems.append(f"position {failure['chain_position']!r}: {failure['check']} expected "
                        f"{failure['expected']!r}, got {failure['actual']!r}")
        state.value(name, failure["expected"], failure["actual"])
    first = links[0].get("chain_position") if isinstance(links[0], Mapping) else None
    if not result.anchored and _is_int(first) and first > 1:
        problems.append("the window's first link is not anchored to window.previous_* hashes")
    state.conclude("audit_chain.links", problems)


def _link_at(links: list[Any] | None, position: Any) -> Mapping[str, JsonValue] | None:
    for link in links or ():
        if isinstance(link, Mapping) and link.get("chain_position") == position and _is_int(position):
            return link
    return None


def _check_record_link(state: _State, chain: Mapping[str, JsonValue], links: list[Any] | None, record: Mapping[str, JsonValue]) -> None:
    position = chain.get("record_position")
    link = _link_at(links, position)
    if link is None:
        state.fail("audit_chain.record_link", f"no link at record_position {position!r} in the window")
        return
    problems = []
    for member in ("decision_id", "record_hash", "receipt_hash", "policy_id", "policy_version"):
        if link.get(member) != record.get(member) or (member in ("decision_id", "record_hash", "receipt_hash")
                                                      and not isinstance(link.get(member), str)):
            problems.append(f"the link's {member} is not the record's")
    own = record.get("audit_chain")
    if own is not None and not _canon_equal(own, stated_audit_chain(link)):
        problems.append("the record's audit_chain member does not equal its link")
    state.conclude("audit_chain.record_link", problems)


def _check_head(state: _State, chain: Mapping[str, JsonValue], links: list[Any] | None) -> None:
    if not links or not isinstance(links[-1], Mapping):
        state.fail("audit_chain.head", "no links")
        return
    last = links[-1]
    if last.get("chain_position") != chain.get("chain_size"):
        return  # the window does not reach the head: not checkable
    problems = []
    if not _digest_equal(last.get("link_hash"), chain.get("head_link_hash")):
        problems.append("head_link_hash is not the last link's link_hash")
    if not _digest_equal(last.get("merkle_root"), chain.get("merkle_root")):
        problems.append("merkle_root is not the last link's rolling root")
    state.conclude("audit_chain.head", problems)


def _check_inclusion(state: _State, chain: Mapping[str, Any], record: Mapping[str, Any]) -> None:
    problems: list[str] = []
    proof = chain.get("inclusion_proof")
    checkpoint = _object(chain.get("checkpoint"))
    _exact_members(problems, "inclusion_proof", proof, _PROOF_MEMBERS)
    if not isinstance(proof, Mapping):
        state.conclude("audit_chain.inclusion_proof", problems)
        return
    if proof.get("tree_algorithm") != CHAIN_TREE_ALGORITHM:
        problems.append(f"tree_algorithm must be {CHAIN_TREE_ALGORITHM}")
    position = chain.get("record_position")
    if not _is_int(position) or proof.get("leaf_index") != position - 1 or not _is_int(proof.get("leaf_index")):
        problems.append("leaf_index must be record_position - 1")
    if proof.get("tree_size") != checkpoint.get("tree_size") or not _is_int(proof.get("tree_size")):
        problems.append("tree_size must equal checkpoint.tree_size")
    expected_leaf = _stated_leaf(record)
    state.value("audit_chain.inclusion_proof.leaf_hash", expected_leaf, proof.get("leaf_hash"))
    if not _digest_equal(expected_leaf, proof.get("leaf_hash")):
        problems.append("leaf_hash is not the leaf of this record")
    path, index, size = proof.get("proof"), proof.get("leaf_index"), proof.get("tree_size")
    root = checkpoint.get("root_hash")
    # A record whose leaf cannot be computed has no audit path: None never verifies (an empty
    # string would be read as the empty leaf, which a crafted checkpoint root could commit to).
    if not (isinstance(path, list) and _is_int(index) and _is_int(size) and isinstance(expected_leaf, str)
            and isinstance(root, str) and verify_inclusion(index, size, expected_leaf, path, root)):
        problems.append("the audit path does not lead from the record's leaf to checkpoint.root_hash")
    state.conclude("audit_chain.inclusion_proof", problems)


def _check_checkpoint(state: _State, chain: Mapping[str, JsonValue], anchors: TrustAnchors, source: list[str | None]) -> None:
    checkpoint = chain.get("checkpoint")
    problems: list[str] = []
    if not isinstance(checkpoint, Mapping):
        state.fail("audit_chain.checkpoint", "checkpoint must be an object")
        state.fail("audit_chain.checkpoint_signature", "checkpoint must be an object")
        return
    checkpoint = dict(checkpoint)
    signature = checkpoint.get("signature")
    unsigned = signature is None  # a gate without an Ed25519 key states its checkpoints unsigned
    if not unsigned:
        _exact_members(problems, "checkpoint.signature", signature, _CHECKPOINT_SIGNATURE_MEMBERS)
    if checkpoint.get("chain_id") != chain.get("chain_id"):
        problems.append("checkpoint.chain_id is not audit_chain.chain_id")
    if checkpoint.get("tree_size") != chain.get("chain_size"):
        problems.append("checkpoint.tree_size is not chain_size")
    if not _is_iso_ms(checkpoint.get("created_at")):
        problems.append("checkpoint.created_at must be ISO 8601 UTC with milliseconds and Z")
    signed = _object(signature)
    key = anchors.select_ed25519(signed.get("key_id"), signed.get("public_key_fingerprint"))
    result = verify_checkpoint(checkpoint, key.public_key_pem if key is not None else "")
    state.value("audit_chain.checkpoint.checkpoint_hash", result.expected_checkpoint_hash,
                checkpoint.get("checkpoint_hash"))
    problems += [f"checkpoint {name} check failed" for name in _CHECKPOINT_INTEGRITY if not result.checks.get(name)]
    state.conclude("audit_chain.checkpoint", problems)

    if unsigned:
        state.fail("audit_chain.checkpoint_signature", "the checkpoint is unsigned: the chain excerpt is not authenticated")
        return
    if key is None:
        state.notes.append("checkpoint signature not checked: no trusted key for it; keys in the packet are not trust anchors")
        return
    signature_problems = [f"checkpoint {name} check failed"
                          for name in _CHECKPOINT_AUTHENTICITY if not result.checks.get(name)]
    if key.key_id is not None and signed.get("key_id") != key.key_id:
        signature_problems.append("checkpoint signature.key_id is not the trusted key's id")
    state.conclude("audit_chain.checkpoint_signature", signature_problems)
    source[0] = key.source
