"""Held actions through HTTP (issue 43, docs/holds.md): a decide that holds opens exactly one hold;
a reviewer's signed resolution is what lets the caller proceed; who may resolve; silence expires."""

from __future__ import annotations

import copy
import threading
import time

import pytest

from gate.holds.events import hold_events_problems, verify_resolution
from gate.verify import verify_record
from gate_client.client import resolution_route
from tests.holds.support import Holds, MovingClock, approved_request, held_request, policy, queue

REVIEWER_HOLDER = "service:reviewer-desk"


@pytest.fixture
def clock():
    return MovingClock()


@pytest.fixture
def gate(make_app, clock):
    return make_app(clock=clock)


@pytest.fixture
def keys(issue_key):
    return {
        "caller": issue_key(permissions="decide")["api_key"],
        "reviewer": issue_key(permissions="decide,resolve", holder=REVIEWER_HOLDER)["api_key"],
        "reviewer2": issue_key(permissions="decide,resolve")["api_key"],
        "admin": issue_key(permissions="decide,admin")["api_key"],
        "other_scope": issue_key(scope="tenant_b", permissions="decide,resolve,admin")["api_key"],
    }


def _as(gate, keys, name):
    return Holds(gate.test_client(), keys[name])


def _held(gate, keys, **kw):
    answer = _as(gate, keys, "caller").decide(held_request(**kw))
    assert answer.status_code == 200, answer.get_json()
    record = answer.get_json()
    assert record["verdict"] == "review"
    return record


def test_a_held_decide_opens_one_hold_with_its_owner_deadline_and_facts(gate, keys, clock):
    record = _held(gate, keys)
    # The hold lives beside the record: the record has exactly the members of any other record
    # (the reference verifier reads it as before).
    approved = _as(gate, keys, "caller").decide(approved_request()).get_json()
    assert set(record) == set(approved) and not [name for name in record if "hold" in name]
    inbox = _as(gate, keys, "reviewer").inbox().get_json()
    assert inbox["total"] == 1 and inbox["counts"] == {"open": 1}
    hold = inbox["holds"][0]
    assert hold["decision_id"] == record["decision_id"] and hold["record_hash"] == record["record_hash"]
    assert hold["queue"] == "default" and hold["priority"] == "normal" and hold["state"] == "open"
    assert hold["rule_id"] == "review_thin_margin" and hold["reason_code"] == "MARGIN_BELOW_FLOOR"
    assert hold["facts"]["margin_percent"] == 12
    assert hold["deadline_at"] > hold["opened_at"] == record["created_at"]
    # a decide that does not hold opens nothing
    assert _as(gate, keys, "caller").decide(approved_request()).get_json()["verdict"] == "yes"
    assert _as(gate, keys, "reviewer").inbox().get_json()["total"] == 1


