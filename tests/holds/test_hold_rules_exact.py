"""The hold rules, exactly (gate.holds.policy and gate.holds.events): every refusal of a hold policy,
where a held record goes, and each problem the offline checks name, one tampering at a time. Pure and
fast: these tests are the mutation suite's first line (docs/mutation-testing.md)."""

from __future__ import annotations

import pytest

from gate.chain.sealing import signature_payload
from gate.errors import GateError
from gate.holds import events as E
from gate.holds.policy import HoldPolicy, Queue
from gate.keys.anchors import TrustAnchors
from gate.keys.signing import Ed25519Key, Ed25519ReceiptSigner
from gate.principals import Principal

KEY = Ed25519Key.from_seed(b"\x09" * 32)
SIGNER = Ed25519ReceiptSigner(KEY)
ANCHORS = TrustAnchors.from_public_key_pem(KEY.public_key_pem, key_id=KEY.key_id)
OTHER = Ed25519ReceiptSigner(Ed25519Key.from_seed(b"\x0a" * 32))
AT = "2026-11-26T00:00:00.000Z"
RECORD = {"decision_id": "dec_1", "record_hash": "r" * 64}
ALICE, BOB = Principal.person("https://idp", "alice", "Alice"), Principal.person("https://idp", "bob")
KEY_A = Principal.api_key("key_a")


def _queue(**changes):
    base = {"deadline_seconds": 3600, "quorum": "any", "members": [], "require_justification": False,
            "escalate_after_seconds": None, "escalate_to": None}
    return {**base, **changes}


def _policy(**changes):
    base = {"default_queue": "default", "four_eyes": True, "queues": {"default": _queue()}, "routes": []}
    return {**base, **changes}


def _route(**changes):
    return {"policy_id": "refunds", "rule_id": None, "queue": "default", "priority": "high", **changes}


def test_the_default_policy_states_every_member():
    assert HoldPolicy().to_json() == {
        "default_queue": "default", "four_eyes": True,
        "queues": {"default": {"deadline_seconds": 86_400, "quorum": "any", "members": [],
                               "require_justification": False, "escalate_after_seconds": None, "escalate_to": None}},
        "routes": []}
    assert HoldPolicy.from_json(HoldPolicy().to_json()) == HoldPolicy()


@pytest.mark.parametrize("body, fragment", [
    ([], "JSON object"),
    ({**_policy(), "extra": 1}, "unknown member(s) extra"),
    ({k: v for k, v in _policy().items() if k != "routes"}, "missing routes"),
    (_policy(four_eyes=1), "four_eyes"),
    (_policy(queues={}), "queues must be"),
    (_policy(queues=[]), "queues must be"),
    (_policy(queues={f"q{i}": _queue() for i in range(51)}, default_queue="q0"), "queues must be"),
    (_policy(queues={"Bad": _queue()}, default_queue="Bad"), "a queue name"),
    (_policy(queues={"default": {**_queue(), "extra": 1}}), "states exactly"),
    (_policy(queues={"default": {k: v for k, v in _queue().items() if k != "quorum"}}), "states exactly"),
    (_policy(queues={"default": []}), "states exactly"),
    (_policy(queues={"default": _queue(quorum="three")}), "quorum must be"),
    (_policy(queues={"default": _queue(members="alice")}), "members must be"),
    (_policy(queues={"default": _queue(members=[f"m{i}" for i in range(51)])}), "members must be"),
    (_policy(queues={"default": _queue(members=[""])}), "members must be"),
    (_policy(queues={"default": _queue(members=["a" * 513])}), "members must be"),
    (_policy(queues={"default": _queue(members=[5])}), "members must be"),
    (_policy(queues={"default": _queue(members=["a\nb"])}), "members must be"),
    (_policy(queues={"default": _queue(members=["a", "a"])}), "members must be"),
    (_policy(queues={"default": _queue(quorum="all", members=["a"])}), "at least two members"),
    (_policy(queues={"default": _queue(require_justification="yes")}), "require_justification"),
    (_policy(queues={"default": _queue(deadline_seconds=4)}), "deadline_seconds"),
    (_policy(queues={"default": _queue(deadline_seconds=30 * 86_400 + 1)}), "deadline_seconds"),
    (_policy(queues={"default": _queue(deadline_seconds=True)}), "deadline_seconds"),
    (_policy(queues={"default": _queue(deadline_seconds=60.0)}), "deadline_seconds"),
    (_policy(queues={"default": _queue(escalate_after_seconds=60)}), "go together"),
    (_policy(queues={"default": _queue(escalate_to="default")}), "go together"),
    (_policy(queues={"default": _queue(escalate_after_seconds=3600, escalate_to="b"), "b": _queue()}),
     "before the deadline"),
    (_policy(queues={"default": _queue(escalate_after_seconds=4, escalate_to="b"), "b": _queue()}),
     "escalate_after_seconds"),
    (_policy(queues={"default": _queue(escalate_after_seconds=60, escalate_to="B")}), "escalate_to"),
    (_policy(queues={"default": _queue(escalate_after_seconds=60, escalate_to="nowhere")}), "name one of the queues"),
    (_policy(queues={"default": _queue(escalate_after_seconds=60, escalate_to="default")}), "comes back"),
    (_policy(queues={"default": _queue(escalate_after_seconds=60, escalate_to="b"),
                     "b": _queue(escalate_after_seconds=60, escalate_to="default")}), "comes back"),
    (_policy(default_queue="other"), "default_queue"),
    (_policy(routes={}), "routes must be"),
    (_policy(routes=[_route()] * 201), "routes must be"),
    (_policy(routes=[{**_route(), "extra": 1}]), "states exactly"),
    (_policy(routes=["x"]), "states exactly"),
    (_policy(routes=[_route(policy_id="9bad")]), "policy_id"),
    (_policy(routes=[_route(policy_id=5)]), "policy_id"),
    (_policy(routes=[_route(rule_id="")]), "rule_id"),
    (_policy(routes=[_route(rule_id=5)]), "rule_id"),
    (_policy(routes=[_route(queue="nope")]), "queue must name"),
    (_policy(routes=[_route(priority="asap")]), "priority"),
])
def test_a_bad_policy_is_refused_with_its_reason(body, fragment):
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json(body)
    assert refused.value.code == "HOLD_POLICY_INVALID" and fragment in refused.value.message


