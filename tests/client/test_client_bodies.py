"""The client's typed answers (`gate_client.bodies`) state exactly the members the gate answers.

The TypedDicts add no runtime check, so this holds them in step with the served bodies: a member
the gate adds, drops or renames fails here, not in a caller's type checker.
"""

from __future__ import annotations

import typing

from gate.holds.events import ResolutionCheck
from gate.services.periodic import WorkerHealth
from gate.verify.result import VerificationReport
from gate_client.bodies import (
    AdvisoryModes,
    Fix,
    KeyRegistryAnswer,
    PartStatus,
    ReceiptAnswer,
    ResolutionAnswer,
    RouteVerification,
    SigningStatus,
    StatusAnswer,
    Workers,
)
from gate_client.client import GateClient
from tests.holds.support import Holds, held_request


def _members(shape) -> tuple[frozenset[str], frozenset[str]]:
    return shape.__required_keys__, shape.__optional_keys__


def _fits(value: dict, shape) -> None:
    required, optional = _members(shape)
    assert required <= set(value) <= required | optional, (shape.__name__, sorted(value))


def test_the_status_answer_states_the_served_members(make_app):
    body = make_app({"GATE_EVENTS_DISPATCH": "true"}).test_client().get("/api/decision/status").get_json()
    _fits(body, StatusAnswer)
    _fits(body["signing"], SigningStatus)
    _fits(body["advisory_modes"], AdvisoryModes)
    for part in ("ledger", "idempotency", "rate_limits", "auth"):
        _fits(body[part], PartStatus)
    for fix in body["fixes"]:
        _fits(fix, Fix)
    _fits(body["workers"], Workers)
    assert body["workers"]["workers"]
    for worker in body["workers"]["workers"]:
        _fits(worker, WorkerHealth)


def test_the_key_registry_answer_states_the_served_members(make_app):
    _fits(make_app().test_client().get("/api/decision/receipt-keys").get_json(), KeyRegistryAnswer)


def test_the_resolution_and_receipt_answers_state_the_served_members(client, issue_key):
    holds = Holds(client, issue_key(permissions="decide")["api_key"])
    reviewer = Holds(client, issue_key(permissions="decide,resolve")["api_key"])  # not the requester
    record = holds.decide(held_request()).get_json()
    assert record["verdict"] == "review"
    _fits(holds.resolution(record["decision_id"]).get_json(), ResolutionAnswer)  # open
    assert reviewer.resolve(record["decision_id"]).status_code == 201
    closed = holds.resolution(record["decision_id"]).get_json()
    _fits(closed, ResolutionAnswer)
    assert closed["resolution"] is not None
    receipt = client.post(f"/api/decision/{record['decision_id']}/execution", headers=holds.h(), json={
        "execution_status": "executed", "decision_record_hash": record["record_hash"],
        "decision_receipt_hash": record["receipt_hash"]}).get_json()
    _fits(receipt, ReceiptAnswer)
    assert set(receipt) == {"ok", "execution"}


def test_a_route_verification_states_the_verifier_members(client, issue_key):
    key = issue_key(permissions="decide")["api_key"]
    record = client.post("/api/decide", json=held_request(), headers={"x-api-key": key}).get_json()
    verification = GateClient("http://gate.invalid").verify(record).to_dict()
    _fits(verification, RouteVerification)
    # every member of the type but the resolution's check (added on a hold's route) is the verifier's
    assert RouteVerification.__optional_keys__ - set(verification) == {"resolution"}



def test_a_route_verification_is_the_verifiers_report_and_the_resolutions_check():
    # one shape: the route's copy differs only in that every member may be missing, and in `resolution`
    hints = typing.get_type_hints(RouteVerification)
    assert hints.pop("resolution") == typing.get_type_hints(ResolutionCheck.to_json)["return"]
    assert hints == typing.get_type_hints(VerificationReport)
    assert list(hints) == list(VerificationReport.__annotations__)  # in the verifier's member order