def test_sixteen_concurrent_retries_of_one_key_open_one_hold(gate, keys):
    api = _as(gate, keys, "caller")
    answers = []

    def call():
        answers.append(Holds(gate.test_client(), keys["caller"]).decide(held_request(), key="retry-1").get_json())
    threads = [threading.Thread(target=call) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({a["decision_id"] for a in answers}) == 1
    inbox = _as(gate, keys, "reviewer").inbox().get_json()
    assert inbox["total"] == 1 and inbox["holds"][0]["decision_id"] == answers[0]["decision_id"]
    assert api.decide(held_request(), key="retry-1").get_json()["decision_id"] == answers[0]["decision_id"]


def test_an_approving_resolution_is_signed_bound_and_lets_the_caller_proceed(gate, keys):
    record = _held(gate, keys)
    reviewer = _as(gate, keys, "reviewer")
    answer = reviewer.resolve(record["decision_id"], "approve", "MARGIN_OK", note="finance signed off")
    assert answer.status_code == 201, answer.get_json()
    event = answer.get_json()["event"]
    assert event["outcome"] == "approved" and event["record_hash"] == record["record_hash"]
    assert event["principal"] == {"kind": "api_key", "id": event["actor"], "holder": REVIEWER_HOLDER}
    polled = _as(gate, keys, "caller").resolution(record["decision_id"]).get_json()
    assert polled["state"] == "approved" and polled["approved"] is True and polled["resolution"] == event
    anchors = gate.extensions["gate"].signing.trust_anchors()
    assert verify_resolution(record, event, anchors).approved
    verified = verify_record(record, anchors=anchors).to_dict()
    assert resolution_route(record, event, anchors, verified).route == "proceed"
    # any changed byte fails, and a resolution bound to another record never proceeds
    for name, value in (("outcome", "denied"), ("note", "x"), ("record_hash", "0" * 64), ("seq", 99)):
        forged = dict(event, **{name: value})
        assert not verify_resolution(record, forged, anchors).verified, name
        assert resolution_route(record, forged, anchors, verified).route == "review"
    other = _held(gate, keys, margin=11)
    assert resolution_route(other, event, anchors, verify_record(other, anchors=anchors).to_dict()).route == "review"
    # a second resolution changes nothing
    again = _as(gate, keys, "reviewer2").resolve(record["decision_id"], "deny", "TOO_LATE")
    assert again.status_code == 409 and again.get_json()["error"] == "HOLD_ALREADY_RESOLVED"


def test_a_denial_routes_to_deny(gate, keys):
    record = _held(gate, keys)
    event = _as(gate, keys, "reviewer").resolve(record["decision_id"], "deny", "MARGIN_TOO_THIN").get_json()["event"]
    anchors = gate.extensions["gate"].signing.trust_anchors()
    check = verify_resolution(record, event, anchors)
    assert check.verified and not check.approved and check.outcome == "denied"
    assert resolution_route(record, event, anchors, verify_record(record, anchors=anchors).to_dict()).route == "deny"


@pytest.mark.parametrize("who, code, status", [
    ("caller", "HOLD_PERMISSION_DENIED", 403),  # a decide-only key
    ("admin", "HOLD_PERMISSION_DENIED", 403),  # admin does not imply resolve
    ("other_scope", "HOLD_NOT_FOUND", 404),  # another scope's hold does not exist for it
])
def test_who_may_not_resolve(gate, keys, who, code, status):
    record = _held(gate, keys)
    answer = _as(gate, keys, who).resolve(record["decision_id"])
    assert answer.status_code == status and answer.get_json()["error"] == code
    assert _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]["state"] == "open"
    assert _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]["events"] == []


def test_four_eyes_refuses_the_requester_and_allows_it_when_the_scope_turns_it_off(gate, keys, issue_key):
    both = issue_key(permissions="decide,resolve")["api_key"]
    api = Holds(gate.test_client(), both)
    record = api.decide(held_request()).get_json()
    refused = api.resolve(record["decision_id"])
    assert refused.status_code == 403 and refused.get_json()["error"] == "HOLD_FOUR_EYES"
    assert _as(gate, keys, "admin").put_policy(policy(four_eyes=False)).status_code == 200
    later = api.decide(held_request(margin=13)).get_json()
    assert api.resolve(later["decision_id"]).status_code == 201
    # the hold opened under four eyes keeps it
    assert api.resolve(record["decision_id"]).get_json()["error"] == "HOLD_FOUR_EYES"


def test_a_two_person_quorum_needs_two_distinct_approvers(gate, keys):
    assert _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="two")})).status_code == 200
    record = _held(gate, keys)
    first = _as(gate, keys, "reviewer").resolve(record["decision_id"]).get_json()
    assert first["event"]["outcome"] is None and first["hold"]["state"] == "open"
    again = _as(gate, keys, "reviewer").resolve(record["decision_id"])
    assert again.status_code == 409 and again.get_json()["error"] == "HOLD_ALREADY_VOTED"
    second = _as(gate, keys, "reviewer2").resolve(record["decision_id"]).get_json()
    assert second["event"]["outcome"] == "approved"
    assert second["event"]["votes"] == [first["event"]["event_hash"]] and second["event"]["approvals_needed"] == 2
    # the closed hold counts both votes, the closing one included (issue 56: it read "1 of 2")
    closed = _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]
    assert second["hold"]["approvals"] == closed["approvals"]
    assert [a["event_hash"] for a in closed["approvals"]] == [first["event"]["event_hash"],
                                                              second["event"]["event_hash"]]
    anchors = gate.extensions["gate"].signing.trust_anchors()
    assert verify_resolution(record, second["event"], anchors).approved


