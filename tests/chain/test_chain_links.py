"""The rolling audit chain (reference facts §6): building links and verifying retained runs."""

from __future__ import annotations

import copy
import json

import pytest
from chain_support import (
    flip_hex,
    hexhash,
    naive_chain,
    naive_h,
    naive_leaf,
    naive_root,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gate.chain import links as chain
from gate.chain.links import (
    LINK_HASH_MEMBERS,
    new_link,
    record_audit_chain,
    verify_links,
)
from gate.protocol.canonical import canonical_bytes, key_order, sha256_hex


def build_chain(size: int, chain_id: str = "chain_test") -> list[dict]:
    """The same chain as `naive_chain`, built with `new_link`."""
    links, prev = [], None
    for position in range(1, size + 1):
        link = new_link(
            chain_id=chain_id, chain_position=position,
            previous_link_hash=prev["link_hash"] if prev else None,
            previous_merkle_root=prev["merkle_root"] if prev else None,
            decision_id=f"dec_{position:04d}", record_hash=hexhash(f"record {position}"),
            receipt_hash=hexhash(f"receipt {position}"),
            policy_id="pricing_exception" if position % 3 else None,
            policy_version="2026.05.1" if position % 3 else None,
            created_at=f"2026-05-21T00:00:{position % 60:02d}.000Z",
        )
        links.append(link)
        prev = link
    return links


def test_naive_json_equals_canonical_json_for_chain_member_names():
    link = naive_chain(2)[1]
    assert key_order(link) == sorted(link)
    assert canonical_bytes(link) == json.dumps(link, sort_keys=True, separators=(",", ":")).encode()


# ---------------------------------------------------------------- hashes


def test_leaf_hash_preimage():
    args = ("dec_1", hexhash("r"), hexhash("p"))
    assert chain.leaf_hash(*args) == naive_leaf(*args)


def test_rolling_root_is_the_leaf_at_position_one_and_a_pair_hash_after():
    leaf, prev = hexhash("leaf"), hexhash("prev")
    assert chain.rolling_root(None, leaf, 1) == leaf
    assert chain.rolling_root(prev, leaf, 2) == naive_root(prev, leaf, 2)
    assert chain.rolling_root(prev, leaf, 3) != chain.rolling_root(prev, leaf, 2)


def test_link_hash_covers_exactly_the_listed_members_absent_as_null():
    link = naive_chain(3)[2]
    assert chain.link_hash(link) == link["link_hash"]
    assert chain.link_hash({**link, "stored_at": "x", "link_hash": "y"}) == link["link_hash"]
    without_policy = {k: v for k, v in link.items() if k != "policy_id"}
    assert chain.link_hash(without_policy) == chain.link_hash({**link, "policy_id": None})
    assert len(LINK_HASH_MEMBERS) == 15 and set(LINK_HASH_MEMBERS) == set(link) - {"link_hash"}


def test_new_link_equals_the_reference_formulas():
    assert build_chain(7) == naive_chain(7)


def test_new_link_members_and_record_audit_chain():
    link = build_chain(2)[1]
    assert list(link) == [*LINK_HASH_MEMBERS[:8], "entry_type", *LINK_HASH_MEMBERS[9:], "link_hash"]
    assert record_audit_chain(link) == {
        "chain_id": "chain_test", "chain_position": 2, "leaf_hash": link["leaf_hash"],
        "link_hash": link["link_hash"], "merkle_root": link["merkle_root"], "entry_type": "decision",
    }


@pytest.mark.parametrize(
    "position, prev_link, prev_root",
    [(0, None, None), (True, None, None), ("1", None, None), (1, hexhash("a"), None),
     (1, None, hexhash("b")), (2, None, None), (2, hexhash("a"), None)],
)
def test_new_link_refuses_links_no_verifier_accepts(position, prev_link, prev_root):
    with pytest.raises(ValueError):
        new_link(chain_id="c", chain_position=position, previous_link_hash=prev_link,
                 previous_merkle_root=prev_root, decision_id="d", record_hash=hexhash("r"),
                 receipt_hash=hexhash("p"), policy_id=None, policy_version=None, created_at="t")


# ---------------------------------------------------------------- verification: valid runs


def test_full_chain_verifies():
    result = verify_links(build_chain(12))
    assert result.valid and result.checked == 12 and result.anchored and result.failures == []


def test_empty_run_is_valid():
    assert verify_links([]).to_dict() == {"valid": True, "checked": 0, "anchored": True, "failures": []}


def test_partial_window_verifies_against_its_starting_previous_hashes():
    links = build_chain(10)
    before = links[3]
    result = verify_links(links[4:], expected_start_previous_link_hash=before["link_hash"],
                          expected_start_previous_root=before["merkle_root"])
    assert result.valid and result.anchored and result.checked == 6


def test_partial_window_without_start_hashes_is_valid_but_not_anchored():
    result = verify_links(build_chain(10)[4:])
    assert result.valid and not result.anchored


def test_partial_window_with_wrong_start_hashes_fails_at_its_first_link():
    links = build_chain(10)
    result = verify_links(links[4:], expected_start_previous_link_hash=links[2]["link_hash"],
                          expected_start_previous_root=links[2]["merkle_root"])
    assert not result.valid
    assert {(f["chain_position"], f["check"]) for f in result.failures} == {
        (5, "previous_link_hash"), (5, "previous_merkle_root")}


def test_genesis_link_must_have_null_previous_hashes_whatever_the_caller_says():
    links = build_chain(3)
    assert verify_links(links, expected_start_previous_link_hash=hexhash("x"),
                        expected_start_previous_root=hexhash("y")).valid
    forged = [dict(links[0], previous_link_hash=hexhash("x"))] + links[1:]
    assert "previous_link_hash" in verify_links(forged).failed_checks


# ---------------------------------------------------------------- verification: tampering


def _tamper(value):
    if isinstance(value, int):
        return value + 1
    if value is None:
        return "x"
    return flip_hex(value) if all(c in "0123456789abcdef" for c in value) else value + "x"


# Member flipped in link 3 of 5 -> the exact checks that must fail (and nothing else).
EXPECTED_FAILURES = {
    "decision_chain_version": {(3, "decision_chain_version"), (3, "link_hash")},
    "chain_id": {(3, "chain_id"), (3, "link_hash")},
    # link 3 now claims 4 (reported under its stated position); link 4 then repeats 4
    "chain_position": {(4, "position_gap"), (4, "merkle_root"), (4, "link_hash")},
    "previous_link_hash": {(3, "previous_link_hash"), (3, "link_hash")},
    "previous_merkle_root": {(3, "previous_merkle_root"), (3, "merkle_root"), (3, "link_hash")},
    "leaf_hash": {(3, "leaf_hash"), (3, "merkle_root"), (3, "link_hash")},
    "merkle_root": {(3, "merkle_root"), (3, "link_hash"), (4, "previous_merkle_root")},
    "merkle_strategy": {(3, "merkle_strategy"), (3, "link_hash")},
    "entry_type": {(3, "leaf_hash"), (3, "link_hash")},
    "decision_id": {(3, "leaf_hash"), (3, "link_hash")},
    "record_hash": {(3, "leaf_hash"), (3, "link_hash")},
    "receipt_hash": {(3, "leaf_hash"), (3, "link_hash")},
    "policy_id": {(3, "link_hash")},
    "policy_version": {(3, "link_hash")},
    "created_at": {(3, "link_hash")},
    "link_hash": {(3, "link_hash"), (4, "previous_link_hash")},
}


def test_every_hashed_member_has_an_expectation():
    assert set(EXPECTED_FAILURES) == set(LINK_HASH_MEMBERS) | {"link_hash"}


@pytest.mark.parametrize("member", sorted(EXPECTED_FAILURES))
def test_a_flipped_member_fails_the_named_checks(member):
    links = build_chain(5)
    links[2] = dict(links[2], **{member: _tamper(links[2][member])})
    result = verify_links(links)
    assert not result.valid
    assert {(f["chain_position"], f["check"]) for f in result.failures} == EXPECTED_FAILURES[member]
    if member == "chain_position":
        assert [f["check"] for f in result.failures].count("position_gap") == 2


def test_failures_report_expected_and_actual_values():
    links = build_chain(3)
    links[1] = dict(links[1], record_hash=hexhash("other"))
    leaf_failure = next(f for f in verify_links(links).failures if f["check"] == "leaf_hash")
    assert leaf_failure["actual"] == links[1]["leaf_hash"]
    assert leaf_failure["expected"] == naive_leaf("dec_0002", hexhash("other"), hexhash("receipt 2"))


def test_a_missing_link_is_a_gap():
    links = build_chain(6)
    del links[2]
    found = {(f["chain_position"], f["check"]) for f in verify_links(links).failures}
    assert found == {(4, "position_gap"), (4, "previous_link_hash"), (4, "previous_merkle_root")}


def test_reordered_links_fail_position_and_linkage():
    links = build_chain(6)
    links[2], links[3] = links[3], links[2]
    result = verify_links(links)
    assert {"position_gap", "previous_link_hash", "previous_merkle_root"} <= set(result.failed_checks)
    assert {"leaf_hash", "merkle_root", "link_hash"}.isdisjoint(result.failed_checks)


def test_a_link_of_another_chain_fails_chain_id():
    links = build_chain(4)
    other = build_chain(4, chain_id="chain_other")
    result = verify_links(links[:2] + other[2:])
    assert "chain_id" in result.failed_checks


def test_a_consistently_recomputed_head_is_still_caught_by_its_successor():
    links = build_chain(4)
    forged = dict(links[1], record_hash=hexhash("forged"))
    forged["leaf_hash"] = chain.leaf_hash(forged["decision_id"], forged["record_hash"], forged["receipt_hash"])
    forged["merkle_root"] = chain.rolling_root(forged["previous_merkle_root"], forged["leaf_hash"], 2)
    forged["link_hash"] = chain.link_hash(forged)
    result = verify_links([links[0], forged, *links[2:]])
    assert {(f["chain_position"], f["check"]) for f in result.failures} == {
        (3, "previous_link_hash"), (3, "previous_merkle_root")}


@pytest.mark.parametrize("bad", [None, "text", 7, [], {}, {"chain_position": 1},
                                 {"chain_position": 1, "decision_id": float("nan")}])
def test_malformed_links_never_raise(bad):
    result = verify_links([bad, *build_chain(2)[1:]])
    assert not result.valid and result.checked == 2


# ---------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.integers(1, 12), data=st.data())
def test_property_any_single_change_to_any_link_is_detected(size, data):
    links = build_chain(size)
    assert verify_links(links).valid
    target = data.draw(st.integers(0, size - 1))
    member = data.draw(st.sampled_from(sorted(EXPECTED_FAILURES)))
    tampered = copy.deepcopy(links)
    tampered[target][member] = _tamper(tampered[target][member])
    assert not verify_links(tampered).valid


@settings(max_examples=100, deadline=None)
@given(size=st.integers(2, 15), data=st.data())
def test_property_every_contiguous_window_verifies_with_its_start(size, data):
    links = build_chain(size)
    start = data.draw(st.integers(0, size - 1))
    end = data.draw(st.integers(start + 1, size))
    before = links[start - 1] if start else {}
    result = verify_links(links[start:end], expected_start_previous_link_hash=before.get("link_hash"),
                          expected_start_previous_root=before.get("merkle_root"))
    assert result.valid and result.anchored and result.checked == end - start


def test_naive_h_is_the_hash_used():  # guards the independence assumption of chain_support
    assert naive_h({"b": 1, "a": None}) == sha256_hex({"a": None, "b": 1})
