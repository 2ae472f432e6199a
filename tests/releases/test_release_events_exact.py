"""Release events (gate.releases.events), exactly: every member of a signed event, the state read
back from it, and each problem `verify_history` names, one tampering at a time (issue 41 item 8)."""

from __future__ import annotations

import copy
import hashlib

import pytest

from gate.keys.anchors import TrustAnchors
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner
from gate.principals import Principal
from gate.protocol.canonical import canonical_bytes
from gate.releases import events as E
from gate.releases.governance import GovernanceState, PolicyAction, build_governance_event, change_summary
from gate.releases.model import Action, Canary, Pending, ReleaseState, Version
from gate.releases.policy import ReleasePolicy

KEY = Ed25519Key.from_seed(b"\x07" * 32)
SIGNER = Ed25519ReceiptSigner(KEY)
ANCHORS = TrustAnchors.from_public_key_pem(KEY.public_key_pem, key_id=KEY.key_id)
V1, V2 = Version("v1", "1" * 64), Version("v2", "2" * 64)
SCOPE = "s" * 64
AT = "2026-11-26T00:00:00.000Z"


def _history() -> list[dict]:
    state = ReleaseState("rb")
    out = []
    for action, inputs in (
        (Action("activate", "key-a", AT, V1), E.EventInputs(SCOPE, "first", "m" * 64)),
        (Action("canary", "key-a", AT, V2, 10, "context.x"), E.EventInputs(SCOPE)),
        (Action("halt", "guardrail", AT), E.EventInputs(SCOPE, "tripped", None, {"tripped": ["failure_rate"]})),
    ):
        event, state = E.build_event(state, action, inputs, SIGNER)
        out.append(event)
    return out


def _rehash(event: dict) -> dict:
    event["event_hash"] = E.event_hash(event)
    event["signature"] = SIGNER.sign_payload(E.signature_payload(event["event_hash"], SIGNER.key_id))
    return event


def test_an_event_states_every_member():
    first = _history()[0]
    body = {k: v for k, v in first.items() if k not in E.SIGNATURE_MEMBERS}
    assert body == {
        "release_event_version": "release_event_v1", "scope_hash": SCOPE, "rulebook_id": "rb", "seq": 1,
        "action": "activate", "actor": "key-a", "created_at": AT, "version": "v1", "rulebook_hash": "1" * 64,
        "percent": None, "subject": None, "request_seq": None, "approval_expires_at": None, "reason": "first",
        "migration_manifest_hash": "m" * 64, "evidence": None, "previous_event_hash": None,
        "state": {"rulebook_id": "rb", "active": {"version": "v1", "rulebook_hash": "1" * 64}, "previous": [],
                  "shadow": None, "canary": None, "pending": []},
    }
    assert first["event_hash"] == hashlib.sha256(canonical_bytes(body)).hexdigest()
    assert (first["key_id"], first["signature_algorithm"], first["public_key_fingerprint"]) == (
        KEY.key_id, "ed25519", KEY.fingerprint)
    assert E.signature_payload("h", "k") == canonical_bytes({"event_hash": "h", "key_id": "k"})
    assert first["signature"] == SIGNER.sign_payload(E.signature_payload(first["event_hash"], KEY.key_id))
    canary, halt = _history()[1:]
    assert (canary["percent"], canary["subject"], canary["previous_event_hash"]) == (10, "context.x",
                                                                                      first["event_hash"])
    assert canary["state"]["canary"] == {"version": "v2", "rulebook_hash": "2" * 64, "percent": 10,
                                         "subject": "context.x", "since_seq": 2}
    assert halt["evidence"] == {"tripped": ["failure_rate"]} and halt["version"] is None
    unsigned, after = E.build_event(ReleaseState("rb"), Action("activate", "k", AT, V1), E.EventInputs(SCOPE), None)
    assert not set(E.SIGNATURE_MEMBERS[1:]) & set(unsigned) and after.seq == 1
    assert after.head_event_hash == unsigned["event_hash"] and after.active == V1


