"""The halt rule (gate/releases/halts.py) pinned by value: which version a move makes serve, which
versions the guardrail halted, and the refusal of a move of a halted version without an override."""

from __future__ import annotations

import pytest

from gate.releases.halts import OVERRIDE_HALT, halt_refusal, halted_version, halted_versions, serving_version
from gate.releases.model import Pending, ReleaseRefused, ReleaseState, Version

AT = "2026-11-26T00:00:00.000Z"
V1, V2, V3 = Version("v1", "1" * 64), Version("v2", "2" * 64), Version("v3", "3" * 64)
STATE = ReleaseState("rb", seq=7, active=V3, previous=(V2, V1),
                     pending=(Pending(4, "canary", V1, 10, "context.x", "key_a", AT),
                              Pending(5, "activate", V2, None, None, "key_a", AT)))
HALTED = frozenset({"v1"})


def _halt(version: object, actor: str = "guardrail", action: str = "halt") -> dict[str, object]:
    return {"action": action, "actor": actor, "evidence": {"canary_version": version}}


def test_the_override_is_named_guardrail_halt():
    assert OVERRIDE_HALT == "guardrail_halt"


def test_a_halted_version_is_named_by_the_guardrails_own_halt_only():
    assert halted_version(_halt("v1")) == "v1"
    assert halted_version(_halt("v1", actor="key_a")) is None  # a person's halt marks nothing
    assert halted_version(_halt("v1", action="shadow")) is None
    assert halted_version(_halt(7)) is None
    assert halted_version({"action": "halt", "actor": "guardrail", "evidence": None}) is None
    assert halted_version({"action": "halt", "actor": "guardrail", "evidence": "v1"}) is None
    assert halted_version({"action": "halt", "actor": "guardrail"}) is None


def test_halted_versions_gathers_every_halt():
    events = [_halt("v1"), {"action": "activate", "version": "v2"}, _halt("v3", actor="key_a"), _halt("v2")]
    assert halted_versions(events) == frozenset({"v1", "v2"})
    assert halted_versions([]) == frozenset()


@pytest.mark.parametrize(("move", "serving"), [
    ({"action": "activate", "version": "v1"}, "v1"),
    ({"action": "canary", "version": "v2", "percent": 5}, "v2"),
    ({"action": "activate", "version": 1}, None),
    ({"action": "canary"}, None),
    ({"action": "rollback"}, "v1"),  # the newest previous, which rollback restores
    ({"action": "approve", "request_seq": 4}, "v1"),  # a canary request
    ({"action": "approve", "request_seq": 5}, "v2"),  # an activation request
    ({"action": "approve", "request_seq": 6}, None),
    ({"action": "approve"}, None),
    ({"action": "shadow", "version": "v1"}, None),  # a shadow never answers a decide
    ({"action": "halt", "version": "v1"}, None),
    ({"version": "v1"}, None),
])
def test_the_version_a_move_makes_serve(move, serving):
    assert serving_version(move, STATE) == serving


def test_a_rollback_with_nothing_to_restore_serves_nothing():
    assert serving_version({"action": "rollback"}, ReleaseState("rb", active=V1)) is None


def _refusal(move: dict[str, object], state: ReleaseState = STATE) -> ReleaseRefused:
    refusal = halt_refusal(move, state, HALTED)
    assert isinstance(refusal, ReleaseRefused)
    return refusal


@pytest.mark.parametrize("move", [
    {"action": "rollback"},
    {"action": "rollback", "reason": "fixed"},
    {"action": "rollback", "override": OVERRIDE_HALT},
    {"action": "rollback", "override": OVERRIDE_HALT, "reason": ""},
    {"action": "rollback", "override": "halt", "reason": "fixed"},
    {"action": "activate", "version": "v1", "override": OVERRIDE_HALT},
    {"action": "canary", "version": "v1", "percent": 5, "reason": "fixed"},
    {"action": "approve", "request_seq": 4},
])
def test_a_halted_version_made_to_serve_without_the_override_and_a_reason_is_refused(move):
    refusal = _refusal(move)
    assert (refusal.code, refusal.status, refusal.details) == ("RELEASE_VERSION_HALTED", 409, {"version": "v1"})
    assert refusal.message == (f"{move['action']} makes version 'v1' serve, which its guardrail halted: only an "
                               "admin does so, with override 'guardrail_halt' and a reason")


@pytest.mark.parametrize("move", [
    {"action": "rollback", "override": OVERRIDE_HALT, "reason": "fixed"},
    {"action": "approve", "request_seq": 4, "override": OVERRIDE_HALT, "reason": "agreed"},
    {"action": "activate", "version": "v2"},
    {"action": "approve", "request_seq": 5},
    {"action": "shadow", "version": "v1"},
    {"action": "halt"},
])
def test_a_move_with_the_override_or_of_no_halted_version_passes(move):
    assert halt_refusal(move, STATE, HALTED) is None


@pytest.mark.parametrize("move", [
    {"action": "activate", "version": "v2", "override": OVERRIDE_HALT, "reason": "x"},
    {"action": "shadow", "version": "v1", "override": OVERRIDE_HALT, "reason": "x"},
    {"action": "halt", "override": "anything"},
    {"action": "approve", "request_seq": 5, "override": OVERRIDE_HALT, "reason": "x"},
])
def test_an_override_where_no_halted_version_would_serve_is_refused(move):
    refusal = _refusal(move)
    assert (refusal.code, refusal.status, refusal.details) == ("RELEASE_ACTION_INVALID", 400, {})
    assert refusal.message == "override applies only to a move that makes a version its guardrail halted serve"


def test_nothing_halted_refuses_only_an_override():
    assert halt_refusal({"action": "rollback"}, STATE, frozenset()) is None
    assert _refusal({"action": "rollback", "override": OVERRIDE_HALT, "reason": "x"},
                    ReleaseState("rb", active=V2)).code == "RELEASE_ACTION_INVALID"
