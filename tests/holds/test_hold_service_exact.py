"""gate/services/holds.py called directly, its rules pinned by value: each step's event (every
member), the row it moves and the outbox event that announces it; the clock's expiry and
escalation and their boundaries; who may act and each refusal's code, message and details;
races; the reads (list, resolution, history, similar); the wait and the sweeper thread. The HTTP
tests of tests/holds walk the same rules end to end; these fork in milliseconds under mutation
testing (docs/mutation-testing.md, suite `holds`)."""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import replace
from datetime import UTC, timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import insert, update

import gate.services.hold_reads as hold_reads
import gate.services.hold_rules as hold_rules
import gate.services.holds as holds_module
from gate.chain.links import scope_hash
from gate.clock import iso_ms
from gate.errors import GateError
from gate.events.cloudevent import full_type
from gate.holds.events import EVENT_MEMBERS, HOLD_EVENT_VERSION, Step, build_head, event_problems
from gate.holds.history import verify_hold_history
from gate.holds.policy import HoldPolicy, Queue
from gate.ledger.holds import HoldRace
from gate.ledger.tables import holds as holds_table
from gate.principals import Principal
from gate.services.hold_rules import Vote, parse_vote, queue_columns, utc
from gate.services.hold_writes import closing_move
from gate.services.holds import MAX_FACTS_BYTES, HoldOpener, _facts_text, hold_sweeper
from tests.holds.service_support import (
    ADMIN,
    ADMIN_RIGHTS,
    REQUESTER,
    RESOLVE,
    REVIEWER,
    SCOPE,
    SECOND,
    START,
    THIRD,
    Desk,
    build_desk,
)
from tests.holds.support import REQUEST, policy, queue

AT = "2026-11-26T12:00:00.000Z"
DEADLINE = "2026-11-27T12:00:00.000Z"  # the default queue's day
CLOCK = Principal.clock()
APPROVE = {"decision": "approve", "reason_code": "CHECKED"}
FACTS = {"account_tier": "annual", "discount_percent": 15, "margin_percent": 12, "owner_approved": True}
# A queue that escalates after ten minutes to `leads`; both have two hours.
ESCALATING = policy({"default": queue(deadline=7200, escalate_after=600, escalate_to="leads"),
                     "leads": queue(deadline=7200)})
ESCALATE_AT, DEADLINE_2H = "2026-11-26T12:10:00.000Z", "2026-11-26T14:00:00.000Z"
DEADLINE_1H = "2026-11-26T13:00:00.000Z"  # the support's queue(): an hour


@pytest.fixture
def desk(database_url, tmp_path):
    built = build_desk(database_url, tmp_path)
    yield built
    built.ledger.dispose()


def _refusal(call: Any, code: str) -> GateError:
    with pytest.raises(GateError) as refused:
        call()
    assert refused.value.code == code, (refused.value.code, refused.value.message)
    return refused.value


def _members(event: dict[str, Any]) -> dict[str, Any]:
    """The event's stated members (without its hash and signature)."""
    return {name: event[name] for name in EVENT_MEMBERS}


def _stated(action: str, principal: Principal, seq: int, previous: str | None, at: str,
            **members: Any) -> dict[str, Any]:
    """What an event of `action` states: every member not named here is null (votes: [])."""
    stated: dict[str, Any] = dict.fromkeys(EVENT_MEMBERS)
    stated.update(hold_event_version=HOLD_EVENT_VERSION, scope_hash=scope_hash(SCOPE), seq=seq,
                  previous_event_hash=previous, action=action, principal=principal.to_json(),
                  actor=principal.actor, created_at=at, votes=[])
    return {**stated, **members}


def _bound(record: dict[str, Any]) -> dict[str, Any]:
    """The event members that bind an event to a held decision."""
    return {"decision_id": record["decision_id"], "record_hash": record["record_hash"]}