def test_a_hold_approved_before_the_closing_vote_counted_reads_every_approval_after_migration_0018(gate, keys):
    """Before issue 56's fix the closing approval did not add itself to the row: a hold closed at
    2 of 2 read "1 of 2" in the API, the CLI and the Inbox. Migration 0018 adds it from the
    hold's signed resolution event; rows that list it, and denied holds, stay as they are."""
    import json

    from sqlalchemy import text, update

    from gate.ledger.tables import holds

    assert _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="two")})).status_code == 200
    approved, denied = _held(gate, keys), _held(gate, keys)
    first = _as(gate, keys, "reviewer").resolve(approved["decision_id"]).get_json()["event"]
    _as(gate, keys, "reviewer2").resolve(approved["decision_id"])
    _as(gate, keys, "reviewer").resolve(denied["decision_id"])
    _as(gate, keys, "reviewer2").resolve(denied["decision_id"], "deny")
    reviewer = _as(gate, keys, "reviewer")
    now = {d: reviewer.show(d).get_json()["hold"] for d in (approved["decision_id"], denied["decision_id"])}
    assert len(now[approved["decision_id"]]["approvals"]) == 2 and len(now[denied["decision_id"]]["approvals"]) == 1
    ledger = gate.extensions["gate"].ledger
    old = json.dumps(now[approved["decision_id"]]["approvals"][:1])  # the votes before the closing one
    assert json.loads(old)[0]["event_hash"] == first["event_hash"]
    with ledger.write() as connection:  # the row as the code before the fix wrote it
        connection.execute(update(holds).where(holds.c.decision_id == approved["decision_id"]).values(
            approvals_json=old))
    assert reviewer.show(approved["decision_id"]).get_json()["hold"]["approvals"] == json.loads(old)
    for _ in range(2):  # the upgrade, then again: idempotent
        with ledger.write() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '0017_slack_messages'"))
        ledger.upgrade()
        for decision_id, hold in now.items():
            assert reviewer.show(decision_id).get_json()["hold"] == hold


def test_a_queue_that_requires_a_justification_refuses_a_vote_without_one(gate, keys):
    _as(gate, keys, "admin").put_policy(policy({"default": queue(justification=True)}))
    record = _held(gate, keys)
    refused = _as(gate, keys, "reviewer").resolve(record["decision_id"])
    assert refused.status_code == 400 and refused.get_json()["error"] == "HOLD_RESOLUTION_INVALID"
    assert _as(gate, keys, "reviewer").resolve(record["decision_id"], note="checked the contract").status_code == 201


def test_racing_resolutions_give_one(gate, keys):
    record = _held(gate, keys)
    statuses = []

    def vote(name, decision):
        statuses.append(Holds(gate.test_client(), keys[name]).resolve(record["decision_id"], decision).status_code)
    threads = [threading.Thread(target=vote, args=(name, d)) for name in ("reviewer", "reviewer2")
               for d in ("approve", "deny", "approve", "deny")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(statuses).count(201) == 1 and all(s in (201, 409) for s in statuses)
    events = _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]["events"]
    assert len(events) == 1 and events[0]["outcome"] in ("approved", "denied")


def test_silence_expires_the_hold_and_an_expiry_never_approves(gate, keys, clock):
    record = _held(gate, keys)
    holds = gate.extensions["gate"].holds
    assert holds.sweep() == 0
    clock.advance(86_400 + 1)
    assert holds.sweep() == 1 and holds.sweep() == 0  # once, however often swept
    polled = _as(gate, keys, "caller").resolution(record["decision_id"]).get_json()
    assert polled["state"] == "expired" and polled["approved"] is False
    event = polled["resolution"]
    assert event["action"] == "expire" and event["principal"] == {"kind": "clock", "id": "clock"}
    anchors = gate.extensions["gate"].signing.trust_anchors()
    check = verify_resolution(record, event, anchors)
    assert check.verified and not check.approved
    assert resolution_route(record, event, anchors, verify_record(record, anchors=anchors).to_dict()).route == "deny"
    late = _as(gate, keys, "reviewer").resolve(record["decision_id"])
    assert late.status_code == 409 and late.get_json()["error"] == "HOLD_ALREADY_RESOLVED"
    # a forged expiry that claims approval fails
    forged = copy.deepcopy(event)
    forged["outcome"] = "approved"
    assert not verify_resolution(record, forged, anchors).approved


