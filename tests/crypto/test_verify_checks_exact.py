"""`gate.verify.checks` helpers and the integrity-block check, branch by branch."""

from __future__ import annotations

import pytest

from gate.constants import CANONICALIZATION, HASH_ALGORITHM
from gate.verify.checks import _INTEGRITY_MIRRORED, _canon_equal, _check_integrity_block, _digest_equal


def test_digest_equal_compares_strings_only_and_passes_lone_surrogates():
    assert _digest_equal("ab", "ab") is True
    assert _digest_equal("ab", "aB") is False
    assert _digest_equal("\ud800x", "\ud800x") is True
    assert _digest_equal("\ud800x", "\ud801x") is False
    assert _digest_equal("x", "\udfffx") is False
    assert _digest_equal(None, "a") is False and _digest_equal("a", 1) is False


def test_canon_equal_is_canonical_and_false_when_either_side_cannot_be_canonicalised():
    assert _canon_equal({"a": 1, "b": [1.0]}, {"b": [1], "a": 1.0}) is True
    assert _canon_equal(True, 1) is False
    assert _canon_equal(float("nan"), float("nan")) is False
    assert _canon_equal(object(), object()) is False


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
    assert _check_integrity_block(dict(record, integrity=_block(record))) is True
    assert _check_integrity_block(record) is None


@pytest.mark.parametrize("bundle", [None, ""])
def test_an_empty_policy_bundle_hash_is_not_required(bundle):
    record = _record(policy_bundle_hash=bundle)
    block = _block(record)
    block.pop("policy_bundle_hash", None)
    assert _check_integrity_block(dict(record, integrity=block)) is True


def test_a_policy_bundle_hash_is_required_when_present():
    record = _record(policy_bundle_hash="b" * 64)
    assert _check_integrity_block(dict(record, integrity=_block(record))) is True
    block = _block(record)
    del block["policy_bundle_hash"]
    assert _check_integrity_block(dict(record, integrity=block)) is False


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
    assert _check_integrity_block(dict(record, integrity=damage(_block(record)))) is False


def test_the_signature_member_of_a_signed_record():
    record = _record(receipt_signature="ed25519:x", receipt_signature_algorithm="ed25519", receipt_key_id="k1")
    good = {"algorithm": "ed25519", "key_id": "k1"}
    assert _check_integrity_block(dict(record, integrity=_block(record, signature=good))) is True
    assert _check_integrity_block(dict(record, integrity=_block(record))) is False  # required when signed
    for bad in ("junk", {"algorithm": "ed25519"}, dict(good, public_key_fingerprint="f"),
                dict(good, key_id="k2")):
        assert _check_integrity_block(dict(record, integrity=_block(record, signature=bad))) is False, bad
    unsigned = _record()
    assert _check_integrity_block(dict(unsigned, integrity=_block(unsigned, signature={}))) is False
