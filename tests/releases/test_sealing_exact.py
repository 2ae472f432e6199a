"""The seal of every signed chain's events, by value (gate/chain/sealing.py, suite `releases`):
which members an event may carry (its body and a whole seal, or its hash alone when the gate
wrote it with signing off), and that an unsigned event is named unsigned wherever keys are given."""

from __future__ import annotations

import pytest

from gate.chain.sealing import (
    SIGNATURE_MEMBERS,
    UNSIGNED,
    event_hash,
    seal,
    sealed_members,
    signature_problem,
)
from gate.keys.signing import HmacKey, HmacReceiptSigner
from gate.verify import TrustAnchors

SECRET = "an-hmac-secret-the-verifier-trusts"
SIGNER = HmacReceiptSigner(HmacKey("hmac-1", SECRET.encode()))


def test_an_event_is_its_body_and_a_whole_seal_or_its_hash_alone():
    body = {"a": 1, "b": 2}
    hashed = {**body, "event_hash": "h"}
    signed = dict(body)
    seal(signed, SIGNER)
    assert sealed_members(hashed, frozenset(body)) and sealed_members(signed, frozenset(body))
    assert not sealed_members(body, frozenset(body))  # no seal at all
    for member in SIGNATURE_MEMBERS[1:]:  # a seal cut short: some signature members, not all
        partial = {k: v for k, v in signed.items() if k != member}
        assert not sealed_members(partial, frozenset(body)), member
    assert not sealed_members({**hashed, "c": 3}, frozenset(body))  # a member the body does not have
    assert not sealed_members({"a": 1, "event_hash": "h"}, frozenset(body))  # one the body has, missing



def test_the_seal_is_the_hash_alone_or_whole_and_nothing_else():
    body = frozenset({"a", "b"})
    for seal_members in ({"event_hash"}, set(SIGNATURE_MEMBERS)):
        event = dict.fromkeys(body | seal_members, 1)
        assert sealed_members(event, body)
        assert not sealed_members(event, body | {"c"}) and not sealed_members(event, frozenset({"a"}))
    assert not sealed_members(dict.fromkeys(body | {"key_id", "signature"}), body)  # no hash
    assert not sealed_members(dict.fromkeys(body | {"signature"}), body)
    assert sealed_members({"a": 1, "b": 2, "event_hash": "h"}, {"a", "b"})  # any set of names


@pytest.mark.parametrize("trust", [TrustAnchors(), TrustAnchors.from_hmac_secret(SECRET)])
def test_an_unsigned_event_is_named_unsigned_and_a_signed_one_is_checked(trust):
    event = {"a": 1}
    event["event_hash"] = event_hash(event)
    assert signature_problem(event, trust) == UNSIGNED
    signed = {"a": 1}
    seal(signed, SIGNER)
    assert signature_problem(signed, trust) == (None if not trust.empty else "signature has no trusted key")
    assert signature_problem({**signed, "signature": None}, trust) != UNSIGNED  # stated, though empty: checked