def test_escalation_moves_the_hold_before_its_deadline_and_is_recorded(gate, keys, clock):
    _as(gate, keys, "admin").put_policy(policy({
        "default": queue(deadline=7200, escalate_after=600, escalate_to="leads"), "leads": queue(deadline=7200)}))
    record = _held(gate, keys)
    holds = gate.extensions["gate"].holds
    clock.advance(601)
    assert holds.sweep() == 1
    hold = _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]
    assert hold["queue"] == "leads" and hold["state"] == "open" and hold["events"][-1]["action"] == "escalate"
    assert hold["deadline_at"] == hold["events"][-1]["deadline_at"]  # the deadline does not move
    clock.advance(7200)
    holds.sweep()
    assert _as(gate, keys, "caller").resolution(record["decision_id"]).get_json()["state"] == "expired"


def test_routes_send_a_rule_to_its_queue_with_its_priority(gate, keys):
    _as(gate, keys, "admin").put_policy(policy(
        {"default": queue(), "finance": queue(deadline=600)},
        routes=[{"policy_id": "pricing_exception", "rule_id": "review_thin_margin", "queue": "finance",
                 "priority": "urgent"}]))
    record = _held(gate, keys)
    hold = _as(gate, keys, "reviewer").inbox("?queue=finance").get_json()["holds"][0]
    assert hold["decision_id"] == record["decision_id"] and hold["priority"] == "urgent"


DESK_CODES = {"approve": ["CHECKED_INVOICE", "EXCEPTION_SIGNED"], "deny": ["NOT_IN_CONTRACT"]}


def test_a_vote_takes_only_its_queue_s_reason_codes_and_a_refused_one_changes_nothing(gate, keys):
    """Issue 65, item 3: `queues.<q>.reason_codes` is the only list a vote of that queue gives,
    per decision; a code outside it (or the other decision's) is HOLD_RESOLUTION_INVALID naming
    the list, and nothing is recorded. A queue stating none takes any code of the pattern."""
    admin = _as(gate, keys, "admin")
    desk = {**queue(), "reason_codes": DESK_CODES}
    routes = [{"policy_id": "pricing_exception", "rule_id": None, "queue": "desk", "priority": "normal"}]
    put = admin.put_policy(policy({"default": queue(), "desk": desk}, routes))
    assert put.status_code == 200, put.get_json()
    assert put.get_json()["policy"]["queues"]["desk"]["reason_codes"] == DESK_CODES
    assert "reason_codes" not in put.get_json()["policy"]["queues"]["default"]
    record = _held(gate, keys)
    reviewer = _as(gate, keys, "reviewer")
    for decision, code in (("approve", "CHECKED"), ("approve", "NOT_IN_CONTRACT"), ("deny", "CHECKED_INVOICE")):
        refused = reviewer.resolve(record["decision_id"], decision, code)
        assert refused.status_code == 400 and refused.get_json()["error"] == "HOLD_RESOLUTION_INVALID"
        listed = DESK_CODES[decision]
        assert refused.get_json()["reason_codes"] == listed and ", ".join(listed) in refused.get_json()["message"]
        assert reviewer.show(record["decision_id"]).get_json()["hold"]["events"] == []
    assert reviewer.resolve(record["decision_id"], "deny", "NOT_IN_CONTRACT").status_code == 201
    assert reviewer.resolution(record["decision_id"]).get_json()["state"] == "denied"
    assert admin.put_policy(policy({"default": queue(), "desk": queue()}, routes)).status_code == 200
    other = _held(gate, keys, margin=11)
    assert reviewer.resolve(other["decision_id"], "approve", "ANY_CODE_AT_ALL").status_code == 201


@pytest.mark.parametrize("codes, fragment", [
    ({"approve": ["OK_CODE"]}, "reason_codes"),
    ({"approve": [], "deny": ["NO_CODE"]}, "reason_codes"),
    ({"approve": ["ok_code"], "deny": ["NO_CODE"]}, "reason_codes"),
    ({"approve": ["OK_CODE", "OK_CODE"], "deny": ["NO_CODE"]}, "reason_codes"),
    ({"approve": ["OK_CODE"], "deny": ["NO_CODE"], "abstain": ["MAYBE"]}, "reason_codes"),
    (["OK_CODE"], "reason_codes"),
])
def test_a_malformed_reason_code_list_is_refused_and_the_policy_stays(gate, keys, codes, fragment):
    admin = _as(gate, keys, "admin")
    refused = admin.put_policy(policy({"default": {**queue(), "reason_codes": codes}}))
    assert refused.status_code == 400 and refused.get_json()["error"] == "HOLD_POLICY_INVALID"
    assert fragment in refused.get_json()["message"], refused.get_json()
    shown = gate.test_client().get("/api/holds/policy", headers={"x-api-key": keys["admin"]}).get_json()
    assert "reason_codes" not in shown["policy"]["queues"]["default"]


