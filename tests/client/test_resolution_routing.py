"""Where a held action routes on its resolution, by value (gate_client.resolutions.resolution_verdict,
docs/client.md "Held actions"): real records and signed resolutions from a gate (the Flask app),
every branch with its route and the checks it reports."""

from __future__ import annotations

import pytest

from gate.keys.anchors import TrustAnchors
from gate.verify import verify_record
from gate_client.client import GateClient, resolution_route
from gate_client.resolutions import DENY, PROCEED, REVIEW, Verdict, resolution_verdict
from tests.holds.support import Holds, approved_request, held_request


@pytest.fixture
def gate(make_app):
    return make_app()


@pytest.fixture
def keys(issue_key):
    return {"caller": issue_key(permissions="decide")["api_key"],
            "reviewer": issue_key(permissions="decide,resolve")["api_key"]}


def _record(gate, keys, body):
    answer = Holds(gate.test_client(), keys["caller"]).decide(body)
    assert answer.status_code == 200
    return answer.get_json()


def _resolved(gate, keys, decision: str):
    record = _record(gate, keys, held_request())
    answer = Holds(gate.test_client(), keys["reviewer"]).resolve(record["decision_id"], decision, "CHECKED")
    assert answer.status_code == 201
    anchors = gate.extensions["gate"].signing.trust_anchors()
    return record, answer.get_json()["event"], anchors, verify_record(record, anchors=anchors).to_dict()


def test_a_verified_approval_proceeds_with_its_checks(gate, keys):
    record, event, anchors, verified = _resolved(gate, keys, "approve")
    verdict = resolution_verdict(record, event, anchors, verified)
    assert verdict == Verdict(PROCEED, "verified approving resolution", {
        **verified, "resolution": {"verified": True, "approved": True, "outcome": "approved", "problems": []}})
    route = resolution_route(record, event, anchors, verified)
    assert (route.route, route.reason, route.record, route.verification) == (PROCEED, verdict.reason, record,
                                                                             verdict.details)


def test_a_verified_denial_is_deny(gate, keys):
    record, event, anchors, verified = _resolved(gate, keys, "deny")
    verdict = resolution_verdict(record, event, anchors, verified)
    assert verdict == Verdict(DENY, "verified resolution: denied", {
        **verified, "resolution": {"verified": True, "approved": False, "outcome": "denied", "problems": []}})


def test_a_record_that_fails_verification_is_reviewed_whatever_the_resolution(gate, keys):
    record, event, anchors, verified = _resolved(gate, keys, "approve")
    failed = {**verified, "verified": False}
    assert resolution_verdict(record, event, anchors, failed) == Verdict(
        REVIEW, "the held record failed offline verification", failed)
    assert resolution_verdict(record, event, anchors, {}) == Verdict(
        REVIEW, "the held record failed offline verification", {})
    assert resolution_verdict(record, event, anchors, None) == Verdict(
        REVIEW, "the held record failed offline verification", {})
    truthy = {**verified, "verified": 1}  # only `true` itself counts
    assert resolution_verdict(record, event, anchors, truthy).route == REVIEW


def test_a_record_that_held_nothing_is_reviewed(gate, keys):
    _, event, anchors, _ = _resolved(gate, keys, "approve")
    other = _record(gate, keys, approved_request())
    assert other["verdict"] == "yes"
    verified = verify_record(other, anchors=anchors).to_dict()
    assert resolution_verdict(other, event, anchors, verified) == Verdict(
        REVIEW, "this record did not hold the action; a resolution does not apply")


def test_a_forged_resolution_is_reviewed_with_its_problems(gate, keys):
    record, event, anchors, verified = _resolved(gate, keys, "approve")
    verdict = resolution_verdict(record, {**event, "outcome": "denied"}, anchors, verified)
    assert verdict.route == REVIEW and verdict.reason.startswith("the resolution failed verification: ")
    assert verdict.details["resolution"]["verified"] is False and verdict.details["verified"] is True
    assert verdict.details["resolution"]["problems"] and verdict.reason.endswith(
        "; ".join(verdict.details["resolution"]["problems"]))


def test_route_by_resolution_routes_a_given_resolution_without_asking(gate, keys):
    record, event, anchors, _ = _resolved(gate, keys, "approve")
    client = GateClient("http://gate.invalid", "key", anchors=anchors)  # nothing is asked: no server there
    assert client.route_by_resolution(record, event).route == PROCEED
    assert resolution_route("not a record", event, anchors, None).route == REVIEW


def test_an_approval_signed_by_a_key_the_client_does_not_pin_is_reviewed(gate, keys):
    """The record verifies (as checked by whoever holds the gate's keys), but this client's anchors
    do not trust the key that signed the resolution: its approval does not proceed."""
    record, event, _, verified = _resolved(gate, keys, "approve")
    verdict = resolution_verdict(record, event, TrustAnchors(), verified)
    assert verdict.route == REVIEW and verdict.details["resolution"]["verified"] is False
    assert any("sign" in problem or "key" in problem for problem in verdict.details["resolution"]["problems"])


def test_resolution_route_as_documented_verifies_the_record_itself(gate, keys):
    """docs/client.md calls `resolution_route(record, resolution, anchors)`: the record is verified
    with those anchors, so an approval proceeds, a tampered record does not, and a client that pins
    no key proceeds on nothing."""
    record, event, anchors, _ = _resolved(gate, keys, "approve")
    assert resolution_route(record, event, anchors).route == PROCEED
    tampered = {**record, "action": "edited after signing"}
    routed = resolution_route(tampered, event, anchors)
    assert routed.route == REVIEW and routed.reason == "the held record failed offline verification"
    assert resolution_route(record, event, TrustAnchors()).route == REVIEW
