"""`gate.verify.checks` helpers (and the digest compare they share, gate.keys.detached) and the
integrity-block check, branch by branch."""

from __future__ import annotations

import pytest

from gate.keys.detached import _digest_equal
from gate.verify.checks import (
    _INTEGRITY_MIRRORED,
    _canon_equal,
    check_integrity_block,
)
from gate.vocabulary import CANONICALIZATION, HASH_ALGORITHM


def test_digest_equal_compares_strings_only_and_passes_lone_surrogates():
    assert _digest_equal("ab", "ab") is True
    assert _digest_equal("ab", "aB") is False
    assert _digest_equal("\ud800x", "\ud800x") is True
    assert _digest_equal("\ud800x", "\ud801x") is False
    assert _digest_equal("x", "\udfffx") is False
    assert _digest_equal(None, "a") is False and _digest_equal("a", 1) is False
    assert _digest_equal(None, None) is False and _digest_equal(1, "a") is False


def test_canon_equal_is_canonical_and_false_when_either_side_cannot_be_canonicalised():
    assert _canon_equal({"a": 1, "b": [1.0]}, {"b": [1], "a": 1.0}) is True
    assert _canon_equal(True, 1) is False
    assert _canon_equal(float("nan"), float("nan")) is False
    assert _canon_equal(object(), object()) is False
    assert _canon_equal({"a": 1}, {"a": 2}) is False
    assert _canon_equal({"a": 1}, object()) is False


def _record(**members):
    record = {name: f"v-{name}" for name in _INTEGRITY_MIRRORED if name != "policy_bundle_hash"}
    record.update(members)
    return record


def _block(record, **changes):
    block = {"canonicalization": CANONICALIZATION, "hash_algorithm": HASH_ALGORITHM}
    block.update({name: record[name] for name in _INTEGRITY_MIRRORED if name in record})
    block.update(changes)
    return block


def test_an_exact_mirror_passes_and_no_block_is_not_checked():
    record = _record()
    assert check_integrity_block(dict(record, integrity=_block(record))) is True
    assert check_integrity_block(record) is None


@pytest.mark.parametrize("bundle", [None, ""])
def test_an_empty_policy_bundle_hash_is_not_required(bundle):
    record = _record(policy_bundle_hash=bundle)
    block = _block(record)
    block.pop("policy_bundle_hash", None)
    assert check_integrity_block(dict(record, integrity=block)) is True


def test_a_policy_bundle_hash_is_required_when_present():
    record = _record(policy_bundle_hash="b" * 64)
    assert check_integrity_block(dict(record, integrity=_block(record))) is True
    block = _block(record)
    del block["policy_bundle_hash"]
    assert check_integrity_block(dict(record, integrity=block)) is False


@pytest.mark.parametrize("damage", [
    lambda b: "junk",
    lambda b: {k: v for k, v in b.items() if k != "input_hash"},
    lambda b: dict(b, extra=1),
    lambda b: dict(b, canonicalization="JCS"),
    lambda b: dict(b, hash_algorithm="sha512"),
    lambda b: dict(b, record_hash="other"),
])
def test_each_departure_from_the_mirror_fails(damage):
    record = _record()
    assert check_integrity_block(dict(record, integrity=damage(_block(record)))) is False


def test_the_signature_member_of_a_signed_record():
    record = _record(receipt_signature="ed25519:x", receipt_signature_algorithm="ed25519", receipt_key_id="k1")
    good = {"algorithm": "ed25519", "key_id": "k1"}
    assert check_integrity_block(dict(record, integrity=_block(record, signature=good))) is True
    assert check_integrity_block(dict(record, integrity=_block(record))) is False  # required when signed
    for bad in ("junk", {"algorithm": "ed25519"}, dict(good, public_key_fingerprint="f"),
                dict(good, key_id="k2")):
        assert check_integrity_block(dict(record, integrity=_block(record, signature=bad))) is False, bad
    unsigned = _record()
    assert check_integrity_block(dict(unsigned, integrity=_block(unsigned, signature={}))) is False


