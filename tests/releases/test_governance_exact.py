"""gate/releases/governance.py pinned by value: the fold of policy changes (sets, requests,
approvals, expiry), the signed governance event and the state it states, reading a stored event
back, and `verify_governance`'s first problem for each way a chain can be wrong. (The HTTP walk
of the same rules: test_governance.py.)"""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest

from gate.chain.sealing import event_hash
from gate.keys.config import SigningSetup
from gate.keys.signing import generate_keyring
from gate.principals import Principal
from gate.releases.governance import (
    GovernanceState,
    PolicyAction,
    PolicyRequest,
    action_of,
    build_governance_event,
    change_summary,
    govern,
    pending_request,
    state_from_event,
    verify_governance,
)
from gate.releases.model import ReleaseRefused
from gate.releases.policy import ReleasePolicy

A, B = Principal.api_key("key_a"), Principal.person("https://idp.example", "bob", "Bob")
ANN = "person:https://id.example#ann"
OFF = ReleasePolicy()
ON = ReleasePolicy(require_approval=True, approval_ttl_seconds=600)
LOOSE = replace(ON, approval_ttl_seconds=7200)
AT, LATER, END = "2026-11-26T00:00:00.000Z", "2026-11-26T00:05:00.000Z", "2026-11-26T00:10:00.000Z"
SCOPE_HASH = "c" * 64


@pytest.fixture(scope="module")
def signing(tmp_path_factory):
    keyring = tmp_path_factory.mktemp("governance") / "keys.json"
    generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
    return SigningSetup.load(keyring, None, "hmac")


def _refused(call, code: str, status: int) -> ReleaseRefused:
    with pytest.raises(ReleaseRefused) as refused:
        call()
    assert (refused.value.code, refused.value.status) == (code, status), refused.value.message
    return refused.value


def _set(before, after, principal=A, at=AT, **more) -> PolicyAction:
    return PolicyAction("policy_set", principal, at, before, after, **more)


def _request(before, after, principal=A, at=AT, expires_at=END) -> PolicyAction:
    return PolicyAction("policy_request", principal, at, before, after, expires_at=expires_at)


def _approve(before, after, request_seq, principal=B, at=LATER) -> PolicyAction:
    return PolicyAction("policy_approve", principal, at, before, after, request_seq=request_seq)


def _requested() -> GovernanceState:
    """ON in force (event 1), and a request to loosen its expiry (event 2), expiring at END."""
    return govern(replace(govern(GovernanceState(), _set(OFF, ON), 1), seq=1), _request(ON, LOOSE), 2)


def test_a_request_states_itself_with_what_it_weakens():
    request = PolicyRequest(4, ON, OFF, "key_a", END)
    assert request.to_json() == {"request_seq": 4, "policy_before": ON.to_json(), "policy_after": OFF.to_json(),
                                 "weakens": ["require_approval", "approval_ttl_seconds"], "requested_by": "key_a",
                                 "expires_at": END}
    assert GovernanceState().to_json(legacy=True) == {"policy": None, "pending": []}
    assert GovernanceState().to_json() == {"policy": None, "pending": [], "settings": {}, "applied": {}}
    assert GovernanceState(3, "h", ON, (request,)).to_json(legacy=True) == {"policy": ON.to_json(),
                                                                         "pending": [request.to_json()]}


def test_a_change_must_start_from_the_policy_in_force():
    stated = replace(OFF, refuse_superseded_inline=True)
    assert govern(GovernanceState(), _set(stated, OFF), 1).policy == OFF  # no chain yet: any stated before
    state = govern(GovernanceState(), _set(OFF, ON), 1)
    refused = _refused(lambda: govern(state, _set(OFF, replace(ON, refuse_superseded_inline=True)), 2),
                       "RELEASE_POLICY_CHANGED", 409)
    assert refused.message == "policy_before is not the policy in force"
    assert govern(state, _set(ON, replace(ON, refuse_superseded_inline=True)), 2).policy.refuse_superseded_inline