def test_the_bounds_themselves_are_allowed():
    policy = HoldPolicy.from_json(_policy(queues={
        "default": _queue(deadline_seconds=5), "long": _queue(deadline_seconds=30 * 86_400),
        "esc": _queue(deadline_seconds=61, escalate_after_seconds=60, escalate_to="long"),
        "all": _queue(quorum="all", members=["a", "b"])},
        routes=[_route(queue="esc")] * 200))
    assert [q.deadline_seconds for q in policy.queues] == [5, 30 * 86_400, 61, 3600]
    assert policy.queue("esc") == Queue("esc", 61, "any", (), False, 60, "long")
    assert policy.queue("missing") is None


def test_a_record_goes_to_the_first_matching_route_else_the_default_queue():
    policy = HoldPolicy.from_json(_policy(
        queues={"default": _queue(), "rule": _queue(quorum="two"), "any_rule": _queue()},
        routes=[_route(rule_id="big", queue="rule", priority="urgent"), _route(queue="any_rule", priority="low"),
                _route(queue="default", priority="high")]))
    assert (policy.assign("refunds", "big").queue.name, policy.assign("refunds", "big").priority) == ("rule", "urgent")
    assert (policy.assign("refunds", "small").queue.name, policy.assign("refunds", "small").priority) == \
        ("any_rule", "low")
    assert (policy.assign("refunds", None).queue.name, policy.assign("refunds", None).priority) == ("any_rule", "low")
    assert (policy.assign("pricing", "big").queue.name, policy.assign("pricing", "big").priority) == \
        ("default", "normal")


@pytest.mark.parametrize("quorum, members, needed", [("any", [], 1), ("two", [], 2), ("all", ["a", "b", "c"], 3)])
def test_approvals_needed(quorum, members, needed):
    assert Queue("q", quorum=quorum, members=tuple(members)).approvals_needed() == needed


# ------------------------------------------------------------------------------------------ events

def _event(action="vote", principal=ALICE, seq=1, prev=None, signer=SIGNER, **step):
    return E.build_event(E.Step(action, principal, AT, RECORD["decision_id"], RECORD["record_hash"], **step),
                         scope_hash="s" * 64, seq=seq, previous_event_hash=prev, signer=signer)


def _approval(principal=ALICE, needed=1, votes=(), seq=1, four_eyes=True):
    return _event("vote", principal, seq=seq, vote="approve", reason_code="OK", outcome=E.APPROVED,
                  approvals_needed=needed, votes=tuple(votes), four_eyes=four_eyes, requested_by="key_a")


