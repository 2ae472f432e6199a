"""`EventChainCheck` (gate/chain/event_check.py), the one result of a signed chain's offline check, by value:
`verified` needs both validity and checked signatures, `problem` is the first problem, the JSON
states the five members in one order, and every chain verifier's result is one, its JSON beginning
with them. What each verifier finds: tests/holds/test_hold_history.py and tests/releases; their
JSON through `gate verify --json`: tests/cli/test_chain_verify_json.py."""

from __future__ import annotations

import dataclasses

import pytest

from gate.chain.event_check import EventChainCheck, keys_given
from gate.holds.history import HoldHistoryCheck
from gate.keys.anchors import TrustAnchors
from gate.releases.events import HistoryCheck
from gate.releases.governance import GovernanceCheck
from gate.releases.key_grants import GrantsCheck

BASE = ["verified", "valid", "signatures_checked", "events", "problems"]


@pytest.mark.parametrize(("valid", "signatures_checked"), [(True, True), (True, False), (False, True),
                                                           (False, False)])
def test_verified_is_valid_with_its_signatures_checked(valid, signatures_checked):
    check = EventChainCheck(valid=valid, signatures_checked=signatures_checked, events=2)
    assert check.verified is (valid and signatures_checked)
    assert check.to_json() == {"verified": valid and signatures_checked, "valid": valid,
                               "signatures_checked": signatures_checked, "events": 2, "problems": []}


def test_the_problem_is_the_first_one_and_the_json_lists_them_all():
    assert EventChainCheck(valid=True, signatures_checked=True, events=0).problem is None
    check = EventChainCheck(valid=False, signatures_checked=False, events=3, problems=("event 2: x", "event 3: y"))
    assert check.problem == "event 2: x" and check.problems == ("event 2: x", "event 3: y")
    assert check.to_json() == {"verified": False, "valid": False, "signatures_checked": False, "events": 3,
                               "problems": ["event 2: x", "event 3: y"]}
    assert list(check.to_json()) == BASE


def test_a_chain_check_is_frozen_and_built_by_keyword():
    check = EventChainCheck(valid=True, signatures_checked=True, events=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        check.valid = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        EventChainCheck(True, True, 1)  # type: ignore[misc]
    assert dataclasses.replace(check, problems=("p",)).problem == "p"


def test_keys_are_given_only_by_anchors_that_hold_a_key():
    assert keys_given(None) is False
    assert keys_given(TrustAnchors()) is False
    assert keys_given(TrustAnchors.from_hmac_secret("a-secret")) is True


@pytest.mark.parametrize("check", [
    HoldHistoryCheck(valid=False, signatures_checked=True, events=4, problems=("head: missing",)),
    HistoryCheck(valid=False, signatures_checked=True, events=4, problems=("event 1: x",)),
    GrantsCheck(valid=False, signatures_checked=True, events=4, problems=("grant event 1: x",)),
    GovernanceCheck(valid=False, signatures_checked=True, events=4, problems=("policy event 1: x",), policies=(None,),
                    changes=()),
], ids=["hold", "release", "grants", "governance"])
def test_every_chain_verifiers_result_is_a_chain_check_and_its_json_begins_with_it(check):
    assert isinstance(check, EventChainCheck)
    body = check.to_json()
    assert list(body)[:len(BASE)] == BASE
    assert {name: body[name] for name in BASE} == EventChainCheck.to_json(check) == {
        "verified": False, "valid": False, "signatures_checked": True, "events": 4, "problems": [check.problem]}