def _view(record: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """The view of the hold a sample held decide at START opened (default policy), changed."""
    view = {
        "decision_id": record["decision_id"], "state": "open", "queue": "default", "priority": "normal",
        "opened_at": AT, "deadline_at": DEADLINE, "escalate_at": None, "policy_id": "pricing_exception",
        "policy_version": record["policy_version"], "rule_id": "review_thin_margin",
        "reason_code": "MARGIN_BELOW_FLOOR", "record_hash": record["record_hash"], "requested_by": REQUESTER,
        "requested_holder": "key:" + REQUESTER, "claimed_by": None, "claimed_at": None, "approvals": [], "approvals_needed": 1,
        "require_justification": False, "four_eyes": True, "resolved_at": None, "resolved_by": None,
        "facts": FACTS, "request": {
            "question": REQUEST["question"], "requested_action": "apply_discount", "target_system": "billing",
            "target_object_id": "sub_1042", "amount": None, "currency": None, "source_record_id": "sub_1042",
            "workflow": "billing_discount_gate", "requester": "key:" + REQUESTER, "signed": True},
    }
    return {**view, **changes}


def _announced(desk: Desk) -> list[tuple[str, str | None, str, dict[str, Any]]]:
    return [(e["type"], e.get("subject"), e["time"], e["data"]) for e in desk.announced()]


def _announcement(name: str, record: dict[str, Any], event: dict[str, Any], queue_name: str,
                  outcome: str | None = None, link: str | None = None) -> tuple[str, str, str, dict[str, Any]]:
    return (full_type(name), record["decision_id"], event["created_at"], {
        **_bound(record), "queue": queue_name, "outcome": outcome, "inbox_url": link, "hold_event": event})


def _verified(desk: Desk) -> None:
    """The scope's whole hold chain verifies offline (links, scope, hashes, signatures, rules)."""
    check = verify_hold_history(desk.service.history_document(SCOPE), desk.anchors)
    assert check.problems == () and check.verified


def _at(seconds: float) -> str:
    return iso_ms(START + timedelta(seconds=seconds))


# ------------------------------------------------------------------------------ pure helpers


def test_utc_reads_a_stored_time_in_utc():
    assert utc(AT) == START and utc(AT).tzinfo is UTC
    assert utc("2026-11-26T13:00:00.000+01:00") == START and utc("2026-11-26T13:00:00+01:00").tzinfo is UTC
    with pytest.raises(ValueError):
        utc("2026-11-26T12:00:00.000z")  # the stored form only: an upper-case Z
    with pytest.raises(ValueError):
        utc("2026-11-26T12:00:00.000XXZXX")  # only the one letter Z is read as UTC


def test_the_stored_facts_are_compact_sorted_utf8_and_bounded_in_bytes():
    assert _facts_text({"b": 1, "a": "é", "t": START}) == '{"a":"é","b":1,"t":"2026-11-26 12:00:00+00:00"}'
    room = MAX_FACTS_BYTES - len('{"x":""}')
    assert _facts_text({"x": "a" * room}) == '{"x":"' + "a" * room + '"}'  # exactly the bound: kept
    assert _facts_text({"x": "é" * (room // 2)}) == '{"x":"' + "é" * (room // 2) + '"}'
    omitted = '{"_omitted": "the facts exceed 16384 bytes; see the decision packet"}'
    assert _facts_text({"x": "a" * (room + 1)}) == omitted
    assert _facts_text({"x": "é" * (room // 2 + 1)}) == omitted  # bytes, not characters


def test_a_queue_sets_its_name_quorum_justification_and_escalation_time():
    assert queue_columns(Queue("desk", 600, "two", (), True, 60, "leads"), START) == {
        "queue": "desk", "approvals_needed": 2, "require_justification": 1, "escalate_at": "2026-11-26T12:01:00.000Z"}
    assert queue_columns(Queue("desk"), START) == {
        "queue": "desk", "approvals_needed": 1, "require_justification": 0, "escalate_at": None}


def test_a_vote_is_parsed_to_its_values():
    assert parse_vote({"decision": "approve", "reason_code": "OK"}) == Vote("approve", "OK", None)
    assert parse_vote({"decision": "deny", "reason_code": "A1", "note": "  one\n\ttwo  "}) == \
        Vote("deny", "A1", "one\n\ttwo")
    assert parse_vote({"decision": "deny", "reason_code": "A1", "note": " \n "}) == Vote("deny", "A1", None)
    assert parse_vote({"decision": "approve", "reason_code": "OK", "note": "x" * 2000}).note == "x" * 2000


@pytest.mark.parametrize(("body", "message", "details"), [
    ([1], "the body must be a JSON object", {}),
    ({**APPROVE, "zeta": 1, "alpha": 2}, "unknown member(s): alpha, zeta", {"unknown": ["alpha", "zeta"]}),
    ({"decision": "maybe", "reason_code": "OK"}, "decision must be 'approve' or 'deny'", {}),
    ({"decision": "approve", "reason_code": "ok"}, "reason_code must match ^[A-Z][A-Z0-9_]{1,63}$", {}),
    ({"decision": "approve", "reason_code": 5}, "reason_code must match ^[A-Z][A-Z0-9_]{1,63}$", {}),
    ({**APPROVE, "note": "x" * 2001}, "note must be text of at most 2000 characters", {}),
    ({**APPROVE, "note": 5}, "note must be text of at most 2000 characters", {}),
    ({**APPROVE, "note": "bell\x07"}, "note must be text of at most 2000 characters", {}),
    ({**APPROVE, "note": "cr\r"}, "note must be text of at most 2000 characters", {}),
])
def test_a_bad_vote_is_refused_with_its_reason(body, message, details):
    refused = _refusal(lambda: parse_vote(body), "HOLD_RESOLUTION_INVALID")
    assert (refused.message, refused.details) == (message, details)


def test_a_closing_step_sets_the_state_and_an_approval_adds_itself():
    row = {"approvals_json": json.dumps([{"actor": "key_a", "event_hash": "e0"}])}
    event = {"seq": 4, "event_hash": "e1"}
    vote = Step("vote", REVIEWER, AT, "dec_1", "h", vote="approve")
    assert closing_move(vote, row, event) == {"approvals_json": json.dumps(
        [{"actor": "key_a", "event_hash": "e0"}, {"actor": "key_rev", "holder": "key:key_rev", "event_hash": "e1"}])}
    closed = {"resolved_at": AT, "resolved_by": "key_rev", "resolution_seq": 4}
    # the closing approval lists itself too (issue 56: a hold closed at 2 of 2 showed 1 of 2)
    assert closing_move(replace(vote, outcome="approved"), row, event) == {
        **closing_move(vote, row, event), "state": "approved", **closed}
    assert closing_move(replace(vote, vote="deny", outcome="denied"), row, event) == {"state": "denied", **closed}
    assert closing_move(replace(vote, vote="deny"), row, event) == {}  # a deny is never an approval
    assert closing_move(Step("claim", REVIEWER, AT, "dec_1", "h"), row, event) == {}


# ------------------------------------------------------------------------------ opening


def test_a_held_decide_opens_its_row_and_announces_it(desk):
    record = desk.held()
    assert desk.row(record["decision_id"]) == {
        **_bound(record), "scope": SCOPE, "policy_id": "pricing_exception",
        "policy_version": record["policy_version"], "rule_id": "review_thin_margin",
        "reason_code": "MARGIN_BELOW_FLOOR", "requested_by": REQUESTER, "queue": "default", "priority": "normal",
        "priority_rank": 1, "opened_at": AT, "deadline_at": DEADLINE, "escalate_at": None, "approvals_needed": 1,
        "require_justification": 0, "four_eyes": 1, "state": "open", "claimed_by": None, "claimed_at": None,
        "approvals_json": "[]", "resolved_at": None, "resolved_by": None, "resolution_seq": None, "row_version": 0,
        "facts_json": json.dumps(FACTS, separators=(",", ":"), sort_keys=True), "requested_holder": None,
        # the request's summary as signed (issue 65), and its two searchable members
        "request_json": json.dumps(_view(record)["request"], ensure_ascii=False, separators=(",", ":"),
                                   sort_keys=True),
        "target_object_id": "sub_1042", "source_record_id": "sub_1042"}
    assert _announced(desk) == [(full_type("hold.opened"), record["decision_id"], AT, {
        **_bound(record), "queue": "default", "priority": "normal", "deadline_at": DEADLINE,
        "policy_id": "pricing_exception", "rule_id": "review_thin_margin", "reason_code": "MARGIN_BELOW_FLOOR",
        "inbox_url": None})]
    assert desk.service.show(SCOPE, record["decision_id"]) == {**_view(record), "events": []}


def test_an_opener_links_to_the_inbox_it_was_given_and_opens_nothing_for_a_verdict_that_does_not_hold(desk):
    assert HoldOpener(desk.ledger, desk.service.governance).inbox_base is None
    opener = HoldOpener(desk.ledger, desk.service.governance, "https://gate.example/wb")
    assert opener.inbox_base == "https://gate.example/wb"
    for verdict in ("yes", "no", None):
        assert opener.opening(SCOPE, {"verdict": verdict, "decision_id": "dec_1"}, REQUESTER, {}) == []


def test_a_route_sets_the_queue_priority_quorum_and_escalation_of_the_hold(desk):
    desk.set_policy(policy(
        {"default": queue(), "finance": queue(deadline=3600, quorum="two", justification=True, escalate_after=60,
                                              escalate_to="default")},
        routes=[{"policy_id": "pricing_exception", "rule_id": None, "queue": "finance", "priority": "urgent"}],
        four_eyes=False))
    desk.decisions.pipeline.holds.inbox_base = "https://gate.example/wb"
    record = desk.held()
    row = desk.row(record["decision_id"])
    assert {name: row[name] for name in ("queue", "priority", "priority_rank", "deadline_at", "escalate_at",
                                         "approvals_needed", "require_justification", "four_eyes")} == {
        "queue": "finance", "priority": "urgent", "priority_rank": 3, "deadline_at": "2026-11-26T13:00:00.000Z",
        "escalate_at": "2026-11-26T12:01:00.000Z", "approvals_needed": 2, "require_justification": 1, "four_eyes": 0}
    assert desk.service.view(row) == _view(record, queue="finance", priority="urgent", deadline_at=DEADLINE_1H,
                                   escalate_at="2026-11-26T12:01:00.000Z", approvals_needed=2,
                                   require_justification=True, four_eyes=False)
    assert _announced(desk)[-1][3]["inbox_url"] == \
        f"https://gate.example/wb?scope={SCOPE}&page=inbox&hold={record['decision_id']}"


# ------------------------------------------------------------------------------ the clock's steps


def test_the_clock_expires_a_hold_from_its_deadline_on(desk):
    record = desk.held()
    row = desk.row(record["decision_id"])
    refused = _refusal(lambda: desk.service.rules.clock_step(row, START + timedelta(seconds=86_399.999)), "HOLD_NOT_DUE")
    assert (refused.message, refused.details) == ("nothing is due on this hold", {})
    assert desk.service.rules.clock_step(row, START + timedelta(days=1)) == (
        Step("expire", CLOCK, "", record["decision_id"], record["record_hash"], queue="default",
             deadline_at=DEADLINE, outcome="expired"), {}, "hold.expired")


def test_the_expiry_closes_the_hold_signed_by_the_clock_and_tells_the_listeners(desk):
    record = desk.held()
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    assert desk.service.writer.expire(SCOPE, record["decision_id"], START) is False  # nothing due: nothing written
    assert desk.service.history_document(SCOPE)["events"] == [] and closed == []
    desk.clock.at = START + timedelta(days=1)
    assert desk.service.writer.expire(SCOPE, record["decision_id"], desk.clock.now()) is True
    event = desk.service.history_document(SCOPE)["events"][0]
    assert _members(event) == _stated("expire", CLOCK, 1, None, DEADLINE, **_bound(record), queue="default",
                                      deadline_at=DEADLINE, outcome="expired")
    assert desk.row(record["decision_id"])["resolution_seq"] == 1
    assert desk.service.show(SCOPE, record["decision_id"]) == {
        **_view(record, state="expired", resolved_at=DEADLINE, resolved_by="clock"), "events": [event]}
    assert _announced(desk)[1:] == [_announcement("hold.expired", record, event, "default", "expired")]
    assert closed == [record["decision_id"]]
    assert desk.service.writer.expire(SCOPE, record["decision_id"], desk.clock.now()) is False  # closed: nothing due
    _verified(desk)


def test_the_clock_escalates_from_the_escalation_time_on(desk):
    desk.set_policy(ESCALATING)
    record = desk.held()
    row = desk.row(record["decision_id"])
    assert row["escalate_at"] == ESCALATE_AT
    refused = _refusal(lambda: desk.service.rules.clock_step(row, START + timedelta(seconds=599.999)), "HOLD_NOT_DUE")
    assert refused.message == "nothing is due on this hold"
    moved = {"queue": "leads", "approvals_needed": 1, "require_justification": 0, "escalate_at": None,
             "claimed_by": None, "claimed_at": None}  # the votes stay with the hold (issue 64)
    assert desk.service.rules.clock_step(row, START + timedelta(seconds=600)) == (
        Step("escalate", CLOCK, "", record["decision_id"], record["record_hash"], queue="leads",
             deadline_at=DEADLINE_2H), moved, "hold.escalated")
    # at the deadline the expiry comes first, whatever escalation is still due
    assert desk.service.rules.clock_step(row, START + timedelta(hours=2))[2] == "hold.expired"


def test_a_sweep_escalates_the_hold_and_keeps_its_deadline(desk):
    desk.set_policy(ESCALATING)  # a governance event: the hold chain starts with the hold's own steps
    record = desk.held()
    desk.clock.at = START + timedelta(seconds=600)
    assert desk.service.sweep() == 1
    event = desk.service.history_document(SCOPE)["events"][-1]
    assert _members(event) == _stated("escalate", CLOCK, 1, None, ESCALATE_AT, **_bound(record),
                                      queue="leads", deadline_at=DEADLINE_2H)
    assert desk.service.view(desk.row(record["decision_id"])) == _view(record, queue="leads", deadline_at=DEADLINE_2H)
    assert _announced(desk)[-1] == _announcement("hold.escalated", record, event, "leads")
    assert desk.service.sweep() == 0
    _verified(desk)


@pytest.mark.parametrize("queues", [
    {"default": queue(deadline=7200), "leads": queue(deadline=7200)},  # the queue no longer escalates
    {"other": queue(deadline=7200)},  # the hold's queue is gone from the policy
])
def test_an_escalation_the_policy_dropped_only_clears_the_escalation_time(desk, queues):
    desk.set_policy(ESCALATING)
    record = desk.held()
    desk.set_policy(policy(queues, default_queue=next(iter(queues))))
    row = desk.row(record["decision_id"])
    due = START + timedelta(seconds=600)
    assert desk.service.rules.clock_step(row, due) == (
        Step("escalate", CLOCK, "", record["decision_id"], record["record_hash"], queue="default",
             deadline_at=DEADLINE_2H, note="no queue to escalate to"), {"escalate_at": None}, "hold.escalated")
    desk.clock.at = due
    assert desk.service.sweep() == 1
    event = desk.service.history_document(SCOPE)["events"][-1]
    assert _members(event) == _stated("escalate", CLOCK, 1, None, ESCALATE_AT, **_bound(record),
                                      queue="default", deadline_at=DEADLINE_2H, note="no queue to escalate to")
    after = desk.row(record["decision_id"])
    assert {**row, "escalate_at": None, "row_version": 1} == after
    assert _announced(desk)[-1] == _announcement("hold.escalated", record, event, "default")
    assert desk.service.sweep() == 0  # nothing is due any more before the deadline
    escalating = _refusal(lambda: desk.service.escalate(SCOPE, REVIEWER, RESOLVE, record["decision_id"]),
                          "HOLD_NOT_ESCALABLE")
    assert escalating.message == "this hold's queue names no queue to escalate to"
    _verified(desk)


def test_a_sweep_counts_what_it_did_within_its_limit(desk, monkeypatch):
    records = [desk.held(margin=m) for m in (12, 11, 10)]
    desk.clock.advance(3600)
    later = desk.held(margin=9)  # its deadline is an hour after the others'
    desk.clock.at = START + timedelta(days=1)
    limits: list[int] = []
    due = desk.service.holds.due
    monkeypatch.setattr(desk.service.holds, "due", lambda now, limit: limits.append(limit) or due(now, limit))
    assert desk.service.sweep(limit=2) == 2
    assert desk.service.sweep() == 1 and limits == [2, 200]
    assert [desk.row(r["decision_id"])["state"] for r in records] == ["expired"] * 3
    assert desk.row(later["decision_id"])["state"] == "open" and desk.service.sweep() == 0


def test_a_sweep_skips_a_hold_resolved_since_it_was_read(desk, monkeypatch):
    resolved, due = desk.held(margin=12), desk.held(margin=11)
    stale = desk.row(resolved["decision_id"])
    desk.service.resolve(SCOPE, REVIEWER, RESOLVE, resolved["decision_id"], APPROVE)
    monkeypatch.setattr(desk.service.holds, "due", lambda now, limit: [stale, desk.row(due["decision_id"])])
    desk.clock.at = START + timedelta(days=1)
    assert desk.service.sweep() == 1
    assert [desk.row(r["decision_id"])["state"] for r in (resolved, due)] == ["approved", "expired"]


def test_a_change_after_the_deadline_expires_the_hold_first(desk):
    record = desk.held()
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    desk.clock.at = START + timedelta(days=1)  # exactly the deadline; no sweep has run
    refused = _refusal(lambda: desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"]),
                       "HOLD_ALREADY_RESOLVED")
    assert (refused.message, refused.details) == ("this hold is already expired", {"state": "expired"})
    assert [(e["action"], e["actor"]) for e in desk.service.history_document(SCOPE)["events"]] == [("expire", "clock")]
    assert closed == [record["decision_id"]]


# ------------------------------------------------------------------------------ votes


def test_a_single_approval_closes_the_hold(desk):
    record = desk.held()
    row = desk.row(record["decision_id"])
    vote = Vote("approve", "CHECKED", "fine by finance")
    assert desk.service.rules.vote_step(row, REVIEWER, vote) == (
        Step("vote", REVIEWER, "", record["decision_id"], record["record_hash"], vote="approve",
             reason_code="CHECKED", note="fine by finance", queue="default", outcome="approved", approvals_needed=1,
             votes=(), four_eyes=True, requested_by=REQUESTER), {}, "hold.resolved")
    assert desk.service.rules.vote_step(row, REVIEWER, Vote("deny", "THIN", None)) == (
        Step("vote", REVIEWER, "", record["decision_id"], record["record_hash"], vote="deny", reason_code="THIN",
             queue="default", outcome="denied", four_eyes=True, requested_by=REQUESTER), {}, "hold.resolved")


def test_a_resolution_is_a_signed_event_announced_to_the_outbox_and_the_listeners(desk):
    record = desk.held()
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    desk.clock.advance(90)
    answer = desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"],
                                  {**APPROVE, "note": "fine by finance"})
    event = answer["event"]
    assert _members(event) == _stated("vote", REVIEWER, 1, None, _at(90), **_bound(record), vote="approve",
                                      reason_code="CHECKED", note="fine by finance", queue="default",
                                      outcome="approved", approvals_needed=1, four_eyes=True, requested_by=REQUESTER)
    assert event_problems(event, record, desk.anchors) == []
    assert answer == {"ok": True, "event": event,
                      "hold": _view(record, state="approved", resolved_at=_at(90), resolved_by="key_rev",
                                    approvals=[{"actor": "key_rev", "holder": "key:key_rev",
                                                "event_hash": event["event_hash"]}])}
    assert desk.row(record["decision_id"])["resolution_seq"] == 1
    assert _announced(desk)[1:] == [_announcement("hold.resolved", record, event, "default", "approved")]
    assert closed == [record["decision_id"]]
    assert desk.service.resolution(SCOPE, record["decision_id"]) == {
        "ok": True, "decision_id": record["decision_id"], "state": "approved", "approved": True,
        "resolution": event, "hold": answer["hold"]}
    again = _refusal(lambda: desk.service.resolve(SCOPE, SECOND, RESOLVE, record["decision_id"], APPROVE),
                     "HOLD_ALREADY_RESOLVED")
    assert (again.message, again.details) == ("this hold is already approved", {"state": "approved"})


def test_a_two_person_quorum_records_the_first_approval_and_closes_on_the_second(desk):
    desk.set_policy(policy({"default": queue(quorum="two")}))
    record = desk.held()
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    row = desk.row(record["decision_id"])
    assert desk.service.rules.vote_step(row, REVIEWER, Vote("approve", "CHECKED", None)) == (
        Step("vote", REVIEWER, "", record["decision_id"], record["record_hash"], vote="approve",
             reason_code="CHECKED", queue="default", four_eyes=True, requested_by=REQUESTER), {}, "hold.voted")
    first = desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE)
    approvals = [{"actor": "key_rev", "holder": "key:key_rev", "event_hash": first["event"]["event_hash"]}]
    assert first["hold"] == _view(record, approvals=approvals, approvals_needed=2, deadline_at=DEADLINE_1H)
    assert desk.row(record["decision_id"])["approvals_json"] == json.dumps(approvals)
    assert _announced(desk)[-1] == _announcement("hold.voted", record, first["event"], "default")
    assert closed == []
    refused = _refusal(lambda: desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE),
                       "HOLD_ALREADY_VOTED")
    assert refused.message == "this holder has already approved this hold (with one of its keys)"
    second = desk.service.resolve(SCOPE, SECOND, RESOLVE, record["decision_id"], APPROVE)["event"]
    assert _members(second) == _stated("vote", SECOND, 2, first["event"]["event_hash"], AT, **_bound(record),
                                       vote="approve", reason_code="CHECKED", queue="default", outcome="approved",
                                       approvals_needed=2, votes=[first["event"]["event_hash"]], four_eyes=True,
                                       requested_by=REQUESTER)
    assert closed == [record["decision_id"]]
    _verified(desk)


def test_one_deny_closes_a_two_person_hold(desk):
    desk.set_policy(policy({"default": queue(quorum="two")}))
    record = desk.held()
    step, move, name = desk.service.rules.vote_step(desk.row(record["decision_id"]), REVIEWER, Vote("deny", "NO", None))
    assert (step.outcome, step.approvals_needed, step.votes, move, name) == ("denied", None, (), {}, "hold.resolved")


def test_four_eyes_keeps_the_requester_off_unless_the_policy_turns_it_off(desk):
    record = desk.held()
    requester = Principal.api_key(REQUESTER)
    refused = _refusal(lambda: desk.service.resolve(SCOPE, requester, RESOLVE, record["decision_id"], APPROVE),
                       "HOLD_FOUR_EYES")
    assert refused.details == {}
    assert refused.message == "the holder that asked for this action cannot resolve it (with any of its keys)"
    desk.set_policy(policy(four_eyes=False))
    later = desk.held(margin=11)
    event = desk.service.resolve(SCOPE, requester, RESOLVE, later["decision_id"], APPROVE)["event"]
    assert (event["outcome"], event["four_eyes"], event["requested_by"]) == ("approved", False, REQUESTER)


def test_a_quorum_all_queue_takes_votes_from_its_members_only(desk):
    desk.set_policy(policy({"default": queue(quorum="all", members=[REVIEWER.id, SECOND.id])}))
    record = desk.held()
    refused = _refusal(lambda: desk.service.resolve(SCOPE, THIRD, RESOLVE, record["decision_id"], APPROVE),
                       "HOLD_NOT_A_MEMBER")
    assert (refused.message, refused.details) == ("this queue takes votes from its members only", {})
    assert desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE)["event"]["outcome"] is None
    closing = desk.service.resolve(SCOPE, SECOND, RESOLVE, record["decision_id"], APPROVE)["event"]
    assert (closing["outcome"], closing["approvals_needed"]) == ("approved", 2)


def test_a_queue_that_requires_a_justification_refuses_a_vote_without_a_note(desk):
    desk.set_policy(policy({"default": queue(justification=True)}))
    record = desk.held()
    refused = _refusal(lambda: desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE),
                       "HOLD_RESOLUTION_INVALID")
    assert refused.message == "this queue requires a written justification (note)"
    event = desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], {**APPROVE, "note": "ok"})["event"]
    assert event["note"] == "ok"