def _resign(event):
    event["event_hash"] = E.event_hash(event)
    event["signature"] = SIGNER.sign_payload(signature_payload(event["event_hash"], SIGNER.key_id))
    return event


def test_an_event_states_every_member_and_verifies():
    event = _approval()
    assert list(event)[:len(E.EVENT_MEMBERS)] == list(E.EVENT_MEMBERS)
    assert event["principal"] == {"kind": "person", "id": "https://idp#alice", "issuer": "https://idp",
                                  "subject": "alice", "display_name": "Alice"}
    assert event["actor"] == "person:https://idp#alice" and event["key_id"] == SIGNER.key_id
    assert E.event_problems(event, RECORD, ANCHORS) == []
    assert E.verify_resolution(RECORD, event, ANCHORS).to_json() == {
        "verified": True, "approved": True, "outcome": "approved", "problems": []}
    with pytest.raises(ValueError):
        _event("approve")


@pytest.mark.parametrize("tamper, problem", [
    (lambda e: e.pop("note"), "members differ"),
    (lambda e: e.update(extra=1), "members differ"),
    (lambda e: _resign({**e, "hold_event_version": "hold_event_v0"}), "hold_event_version must be"),
    (lambda e: e.update(note="changed"), "tampered"),
    (lambda e: e.update(signature=OTHER.sign_payload(signature_payload(e["event_hash"], SIGNER.key_id))),
     "signature fails"),
    (lambda e: e.update(key_id="unknown", public_key_fingerprint="f" * 64), "no trusted key"),
    (lambda e: _resign({**e, "decision_id": "dec_2"}), "decision_id is not"),
    (lambda e: _resign({**e, "record_hash": "x" * 64}), "record_hash is not"),
    (lambda e: _resign({**e, "decision_id": None}), "decision_id is not"),
    (lambda e: _resign({**e, "principal": {"kind": "robot", "id": "x"}}), "principal is malformed"),
    (lambda e: _resign({**e, "actor": "person:https://idp#bob"}), "actor is not its principal's"),
])
def test_each_problem_of_one_event_is_named(tamper, problem):
    event = _approval()
    result = tamper(event)
    event = result if isinstance(result, dict) else event
    problems = E.event_problems(event, RECORD, ANCHORS)
    assert any(problem in p for p in problems), problems
    assert not E.verify_resolution(RECORD, event, ANCHORS).verified
    assert not E.verify_resolution(RECORD, event, ANCHORS).approved


def test_a_non_object_is_no_event():
    assert E.event_problems(["x"], RECORD, ANCHORS) == ["a hold event must be a JSON object"]
    assert E.verify_resolution(RECORD, None, ANCHORS).to_json()["verified"] is False


@pytest.mark.parametrize("event, problem", [
    (_event("vote", vote="approve", reason_code="OK"), "does not close"),
    (_event("claim"), "does not close"),
    (_event("vote", vote="deny", reason_code="NO", outcome=E.APPROVED), "does not follow"),
    (_event("vote", vote="approve", reason_code="OK", outcome=E.DENIED), "does not follow"),
    (_event("expire", Principal.clock(), outcome=E.APPROVED), "does not follow"),
    (_event("escalate", Principal.clock(), outcome=E.EXPIRED), "does not follow"),
])
def test_only_a_closing_event_whose_outcome_follows_is_a_resolution(event, problem):
    check = E.verify_resolution(RECORD, event, ANCHORS)
    assert not check.verified and not check.approved and check.outcome is None
    assert any(problem in p for p in check.problems), check.problems


def test_denial_and_expiry_verify_and_never_approve():
    for event, outcome in ((_event("vote", vote="deny", reason_code="NO", outcome=E.DENIED), "denied"),
                           (_event("expire", Principal.clock(), outcome=E.EXPIRED), "expired")):
        check = E.verify_resolution(RECORD, event, ANCHORS)
        assert (check.verified, check.approved, check.outcome) == (True, False, outcome)


def _two_person(first=ALICE, second=BOB, four_eyes=True):
    vote = _event("vote", first, seq=1, vote="approve", reason_code="OK")
    close = _event("vote", second, seq=2, prev=vote["event_hash"], vote="approve", reason_code="OK",
                   outcome=E.APPROVED, approvals_needed=2, votes=(vote["event_hash"],), four_eyes=four_eyes,
                   requested_by="key_a")
    return [vote, close]