@pytest.mark.parametrize("body, fragment", [
    ({"decision": "maybe", "reason_code": "X1"}, "decision"),
    ({"decision": "approve", "reason_code": "lower"}, "reason_code"),
    ({"decision": "approve", "reason_code": "OK_1", "extra": 1}, "unknown"),
    ({"decision": "approve", "reason_code": "OK_1", "note": "x" * 2001}, "note"),
    ([1, 2], "object"),
])
def test_a_malformed_resolution_is_refused_and_changes_nothing(gate, keys, body, fragment):
    record = _held(gate, keys)
    answer = gate.test_client().post(f"/api/holds/{record['decision_id']}/resolve", json=body,
                                     headers={"x-api-key": keys["reviewer"]})
    assert answer.status_code == 400 and answer.get_json()["error"] == "HOLD_RESOLUTION_INVALID"
    assert fragment in answer.get_json()["message"]
    assert _as(gate, keys, "reviewer").show(record["decision_id"]).get_json()["hold"]["events"] == []


def test_the_hold_policy_is_admin_only_and_a_signed_change_of_the_governance_chain(gate, keys):
    refused = _as(gate, keys, "reviewer").put_policy(policy(four_eyes=False))
    assert refused.status_code == 403 and refused.get_json()["error"] == "HOLD_PERMISSION_DENIED"
    bad = _as(gate, keys, "admin").put_policy({"default_queue": "x"})
    assert bad.status_code == 400 and bad.get_json()["error"] == "HOLD_POLICY_INVALID"
    ok = _as(gate, keys, "admin").put_policy(policy(four_eyes=False)).get_json()
    assert ok["event"]["action"] == "policy_set" and ok["event"]["setting"] == "hold_policy"
    assert ok["event"]["policy_after"]["four_eyes"] is False and ok["policy"]["four_eyes"] is False
    governance = gate.test_client().get("/api/decision/release-policy", headers={"x-api-key": keys["admin"]})
    assert [e["setting"] for e in governance.get_json()["history"]] == ["hold_policy"]
    history = gate.test_client().get("/api/holds/history", headers={"x-api-key": keys["admin"]}).get_json()
    assert history["events"] == []


def test_a_vote_after_the_deadline_expires_the_hold_first_even_before_any_sweep(gate, keys, clock):
    record = _held(gate, keys)
    clock.advance(86_400)  # exactly at the deadline: no sweep has run
    late = _as(gate, keys, "reviewer").resolve(record["decision_id"])
    assert late.status_code == 409 and late.get_json()["error"] == "HOLD_ALREADY_RESOLVED"
    assert late.get_json()["state"] == "expired"
    polled = _as(gate, keys, "caller").resolution(record["decision_id"]).get_json()
    assert polled["state"] == "expired" and polled["resolution"]["action"] == "expire"


def test_claims_keep_other_reviewers_off_until_released_or_stale(gate, keys, clock):
    record = _held(gate, keys)
    first, second = _as(gate, keys, "reviewer"), _as(gate, keys, "reviewer2")
    claimed = first.act(record["decision_id"], "claim")
    assert claimed.status_code == 201 and claimed.get_json()["hold"]["claimed_by"] == claimed.get_json()["event"]["actor"]
    assert claimed.get_json()["event"]["action"] == "claim"
    for refused in (second.act(record["decision_id"], "claim"), second.resolve(record["decision_id"])):
        assert refused.status_code == 409 and refused.get_json()["error"] == "HOLD_CLAIMED"
    not_theirs = second.act(record["decision_id"], "unclaim")
    assert not_theirs.status_code == 409 and not_theirs.get_json()["error"] == "HOLD_CLAIMED"
    assert first.act(record["decision_id"], "claim").status_code == 201  # one's own claim is renewed
    released = first.act(record["decision_id"], "unclaim")
    assert released.status_code == 201 and released.get_json()["hold"]["claimed_by"] is None
    assert second.act(record["decision_id"], "claim").status_code == 201
    clock.advance(30 * 60 + 1)  # a claim left alone goes stale: it never blocks the others for good
    assert first.resolve(record["decision_id"]).status_code == 201
    actions = [e["action"] for e in first.show(record["decision_id"]).get_json()["hold"]["events"]]
    assert actions == ["claim", "claim", "unclaim", "claim", "vote"]