def test_the_stored_state_reads_back_as_it_was():
    pending = Pending(3, "canary", V2, 2.5, "context.inputs.account", "key-a", "2026-12-01T00:00:00.000Z")
    state = ReleaseState("rb", 4, "h" * 64, V1, (V2,), V2, Canary(V2, 2.5, "context.x", 2), (pending,))
    member = E.state_member(state)
    assert "seq" not in member and "head_event_hash" not in member
    assert E.state_from_member("rb", 4, "h" * 64, member) == state
    assert E.state_from_member("rb", 0, None, {}) == ReleaseState("rb")


def test_an_event_reads_back_as_its_action():
    canary = _history()[1]
    assert E.action_of(canary) == Action("canary", "key-a", AT, V2, 10, "context.x", None, None)
    assert E.action_of({"action": "halt", "actor": "guardrail", "created_at": AT, "version": "v1"}).version is None
    approve = {"action": "approve", "actor": "key-b", "created_at": AT, "version": "v2", "rulebook_hash": "2" * 64,
               "request_seq": 2, "approval_expires_at": "2026-12-01T00:00:00.000Z"}
    assert E.action_of(approve) == Action("approve", "key-b", AT, V2, None, None, 2, "2026-12-01T00:00:00.000Z")


def test_a_whole_history_verifies_with_and_without_anchors():
    history = _history()
    check = E.verify_history(history, ANCHORS)
    assert check.valid and check.signatures_checked and check.verified and check.events == 3
    assert check.problems == () and check.problem is None
    assert check.state == {**history[-1]["state"], "seq": 3, "head_event_hash": history[-1]["event_hash"]}
    assert check.to_json() == {"verified": True, "valid": True, "signatures_checked": True, "events": 3,
                               "problems": [], "state": check.state, "policy_changes": []}
    unkeyed = E.verify_history(history, None)  # hashes and links only: intact, never verified
    assert unkeyed.valid and not unkeyed.signatures_checked and not unkeyed.verified
    assert E.verify_history(history, TrustAnchors()) == E.HistoryCheck(  # no trusted key: no signature holds
        valid=False, signatures_checked=False, events=3, problems=("event 1: signature has no trusted key",))
    assert E.history_document(SCOPE, "rb", history) == {"release_history_version": "release_history_v1",
                                                        "scope_hash": SCOPE, "rulebook_id": "rb", "events": history,
                                                        "governance": []}


def _tampered(edit) -> list[dict]:
    history = copy.deepcopy(_history())
    edit(history)
    return history


@pytest.mark.parametrize(("what", "edit", "problem"), [
    ("no events", lambda h: h.clear(), "no events"),
    ("not an object", lambda h: h.__setitem__(1, "x"), "event 2: not a release_event_v1 object"),
    ("another version", lambda h: h[1].update(release_event_version="release_event_v0"),
     "event 2: not a release_event_v1 object"),
    ("a gap", lambda h: h.pop(1), "event 2: seq 3, expected 2 (gap or reorder)"),
    ("another rulebook", lambda h: h.__setitem__(1, _rehash({**h[1], "rulebook_id": "other"})),
     "event 2: belongs to another release"),
    ("another scope", lambda h: h.__setitem__(1, _rehash({**h[1], "scope_hash": "t" * 64})),
     "event 2: belongs to another release"),
    ("a broken link", lambda h: h.__setitem__(1, _rehash({**h[1], "previous_event_hash": "0" * 64})),
     "event 2: previous_event_hash does not link to the event before it"),
    ("edited content", lambda h: h[1].update(reason="edited"), "event 2: event_hash does not match its content (tampered)"),
    ("a bad signature", lambda h: h[1].update(signature=h[0]["signature"]), "event 2: signature fails"),
    ("another key id", lambda h: h[1].update(key_id="someone-else"), "event 2: signature fails"),
    ("a refused action", lambda h: h.__setitem__(1, _rehash({**h[1], "action": "rollback"})),
     "event 2: the state machine refuses this action (RELEASE_NOTHING_TO_ROLL_BACK)"),
    ("a forged state", lambda h: h.__setitem__(1, _rehash({**h[1], "state": {**h[1]["state"], "canary": None}})),
     "event 2: stated state is not the fold of the actions"),
])
def test_each_tampering_is_named_at_its_event(what, edit, problem):
    history = _tampered(edit)
    check = E.verify_history(history, ANCHORS)
    assert check.valid is False and check.problems == (problem,) and check.state is None
    assert check.events == len(history)


