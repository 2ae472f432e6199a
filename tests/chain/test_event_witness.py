"""`gate.chain.event_witness` by value: the signed event chains' checkpoints in the audit chain's
witnessed log (issue 52, defect 6): their chain ids, their RFC 6962 root over the event hashes,
the comparison of a whole chain with a held checkpoint, which checkpoint a signed time selects,
and the held checkpoint's own signature."""

from __future__ import annotations

import hashlib

import pytest

from gate.chain.event_witness import (
    event_chain_failures,
    event_tree_root,
    governance_chain_id,
    held_at,
    held_checkpoint_problems,
    hold_chain_id,
    release_chain_id,
    witness_problems,
)
from gate.chain.merkle import EMPTY_ROOT, checkpoint_body, mth, sign_checkpoint
from gate.protocol.canonical import sha256_hex
from gate.verify import TrustAnchors
from tests.holds.chain_support import KEY, OTHER, anchors

SCOPE = hashlib.sha256(b"tenant_a").hexdigest()
HASHES = [hashlib.sha256(bytes([n])).hexdigest() for n in range(5)]


def held(size: int, hashes: list[str] | None = None, at: str = "2026-11-03T09:00:00.000Z", key=KEY,
         chain: str | None = None) -> dict:
    leaves = (HASHES if hashes is None else hashes)[:size]
    return sign_checkpoint(checkpoint_body(chain or hold_chain_id(SCOPE), size, mth(leaves), at), key)


def test_chain_ids_keep_the_kinds_and_the_rulebooks_apart():
    assert hold_chain_id(SCOPE) == "hold_chain_" + SCOPE[:32]
    assert governance_chain_id(SCOPE) == "governance_chain_" + SCOPE[:32]
    assert release_chain_id(SCOPE, "pricing") == "release_chain_" + sha256_hex([SCOPE, "pricing"])[:32]
    assert release_chain_id(SCOPE, "pricing") != release_chain_id(SCOPE, "pricing2")
    assert len({hold_chain_id(SCOPE), governance_chain_id(SCOPE), release_chain_id(SCOPE, "x")}) == 3


def test_the_root_is_rfc6962_over_the_event_hashes():
    assert event_tree_root([]) == EMPTY_ROOT
    assert event_tree_root(HASHES[:1]) == mth(HASHES[:1])
    assert event_tree_root(tuple(HASHES)) == mth(HASHES)
    with pytest.raises(ValueError):
        event_tree_root(["not hex"])


def test_a_chain_extends_its_held_checkpoint_or_is_named():
    assert event_chain_failures(None, []) == []
    assert event_chain_failures(held(3), HASHES[:3]) == []
    assert event_chain_failures(held(3), HASHES) == []
    assert event_chain_failures(held(1), HASHES) == []
    assert event_chain_failures(held(5), HASHES) == []
    assert event_chain_failures(held(3), HASHES[:2]) == ["checkpoint_log.size"]
    assert event_chain_failures(held(1), []) == ["checkpoint_log.size"]
    rewritten = [*HASHES[:1], "ab" * 32, *HASHES[2:]]
    assert event_chain_failures(held(3), rewritten) == ["checkpoint_log.consistency"]
    assert event_chain_failures(held(3), rewritten[:3]) == ["checkpoint_log.consistency"]
    assert event_chain_failures(held(2), rewritten[:1] + HASHES[1:]) == []
    assert event_chain_failures(held(3), [*HASHES[:3], "not hex"]) == ["checkpoint_log.consistency"]
    assert event_chain_failures({**held(3), "tree_size": "3"}, HASHES) == ["checkpoint_log.size"]
    assert event_chain_failures({**held(3), "tree_size": 0}, HASHES) == ["checkpoint_log.consistency"]
    # a held tree of no events is no checkpoint (a log refuses one): nothing extends it
    assert event_chain_failures({**held(3), "tree_size": 0, "root_hash": EMPTY_ROOT}, HASHES) == [
        "checkpoint_log.consistency"]