def test_reassign_and_escalate_move_the_hold_with_its_votes_and_reset_its_claim(gate, keys):
    _as(gate, keys, "admin").put_policy(policy({
        "default": queue(quorum="two", escalate_after=600, escalate_to="noted"),
        "noted": queue(quorum="two", justification=True), "other": queue(quorum="two")}))
    record = _held(gate, keys)
    reviewer = _as(gate, keys, "reviewer")
    reviewer.resolve(record["decision_id"])  # one of two approvals
    reviewer.act(record["decision_id"], "claim")
    moved = reviewer.act(record["decision_id"], "reassign", {"queue": "other", "note": "wrong desk"})
    assert moved.status_code == 201, moved.get_json()
    hold = moved.get_json()["hold"]
    assert hold["queue"] == "other" and hold["claimed_by"] is None and len(hold["approvals"]) == 1
    assert hold["escalate_at"] is None and moved.get_json()["event"]["note"] == "wrong desk"
    for body in ({"queue": "other"}, {"queue": "nowhere"}, {"queue": 5}, {}, {"queue": "noted", "note": 5}):
        refused = reviewer.act(record["decision_id"], "reassign", body)
        assert refused.status_code == 400 and refused.get_json()["error"] == "HOLD_RESOLUTION_INVALID", body
    not_escalable = reviewer.act(record["decision_id"], "escalate")
    assert not_escalable.status_code == 409 and not_escalable.get_json()["error"] == "HOLD_NOT_ESCALABLE"
    reviewer.act(record["decision_id"], "reassign", {"queue": "default"})
    escalated = reviewer.act(record["decision_id"], "escalate")
    assert escalated.status_code == 201 and escalated.get_json()["hold"]["queue"] == "noted"
    assert escalated.get_json()["hold"]["approvals_needed"] == 2 and len(escalated.get_json()["hold"]["approvals"]) == 1
    assert escalated.get_json()["event"]["deadline_at"] == hold["deadline_at"]
    for action in ("claim", "unclaim", "escalate"):
        refused = _as(gate, keys, "caller").act(record["decision_id"], action)
        assert refused.status_code == 403 and refused.get_json()["error"] == "HOLD_PERMISSION_DENIED"
    refused = _as(gate, keys, "caller").act(record["decision_id"], "reassign", {"queue": "other"})
    assert refused.status_code == 403
    # the vote given before the moves still counts, once; the second holder completes the quorum
    assert reviewer.resolve(record["decision_id"]).get_json()["error"] == "HOLD_ALREADY_VOTED"
    closing = _as(gate, keys, "reviewer2").resolve(record["decision_id"], note="checked twice")
    assert closing.status_code == 201 and closing.get_json()["event"]["outcome"] == "approved"
    events = reviewer.show(record["decision_id"]).get_json()["hold"]["events"]
    assert hold_events_problems(record, events, gate.extensions["gate"].signing.trust_anchors()) == []


def _loosens(answer, *loosened):
    body = answer.get_json()
    assert answer.status_code == 409 and body["error"] == "HOLD_MOVE_LOOSENS", body
    assert body["loosens"] == list(loosened), body