def test_a_set_applies_at_once_unless_it_weakens_a_policy_requiring_approval():
    state = govern(GovernanceState(), _set(OFF, ON), 1)
    assert (state.policy, state.pending, state.seq) == (ON, (), 0)  # the seq is the caller's to set
    refused = _refused(lambda: govern(state, _set(ON, LOOSE), 2), "RELEASE_POLICY_APPROVAL_REQUIRED", 409)
    assert "second principal" in refused.message
    stronger = govern(state, _set(ON, replace(ON, approval_ttl_seconds=60)), 2)
    assert stronger.policy.approval_ttl_seconds == 60


def test_a_request_keeps_the_policy_and_adds_a_pending_entry():
    state = _requested()
    assert state.policy == ON
    assert state.pending == (PolicyRequest(2, ON, LOOSE, "key_a", END),)
    by_person = govern(state, _request(ON, OFF, principal=B, expires_at=LATER), 3)
    assert by_person.pending[1] == PolicyRequest(3, ON, OFF, B.actor, LATER)
    refused = _refused(lambda: govern(state, _request(ON, OFF, expires_at=None), 3), "RELEASE_POLICY_INVALID", 400)
    assert refused.message == "a policy request states when it expires"
    assert govern(state, _set(ON, replace(ON, approval_ttl_seconds=60)), 3).pending == state.pending


def test_an_unknown_action_is_refused():
    refused = _refused(lambda: govern(GovernanceState(), PolicyAction("policy_reset", A, AT, OFF, ON), 1),
                       "RELEASE_POLICY_INVALID", 400)
    assert "policy_set, policy_request, policy_approve" in refused.message


def test_an_approval_applies_the_request_it_names_and_only_that_one():
    state = govern(_requested(), _request(ON, OFF, expires_at=END), 3)
    approved = govern(state, _approve(ON, LOOSE, 2), 4)
    assert approved.policy == LOOSE and [p.seq for p in approved.pending] == [3]


def test_an_approval_is_refused_for_each_reason_in_turn():
    state = _requested()
    missing = _refused(lambda: govern(state, _approve(ON, LOOSE, 9), 3), "RELEASE_APPROVAL_NOT_FOUND", 404)
    assert "request_seq" in missing.message
    _refused(lambda: govern(state, _approve(ON, LOOSE, 2, at=END), 3), "RELEASE_APPROVAL_NOT_FOUND", 404)  # expired
    _refused(lambda: govern(state, _approve(ON, LOOSE, 2, principal=A), 3), "RELEASE_SELF_APPROVAL", 403)
    _refused(lambda: govern(state, _approve(ON, OFF, 2), 3), "RELEASE_APPROVAL_MISMATCH", 409)
    # The request was made against ON; a policy in force that differs makes it stale.
    stale = replace(state, policy=None, pending=(replace(state.pending[0], before=OFF),))
    changed = _refused(lambda: govern(stale, _approve(ON, LOOSE, 2), 3), "RELEASE_POLICY_CHANGED", 409)
    assert "request the change again" in changed.message


def test_expired_requests_drop_out_at_their_instant():
    state = _requested()
    assert pending_request(state, 2, LATER) == state.pending[0]
    assert pending_request(state, 2, END) is None
    assert pending_request(state, 3, LATER) is None
    assert govern(state, _set(ON, replace(ON, approval_ttl_seconds=60), at=END), 3).pending == ()
    assert govern(state, _set(ON, replace(ON, approval_ttl_seconds=60), at=LATER), 3).pending == state.pending


def _chain(signing):
    """Three signed events: ON set by A, a request by A to loosen it, B's approval."""
    signer = signing.receipt_signer()
    first, state = build_governance_event(GovernanceState(), _set(OFF, ON, reason="pilot"), SCOPE_HASH, signer)
    second, state = build_governance_event(state, _request(ON, LOOSE), SCOPE_HASH, signer)
    third, state = build_governance_event(state, _approve(ON, LOOSE, 2), SCOPE_HASH, signer)
    return [first, second, third], state