# ------------------------------------------------------------------------------ claims


def test_a_claim_and_its_release_are_signed_chained_and_announced(desk):
    record = desk.held()
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    row = desk.row(record["decision_id"])
    assert desk.service.rules.claim_step(row, REVIEWER, False) == (
        Step("claim", REVIEWER, "", record["decision_id"], record["record_hash"], queue="default"),
        {"claimed_by": "key_rev", "claimed_at": "@now"}, "hold.claimed")
    desk.clock.advance(60)
    claimed = desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])
    first = claimed["event"]
    assert _members(first) == _stated("claim", REVIEWER, 1, None, _at(60), **_bound(record), queue="default")
    assert claimed == {"ok": True, "event": first, "hold": _view(record, claimed_by="key_rev", claimed_at=_at(60))}
    claimed_row = desk.row(record["decision_id"])
    assert desk.service.rules.claim_step(claimed_row, REVIEWER, True) == (
        Step("unclaim", REVIEWER, "", record["decision_id"], record["record_hash"], queue="default"),
        {"claimed_by": None, "claimed_at": None}, "hold.unclaimed")
    released = desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"], release=True)
    second = released["event"]
    assert _members(second) == _stated("unclaim", REVIEWER, 2, first["event_hash"], _at(60), **_bound(record),
                                       queue="default")
    assert released == {"ok": True, "event": second, "hold": _view(record)}
    assert _announced(desk)[1:] == [_announcement("hold.claimed", record, first, "default"),
                                    _announcement("hold.unclaimed", record, second, "default")]
    assert closed == []
    _verified(desk)