@pytest.mark.parametrize(("guarded", "moves", "loosened"), [
    # issue 64: 1 of 2 approvals, reassigned to `default`, approved by the same holder again
    (queue(quorum="two", escalate_after=600, escalate_to="default"), ("reassign", "escalate"), ("quorum",)),
    # quorum `all` [bob, carol]: the holder refused as not a member approved after the move
    (queue(quorum="all", members=["service:bob", "service:carol"]), ("reassign",), ("quorum", "members")),
    # a queue requiring a note: approved with none after the move
    (queue(justification=True, escalate_after=600, escalate_to="default"), ("reassign", "escalate"),
     ("require_justification",)),
])
def test_a_move_to_a_looser_queue_is_refused_and_changes_nothing(gate, keys, clock, guarded, moves, loosened):
    _as(gate, keys, "admin").put_policy(policy({"default": queue(), "guarded": guarded}, routes=[{
        "policy_id": "pricing_exception", "rule_id": None, "queue": "guarded", "priority": "normal"}]))
    record = _held(gate, keys)
    reviewer = _as(gate, keys, "reviewer")
    if guarded["quorum"] == "two":
        assert reviewer.resolve(record["decision_id"]).get_json()["hold"]["approvals_needed"] == 2
    before = reviewer.show(record["decision_id"]).get_json()["hold"]
    if "reassign" in moves:
        _loosens(reviewer.act(record["decision_id"], "reassign", {"queue": "default"}), *loosened)
    if "escalate" in moves:
        _loosens(reviewer.act(record["decision_id"], "escalate"), *loosened)
        clock.advance(601)  # the sweeper's escalation never loosens either: the hold stays, its deadline due
        assert gate.extensions["gate"].holds.sweep() == 1
        stayed = reviewer.show(record["decision_id"]).get_json()["hold"]
        assert (stayed["queue"], stayed["escalate_at"], stayed["events"][-1]["note"]) == (
            "guarded", None, "the escalation would loosen the hold's guard or tell a new recipient; it stays")
        before = {**before, "escalate_at": None, "events": stayed["events"]}
    assert reviewer.show(record["decision_id"]).get_json()["hold"] == before
    again = reviewer.resolve(record["decision_id"])
    assert again.status_code in (400, 403, 409) and again.get_json()["error"] in (
        "HOLD_ALREADY_VOTED", "HOLD_NOT_A_MEMBER", "HOLD_RESOLUTION_INVALID"), again.get_json()


def test_a_vote_from_a_looser_queue_counts_in_a_quorum_all_only_from_a_member(gate, keys, issue_key):
    bob = Holds(gate.test_client(), issue_key(permissions="resolve", holder="service:bob")["api_key"])
    carol = Holds(gate.test_client(), issue_key(permissions="resolve", holder="service:carol")["api_key"])
    _as(gate, keys, "admin").put_policy(policy({"default": queue(quorum="two"),
                                                "board": queue(quorum="all", members=["service:bob", "service:carol"]),
                                                "two": queue(quorum="two")}))
    record = _held(gate, keys)
    _as(gate, keys, "reviewer").resolve(record["decision_id"])  # not a member of `board`
    assert _as(gate, keys, "reviewer").act(record["decision_id"], "reassign", {"queue": "board"}).status_code == 201
    assert bob.resolve(record["decision_id"]).get_json()["hold"]["state"] == "open"  # 1 member of 2
    _loosens(bob.act(record["decision_id"], "reassign", {"queue": "two"}), "members")
    closing = carol.resolve(record["decision_id"])
    assert closing.status_code == 201 and closing.get_json()["event"]["outcome"] == "approved"
    assert len(closing.get_json()["event"]["votes"]) == 2  # every earlier approval, as the verifier reads them
    events = bob.show(record["decision_id"]).get_json()["hold"]["events"]
    assert hold_events_problems(record, events, gate.extensions["gate"].signing.trust_anchors()) == []


def test_a_move_never_tells_a_hold_to_a_recipient_its_record_does_not_reach(gate, keys):
    ext = {**queue(), "notify": {"email": ["ext-desk@partner.example"], "every_seconds": 0}}
    _as(gate, keys, "admin").put_policy(policy({"default": queue(), "ext": ext, "desk": queue(
        escalate_after=600, escalate_to="ext")}, routes=[{"policy_id": "other_policy", "rule_id": None,
                                                          "queue": "desk", "priority": "normal"}]))
    record = _held(gate, keys)
    reviewer = _as(gate, keys, "reviewer")
    _loosens(reviewer.act(record["decision_id"], "reassign", {"queue": "ext"}), "notify")
    # a queue whose escalation reaches `ext` is no way around it: from there the move is refused too
    assert reviewer.act(record["decision_id"], "reassign", {"queue": "desk"}).status_code == 201
    _loosens(reviewer.act(record["decision_id"], "escalate"), "notify")
    assert reviewer.show(record["decision_id"]).get_json()["hold"]["queue"] == "desk"
    # a record the policy itself sends through `desk` reaches `ext` by its escalation (a governed change)
    _as(gate, keys, "admin").put_policy(policy({"default": queue(), "ext": ext, "desk": queue(
        escalate_after=600, escalate_to="ext")}, routes=[{"policy_id": "pricing_exception", "rule_id": None,
                                                          "queue": "desk", "priority": "normal"}]))
    routed = _held(gate, keys, margin=11)
    escalated = reviewer.act(routed["decision_id"], "escalate")
    assert escalated.status_code == 201 and escalated.get_json()["hold"]["queue"] == "ext"