def test_a_governance_event_states_the_action_the_principal_and_the_state_after(signing):
    [first, second, third], state = _chain(signing)
    assert {k: v for k, v in first.items() if k not in ("event_hash", "key_id", "signature_algorithm",
                                                       "public_key_fingerprint", "signature")} == {
        "release_governance_event_version": "release_governance_event_v1", "scope_hash": SCOPE_HASH, "seq": 1,
        "setting": "release_policy", "approvals_required": False,
        "action": "policy_set", "actor": "key_a", "principal": {"kind": "api_key", "id": "key_a"}, "created_at": AT,
        "request_seq": None, "expires_at": None, "reason": "pilot", "policy_before": OFF.to_json(),
        "policy_after": ON.to_json(), "weakens": [], "previous_event_hash": None,
        "state": {"policy": ON.to_json(), "pending": [], "settings": {}, "applied": {"release_policy": 1}}}
    assert first["event_hash"] == event_hash(first)
    assert first["key_id"] == signing.receipt_signer().key_id and first["signature"]
    assert (second["seq"], second["previous_event_hash"], second["expires_at"], second["weakens"]) == (
        2, first["event_hash"], END, ["approval_ttl_seconds"])
    assert second["state"] == {"policy": ON.to_json(), "pending": [PolicyRequest(2, ON, LOOSE, "key_a", END).to_json()],
                               "settings": {}, "applied": {"release_policy": 1}}
    assert (third["actor"], third["principal"], third["request_seq"]) == (B.actor, B.to_json(), 2)
    assert third["state"] == {"policy": LOOSE.to_json(), "pending": [], "settings": {},
                              "applied": {"release_policy": 3}}
    assert (state.seq, state.head_event_hash, state.policy, state.pending) == (3, third["event_hash"], LOOSE, ())
    assert state_from_event(third) == state
    assert state_from_event(second) == GovernanceState(2, second["event_hash"], ON, (
        PolicyRequest(2, ON, LOOSE, "key_a", END),), applied={"release_policy": 1})


def test_an_unsigned_event_has_only_its_hash(signing):
    event, state = build_governance_event(GovernanceState(), _set(OFF, ON), SCOPE_HASH, None)
    assert "signature" not in event and "key_id" not in event and event["event_hash"] == state.head_event_hash
    with pytest.raises(ReleaseRefused):
        build_governance_event(state, _set(ON, LOOSE), SCOPE_HASH, None)


def test_a_stored_event_without_a_policy_reads_as_none():
    event = {"seq": 4, "event_hash": "h", "state": {"policy": None, "pending": []}}
    assert state_from_event(event) == GovernanceState(4, "h", None, ())
    assert state_from_event({"seq": 1, "event_hash": "h", "state": {}}) == GovernanceState(1, "h", None, ())


def test_an_event_states_its_action(signing):
    [first, second, third], _state = _chain(signing)
    assert action_of(first) == _set(OFF, ON, reason="pilot")
    assert action_of(second) == _request(ON, LOOSE)
    assert action_of(third) == _approve(ON, LOOSE, 2)
    with pytest.raises(ValueError):
        action_of({**third, "principal": {"kind": "api_key"}})
    assert change_summary(third, "key_a") == {**{k: third[k] for k in (
        "seq", "setting", "action", "actor", "principal", "created_at", "request_seq", "weakens", "policy_before",
        "policy_after")}, "requested_by": "key_a", "approved_by": ["key_a", B.actor]}
    assert change_summary(first) == {**{k: first[k] for k in (
        "seq", "setting", "action", "actor", "principal", "created_at", "request_seq", "weakens", "policy_before",
        "policy_after")}, "requested_by": "key_a", "approved_by": ["key_a"]}
    assert change_summary(second)["approved_by"] == [] and change_summary(second)["requested_by"] == "key_a"
    assert change_summary({}) == {**dict.fromkeys(("seq", "action", "actor", "principal", "created_at", "request_seq",
                                                   "weakens", "policy_before", "policy_after", "requested_by")),
                                  "setting": "release_policy", "approved_by": []}


