"""The pure rules of issue 42 pinned one by one: which policy changes weaken, when a change needs
approval, when a dry-run manifest is required, the governance fold (requests, approvals, stale
requests, self-approval) and the per-event checks `verify_history` applies."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from gate.errors import GateError
from gate.principals import Principal
from gate.releases.events import (
    OVERRIDE_HALT,
    halted_version,
    override_problem,
    policy_problem,
    principal_problem,
)
from gate.releases.governance import GovernanceState, PolicyAction, govern, verify_governance
from gate.releases.guards import dataset_as_of, staleness_problem
from gate.releases.model import Pending, ReleaseRefused, ReleaseState, Version
from gate.releases.policy import MEMBERS, ReleasePolicy, needs_approval, needs_dry_run, weakenings

BASE = ReleasePolicy(require_approval=True, approval_ttl_seconds=3600, refuse_superseded_inline=True,
                     require_dry_run=True, dry_run_canary_percent=5, dry_run_max_age_seconds=86400)
A, B = Principal.api_key("key_a"), Principal.api_key("key_b")
AT = "2026-11-26T00:00:00.000Z"


@pytest.mark.parametrize(("change", "weakened"), [
    ({"require_approval": False}, ("require_approval",)),
    ({"refuse_superseded_inline": False}, ("refuse_superseded_inline",)),
    ({"require_dry_run": False}, ("require_dry_run",)),
    ({"approval_ttl_seconds": 3601}, ("approval_ttl_seconds",)),
    ({"dry_run_max_age_seconds": 86401}, ("dry_run_max_age_seconds",)),
    ({"dry_run_canary_percent": 5.01}, ("dry_run_canary_percent",)),
    ({"approval_ttl_seconds": 3599, "dry_run_canary_percent": 4, "dry_run_max_age_seconds": 60}, ()),
    ({"require_approval": False, "approval_ttl_seconds": 7200},
     ("require_approval", "approval_ttl_seconds")),
])
def test_weakenings_name_each_member_a_change_weakens(change, weakened):
    after = replace(BASE, **change)
    assert weakenings(BASE, after) == weakened
    assert needs_approval(BASE, after) is bool(weakened)
    assert needs_approval(replace(BASE, require_approval=False), after) is False  # approvals off: applies


def test_turning_checks_on_is_never_a_weakening():
    off = ReleasePolicy()
    assert weakenings(off, BASE) == ()


def test_put_needs_every_member_and_patch_keeps_the_others():
    with pytest.raises(GateError) as missing:
        ReleasePolicy.from_json({"require_approval": True})
    assert missing.value.details["missing"] == list(MEMBERS[1:])
    assert ReleasePolicy.from_json(BASE.to_json()) == BASE
    assert BASE.patched({"approval_ttl_seconds": 600}) == replace(BASE, approval_ttl_seconds=600)
    for bad in ({}, {"nobody": 1}, {"approval_ttl_seconds": True}, {"dry_run_canary_percent": -1},
                {"dry_run_max_age_seconds": 59}, {"require_dry_run": 1}, [], "x"):
        with pytest.raises(GateError):
            BASE.patched(bad)
    assert ReleasePolicy.stored({"require_approval": True, "approval_ttl_seconds": 600}) == ReleasePolicy(
        require_approval=True, approval_ttl_seconds=600)


@pytest.mark.parametrize(("action", "percent", "needed"), [
    ("activate", None, True), ("canary", 5, False), ("canary", 5.01, True), ("canary", None, False),
    ("shadow", None, False), ("approve", None, False), ("halt", None, False), ("canary", True, False),
])
def test_needs_dry_run(action, percent, needed):
    assert needs_dry_run(BASE, action, percent) is needed
    assert needs_dry_run(replace(BASE, require_dry_run=False), action, percent) is False


def _act(name, principal, before, after, **more):
    return PolicyAction(name, principal, more.pop("at", AT), before, after, **more)


def test_the_governance_fold():
    off = ReleasePolicy()
    on = replace(off, require_approval=True)
    state = govern(GovernanceState(), _act("policy_set", A, off, on), 1)
    assert state.policy == on
    with pytest.raises(ReleaseRefused) as alone:
        govern(state, _act("policy_set", A, on, off), 2)
    assert alone.value.code == "RELEASE_POLICY_APPROVAL_REQUIRED"
    requested = govern(replace(state, seq=1), _act("policy_request", A, on, off, expires_at="2026-11-27T00:00:00.000Z"), 2)
    assert requested.policy == on and requested.pending[0].requested_by == A.actor
    with pytest.raises(ReleaseRefused) as own:
        govern(requested, _act("policy_approve", A, on, off, request_seq=2), 3)
    assert own.value.code == "RELEASE_SELF_APPROVAL"
    with pytest.raises(ReleaseRefused) as other:
        govern(requested, _act("policy_approve", B, on, on, request_seq=2), 3)
    assert other.value.code == "RELEASE_APPROVAL_MISMATCH"
    with pytest.raises(ReleaseRefused) as expired:
        govern(requested, _act("policy_approve", B, on, off, request_seq=2, at="2026-11-27T00:00:00.000Z"), 3)
    assert expired.value.code == "RELEASE_APPROVAL_NOT_FOUND"
    with pytest.raises(ReleaseRefused) as changed:
        govern(requested, _act("policy_approve", B, replace(on, approval_ttl_seconds=60), off, request_seq=2), 3)
    assert changed.value.code == "RELEASE_POLICY_CHANGED"
    approved = govern(requested, _act("policy_approve", B, on, off, request_seq=2), 3)
    assert approved.policy == off and approved.pending == ()


def test_verify_governance_with_no_events_knows_no_policy():
    check = verify_governance([], None, "s" * 64)
    assert check.problem is None and check.policies == (None,) and check.changes == ()
    assert (check.valid, check.signatures_checked, check.events) == (True, False, 0)
    assert verify_governance([{"release_governance_event_version": "x"}], None, "s").problem.startswith(
        "policy event 1: not a")


def test_policy_problem_per_event():
    approvals, dry = ReleasePolicy(require_approval=True), ReleasePolicy(require_dry_run=True)
    assert policy_problem({"action": "activate", "approval_expires_at": None}, approvals) == (
        "activate applied alone while the policy in force required approval")
    assert policy_problem({"action": "activate", "approval_expires_at": AT}, approvals) is None
    assert policy_problem({"action": "halt"}, approvals) is None
    assert policy_problem({"action": "canary", "percent": 10}, dry) == (
        "canary without the dry-run manifest the policy in force required")
    assert policy_problem({"action": "canary", "percent": 10, "migration_manifest_hash": "a" * 64}, dry) is None
    assert policy_problem({"action": "activate"}, ReleasePolicy()) is None


def test_override_and_principal_problems():
    state = ReleaseState("r", pending=(Pending(3, "activate", Version("v2", "h" * 64), None, None, "key_a", AT),))
    halted = frozenset({"v2"})
    assert override_problem({"action": "activate", "version": "v2"}, state, halted)
    assert override_problem({"action": "approve", "request_seq": 3}, state, halted)
    assert override_problem({"action": "approve", "request_seq": 9}, state, halted) is None
    assert override_problem({"action": "activate", "version": "v2", "override": OVERRIDE_HALT}, state, halted)
    assert override_problem({"action": "activate", "version": "v2", "override": OVERRIDE_HALT, "reason": "fixed"},
                            state, halted) is None
    assert override_problem({"action": "activate", "version": "v1"}, state, halted) is None
    assert halted_version({"action": "halt", "actor": "guardrail", "evidence": {"canary_version": "v2"}}) == "v2"
    assert halted_version({"action": "halt", "actor": "key_a", "evidence": {"canary_version": "v2"}}) is None
    assert principal_problem({"actor": "key_a", "principal": {"kind": "api_key", "id": "key_a"}}) is None
    assert principal_problem({"actor": "key_b", "principal": {"kind": "api_key", "id": "key_a"}}) == (
        "actor is not its principal's")
    assert principal_problem({"actor": "x", "principal": {"kind": "api_key"}}).startswith("its principal is malformed")


def test_staleness_of_the_dry_run_history():
    dry_run = {"history_versions": [{"last": "2026-11-20T00:00:00.000Z"}, {"last": "2026-11-25T00:00:00Z"},
                                     {"last": "not a time"}, "junk"]}
    assert dataset_as_of(dry_run) == datetime(2026, 11, 25, tzinfo=UTC)
    now = datetime(2026, 11, 26, tzinfo=UTC)
    assert staleness_problem(dry_run, now, 86_400) is None
    assert "staler than the scope's bound of 3600 s" in staleness_problem(dry_run, now, 3600)
    assert staleness_problem({}, now, 3600) == "the dry-run states no decision time for the history it ran over"


def test_the_dry_run_bounds_weaken_only_while_the_dry_run_stays_required():
    loose = {"dry_run_canary_percent": 50, "dry_run_max_age_seconds": 10 * 86_400}
    assert weakenings(replace(BASE, require_dry_run=False), replace(BASE, **loose)) == ()  # turned on: stronger
    assert weakenings(BASE, replace(BASE, require_dry_run=False, **loose)) == ("require_dry_run",)
    assert weakenings(BASE, replace(BASE, **loose)) == ("dry_run_max_age_seconds", "dry_run_canary_percent")


@pytest.mark.parametrize(("member", "value", "ok"), [
    ("approval_ttl_seconds", 60, True), ("approval_ttl_seconds", 59, False), ("approval_ttl_seconds", 30 * 86_400, True),
    ("approval_ttl_seconds", 30 * 86_400 + 1, False), ("approval_ttl_seconds", 600.0, False),
    ("approval_ttl_seconds", True, False),
    ("dry_run_max_age_seconds", 60, True), ("dry_run_max_age_seconds", 59, False),
    ("dry_run_max_age_seconds", 365 * 86_400, True), ("dry_run_max_age_seconds", 365 * 86_400 + 1, False),
    ("dry_run_canary_percent", 0, True), ("dry_run_canary_percent", 99.99, True), ("dry_run_canary_percent", 100, False),
    ("dry_run_canary_percent", -0.01, False), ("dry_run_canary_percent", True, False),
    ("dry_run_canary_percent", "5", False), ("dry_run_canary_percent", 5, True),
    ("require_approval", 1, False), ("refuse_superseded_inline", "true", False), ("require_dry_run", None, False),
    ("require_approval", False, True),
])
def test_each_member_is_checked_at_its_bounds_and_named(member, value, ok):
    if ok:
        assert getattr(BASE.patched({member: value}), member) == value
        return
    with pytest.raises(GateError) as refused:
        BASE.patched({member: value})
    assert refused.value.code == "RELEASE_POLICY_INVALID" and refused.value.details == {"member": member}


def test_a_policy_is_read_whole_stored_or_patched_and_refuses_anything_else():
    assert BASE.to_json() == {"require_approval": True, "approval_ttl_seconds": 3600, "refuse_superseded_inline": True,
                              "require_dry_run": True, "dry_run_canary_percent": 5, "dry_run_max_age_seconds": 86400}
    assert ReleasePolicy().to_json() == {"require_approval": False, "approval_ttl_seconds": 86_400,
                                         "refuse_superseded_inline": False, "require_dry_run": False,
                                         "dry_run_canary_percent": 0, "dry_run_max_age_seconds": 604_800}
    for bad in ([], "x", None):
        with pytest.raises(GateError) as refused:
            ReleasePolicy.from_json(bad)
        assert refused.value.code == "RELEASE_POLICY_INVALID" and refused.value.message == (
            "a release policy is a JSON object")
    with pytest.raises(GateError) as unknown:
        ReleasePolicy.from_json({**BASE.to_json(), "zeta": 1, "alpha": 2})
    assert unknown.value.message.startswith("unknown member(s) alpha, zeta; a release policy has require_approval, ")
    with pytest.raises(GateError) as invalid:
        ReleasePolicy.from_json({**BASE.to_json(), "approval_ttl_seconds": 1})
    assert invalid.value.details == {"member": "approval_ttl_seconds"}
    assert ReleasePolicy.stored(None) == ReleasePolicy.stored([1]) == ReleasePolicy()
    assert ReleasePolicy.stored({"require_dry_run": True, "gone": 1}) == ReleasePolicy(require_dry_run=True)
    with pytest.raises(GateError):
        ReleasePolicy.stored({"approval_ttl_seconds": 1})
    with pytest.raises(GateError) as empty:
        BASE.patched({})
    assert empty.value.message == "a PATCH names at least one member"


def test_an_approval_is_needed_only_while_approvals_are_required_and_for_a_weakening():
    off = replace(BASE, require_approval=False)
    assert needs_approval(BASE, replace(BASE, approval_ttl_seconds=3601)) is True
    assert needs_approval(BASE, replace(BASE, approval_ttl_seconds=3600)) is False
    assert needs_approval(off, replace(off, approval_ttl_seconds=9999)) is False
    assert needs_approval(off, BASE) is False