def _chain_member(position=1, **changes):
    from gate.chain.links import leaf_hash
    from gate.vocabulary import CHAIN_ENTRY_TYPE_DECISION

    leaf = leaf_hash("dec_1", "a" * 64, "b" * 64)
    member = {"chain_id": "chain_1", "chain_position": position, "entry_type": CHAIN_ENTRY_TYPE_DECISION,
              "leaf_hash": leaf, "link_hash": "c" * 64, "merkle_root": leaf if position == 1 else "d" * 64}
    member.update(changes)
    return member


def _audit(record):
    from gate.verify.checks import check_audit_chain

    value = check_audit_chain(record, "a" * 64, "b" * 64)
    return {} if value is None else {"audit_chain": value}


def test_the_audit_chain_member_alone():
    from gate.chain.links import AUDIT_CHAIN_MEMBERS

    assert set(_chain_member()) == set(AUDIT_CHAIN_MEMBERS)
    assert _audit({"decision_id": "dec_1", "audit_chain": _chain_member()}) == {"audit_chain": True}
    assert _audit({"decision_id": "dec_1", "audit_chain": _chain_member(7)}) == {"audit_chain": True}
    assert _audit({"decision_id": "dec_1"}) == {}
    assert _audit({"decision_id": "dec_1", "audit_chain_signature": "ed25519:x"}) == {"audit_chain": False}
    for bad in ("junk", [1], dict(_chain_member(), extra=1),
                {k: v for k, v in _chain_member().items() if k != "link_hash"},
                _chain_member(leaf_hash="e" * 64), _chain_member(entry_type="other"), _chain_member(0),
                _chain_member(True), _chain_member(chain_id=""), _chain_member(link_hash="C" * 64),
                _chain_member(1, merkle_root="d" * 64)):
        assert _audit({"decision_id": "dec_1", "audit_chain": bad}) == {"audit_chain": False}, bad


def test_urls():
    from gate.protocol.records import decision_urls
    from gate.verify.checks import check_urls

    url = decision_urls("dec_1")["decision_url"]
    assert check_urls({}) is None
    assert check_urls({"decision_id": "dec_1", "decision_url": url}) is True
    assert check_urls({"decision_id": "dec_1", "decision_url": url + "x"}) is False
    assert check_urls({"decision_id": 5, "decision_url": url}) is False
    assert check_urls({"replay": "r", "replay_url": "r"}) is True
    assert check_urls({"replay": "r", "replay_url": "s"}) is False
    assert check_urls({"decision_id": "dec_1", "decision_url": url, "replay": "r", "replay_url": "s"}) is False
    assert check_urls({"decision_id": "dec_1", "decision_url": "x", "replay": "r", "replay_url": "r"}) is False


def _policy_record(**changes):
    record = {"policy_id": "p", "policy_version": "1", "policy_hash": "h", "evaluator_version": "e",
              "rulebook": {"id": "p", "version": "1", "hash": "h"},
              "policy_bundle": {"id": "p", "version": "1", "hash": "h"},
              "rulebook_contract": {"evaluator_version": "e"}}
    record.update(changes)
    return record


def test_policy_consistency():
    from gate.verify.checks import check_policy_consistency as check

    assert check({}, False) is None
    assert check({"source_hash": "h", "policy_hash": "h"}, False) is True
    assert check({"source_hash": "x", "policy_hash": "h"}, False) is False
    assert check(_policy_record(), True) is True
    assert check(_policy_record(policy_bundle=None, rulebook_contract=None), True) is True
    assert check(_policy_record(rulebook="x"), True) is False
    assert check({"rulebook": "x"}, False) is None
    for changes in ({"policy_id": "q"}, {"policy_version": "2"}, {"policy_hash": "g"},
                    {"policy_bundle": "x"}, {"policy_bundle": {"id": "p", "version": "1", "hash": "g"}},
                    {"policy_bundle": {"id": "q", "version": "1", "hash": "h"}},
                    {"policy_bundle": {"id": "p", "version": "2", "hash": "h"}},
                    {"rulebook_contract": "x"}, {"rulebook_contract": {"evaluator_version": "f"}},
                    {"source_hash": "x"}):
        assert check(_policy_record(**changes), True) is False, changes