def test_a_whole_chain_verifies_and_states_the_policy_after_each_event(signing):
    events, _state = _chain(signing)
    check = verify_governance(events, signing.trust_anchors(), SCOPE_HASH)
    assert check.problem is None and check.problems == ()
    assert (check.valid, check.signatures_checked, check.verified, check.events) == (True, True, True, 3)
    assert check.policies == (OFF, ON, ON, LOOSE)
    assert check.changes == (change_summary(events[0]), change_summary(events[1]), change_summary(events[2], "key_a"))
    assert check.to_json() == {"verified": True, "valid": True, "signatures_checked": True, "events": 3,
                               "problems": []}  # the chain check's members: its changes reach JSON via a history
    unkeyed = verify_governance(events, None, SCOPE_HASH)  # hashes and links only
    assert unkeyed.problem is None and (unkeyed.valid, unkeyed.signatures_checked, unkeyed.verified) == (
        True, False, False)


def _resealed(event):
    event = {k: v for k, v in event.items() if k not in ("key_id", "signature_algorithm", "public_key_fingerprint",
                                                          "signature")}
    event["event_hash"] = event_hash(event)
    return event


@pytest.mark.parametrize(("edit", "problem", "passed"), [
    (lambda events: events.__setitem__(1, "x"), "policy event 2: not a release_governance_event_v1 object", 1),
    (lambda events: events[1].__setitem__("release_governance_event_version", "v0"),
     "policy event 2: not a release_governance_event_v1 object", 1),
    (lambda events: events.pop(1), "policy event 2: seq 3, expected 2 (gap or reorder)", 1),
    (lambda events: events[1].__setitem__("reason", "edited"),
     "policy event 2: event_hash does not match its content (tampered)", 1),
    (lambda events: events[2].__setitem__("signature", events[1]["signature"]), "policy event 3: signature fails", 2),
])
def test_a_broken_chain_names_its_first_problem(signing, edit, problem, passed):
    events, _state = _chain(signing)
    edit(events)
    check = verify_governance(events, signing.trust_anchors(), SCOPE_HASH)
    assert check.problem == problem
    assert (check.valid, check.signatures_checked, check.events, check.problems) == (False, True, len(events),
                                                                                     (problem,))
    assert check.policies == (None, ON, ON)[:passed + 1] and len(check.changes) == passed  # as far as it got


def test_a_chain_of_another_scope_is_refused(signing):
    events, _state = _chain(signing)
    assert verify_governance(events, None, "d" * 64).problem == "policy event 1: belongs to another scope"


@pytest.mark.parametrize(("index", "member", "value", "problem"), [
    (0, "principal", {"kind": "api_key"}, "policy event 1: its principal or policies are malformed"),
    (0, "policy_after", {"require_approval": "yes"}, "policy event 1: its principal or policies are malformed"),
    (1, "action", "policy_set", ("policy event 2: the governance rules refuse this change "
                                "(RELEASE_POLICY_APPROVAL_REQUIRED)")),
    (2, "principal", {"kind": "api_key", "id": "key_c"}, "policy event 3: actor is not its principal's"),
    (2, "actor", "key_a", "policy event 3: actor is not its principal's"),
    (0, "state", {"policy": OFF.to_json(), "pending": []}, ("policy event 1: stated policy is not the fold of the "
                                                            "changes")),
])
def test_an_event_the_rules_refuse_or_that_misstates_its_fold_fails(index, member, value, problem):
    events, _state = _chain_unsigned()
    events[index][member] = value
    events = _relinked(events, index)
    check = verify_governance(events, None, SCOPE_HASH)
    assert check.problem == problem and check.problems == (problem,)
    assert (check.valid, check.signatures_checked, check.events) == (False, False, 3)
    assert len(check.policies) == index + 1


def test_the_approval_of_its_own_request_fails_verification():
    events, _state = _chain_unsigned()
    for event in events[2:]:
        event.update(actor=A.actor, principal=A.to_json())
    events = _relinked(events, 2)
    assert verify_governance(events, None, SCOPE_HASH).problem == (
        "policy event 3: the governance rules refuse this change (RELEASE_SELF_APPROVAL)")


def _chain_unsigned():
    first, state = build_governance_event(GovernanceState(), _set(OFF, ON), SCOPE_HASH, None)
    second, state = build_governance_event(state, _request(ON, LOOSE), SCOPE_HASH, None)
    third, state = build_governance_event(state, _approve(ON, LOOSE, 2), SCOPE_HASH, None)
    return [first, second, third], state