def test_the_inbox_lists_filters_and_pages(gate, keys, clock):
    _as(gate, keys, "admin").put_policy(policy(
        {"default": queue(), "fast": queue(deadline=600)},
        routes=[{"policy_id": "pricing_exception", "rule_id": None, "queue": "fast", "priority": "low"}]))
    first = _held(gate, keys)
    clock.advance(60)
    second = _held(gate, keys, margin=11)
    reviewer = _as(gate, keys, "reviewer")
    listed = reviewer.inbox().get_json()
    assert [h["decision_id"] for h in listed["holds"]] == [first["decision_id"], second["decision_id"]]
    assert reviewer.inbox("?limit=1&offset=1").get_json()["holds"][0]["decision_id"] == second["decision_id"]
    reviewer.resolve(first["decision_id"], "deny", "NO")
    assert reviewer.inbox("?state=denied").get_json()["total"] == 1
    assert reviewer.inbox("?state=closed").get_json()["total"] == 1
    assert reviewer.inbox("?state=all").get_json()["total"] == 2
    assert reviewer.inbox("?queue=default").get_json()["total"] == 0
    for query in ("?state=maybe", "?limit=0", "?limit=501", "?offset=-1"):
        answer = reviewer.inbox(query)
        assert answer.status_code == 400 and answer.get_json()["error"] == "REQUEST_INVALID", query
    assert _as(gate, keys, "other_scope").inbox("?state=all").get_json()["total"] == 0
    history = gate.test_client().get("/api/holds/history", headers={"x-api-key": keys["reviewer"]}).get_json()
    assert history["hold_history_version"] == "hold_history_v1"
    assert [e["seq"] for e in history["events"]] == [1] and history["events"][0]["outcome"] == "denied"
    assert reviewer.client.get("/api/holds/policy", headers=reviewer.h()).get_json()["policy"]["queues"]["fast"][
        "deadline_seconds"] == 600


def test_the_wait_answers_at_once_when_closed_and_waits_in_thread_without_parking(gate, keys):
    record = _held(gate, keys)
    caller = _as(gate, keys, "caller")
    started = time.monotonic()
    assert caller.resolution(record["decision_id"], wait=1).get_json()["state"] == "open"
    assert 0.9 < time.monotonic() - started < 5
    waiter = threading.Thread(target=lambda: answers.append(caller.resolution(record["decision_id"], wait=20)
                                                            .get_json()))
    answers: list = []
    waiter.start()
    time.sleep(0.5)
    resolved_at = time.monotonic()
    _as(gate, keys, "reviewer").resolve(record["decision_id"])
    waiter.join(timeout=10)
    assert answers and answers[0]["state"] == "approved" and time.monotonic() - resolved_at < 2
    for bad in ("?wait=31", "?wait=-1", "?wait=x"):
        refused = gate.test_client().get(f"/api/decision/{record['decision_id']}/resolution{bad}",
                                         headers={"x-api-key": keys["caller"]})
        assert refused.status_code == 400
    missing = caller.resolution("dec_" + "0" * 24)
    assert missing.status_code == 404 and missing.get_json()["error"] == "HOLD_NOT_FOUND"


def test_hold_events_link_to_the_inbox_when_the_workbench_address_is_known(make_app, issue_key):
    import json as _json

    from gate.ledger.outbox import Outbox

    app = make_app({"GATE_WORKBENCH_URL": "https://gate.example/workbench"})
    caller, reviewer = issue_key(permissions="decide")["api_key"], issue_key(permissions="resolve")["api_key"]
    record = Holds(app.test_client(), caller).decide(held_request()).get_json()
    Holds(app.test_client(), reviewer).resolve(record["decision_id"])
    events = [_json.loads(r["event_json"]) for r in Outbox(app.extensions["gate"].ledger).events_after("tenant_a", 0)]
    links = {e["type"].rsplit(".", 1)[-1]: e["data"]["inbox_url"] for e in events if e["type"].startswith(
        "dev.decision-gate.hold.")}
    expected = f"https://gate.example/workbench?scope=tenant_a&page=inbox&hold={record['decision_id']}"
    assert links == {"opened": expected, "resolved": expected}