def test_a_claim_keeps_other_reviewers_off_for_thirty_minutes(desk):
    record = desk.held()
    desk.service.claim(SCOPE, SECOND, RESOLVE, record["decision_id"])
    for call in (lambda: desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"]),
                 lambda: desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE)):
        refused = _refusal(call, "HOLD_CLAIMED")
        assert (refused.message, refused.details) == ("another reviewer has claimed this hold",
                                                      {"claimed_by": SECOND.actor})
    refused = _refusal(lambda: desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"], release=True),
                       "HOLD_CLAIMED")
    assert (refused.message, refused.details) == ("only the reviewer who claimed this hold releases it",
                                                  {"claimed_by": SECOND.actor})
    desk.clock.advance(30 * 60 - 0.001)
    _refusal(lambda: desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"]), "HOLD_CLAIMED")
    desk.clock.advance(0.001)  # thirty minutes on, the claim is stale
    assert desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])["hold"]["claimed_by"] == "key_rev"


# ------------------------------------------------------------------------------ moves


def test_a_move_resets_the_claim_keeps_the_votes_and_takes_the_new_queue(desk):
    desk.set_policy(policy({"default": queue(quorum="two"),
                            "other": queue(quorum="two", justification=True, escalate_after=60,
                                           escalate_to="default")}))
    record = desk.held()
    desk.clock.advance(30)
    row = desk.row(record["decision_id"])
    other = desk.service.policy(SCOPE).queue("other")
    moved = {"queue": "other", "approvals_needed": 2, "require_justification": 1, "escalate_at": _at(90),
             "claimed_by": None, "claimed_at": None}  # the votes stay with the hold (issue 64)
    for action, name in (("reassign", "hold.reassigned"), ("escalate", "hold.escalated")):
        assert desk.service.rules.move_step(row, REVIEWER, action, other, "wrong desk") == (
            Step(action, REVIEWER, "", record["decision_id"], record["record_hash"], note="wrong desk",
                 queue="other", deadline_at=DEADLINE_1H), moved, name)
    same = _refusal(lambda: desk.service.rules.move_step(row, REVIEWER, "reassign", desk.service.policy(SCOPE).queue(
        "default"), None), "HOLD_RESOLUTION_INVALID")
    assert same.message == "the hold is already in this queue"
    # issue 64: back from `other` (a note required) to `default` (none) would loosen the hold's guard
    there = {**row, "queue": "other", "require_justification": 1}
    for action in ("reassign", "escalate"):
        looser = _refusal(lambda a=action: desk.service.rules.move_step(there, REVIEWER, a, desk.service.policy(
            SCOPE).queue("default"), None), "HOLD_MOVE_LOOSENS")
        assert (looser.message, looser.details) == (
            ("queue 'default' would let this hold through more loosely (require_justification); a hold keeps the "
             "strictest guard it has been under"), {"queue": "default", "loosens": ["require_justification"]})