def _relinked(events, start):
    """Rehash from `start` on, each event linked to the one before (an edit a forger would make)."""
    events = copy.deepcopy(events)
    for index in range(start, len(events)):
        if index:
            events[index]["previous_event_hash"] = events[index - 1]["event_hash"]
        events[index] = _resealed(events[index])
    return events


def test_a_first_change_that_is_a_request_pins_the_policy_it_was_made_against():
    state = govern(GovernanceState(), _request(ON, LOOSE), 1)
    assert state.policy == ON and state.to_json()["policy"] == ON.to_json()
    _refused(lambda: govern(state, _set(OFF, ON), 2), "RELEASE_POLICY_CHANGED", 409)  # a stale before is refused


# ------------------------------------------------------------------ issue 52: every safeguard setting, bound requests

from gate.events.egress import EventSettings  # noqa: E402
from gate.governance.table import SAFEGUARDS  # noqa: E402
from gate.releases.governance import (  # noqa: E402
    approvals_required,
    distinct_approver,
    refusal_code,
    replay_state,
)

QUIET, LOUD = EventSettings(), EventSettings(decision_created=True)


def _egress(action, before, after, principal=A, at=AT, required=True, **more) -> PolicyAction:
    return PolicyAction(action, principal, at, before, after, setting="event_settings",
                        approvals_required=required, **more)


def test_a_request_is_bound_to_the_sequence_not_to_the_values():
    state = replace(_requested(), seq=2)  # ON in force (applied at 1), request 2 to loosen it
    assert state.applied == {"release_policy": 1}
    stronger = replace(govern(state, _set(ON, replace(ON, approval_ttl_seconds=60), at=LATER), 3), seq=3)
    assert stronger.applied == {"release_policy": 3}
    tight = replace(ON, approval_ttl_seconds=60)
    asked = replace(govern(stronger, _request(tight, ON, at=LATER), 4), seq=4)
    back = replace(govern(asked, _approve(tight, ON, 4), 5), seq=5)
    assert back.policy == ON and back.pending == state.pending  # equal values again, the request still pending
    stale = _refused(lambda: govern(back, _approve(ON, LOOSE, 2), 6), "RELEASE_POLICY_CHANGED", 409)
    assert stale.message == "the setting changed since this request was made: request the change again"
    # another setting's change does not make it stale
    other = replace(govern(state, _egress("policy_set", QUIET, EventSettings(anomaly_every_seconds=300)), 3,
                           SAFEGUARDS), seq=3)
    assert govern(other, _approve(ON, LOOSE, 2), 4, SAFEGUARDS).policy == LOOSE
    assert govern(state, _approve(ON, LOOSE, 2), 3).applied == {"release_policy": 3}