def test_a_key_is_found_by_its_id_when_the_fingerprint_is_gone():
    history = _history()
    history[1].pop("public_key_fingerprint")  # outside event_hash: the key id still names the key
    assert E.verify_history(history, ANCHORS).valid


def test_a_key_the_anchors_do_not_hold_is_named():
    other = TrustAnchors.from_public_key_pem(Ed25519Key.from_seed(b"\x08" * 32).public_key_pem)
    assert E.verify_history(_history(), other).problems == ("event 1: signature has no trusted key",)


def test_a_first_event_that_is_no_object_is_no_history():
    assert E.verify_history(["x"], ANCHORS) == E.HistoryCheck(valid=False, signatures_checked=True, events=1,
                                                              problems=("no events",))
    assert E.verify_history([], None) == E.HistoryCheck(valid=False, signatures_checked=False, events=0,
                                                        problems=("no events",))


# ------------------------------------------------------------------ the halt rule in a signed history (issue 52)

HALT_EVIDENCE = {"canary_version": "v1", "tripped": ["failure_rate"]}


def _governed(*moves: tuple[Action, dict], principals: bool = True, governance_seqs: tuple[int, ...] = ()) -> list[dict]:
    """v1 then v2 active, a canary of v1 the guardrail halted, then `moves` (each an action and the
    inputs it states beyond SCOPE); every event names its principal unless `principals` is off, and
    the policy event in force (`governance_seqs`, by event; 0 beyond them)."""
    state, out = ReleaseState("rb"), []
    steps = [(Action("activate", "key-a", AT, V1), {}), (Action("activate", "key-a", AT, V2), {}),
             (Action("canary", "key-a", AT, V1, 10, "context.x"), {}),
             (Action("halt", "guardrail", AT), {"reason": "tripped", "evidence": HALT_EVIDENCE}), *moves]
    for index, (action, stated) in enumerate(steps):
        principal = Principal.guardrail() if action.actor == "guardrail" else Principal.api_key(action.actor)
        seq = governance_seqs[index] if index < len(governance_seqs) else 0
        inputs = E.EventInputs(SCOPE, **stated, **({"principal": principal, "governance_seq": seq} if principals else {}))
        event, state = E.build_event(state, action, inputs, SIGNER)
        out.append(event)
    return out


def _policy_changes() -> list[dict]:
    """The scope's governance chain: two signed changes of a policy that needs no approval."""
    first_policy = ReleasePolicy(refuse_superseded_inline=True)
    second_policy = ReleasePolicy(refuse_superseded_inline=True, approval_ttl_seconds=600)
    principal = Principal.api_key("key-a")
    first, state = build_governance_event(GovernanceState(), PolicyAction(
        "policy_set", principal, AT, ReleasePolicy(), first_policy), SCOPE, SIGNER)
    second, _state = build_governance_event(state, PolicyAction(
        "policy_set", principal, AT, first_policy, second_policy), SCOPE, SIGNER)
    return [first, second]


def test_a_history_lists_the_scopes_policy_changes_it_verified():
    changes = _policy_changes()
    check = E.verify_history(_governed(governance_seqs=(0, 1, 2, 2)), ANCHORS, changes)
    assert check.valid, check.problems
    assert check.policy_changes == tuple(change_summary(event) for event in changes)


def test_a_history_folds_its_governance_chain_with_the_table_it_is_given():
    """A change of another safeguard setting (the event settings, issue 52) verifies with the table
    that knows it (`gate verify` passes SAFEGUARDS) and not with the release policy's alone."""
    from gate.events.egress import EventSettings
    from gate.governance.table import SAFEGUARDS

    settings, _state = build_governance_event(GovernanceState(), PolicyAction(
        "policy_set", Principal.api_key("key-a"), AT, EventSettings(), EventSettings(anomaly_every_seconds=300),
        setting="event_settings", approvals_required=False), SCOPE, SIGNER, SAFEGUARDS)
    check = E.verify_history(_history(), ANCHORS, [settings], SAFEGUARDS)
    assert check.verified and check.policy_changes == (change_summary(settings),)
    assert E.verify_history(_history(), ANCHORS, [settings]) == E.HistoryCheck(
        valid=False, signatures_checked=True, events=3,
        problems=("policy event 1: its principal or policies are malformed",))