def test_a_reassignment_is_announced_and_checks_its_body(desk):
    desk.set_policy(policy({"default": queue(), "other": queue()}))
    record = desk.held()
    for body in (None, ["other"], "other", {}, {"queue": 5}, {"queue": "nowhere"}):
        refused = _refusal(lambda b=body: desk.service.reassign(SCOPE, REVIEWER, RESOLVE, record["decision_id"], b),
                           "HOLD_RESOLUTION_INVALID")
        assert refused.message == "queue must name one of the scope's queues", body
    for note in ("x" * 2001, 5):
        refused = _refusal(lambda n=note: desk.service.reassign(
            SCOPE, REVIEWER, RESOLVE, record["decision_id"], {"queue": "other", "note": n}), "HOLD_RESOLUTION_INVALID")
        assert refused.message == "note must be text of at most 2000 characters"
    answer = desk.service.reassign(SCOPE, REVIEWER, RESOLVE, record["decision_id"], {"queue": "other",
                                                                                     "note": "x" * 2000})
    event = answer["event"]
    assert _members(event) == _stated("reassign", REVIEWER, 1, None, AT, **_bound(record), note="x" * 2000,
                                      queue="other", deadline_at=DEADLINE_1H)
    assert answer == {"ok": True, "event": event, "hold": _view(record, queue="other", deadline_at=DEADLINE_1H)}
    assert _announced(desk)[-1] == _announcement("hold.reassigned", record, event, "other")