def test_every_setting_of_the_table_folds_by_the_same_rules():
    state = replace(govern(GovernanceState(), _set(OFF, ON), 1), seq=1)
    refused = _refused(lambda: govern(state, _egress("policy_set", QUIET, LOUD), 2, SAFEGUARDS),
                       "GOVERNANCE_APPROVAL_REQUIRED", 409)
    assert refused.message == "a weakening change while approvals are required needs a second principal"
    asked = replace(govern(state, _egress("policy_request", QUIET, LOUD, expires_at=END), 2, SAFEGUARDS), seq=2)
    assert asked.settings == {"event_settings": QUIET} and asked.applied == {"release_policy": 1}
    assert asked.pending == (PolicyRequest(2, QUIET, LOUD, A.actor, END, "event_settings"),)
    assert asked.pending[0].weakens == ("decision_created",)
    assert asked.to_json()["pending"] == [{"setting": "event_settings", "request_seq": 2,
                                           "policy_before": QUIET.to_json(), "policy_after": LOUD.to_json(),
                                           "weakens": ["decision_created"], "requested_by": A.actor,
                                           "expires_at": END}]
    own = _refused(lambda: govern(asked, _egress("policy_approve", QUIET, LOUD, request_seq=2), 3, SAFEGUARDS),
                   "GOVERNANCE_SELF_APPROVAL", 403)
    assert own.message == "a principal cannot approve its own request (nor another key of the same holder)"
    _refused(lambda: govern(asked, _approve(ON, LOOSE, 2), 3, SAFEGUARDS), "RELEASE_APPROVAL_NOT_FOUND", 404)
    _refused(lambda: govern(asked, _egress("policy_approve", QUIET, QUIET, principal=B, request_seq=2), 3,
                            SAFEGUARDS), "GOVERNANCE_APPROVAL_MISMATCH", 409)
    _refused(lambda: govern(asked, _egress("policy_approve", LOUD, LOUD, principal=B, request_seq=2), 3,
                            SAFEGUARDS), "GOVERNANCE_SETTING_CHANGED", 409)
    done = govern(asked, _egress("policy_approve", QUIET, LOUD, principal=B, request_seq=2), 3, SAFEGUARDS)
    assert (done.settings, done.applied, done.pending) == (
        {"event_settings": LOUD}, {"release_policy": 1, "event_settings": 3}, ())
    assert done.value("event_settings") == LOUD and done.value("hold_policy") is None and done.value(
        "release_policy") == ON
    unknown = _refused(lambda: govern(state, replace(_set(OFF, ON), setting="nothing"), 2, SAFEGUARDS),
                       "GOVERNANCE_REQUEST_INVALID", 400)
    assert unknown.message == ("a safeguard setting is one of release_policy, hold_policy, event_settings, "
                               "api_keys, event_subscriptions, privacy, subject_erasure")
    _refused(lambda: govern(state, _egress("policy_set", QUIET, LOUD), 2), "GOVERNANCE_REQUEST_INVALID", 400)


def test_whether_approvals_were_required_comes_from_the_chain_else_the_event():
    assert approvals_required(GovernanceState(), _set(ON, OFF)) is True
    assert approvals_required(GovernanceState(), _set(OFF, ON, approvals_required=True)) is False
    assert approvals_required(GovernanceState(), _egress("policy_set", QUIET, LOUD, required=False)) is False
    assert approvals_required(GovernanceState(), _egress("policy_set", QUIET, LOUD, required=True)) is True
    missing = _refused(lambda: approvals_required(GovernanceState(), _egress("policy_set", QUIET, LOUD,
                                                                              required=None)),
                       "GOVERNANCE_REQUEST_INVALID", 400)
    assert missing.message == "a change states whether approvals were required"
    _refused(lambda: approvals_required(GovernanceState(), _egress("policy_set", QUIET, LOUD, required=1)),
             "GOVERNANCE_REQUEST_INVALID", 400)
    on = GovernanceState(policy=ON)
    assert approvals_required(on, _egress("policy_set", QUIET, LOUD, required=None)) is True
    assert approvals_required(on, _egress("policy_set", QUIET, LOUD, required=True)) is True
    lied = _refused(lambda: approvals_required(on, _egress("policy_set", QUIET, LOUD, required=False)),
                    "GOVERNANCE_SETTING_CHANGED", 409)
    assert lied.message == "approvals_required is not the release policy's in force"
    assert approvals_required(GovernanceState(policy=OFF), _egress("policy_set", QUIET, LOUD, required=None)) is False