def test_a_broken_policy_change_fails_the_history_with_the_changes_before_it():
    changes = _policy_changes()
    changes[1]["signature"] = changes[0]["signature"]
    check = E.verify_history(_governed(governance_seqs=(0, 1, 2, 2)), ANCHORS, changes)
    assert check == E.HistoryCheck(valid=False, signatures_checked=True, events=4,
                                   problems=("policy event 2: signature fails",),
                                   policy_changes=(change_summary(changes[0]),))
    assert check.problem == "policy event 2: signature fails" and check.state is None
    other_scope = _policy_changes()
    assert E.verify_history(_governed(), None, [{**other_scope[0], "scope_hash": "t" * 64}]).problems == (
        "policy event 1: belongs to another scope",)


def test_a_policy_event_in_force_never_goes_back():
    changes = _policy_changes()
    check = E.verify_history(_governed(governance_seqs=(0, 2, 1, 2)), ANCHORS, changes)
    assert check == E.HistoryCheck(valid=False, signatures_checked=True, events=4,
                                   problems=("event 3: governance_seq 1 goes back before policy event 2",),
                                   policy_changes=tuple(change_summary(event) for event in changes))
    history = _governed(governance_seqs=(0, 1, 2, 2))
    history[1].pop("governance_seq")
    assert E.verify_history(_relinked(history, old_form=()), ANCHORS, changes).problems == (
        "event 2: governance_seq None goes back before policy event 0",)


ROLLBACK = Action("rollback", "key-a", AT)


def test_a_rollback_to_the_halted_version_without_the_override_fails_at_its_event():
    check = E.verify_history(_governed((ROLLBACK, {})), ANCHORS)
    assert check.problems == (("event 5: rollback makes version 'v1' serve, which its guardrail halted: only an "
                               "admin does so, with override 'guardrail_halt' and a reason"),)
    reasoned = E.verify_history(_governed((ROLLBACK, {"reason": "fixed"})), ANCHORS)
    assert reasoned.problems[0].startswith("event 5: rollback makes version 'v1' serve")
    assert E.verify_history(_governed((ROLLBACK, {"reason": "fixed", "override": "guardrail_halt"})), ANCHORS).valid


def test_an_override_where_nothing_halted_would_serve_fails_verification():
    moves = (Action("activate", "key-a", AT, V1), {"reason": "fixed", "override": "guardrail_halt"}), \
        (Action("shadow", "key-a", AT, V2), {"reason": "x", "override": "guardrail_halt"})
    check = E.verify_history(_governed(*moves), ANCHORS)
    assert check.problems == (("event 6: override applies only to a move that makes a version its guardrail "
                               "halted serve"),)


def test_a_history_in_the_form_before_issue_42_is_not_judged_by_the_halt_rule():
    assert E.verify_history(_governed((ROLLBACK, {}), principals=False), ANCHORS).valid


def test_an_event_without_its_principal_cannot_follow_one_with_it():
    history = _governed((ROLLBACK, {"reason": "fixed", "override": "guardrail_halt"}))
    old_form = {k: v for k, v in history[-1].items() if k not in ("principal", "governance_seq", "override")}
    history[-1] = _rehash(old_form)
    assert E.verify_history(history, ANCHORS).problems == (
        "event 5: lacks the principal every event carries since event 1 (the form before issue 42 cannot follow it)",)
    # Events in the old form first, then the new form from event 3 on: that is how a history grew.
    grown = _relinked(_governed((ROLLBACK, {"reason": "fixed", "override": "guardrail_halt"})), old_form=(0, 1))
    assert E.verify_history(grown, ANCHORS).valid
    back = _relinked(grown, old_form=(0, 1, 3))
    assert E.verify_history(back, ANCHORS).problems == (
        "event 4: lacks the principal every event carries since event 3 (the form before issue 42 cannot follow it)",)


