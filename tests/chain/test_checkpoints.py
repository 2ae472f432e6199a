"""Signed checkpoints `decision_chain_checkpoint_v1` of the RFC 6962 tree."""

from __future__ import annotations

import base64
import copy
from datetime import UTC, datetime

import nacl.signing
import pytest
from chain_support import OTHER_SEED, SEED, flip_hex, hexhash, naive_h

from gate.chain.merkle import (
    CHECKPOINT_BODY_MEMBERS,
    checkpoint_body,
    checkpoint_hash,
    sign_checkpoint,
    verify_checkpoint,
)
from gate.keys.signing import Ed25519Key

KEY = Ed25519Key.from_seed(SEED)
ROOT = hexhash("root")


def signed(**overrides):
    body = checkpoint_body("chain_a", 42, ROOT, "2026-05-21T00:00:00.000Z")
    return sign_checkpoint({**body, **overrides}, KEY)


def test_body_members_and_labels():
    body = checkpoint_body("chain_a", 42, ROOT, datetime(2026, 5, 21, 1, 2, 3, 456789, tzinfo=UTC))
    assert body == {
        "checkpoint_version": "decision_chain_checkpoint_v1", "chain_id": "chain_a", "tree_size": 42,
        "root_hash": ROOT, "hash_algorithm": "sha256", "tree_algorithm": "rfc6962_sha256",
        "created_at": "2026-05-21T01:02:03.456Z",
    }
    assert tuple(body) == CHECKPOINT_BODY_MEMBERS


def test_signature_is_ed25519_over_the_hash_text():
    checkpoint = signed()
    body = {name: checkpoint[name] for name in CHECKPOINT_BODY_MEMBERS}
    assert checkpoint["checkpoint_hash"] == naive_h(body) == checkpoint_hash(body)
    raw = base64.urlsafe_b64decode(checkpoint["signature"]["signature"] + "==")
    nacl.signing.VerifyKey(KEY.public_key_raw).verify(checkpoint["checkpoint_hash"].encode("utf-8"), raw)
    assert checkpoint["signature"] == {
        "algorithm": "ed25519", "key_id": KEY.key_id, "public_key_fingerprint": KEY.fingerprint,
        "signature": checkpoint["signature"]["signature"],
    }


def test_a_good_checkpoint_verifies_and_is_truthy():
    result = verify_checkpoint(signed(), KEY.public_key_pem)
    assert result.valid and bool(result) and result.failed_checks == []


def test_a_pem_with_literal_newline_escapes_is_the_same_key():
    assert verify_checkpoint(signed(), KEY.public_key_pem.replace("\n", "\\n") + "\n")


@pytest.mark.parametrize("member, value, failing", [
    ("chain_id", "chain_b", {"checkpoint_hash", "signature"}),
    ("tree_size", 43, {"checkpoint_hash", "signature"}),
    ("root_hash", flip_hex(ROOT), {"checkpoint_hash", "signature"}),
    ("created_at", "2026-05-21T00:00:01.000Z", {"checkpoint_hash", "signature"}),
    ("checkpoint_version", "decision_chain_checkpoint_v2", {"checkpoint_version", "checkpoint_hash", "signature"}),
    ("hash_algorithm", "sha512", {"algorithms", "checkpoint_hash", "signature"}),
    ("tree_algorithm", "rolling_sha256_pair_v1", {"algorithms", "checkpoint_hash", "signature"}),
    ("checkpoint_hash", hexhash("other"), {"checkpoint_hash"}),
])
def test_a_changed_member_fails_the_named_checks(member, value, failing):
    checkpoint = signed()
    checkpoint[member] = value
    assert set(verify_checkpoint(checkpoint, KEY.public_key_pem).failed_checks) == failing


def test_an_extra_unsigned_member_fails_members():
    checkpoint = dict(signed(), note="unsigned")
    assert verify_checkpoint(checkpoint, KEY.public_key_pem).failed_checks == ["members"]


def test_another_key_fails_fingerprint_and_signature():
    other = Ed25519Key.from_seed(OTHER_SEED)
    result = verify_checkpoint(signed(), other.public_key_pem)
    assert result.failed_checks == ["public_key_fingerprint", "signature"]


def test_a_signature_by_another_key_with_our_fingerprint_fails():
    checkpoint = signed()
    forged = sign_checkpoint({name: checkpoint[name] for name in CHECKPOINT_BODY_MEMBERS},
                             Ed25519Key.from_seed(OTHER_SEED))
    forged["signature"]["public_key_fingerprint"] = KEY.fingerprint
    assert verify_checkpoint(forged, KEY.public_key_pem).failed_checks == ["signature"]


@pytest.mark.parametrize("mutate, failing", [
    (lambda c: c["signature"].update(algorithm="hmac-sha256"), ["signature_algorithm"]),
    (lambda c: c["signature"].update(signature=c["signature"]["signature"] + "="), ["signature"]),
    (lambda c: c["signature"].update(signature=None), ["signature"]),
    (lambda c: c.update(signature="text"), ["public_key_fingerprint", "signature", "signature_algorithm"]),
    (lambda c: c.update(tree_size=-1), ["checkpoint_hash", "signature", "tree_size"]),
    (lambda c: c.update(root_hash=ROOT.upper()), ["checkpoint_hash", "root_hash", "signature"]),
])
def test_malformed_signatures_and_values(mutate, failing):
    checkpoint = copy.deepcopy(signed())
    mutate(checkpoint)
    assert verify_checkpoint(checkpoint, KEY.public_key_pem).failed_checks == failing


@pytest.mark.parametrize("checkpoint", [None, [], "x", {}, {"tree_size": float("nan")}])
def test_garbage_never_raises(checkpoint):
    assert not verify_checkpoint(checkpoint, KEY.public_key_pem).valid


@pytest.mark.parametrize("pem", ["", "not a key", None, KEY.private_key_pem])
def test_an_unusable_trusted_key_fails_public_key(pem):
    result = verify_checkpoint(signed(), pem)
    assert "public_key" in result.failed_checks and not result.valid


@pytest.mark.parametrize("call", [
    lambda: checkpoint_body("c", -1, ROOT, "t"), lambda: checkpoint_body("c", 1, "abc", "t"),
    lambda: checkpoint_body("c", True, ROOT, "t"), lambda: sign_checkpoint({"chain_id": "c"}, KEY),
    lambda: sign_checkpoint({**checkpoint_body("c", 1, ROOT, "t"), "extra": 1}, KEY),
])
def test_builders_refuse_bad_bodies(call):
    with pytest.raises(ValueError):
        call()