class _AnyName:
    """Not a string, yet equal to every queue name: only a string names a queue."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = object.__hash__


def test_only_a_string_names_a_queue(desk):
    desk.set_policy(policy({"default": queue(), "other": queue()}))
    record = desk.held()
    refused = _refusal(lambda: desk.service.reassign(SCOPE, REVIEWER, RESOLVE, record["decision_id"],
                                                     {"queue": _AnyName()}), "HOLD_RESOLUTION_INVALID")
    assert refused.message == "queue must name one of the scope's queues"


def test_another_scopes_hold_is_absent_before_any_body_check(desk):
    record = desk.held()
    for call in (lambda: desk.service.reassign("globex", REVIEWER, RESOLVE, record["decision_id"], None),
                 lambda: desk.service.resolve("globex", REVIEWER, RESOLVE, record["decision_id"], None)):
        refused = _refusal(call, "HOLD_NOT_FOUND")
        assert (refused.message, refused.details) == ("no hold for this decision in this scope",
                                                      {"decision_id": record["decision_id"]})


def test_a_reviewer_escalates_to_the_queue_the_policy_names(desk):
    desk.set_policy(ESCALATING)
    record = desk.held()
    missing = _refusal(lambda: desk.service.escalate(SCOPE, REVIEWER, RESOLVE, "dec_missing"), "HOLD_NOT_FOUND")
    assert missing.details == {"decision_id": "dec_missing"}
    answer = desk.service.escalate(SCOPE, REVIEWER, RESOLVE, record["decision_id"])
    event = answer["event"]
    assert _members(event) == _stated("escalate", REVIEWER, 1, None, AT, **_bound(record), queue="leads",
                                      deadline_at=DEADLINE_2H)
    assert answer["hold"] == _view(record, queue="leads", deadline_at=DEADLINE_2H)
    assert _announced(desk)[-1] == _announcement("hold.escalated", record, event, "leads")
    refused = _refusal(lambda: desk.service.escalate(SCOPE, REVIEWER, RESOLVE, record["decision_id"]),
                       "HOLD_NOT_ESCALABLE")
    assert (refused.message, refused.details) == ("this hold's queue names no queue to escalate to", {})


@pytest.mark.parametrize("act", ["resolve", "claim", "release", "reassign", "escalate"])
def test_each_change_of_a_hold_needs_the_resolve_permission(desk, act):
    record = desk.held()
    calls = {
        "resolve": lambda: desk.service.resolve(SCOPE, REVIEWER, ADMIN_RIGHTS, record["decision_id"], APPROVE),
        "claim": lambda: desk.service.claim(SCOPE, REVIEWER, ADMIN_RIGHTS, record["decision_id"]),
        "release": lambda: desk.service.claim(SCOPE, REVIEWER, ADMIN_RIGHTS, record["decision_id"], release=True),
        "reassign": lambda: desk.service.reassign(SCOPE, REVIEWER, ADMIN_RIGHTS, record["decision_id"],
                                                  {"queue": "default"}),
        "escalate": lambda: desk.service.escalate(SCOPE, REVIEWER, ADMIN_RIGHTS, record["decision_id"]),
    }
    refused = _refusal(calls[act], "HOLD_PERMISSION_DENIED")
    assert (refused.message, refused.details) == ("this principal lacks the 'resolve' permission in this scope",
                                                  {"permission": "resolve"})
    assert desk.service.history_document(SCOPE)["events"] == []


# ------------------------------------------------------------------------------ the policy


def test_the_hold_policy_is_a_signed_admin_change_of_the_governance_chain(desk):
    refused = _refusal(lambda: desk.service.set_policy(SCOPE, ADMIN, RESOLVE, policy()), "HOLD_PERMISSION_DENIED")
    assert refused.message == "this principal lacks the 'admin' permission in this scope"  # gate.principals.require
    assert refused.details == {"permission": "admin"}
    first = desk.set_policy(policy(four_eyes=False))
    stated = policy(four_eyes=False)
    assert first == {"ok": True, "policy": stated, "pending": [], "governance_seq": 1, "requested": False,
                     "event": first["event"]}
    assert {k: first["event"][k] for k in ("seq", "setting", "action", "actor", "policy_before", "policy_after",
                                          "weakens", "approvals_required", "previous_event_hash")} == {
        "seq": 1, "setting": "hold_policy", "action": "policy_set", "actor": ADMIN.actor,
        "policy_before": HoldPolicy().to_json(), "policy_after": stated, "weakens": ["four_eyes"],
        "approvals_required": False, "previous_event_hash": None}
    desk.clock.advance(1)
    second = desk.set_policy(ESCALATING)["event"]
    assert (second["seq"], second["previous_event_hash"], second["policy_after"]) == (
        2, first["event"]["event_hash"], ESCALATING)
    assert desk.service.policy(SCOPE).to_json() == ESCALATING
    assert desk.set_policy(ESCALATING)["event"] is None  # nothing changes: no event
    assert [(e["type"], e.get("subject"), e["time"], e["data"]["policy"], e["data"]["event_hash"])
            for e in desk.announced()] == [
        (full_type("hold.policy_changed"), "@release-policy", AT, stated, first["event"]["event_hash"]),
        (full_type("hold.policy_changed"), "@release-policy", _at(1), ESCALATING, second["event_hash"])]
    assert desk.service.history_document(SCOPE)["events"] == []  # the hold chain holds the holds' steps only


def _racing(desk: Desk, monkeypatch: pytest.MonkeyPatch, races: int) -> list[int]:
    """Every append of the hold chain loses the race `races` times, then goes through."""
    calls: list[int] = []
    append = desk.service.holds.append

    def racing(*args: Any, **kwargs: Any) -> dict[str, Any]:
        calls.append(len(calls))
        if len(calls) <= races:
            raise HoldRace("test")
        return append(*args, **kwargs)
    monkeypatch.setattr(desk.service.holds, "append", racing)
    return calls


def test_a_lost_race_is_retried_and_eight_are_busy(desk, monkeypatch):
    record = desk.held()
    calls = _racing(desk, monkeypatch, 1)
    assert desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])["event"]["seq"] == 1
    assert len(calls) == 2
    calls = _racing(desk, monkeypatch, 8)
    busy = _refusal(lambda: desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"]), "HOLD_BUSY")
    assert (busy.message, busy.details, len(calls)) == (
        "the hold changed too often while this request was made; retry", {}, 8)


# ------------------------------------------------------------------------------ reads


def test_the_resolution_of_an_open_hold_is_none(desk):
    record = desk.held()
    assert desk.service.resolution(SCOPE, record["decision_id"]) == {
        "ok": True, "decision_id": record["decision_id"], "state": "open", "approved": False, "resolution": None,
        "hold": _view(record)}
    missing = _refusal(lambda: desk.service.resolution(SCOPE, "dec_missing"), "HOLD_NOT_FOUND")
    assert missing.details == {"decision_id": "dec_missing"}


def test_a_closed_hold_without_its_closing_event_never_reads_approved(desk):
    record = desk.held()
    desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])
    with desk.ledger.write() as connection:
        connection.execute(update(holds_table).where(holds_table.c.decision_id == record["decision_id"])
                           .values(state="approved"))
    answer = desk.service.resolution(SCOPE, record["decision_id"])
    assert (answer["state"], answer["approved"], answer["resolution"]) == ("approved", False, None)


def test_the_inbox_lists_by_state_and_queue_with_the_counts(desk):
    first = desk.held(margin=12)
    desk.clock.advance(60)
    second = desk.held(margin=11)
    desk.service.resolve(SCOPE, REVIEWER, RESOLVE, first["decision_id"], {"decision": "deny", "reason_code": "NO"})
    second_view = _view(second, opened_at=_at(60), deadline_at=iso_ms(START + timedelta(days=1, seconds=60)),
                        facts={**FACTS, "margin_percent": 11})
    assert desk.service.list(SCOPE) == {"ok": True, "holds": [second_view], "count": 1, "total": 1,
                                        "counts": {"open": 1, "denied": 1}}
    assert [h["decision_id"] for h in desk.service.list(SCOPE, state="all")["holds"]] == [
        first["decision_id"], second["decision_id"]]
    for state in ("closed", "denied"):
        assert [h["decision_id"] for h in desk.service.list(SCOPE, state=state)["holds"]] == [first["decision_id"]]
    assert desk.service.list(SCOPE, state="approved")["total"] == 0
    assert desk.service.list(SCOPE, state="all", queue="other")["total"] == 0
    page = desk.service.list(SCOPE, state="all", limit=1, offset=1)
    assert (page["count"], page["total"], page["holds"][0]["decision_id"]) == (1, 2, second["decision_id"])
    refused = _refusal(lambda: desk.service.list(SCOPE, state="maybe"), "REQUEST_INVALID")
    assert refused.message == "state must be one of open, approved, denied, expired, closed, all"


def test_the_inbox_shows_fifty_holds_from_the_first_by_default(desk):
    record = desk.held()
    row = desk.row(record["decision_id"])
    with desk.ledger.write() as connection:
        connection.execute(insert(holds_table), [{**row, "decision_id": f"dec_{n:03d}"} for n in range(50)])
    listed = desk.service.list(SCOPE)
    assert (listed["count"], listed["total"], listed["holds"][0]["decision_id"]) == (50, 51, "dec_000")


def test_the_history_document_is_the_scopes_chain_newest_last(desk, monkeypatch):
    record = desk.held()
    first = desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])["event"]
    second = desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE)["event"]
    desk.clock.advance(5)
    document = desk.service.history_document(SCOPE)
    signer = desk.signing.receipt_signer()
    as_of = iso_ms(desk.clock.now())
    assert document == {"hold_history_version": "hold_history_v1", "scope_hash": scope_hash(SCOPE),
                        "events": [first, second],
                        "head": build_head(scope_hash(SCOPE), [first, second], as_of, signer)}
    assert document["head"]["seq"] == 2 and document["head"]["head_event_hash"] == second["event_hash"]
    assert document["head"]["as_of"] == as_of and document["head"]["key_id"] == signer.key_id
    assert verify_hold_history(document, desk.anchors).verified
    newest = desk.service.history_document(SCOPE, limit=1)
    assert newest["events"] == [second] and newest["head"]["seq"] == 2
    empty = desk.service.history_document("globex")
    assert empty["events"] == [] and (empty["head"]["seq"], empty["head"]["head_event_hash"]) == (0, None)
    assert empty["head"]["scope_hash"] == scope_hash("globex") and verify_hold_history(empty, desk.anchors).verified
    limits: list[int] = []
    history = desk.service.holds.history
    monkeypatch.setattr(desk.service.holds, "history", lambda scope, limit: limits.append(limit) or history(
        scope, limit))
    desk.service.history_document(SCOPE)
    assert limits == [10_000]


def test_the_holds_like_a_closed_one_leave_it_out_and_state_how_each_closed(desk):
    denied = desk.held(margin=12)
    desk.clock.advance(1)
    expired = desk.held(margin=14)  # as near as the denied one, and newer: it comes first
    desk.clock.advance(1)
    target = desk.held(margin=13)
    desk.service.resolve(SCOPE, SECOND, RESOLVE, denied["decision_id"],
                         {"decision": "deny", "reason_code": "THIN", "note": "too thin"})
    desk.service.resolve(SCOPE, REVIEWER, RESOLVE, target["decision_id"], APPROVE)
    desk.clock.at = START + timedelta(days=1, seconds=1)
    assert desk.service.sweep() == 1
    similar = desk.service.similar(SCOPE, target["decision_id"])
    assert similar == [
        {**desk.service.view(desk.row(expired["decision_id"])), "distance": 0.25, "resolution": {
            "vote": None, "reason_code": None, "note": None, "actor": "clock", "created_at": _at(86_401)}},
        {**desk.service.view(desk.row(denied["decision_id"])), "distance": 0.25, "resolution": {
            "vote": "deny", "reason_code": "THIN", "note": "too thin", "actor": SECOND.actor,
            "created_at": _at(2)}}]
    assert [h["decision_id"] for h in desk.service.similar(SCOPE, target["decision_id"], limit=1)] == [
        expired["decision_id"]]
    assert [h["decision_id"] for h in desk.service.similar(SCOPE, denied["decision_id"])] == [
        target["decision_id"], expired["decision_id"]]


# ------------------------------------------------------------------------------ waiting


class _Recorded(threading.Condition):
    """The service's wake-up condition, noting each wait's timeout (and stopping a runaway wait)."""

    def __init__(self) -> None:
        super().__init__()
        self.timeouts: list[float | None] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        assert len(self.timeouts) < 20, "the wait never ends"
        return super().wait(timeout)


def test_a_wait_polls_every_quarter_second_and_answers_open_when_it_runs_out(desk):
    record = desk.held()
    desk.service.notices.closed = recorded = _Recorded()
    started = time.monotonic()
    answer = desk.service.wait_closed(SCOPE, record["decision_id"], 0.8)
    assert answer == desk.service.resolution(SCOPE, record["decision_id"]) and answer["state"] == "open"
    assert 0.8 <= time.monotonic() - started < 4
    assert recorded.timeouts[0] == 0.25 and all(0 < t <= 0.25 for t in recorded.timeouts)


def test_a_wait_that_has_run_out_reads_once(desk, monkeypatch):
    record = desk.held()
    ticks = iter([100.0, 100.0])  # the wait starts and finds no time left, exactly
    monkeypatch.setattr(holds_module, "time", SimpleNamespace(monotonic=lambda: next(ticks, 101.0)))
    reads: list[str] = []
    resolution = desk.service.resolution
    monkeypatch.setattr(desk.service, "resolution", lambda scope, decision_id: reads.append(decision_id) or resolution(
        scope, decision_id))
    assert desk.service.wait_closed(SCOPE, record["decision_id"], 0)["state"] == "open"
    assert reads == [record["decision_id"]]


def test_a_close_in_this_process_wakes_the_wait_at_once(desk):
    record = desk.held()
    closer = threading.Timer(0.1, lambda: desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"],
                                                               APPROVE))
    closer.start()
    started = time.monotonic()
    answer = desk.service.wait_closed(SCOPE, record["decision_id"], 10, poll=10)
    took = time.monotonic() - started
    closer.join()
    assert (answer["state"], answer["approved"]) == ("approved", True) and took < 2
    assert answer["resolution"] == desk.service.history_document(SCOPE)["events"][-1]


def test_the_sweeper_thread_expires_a_due_hold_until_stopped(desk):
    record = desk.held()
    desk.clock.at = START + timedelta(days=1)
    assert hold_sweeper(desk.service).interval == 1.0
    sweeper = hold_sweeper(desk.service, interval=0.02)
    assert sweeper._thread is None and sweeper.name == "hold-sweeper" and sweeper.log.name == "gate.holds"
    sweeper.start()
    thread = sweeper._thread
    try:
        sweeper.start()  # once per process: a second start keeps the running thread
        assert sweeper._thread is thread and thread is not None and thread.is_alive()
        assert (thread.name, thread.daemon) == ("gate-hold-sweeper", True)
        waited = time.monotonic() + 2
        while desk.row(record["decision_id"])["state"] == "open" and time.monotonic() < waited:
            time.sleep(0.01)
        assert desk.row(record["decision_id"])["state"] == "expired"
    finally:
        sweeper.stop()
        if thread is not None:
            thread.join(2)
    assert thread is not None and not thread.is_alive()


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class _FailsOnce:
    """A service whose first sweep fails (the ledger is away), then sweeps."""

    def __init__(self) -> None:
        self.calls = 0
        self.again = threading.Event()

    def sweep(self) -> int:
        self.calls += 1
        if self.calls == 1:
            raise RuntimeError("the ledger is away")
        self.again.set()
        return 0


def test_a_failed_sweep_is_logged_with_its_exception_and_the_next_pass_tries_again():
    logger, records = logging.getLogger("gate.holds"), _Records()
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.DEBUG)
    service = _FailsOnce()
    sweeper = hold_sweeper(service, interval=0.01)  # type: ignore[arg-type]
    try:
        sweeper.start()
        assert service.again.wait(2)
    finally:
        sweeper.stop()
        if sweeper._thread is not None:
            sweeper._thread.join(2)
        logger.removeHandler(records)
        logger.setLevel(level)
    failed = [r for r in records.records if r.getMessage() == "background worker hold-sweeper failed (1 in a row)"]
    assert len(failed) == 1 and failed[0].levelno == logging.ERROR and failed[0].name == "gate.holds"
    assert isinstance(failed[0].exc_info, tuple) and failed[0].exc_info[0] is RuntimeError
    assert sweeper.failures == 1 and sweeper.failures_in_a_row == 0 and sweeper.last_success is not None




# ------------------------------------------------------------------------------ holders (issue 52)

ANN, BOB = "person:https://id.example#ann", "person:https://id.example#bob"


def test_four_eyes_refuses_every_key_of_the_requesting_holder(desk):
    record = desk.held(holder=ANN)
    row = desk.row(record["decision_id"])
    assert row["requested_holder"] == ANN and desk.service.view(row)["requested_holder"] == ANN
    for twin in (Principal.api_key("key_twin", ANN), Principal.person("https://id.example", "ann")):
        refused = _refusal(lambda twin=twin: desk.service.resolve(SCOPE, twin, RESOLVE, record["decision_id"], APPROVE),
                           "HOLD_FOUR_EYES")
        assert refused.message == "the holder that asked for this action cannot resolve it (with any of its keys)"
    # the deciding key itself, holder stated, is refused too; another holder's key closes it
    _refusal(lambda: desk.service.resolve(SCOPE, Principal.api_key(REQUESTER, ANN), RESOLVE, record["decision_id"],
                                          APPROVE), "HOLD_FOUR_EYES")
    event = desk.service.resolve(SCOPE, Principal.api_key("key_bob", BOB), RESOLVE, record["decision_id"], APPROVE)["event"]
    assert (event["outcome"], event["requested_by"], event["requested_holder"]) == ("approved", REQUESTER, ANN)
    assert event["principal"] == {"kind": "api_key", "id": "key_bob", "holder": BOB}
    _verified(desk)


def test_a_second_key_of_a_holder_that_approved_is_no_second_vote(desk):
    desk.set_policy(policy({"default": queue(quorum="two")}))
    record = desk.held()
    first = desk.service.resolve(SCOPE, Principal.api_key("key_ann1", ANN), RESOLVE, record["decision_id"], APPROVE)
    assert json.loads(desk.row(record["decision_id"])["approvals_json"]) == [
        {"actor": "key_ann1", "holder": ANN, "event_hash": first["event"]["event_hash"]}]
    for twin in (Principal.api_key("key_ann2", ANN), Principal.person("https://id.example", "ann")):
        _refusal(lambda twin=twin: desk.service.resolve(SCOPE, twin, RESOLVE, record["decision_id"], APPROVE),
                 "HOLD_ALREADY_VOTED")
    assert "requested_holder" not in first["event"]  # the requester stated none: its key is its holder
    closed = desk.service.resolve(SCOPE, Principal.api_key("key_bob", BOB), RESOLVE, record["decision_id"], APPROVE)
    assert closed["event"]["outcome"] == "approved" and "requested_holder" not in closed["event"]
    _verified(desk)


def test_an_approval_stored_before_holders_counts_as_its_keys_own(desk):
    desk.set_policy(policy({"default": queue(quorum="two")}))
    record = desk.held()
    with desk.ledger.write() as connection:  # a vote recorded before holders: {actor, event_hash}
        connection.execute(update(holds_table).where(holds_table.c.decision_id == record["decision_id"])
                           .values(approvals_json=json.dumps([{"actor": "key_old", "event_hash": "e" * 64}])))
    row = desk.row(record["decision_id"])
    with pytest.raises(GateError) as again:
        desk.service.rules.vote_step(row, Principal.api_key("key_old"), Vote("approve", "CHECKED", None))
    assert again.value.code == "HOLD_ALREADY_VOTED"
    step, _move, _name = desk.service.rules.vote_step(row, Principal.api_key("key_new", ANN), Vote("approve", "CHECKED", None))
    assert step.outcome == "approved" and step.requested_holder is None
    assert hold_rules._approval_holder({"actor": "key_old", "holder": ANN}) == ANN
    assert hold_rules._approval_holder({"actor": "key_old", "holder": None}) == "key:key_old"
    assert hold_reads.requester_holder({"requested_by": "key_c", "requested_holder": None}) == "key:key_c"
    assert hold_reads.requester_holder({"requested_by": "key_c"}) == "key:key_c"


def test_an_approval_that_does_not_close_lists_no_earlier_votes(desk):
    desk.set_policy(policy({"default": queue(quorum="all", members=[REVIEWER.id, SECOND.id, THIRD.id])}))
    record = desk.held()
    first = desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], APPROVE)["event"]
    step, _move, name = desk.service.rules.vote_step(desk.row(record["decision_id"]), SECOND, Vote("approve", "OK", None))
    assert (step.outcome, step.votes, step.approvals_needed, name) == (None, (), None, "hold.voted")
    second = desk.service.resolve(SCOPE, SECOND, RESOLVE, record["decision_id"], APPROVE)["event"]
    assert (second["outcome"], second["votes"]) == (None, [])
    third = desk.service.resolve(SCOPE, THIRD, RESOLVE, record["decision_id"], APPROVE)["event"]
    assert (third["outcome"], third["votes"]) == ("approved", [first["event_hash"], second["event_hash"]])


def test_a_vote_is_judged_under_the_policy_it_is_given_and_by_its_own_claim(desk):
    record = desk.held()
    row = desk.row(record["decision_id"])
    vote = Vote("approve", "CHECKED", None)
    members_only = HoldPolicy.from_json(policy({"default": queue(quorum="all", members=[SECOND.id, THIRD.id])}))
    refused = _refusal(lambda: desk.service.rules.vote_step(row, REVIEWER, vote, members_only), "HOLD_NOT_A_MEMBER")
    assert refused.message == "this queue takes votes from its members only"
    assert desk.service.rules.vote_step(row, REVIEWER, vote)[0].outcome == "approved"  # the scope's policy: quorum any
    # a queue the policy no longer has: no quorum rule of its own, any reviewer's vote is judged as before
    step, move, name = desk.service.rules.vote_step({**row, "queue": "gone"}, REVIEWER, vote, members_only)
    assert (step.queue, step.outcome, step.approvals_needed, move, name) == ("gone", "approved", 1, {},
                                                                            "hold.resolved")
    desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])  # its own claim keeps nobody off
    claimed = desk.row(record["decision_id"])
    assert claimed["claimed_by"] == REVIEWER.actor
    assert desk.service.rules.vote_step(claimed, REVIEWER, vote)[0].outcome == "approved"
    _refusal(lambda: desk.service.rules.vote_step(claimed, SECOND, vote), "HOLD_CLAIMED")