def test_a_decisions_events_verify_in_order_with_their_quorum():
    assert E.hold_events_problems(RECORD, _two_person(), ANCHORS) == []
    assert E.hold_events_problems(RECORD, [], ANCHORS) == []
    claim = _event("claim", seq=1)
    assert E.hold_events_problems(RECORD, [claim, _approval(seq=2)], ANCHORS) == []


@pytest.mark.parametrize("events, problem", [
    (lambda: list(reversed(_two_person())), "chain order"),
    (lambda: [_two_person()[0], _two_person()[0]], "chain order"),
    (lambda: [_approval(seq=1), _event("claim", seq=2)], "closes once"),
    (lambda: [_approval(seq=1), _approval(BOB, seq=2)], "closes once"),
    (lambda: [_event("vote", seq=1, vote="deny", reason_code="NO", outcome=E.APPROVED)], "cannot close"),
    (lambda: _two_person(ALICE, ALICE), "approved twice"),
    (lambda: [_approval(needed=2)], "the quorum needs 2"),
    (lambda: [_approval(needed=0)], "approvals_needed"),
    (lambda: [_approval(needed=None)], "approvals_needed"),
    (lambda: [_approval(votes=("x" * 64,))], "earlier approving votes"),
    (lambda: [_approval(KEY_A)], "four eyes"),
    (lambda: [_two_person()[0]] + [_resign({**_two_person()[1], "votes": []})], "earlier approving votes"),
    (lambda: [_approval(seq=1)] + [{**_approval(seq=2), "note": "x"}], "tampered"),
])
def test_each_problem_of_a_decisions_events_is_named(events, problem):
    problems = E.hold_events_problems(RECORD, events(), ANCHORS)
    assert any(problem in p for p in problems), problems


def test_four_eyes_off_lets_the_requester_approve():
    assert E.hold_events_problems(RECORD, [_approval(KEY_A, four_eyes=False)], ANCHORS) == []
    assert any("four eyes" in p for p in E.hold_events_problems(RECORD, [_approval(KEY_A)], ANCHORS))
    assert E.hold_events_problems(RECORD, _two_person(KEY_A, BOB, four_eyes=False), ANCHORS) == []


def test_a_deny_vote_among_the_votes_does_not_count_as_an_approval():
    deny_then = [_event("vote", BOB, seq=1, vote="deny", reason_code="NO"),
                 _approval(ALICE, needed=2, seq=2)]
    problems = E.hold_events_problems(RECORD, deny_then, ANCHORS)
    assert any("the quorum needs 2" in p for p in problems), problems


def test_a_refusal_names_exactly_what_is_unknown_or_missing():
    with pytest.raises(GateError) as unknown:
        HoldPolicy.from_json({**_policy(), "zeta": 1, "alpha": 2})
    assert unknown.value.message == "a PUT states the whole hold policy: unknown member(s) alpha, zeta"
    assert unknown.value.details == {"unknown": ["alpha", "zeta"], "missing": []}
    with pytest.raises(GateError) as missing:
        HoldPolicy.from_json({"four_eyes": True, "queues": {}})
    assert missing.value.message == "a PUT states the whole hold policy: missing default_queue, routes"
    assert missing.value.details == {"unknown": [], "missing": ["default_queue", "routes"]}


def test_a_route_refusal_names_its_place():
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json(_policy(routes=[_route(), _route(priority="asap")]))
    assert refused.value.message.startswith("routes[1].priority")


def test_the_size_limits_are_inclusive():
    many = {f"q{i}": _queue() for i in range(50)}
    assert len(HoldPolicy.from_json(_policy(queues=many, default_queue="q0")).queues) == 50
    members = [f"m{i}" for i in range(49)] + ["x" * 512]
    policy = HoldPolicy.from_json(_policy(queues={"default": _queue(quorum="all", members=members)}))
    assert policy.queue("default").approvals_needed() == 50


def test_a_chain_of_escalations_that_runs_into_a_loop_is_refused():
    with pytest.raises(GateError) as refused:
        HoldPolicy.from_json(_policy(queues={
            "default": _queue(escalate_after_seconds=60, escalate_to="b"),
            "b": _queue(escalate_after_seconds=60, escalate_to="c"),
            "c": _queue(escalate_after_seconds=60, escalate_to="b")}))
    assert refused.value.message == "escalation from queue 'default' comes back to 'b'"