def _relinked(history: list[dict], old_form: tuple[int, ...]) -> list[dict]:
    """The history with the events at `old_form` in the form before issue 42, linked and signed again."""
    out: list[dict] = []
    for index, stated in enumerate(history):
        event = {k: v for k, v in stated.items() if index not in old_form or k not in (
            "principal", "governance_seq", "override")}
        event["previous_event_hash"] = out[-1]["event_hash"] if out else None
        out.append(_rehash(event))
    return out


def test_the_holder_is_signed_in_the_principal_and_read_back_by_the_fold():
    """Issue 52: an event states its key's holder in its signed principal; the fold reads it from
    there, and a state's pending request keeps it (only when one was stated)."""
    from gate.principals import Principal

    ann = "person:https://id.example#ann"
    key = Principal.api_key("key-a", ann)
    asked = Action("activate", "key-a", AT, V1, approval_expires_at="2026-12-01T00:00:00.000Z", holder=ann)
    event, after = E.build_event(ReleaseState("rb"), asked, E.EventInputs(SCOPE, principal=key, governance_seq=0), SIGNER)
    assert event["principal"] == {"kind": "api_key", "id": "key-a", "holder": ann}
    assert event["state"]["pending"][0]["requested_holder"] == ann
    assert E.action_of(event) == asked
    assert E.state_from_member("rb", 1, event["event_hash"], event["state"]) == after
    assert E.action_of({**event, "principal": {"kind": "api_key", "id": "key-a"}}).holder is None
    assert E.action_of({**event, "principal": {"kind": "api_key", "id": "key-a", "holder": 7}}).holder is None
    assert E.action_of({**event, "principal": "key-a"}).holder is None
    for wrong in (Principal.api_key("key-a"), Principal.api_key("key-a", "service:other"), Principal.api_key("key-b", ann)):
        with pytest.raises(ValueError) as refused:
            E.build_event(ReleaseState("rb"), asked, E.EventInputs(SCOPE, principal=wrong, governance_seq=0), SIGNER)
        assert str(refused.value) == "the event's actor and holder must be its principal's"


def test_a_history_where_one_holder_approved_its_own_request_fails():
    from gate.principals import Principal

    ann, bob = "person:https://id.example#ann", "person:https://id.example#bob"
    state, events = ReleaseState("rb"), []
    for action, principal in (
        (Action("activate", "key-a", AT, V1, approval_expires_at="2026-12-01T00:00:00.000Z", holder=ann),
         Principal.api_key("key-a", ann)),
        (Action("approve", "key-b", AT, V1, request_seq=1, holder=bob), Principal.api_key("key-b", bob)),
    ):
        event, state = E.build_event(state, action, E.EventInputs(SCOPE, principal=principal, governance_seq=0), SIGNER)
        events.append(event)
    assert E.verify_history(events, ANCHORS).valid and state.active == V1
    events[1]["principal"]["holder"] = ann  # the approval re-stated as Ann's second key, signed again
    _rehash(events[1])
    assert E.verify_history(events, ANCHORS).problems == (
        "event 2: the state machine refuses this action (RELEASE_SELF_APPROVAL)",)


def test_an_event_with_a_principal_states_its_override_or_none():
    from gate.principals import Principal

    key = Principal.api_key("key-a")
    plain, _ = E.build_event(ReleaseState("rb"), Action("activate", "key-a", AT, V1),
                             E.EventInputs(SCOPE, principal=key, governance_seq=0), SIGNER)
    assert "override" in plain and plain["override"] is None
    forced, _ = E.build_event(ReleaseState("rb"), Action("activate", "key-a", AT, V1),
                              E.EventInputs(SCOPE, "halted in error", principal=key, governance_seq=0,
                                            override=E.OVERRIDE_HALT), SIGNER)
    assert (forced["override"], forced["reason"]) == ("guardrail_halt", "halted in error")