def test_the_checkpoint_held_by_a_signed_time_is_the_newest_made_by_then():
    first, second = held(2, at="2026-11-03T09:00:00.000Z"), held(4, at="2026-11-03T09:05:00.000Z")
    other = held(5, at="2026-11-03T09:01:00.000Z", chain="hold_chain_" + "0" * 32)
    entries = [first, other, second]
    assert held_at(entries, hold_chain_id(SCOPE), "2026-11-03T08:59:59.999Z") is None
    assert held_at(entries, hold_chain_id(SCOPE), "2026-11-03T09:00:00.000Z") is first
    assert held_at(entries, hold_chain_id(SCOPE), "2026-11-03T09:04:59.999Z") is first
    assert held_at(entries, hold_chain_id(SCOPE), "2026-11-03T09:05:00.000Z") is second
    assert held_at(entries, hold_chain_id(SCOPE), "2026-11-04T00:00:00.000Z") is second
    assert held_at(entries, hold_chain_id(SCOPE), None) is None
    assert held_at([{**first, "created_at": None}], hold_chain_id(SCOPE), "2027-01-01T00:00:00.000Z") is None


def test_a_held_checkpoint_must_be_signed_by_a_trusted_key():
    assert held_checkpoint_problems(held(2), anchors()) == []
    assert held_checkpoint_problems(held(2, key=OTHER), anchors()) == [
        "no trusted key for the held checkpoint's signature"]
    assert held_checkpoint_problems({**held(2), "signature": None}, anchors()) == [
        "no trusted key for the held checkpoint's signature"]
    assert held_checkpoint_problems({**held(2), "tree_size": 1}, anchors()) == [
        "the held checkpoint fails checkpoint_hash, signature"]


def test_the_held_checkpoints_key_is_chosen_by_its_key_id_then_its_fingerprint():
    both = anchors(KEY) + anchors(OTHER)
    stated = held(2)
    other_fingerprint = {**stated, "signature": {**stated["signature"], "public_key_fingerprint": OTHER.fingerprint}}
    # by key id first: KEY's, whose fingerprint the checkpoint then misstates (by fingerprint, OTHER's would fail the signature)
    assert held_checkpoint_problems(other_fingerprint, both) == ["the held checkpoint fails public_key_fingerprint"]
    no_id = {**stated, "signature": {**stated["signature"], "key_id": None}}
    assert held_checkpoint_problems(no_id, both) == []  # then by fingerprint
    # two trusted keys under one key id: the stated fingerprint picks the signer's
    twin = held(2, key=OTHER)
    twin = {**twin, "signature": {**twin["signature"], "key_id": KEY.key_id}}
    trust = anchors(KEY) + TrustAnchors.from_registry_entries([{
        "key_id": KEY.key_id, "algorithm": "ed25519", "public_key": OTHER.public_key_pem,
        "public_key_fingerprint": OTHER.fingerprint, "status": "active", "not_before": "2026-01-01T00:00:00.000Z"}])
    assert held_checkpoint_problems(twin, trust) == []


def test_a_served_chain_against_a_log():
    chain = hold_chain_id(SCOPE)
    events = [{"event_hash": h} for h in HASHES[:3]]
    log = [held(2), held(3, at="2026-11-03T09:10:00.000Z")]
    assert witness_problems(chain, events, [], anchors()) == []
    assert witness_problems(chain, events, log, anchors()) == []
    assert witness_problems(chain, events[:2], log, anchors(), "2026-11-03T09:05:00.000Z") == []
    assert witness_problems(chain, events[:2], log, anchors()) == [(
        f"checkpoint_log: the checkpoint of 3 events of {chain} witnessed at 2026-11-03T09:10:00.000Z is longer "
        "than the document's 2 events (checkpoint_log.size: the chain was cut back)")]
    rewritten = [events[0], {"event_hash": "ab" * 32}, events[2]]
    assert witness_problems(chain, rewritten, log, None) == [(
        f"checkpoint_log: the checkpoint of 3 events of {chain} witnessed at 2026-11-03T09:10:00.000Z has another "
        "root than the document's first events (checkpoint_log.consistency: the chain was rewritten)")]
    assert witness_problems(chain, [events[0], "not an event", events[2]], log, None)[0].endswith(
        "(checkpoint_log.consistency: the chain was rewritten)")
    forged = [held(3, key=OTHER)]
    assert witness_problems(chain, events, forged, anchors()) == ["no trusted key for the held checkpoint's signature"]
    assert witness_problems(chain, events, forged, None) == []
    assert witness_problems("release_chain_" + "1" * 32, events[:1], log, anchors()) == []