def _forged(key_id, signer):
    """An approval whose signature members name `key_id` but were made with `signer`."""
    event = _approval()
    event["key_id"] = key_id
    event["public_key_fingerprint"] = signer.public_key_fingerprint
    event["signature"] = signer.sign_payload(signature_payload(event["event_hash"], key_id))
    return event


def test_a_signature_is_checked_with_the_key_the_event_names_and_its_fingerprint():
    from gate.keys.anchors import TrustedEd25519Key

    other_key = Ed25519Key.from_seed(b"\x0a" * 32)
    both = TrustAnchors(ed25519=(ANCHORS.ed25519[0],
                                 TrustedEd25519Key.from_pem(other_key.public_key_pem, key_id="key-b", source="test")))
    # Signed by the other key while naming key-b's id with the other key's fingerprint: key-b checks it.
    forged = _forged("key-b", SIGNER)
    assert E.event_problems(forged, RECORD, both) == ["signature fails"]
    # Two trusted keys under one id: the fingerprint picks the one that signed.
    twins = TrustAnchors(ed25519=(TrustedEd25519Key.from_pem(other_key.public_key_pem, key_id="shared", source="t"),
                                  TrustedEd25519Key.from_pem(KEY.public_key_pem, key_id="shared", source="t")))
    assert E.event_problems(_forged("shared", SIGNER), RECORD, twins) == []


def test_every_bad_event_is_named_not_only_the_last():
    first = {**_event("claim", seq=1), "note": "x"}
    problems = E.hold_events_problems(RECORD, [first, _approval(seq=2)], ANCHORS)
    assert problems == ["hold_events[0]: event_hash does not match its content (tampered)"]


def test_a_close_that_its_action_cannot_make_is_named_with_the_action():
    event = _event("vote", vote="deny", reason_code="NO", outcome=E.APPROVED)
    assert E.hold_events_problems(RECORD, [event], ANCHORS) == ["a vote event cannot close a hold as 'approved'"]


# ------------------------------------------------------------------ what weakens the hold policy (issue 52)

from gate.holds.policy import weakenings  # noqa: E402

STRICT = _policy(queues={"default": _queue(quorum="all", members=["a", "b", "c"], require_justification=True,
                                           escalate_after_seconds=600, escalate_to="leads"),
                         "leads": _queue(quorum="two")},
                 routes=[_route(queue="leads"), _route(policy_id="refunds", rule_id="big", queue="default")])


def _weakens(**changes):
    after = {**STRICT, **changes}
    return weakenings(HoldPolicy.from_json(STRICT), HoldPolicy.from_json(after))


def _queues(**default):
    return {"default": {**STRICT["queues"]["default"], **default}, "leads": STRICT["queues"]["leads"]}


@pytest.mark.parametrize(("changes", "named"), [
    ({}, ()),
    ({"four_eyes": False}, ("four_eyes",)),
    # the member restriction dropped is named too (issue 64: all [bob, carol] -> two was not a weakening)
    ({"queues": _queues(quorum="two")}, ("queues.default.quorum", "queues.default.members")),
    ({"queues": _queues(quorum="any")}, ("queues.default.quorum", "queues.default.members")),
    ({"queues": _queues(members=["a", "b"])}, ("queues.default.quorum", "queues.default.members")),
    ({"queues": _queues(members=["a", "b", "d"])}, ("queues.default.members",)),
    ({"queues": _queues(members=["a", "b", "c", "d"])}, ()),  # one more approval needed: stronger
    ({"queues": _queues(deadline_seconds=3601)}, ("queues.default.deadline_seconds",)),
    ({"queues": _queues(deadline_seconds=3599)}, ()),
    ({"queues": _queues(require_justification=False)}, ("queues.default.require_justification",)),
    ({"queues": _queues(escalate_after_seconds=None, escalate_to=None)}, ("queues.default.escalate_after_seconds",)),
    ({"queues": _queues(escalate_after_seconds=601)}, ("queues.default.escalate_after_seconds",)),
    ({"queues": _queues(escalate_after_seconds=599)}, ()),
])
def test_each_member_that_weakens_a_queue_is_named(changes, named):
    assert _weakens(**changes) == named