def test_the_codes_distinct_approvers_and_a_legacy_state():
    assert [refusal_code("release_policy", k) for k in ("changed", "required", "invalid", "not_found", "self",
                                                        "mismatch")] == [
        "RELEASE_POLICY_CHANGED", "RELEASE_POLICY_APPROVAL_REQUIRED", "RELEASE_POLICY_INVALID",
        "RELEASE_APPROVAL_NOT_FOUND", "RELEASE_SELF_APPROVAL", "RELEASE_APPROVAL_MISMATCH"]
    assert [refusal_code("hold_policy", k) for k in ("changed", "required", "invalid", "not_found", "self",
                                                     "mismatch")] == [
        "GOVERNANCE_SETTING_CHANGED", "GOVERNANCE_APPROVAL_REQUIRED", "GOVERNANCE_REQUEST_INVALID",
        "GOVERNANCE_REQUEST_NOT_FOUND", "GOVERNANCE_SELF_APPROVAL", "GOVERNANCE_APPROVAL_MISMATCH"]
    asked = PolicyRequest(2, OFF, ON, "key_a", END)
    assert distinct_approver(asked, B) is True and distinct_approver(asked, A) is False
    ann = "person:https://idp.example#ann"
    by_ann = PolicyRequest(2, OFF, ON, "key_a", END, requested_holder=ann)
    # holders, not keys: Ann's other key and Ann signed in are no second approver; a key of no holder is its own
    assert distinct_approver(by_ann, Principal.api_key("key_c", ann)) is False
    assert distinct_approver(by_ann, Principal.person("https://idp.example", "ann")) is False
    assert distinct_approver(by_ann, Principal.api_key("key_c")) is True
    assert distinct_approver(asked, Principal.api_key("key_a", ann)) is True
    state = GovernanceState(3, "h", ON, (), {"event_settings": LOUD}, {"release_policy": 1, "event_settings": 3})
    assert state.to_json(legacy=True) == {"policy": ON.to_json(), "pending": []}
    assert state.to_json() == {"policy": ON.to_json(), "pending": [], "settings": {"event_settings": LOUD.to_json()},
                               "applied": {"event_settings": 3, "release_policy": 1}}
    assert list(state.to_json()["applied"]) == ["event_settings", "release_policy"]


def test_a_chain_of_every_setting_verifies_replays_and_reads_back(signing):
    signer = signing.receipt_signer()
    first, state = build_governance_event(GovernanceState(), _set(OFF, ON), SCOPE_HASH, signer, SAFEGUARDS)
    second, state = build_governance_event(state, _egress("policy_request", QUIET, LOUD, expires_at=END),
                                           SCOPE_HASH, signer, SAFEGUARDS)
    third, state = build_governance_event(state, _egress("policy_approve", QUIET, LOUD, principal=B, at=LATER,
                                                         request_seq=2), SCOPE_HASH, signer, SAFEGUARDS)
    events = [first, second, third]
    assert (second["setting"], second["approvals_required"], second["weakens"]) == (
        "event_settings", True, ["decision_created"])
    assert state_from_event(third, SAFEGUARDS) == state
    assert replay_state(events, SAFEGUARDS) == state
    assert replay_state([first]) == replace(state_from_event(first), pending=())
    check = verify_governance(events, signing.trust_anchors(), SCOPE_HASH, SAFEGUARDS)
    assert check.problem is None and check.policies == (OFF, ON, ON, ON)
    assert [(c["setting"], c["requested_by"], c["approved_by"]) for c in check.changes] == [
        ("release_policy", A.actor, [A.actor]), ("event_settings", A.actor, []),
        ("event_settings", A.actor, [A.actor, B.actor])]
    assert verify_governance(events, None, SCOPE_HASH).problem == (
        "policy event 2: its principal or policies are malformed")  # the release policy's rules alone
    hold_first, _ = build_governance_event(GovernanceState(), replace(
        _egress("policy_set", QUIET, EventSettings(anomaly_every_seconds=300)), approvals_required=False),
        SCOPE_HASH, signer, SAFEGUARDS)
    release_second, _ = build_governance_event(replace(replay_state([hold_first], SAFEGUARDS), seq=1,
                                                       head_event_hash=hold_first["event_hash"]),
                                               _set(LOOSE, ON), SCOPE_HASH, signer, SAFEGUARDS)
    late = verify_governance([hold_first, release_second], None, SCOPE_HASH, SAFEGUARDS)
    assert late.problem is None and late.policies == (LOOSE, LOOSE, ON)  # before it: what it replaced
    assert verify_governance([hold_first], None, SCOPE_HASH, SAFEGUARDS).policies == (None, None)