def test_a_queue_removed_or_a_looser_target_is_named():
    lax = _queue(deadline_seconds=3600)
    assert _weakens(queues={"default": STRICT["queues"]["default"], "leads": _queue(quorum="two"), "lax": lax}) == ()
    escalated = _queues(escalate_to="lax")
    assert _weakens(queues={**escalated, "lax": lax}) == ("queues.default.escalate_to",)
    assert _weakens(queues={**_queues(escalate_to="lax"), "lax": _queue(quorum="all", members=["a", "b", "c", "e"],
                                                                       require_justification=True)}) == ()
    moved = [_route(queue="default"), _route(policy_id="refunds", rule_id="big", queue="default")]
    assert _weakens(routes=moved) == ()  # refunds' records go from `two` to `all` of three: stronger
    assert _weakens(queues={**_queues(), "lax": lax}, routes=[_route(queue="lax"), STRICT["routes"][1]]) == (
        "routes[refunds/big]", "routes[refunds/*]")  # the first match wins: rule big goes to lax too
    assert _weakens(queues={**_queues(), "lax": lax}, routes=[STRICT["routes"][0], _route(
        policy_id="refunds", rule_id="big", queue="lax")]) == ()  # behind the catch-all: never matched
    assert _weakens(queues={**_queues(), "lax": lax}, routes=[_route(
        policy_id="refunds", rule_id="big", queue="lax"), STRICT["routes"][0]]) == ("routes[refunds/big]",)
    assert _weakens(queues={**_queues(), "lax": lax}, default_queue="lax") == ("default_queue",)
    assert _weakens(queues={"default": STRICT["queues"]["default"] | {"escalate_after_seconds": None,
                                                                      "escalate_to": None}},
                    routes=[]) == ("queues.default.escalate_after_seconds", "queues.leads")  # refunds: to `all`


def test_every_queue_is_compared_after_a_removed_one():
    queues = {**_queues(), "extra": _queue(), "third": _queue()}
    before = HoldPolicy.from_json({**STRICT, "queues": queues})
    after = HoldPolicy.from_json({**STRICT, "queues": {**_queues(), "third": _queue(deadline_seconds=7200)}})
    assert weakenings(before, after) == ("queues.extra", "queues.third.deadline_seconds")


def test_an_escalation_is_compared_where_the_queue_has_one():
    queues = {**_queues(), "lax": _queue()}
    before = HoldPolicy.from_json({**STRICT, "queues": queues})
    to_lax = HoldPolicy.from_json({**STRICT, "queues": {**queues, "default": {**queues["default"],
                                                                             "escalate_to": "lax"}}})
    assert weakenings(before, to_lax) == ("queues.default.escalate_to",)
    assert weakenings(to_lax, before) == ()
    unescalated = {**queues, "default": {**queues["default"], "escalate_after_seconds": None, "escalate_to": None}}
    assert weakenings(HoldPolicy.from_json({**STRICT, "queues": unescalated}),
                      HoldPolicy.from_json({**STRICT, "queues": unescalated})) == ()


def test_a_rule_route_is_compared_with_where_that_rule_went_not_with_the_policy_route():
    queues = {"default": _queue(quorum="all", members=["a", "b", "c"]), "lax": _queue(), "leads": _queue(quorum="two")}
    before = HoldPolicy.from_json(_policy(queues=queues, routes=[_route(rule_id="big", queue="default"),
                                                                 _route(queue="lax")]))
    after = HoldPolicy.from_json(_policy(queues=queues, routes=[_route(rule_id="big", queue="leads"),
                                                                _route(queue="lax")]))
    assert weakenings(before, after) == ("routes[refunds/big]",)  # all of three -> two (lax -> two is stronger)
    assert weakenings(after, before) == ()


def test_a_route_of_another_rule_and_another_policy_are_told_apart():
    policy = HoldPolicy.from_json(_policy(queues={"default": _queue(), "lax": _queue(deadline_seconds=7200)},
                                          routes=[_route(rule_id="r1", queue="default")]))
    wider = HoldPolicy.from_json(_policy(queues={"default": _queue(), "lax": _queue(deadline_seconds=7200)},
                                         routes=[_route(rule_id="r1", queue="default"), _route(queue="lax")]))
    assert weakenings(policy, wider) == ("routes[refunds/*]",)  # refunds' other rules now go to the laxer queue
    other = HoldPolicy.from_json(_policy(queues={"default": _queue(), "lax": _queue(deadline_seconds=7200)},
                                         routes=[_route(rule_id="r1", queue="default"),
                                                 _route(policy_id="other", queue="lax")]))
    assert weakenings(policy, other) == ("routes[other/*]",)
    assert weakenings(wider, policy) == ()