def test_a_policy_request_is_approved_by_another_holder_never_by_another_key_of_its_own():
    """Issue 52: the request states its key's holder (only when one is stated), and a second key
    of that holder, or the person it names, is the same approver."""
    ann_a, ann_b = Principal.api_key("key_a", ANN), Principal.api_key("key_b", ANN)
    state = govern(replace(govern(GovernanceState(), _set(OFF, ON), 1), seq=1), _request(ON, LOOSE, ann_a), 2)
    request = state.pending[0]
    assert (request.requested_by, request.requested_holder) == ("key_a", ANN)
    assert request.to_json()["requested_holder"] == ANN
    assert "requested_holder" not in _requested().pending[0].to_json()
    refused = _refused(lambda: govern(state, _approve(ON, LOOSE, 2, principal=ann_b), 3), "RELEASE_SELF_APPROVAL", 403)
    assert refused.message == "a principal cannot approve its own request (nor another key of the same holder)"
    _refused(lambda: govern(state, _approve(ON, LOOSE, 2, principal=Principal.person("https://id.example", "ann")), 3),
             "RELEASE_SELF_APPROVAL", 403)
    assert govern(state, _approve(ON, LOOSE, 2, principal=Principal.api_key("key_b", "service:b")), 3).policy == LOOSE
    assert govern(state, _approve(ON, LOOSE, 2, principal=Principal.api_key("key_b")), 3).policy == LOOSE
    # A request of a key of no stated holder: another key with a holder approves it, the same key never.
    assert govern(_requested(), _approve(ON, LOOSE, 2, principal=ann_b), 3).policy == LOOSE
    assert state_from_event({"seq": 2, "event_hash": "e" * 64, "state": state.to_json()}).pending == state.pending


def test_the_approval_of_its_own_holder_fails_verification():
    first, state = build_governance_event(GovernanceState(), _set(OFF, ON), SCOPE_HASH, None)
    second, state = build_governance_event(state, _request(ON, LOOSE, Principal.api_key("key_a", ANN)), SCOPE_HASH, None)
    third, state = build_governance_event(state, _approve(ON, LOOSE, 2, Principal.api_key("key_b", "service:b")),
                                          SCOPE_HASH, None)
    assert verify_governance([first, second, third], None, SCOPE_HASH).problem is None
    third["principal"]["holder"] = ANN  # the approval was Ann's second key
    events = _relinked([first, second, third], 2)
    assert verify_governance(events, None, SCOPE_HASH).problem == (
        "policy event 3: the governance rules refuse this change (RELEASE_SELF_APPROVAL)")


def test_event_settings_are_read_whole_or_refused_with_their_own_code():
    from gate.errors import GateError

    body = {"decision_created": True, "anomaly_every_seconds": 300}
    assert EventSettings.from_json(body) == EventSettings(True, 300)
    assert EventSettings.from_json(body).to_json() == body
    for bad in ({"decision_created": True}, {**body, "anomaly_every_seconds": 299}, {**body, "extra": 1}, []):
        with pytest.raises(GateError) as refused:
            EventSettings.from_json(bad)
        assert refused.value.code == "EVENT_SETTINGS_INVALID"


def test_a_chain_written_before_issue_52_verifies_with_the_state_it_stated_then():
    events, _state = _chain_unsigned()
    for event in events:  # no `setting`, and the state without `settings` and `applied`
        del event["setting"]
        event["state"] = {"policy": event["state"]["policy"], "pending": event["state"]["pending"]}
    legacy = _relinked(events, 0)
    check = verify_governance(legacy, None, SCOPE_HASH)
    assert (check.problem, check.policies) == (None, (OFF, ON, ON, LOOSE))
    events[1]["state"] = _chain_unsigned()[0][1]["state"]  # today's shape in an event that names no setting
    assert verify_governance(_relinked(events, 0), None, SCOPE_HASH).problem == (
        "policy event 2: stated policy is not the fold of the changes")


def test_a_stored_state_reads_back_another_settings_pending_request_whole():
    state = replace(govern(GovernanceState(), _set(OFF, ON), 1), seq=1)
    asked = replace(govern(state, _egress("policy_request", QUIET, LOUD, expires_at=END), 2, SAFEGUARDS), seq=2,
                    head_event_hash="h")
    read = state_from_event({"seq": 2, "event_hash": "h", "state": asked.to_json()}, SAFEGUARDS)
    assert read == asked
    [request] = read.pending
    assert (request.setting, request.before, request.after, request.weakens) == (
        "event_settings", QUIET, LOUD, ("decision_created",))
