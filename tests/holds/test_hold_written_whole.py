"""`HoldService.write_whole` (issue 53): a held decision's hold written in one transaction when it
closes, for a writer of history (the demo seed) whose decides keep their holds in a
`DeferredOpener`. The hold it leaves is the one a live review leaves (row, signed chained events,
announcements, listeners), and a refused step writes nothing at all, not even the row."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from gate.errors import GateError
from gate.holds.events import EVENT_MEMBERS
from gate.holds.history import verify_hold_history
from gate.principals import Principal
from gate.services.decide import Caller
from gate.services.holds import DeferredOpener
from gate.services.root import decision_services
from tests.holds.service_support import REQUESTER, RESOLVE, REVIEWER, SCOPE, SECOND, build_desk
from tests.holds.support import held_request, policy, queue

APPROVE = {"decision": "approve", "reason_code": "CHECKED"}
BOUND = ("seq", "previous_event_hash", "decision_id", "record_hash", "votes")  # what differs between two holds


@pytest.fixture
def desk(database_url, tmp_path):
    built = build_desk(database_url, tmp_path)
    yield built
    built.ledger.dispose()


def _deferred(desk: Any) -> tuple[dict[str, Any], DeferredOpener]:
    """A held decide through a decision service whose opener defers: its record and opener."""
    core = decision_services(desk.ledger, desk.signing, clock=desk.clock, releases=False, deferred_holds=True)
    decisions, opener = core.decisions, core.opener
    assert isinstance(opener, DeferredOpener)
    caller = Caller(REQUESTER, SCOPE, "starter", 1_000_000, 1_000_000_000)
    record = dict(decisions.decide(caller, held_request(11)).record)
    assert record["verdict"] == "review" and list(opener.deferred) == [record["decision_id"]]
    return record, opener


def _stated(event: dict[str, Any]) -> dict[str, Any]:
    return {name: event[name] for name in EVENT_MEMBERS if name not in BOUND}


def _unbound(view: dict[str, Any]) -> dict[str, Any]:
    return {**view, "decision_id": None, "record_hash": None, "facts": None,
            "approvals": [(a["actor"], a["holder"]) for a in view["approvals"]]}


def test_a_hold_written_whole_is_the_hold_a_live_review_leaves(desk):
    desk.set_policy(policy({"default": queue(quorum="two")}))
    live = desk.held()
    record, opener = _deferred(desk)
    assert desk.service.holds.hold(SCOPE, record["decision_id"]) is None  # nothing open for a sweeper
    closed: list[str] = []
    desk.service.on_closed(closed.append)
    desk.clock.advance(90)
    for principal in (REVIEWER, SECOND):
        desk.service.resolve(SCOPE, principal, RESOLVE, live["decision_id"], APPROVE)
    written = desk.service.write_whole(opener.deferred.pop(record["decision_id"]),
                                       [(REVIEWER, RESOLVE, APPROVE), (SECOND, RESOLVE, APPROVE)])
    events = desk.service.holds.events_of(SCOPE, live["decision_id"])
    assert [_stated(e) for e in written] == [_stated(e) for e in events]
    assert written[1]["votes"] == [written[0]["event_hash"]] and written[0]["previous_event_hash"] == events[1]["event_hash"]
    assert written == desk.service.holds.events_of(SCOPE, record["decision_id"])
    assert _unbound(desk.service.view(desk.row(record["decision_id"]))) == _unbound(desk.service.view(desk.row(live["decision_id"])))
    assert closed == [live["decision_id"], record["decision_id"]]
    types = [(e["type"].rsplit(".", 2)[-2:], e["subject"]) for e in desk.announced()]
    assert types[-3:] == [(["hold", "opened"], record["decision_id"]), (["hold", "voted"], record["decision_id"]),
                          (["hold", "resolved"], record["decision_id"])]
    check = verify_hold_history(desk.service.history_document(SCOPE), desk.anchors)
    assert check.problems == () and check.verified and check.closed["approved"] == 2


@pytest.mark.parametrize("case", ["four_eyes", "permission", "bad_vote", "past_deadline", "not_due", "policy"])
def test_a_refused_hold_writes_nothing_not_even_its_row(desk, case):
    record, opener = _deferred(desk)
    row = opener.deferred[record["decision_id"]]
    requester = Principal.api_key(REQUESTER)
    calls = {
        "four_eyes": ("HOLD_FOUR_EYES", lambda: desk.service.write_whole(row, [(requester, RESOLVE, APPROVE)])),
        "permission": ("HOLD_PERMISSION_DENIED",
                       lambda: desk.service.write_whole(row, [(REVIEWER, frozenset({"read"}), APPROVE)])),
        "bad_vote": ("HOLD_RESOLUTION_INVALID",
                     lambda: desk.service.write_whole(row, [(REVIEWER, RESOLVE, {"decision": "maybe"})])),
        "past_deadline": ("HOLD_ALREADY_RESOLVED",
                          lambda: (desk.clock.advance(86_400), desk.service.write_whole(row, [(REVIEWER, RESOLVE,
                                                                                              APPROVE)]))),
        "not_due": ("HOLD_NOT_DUE", lambda: desk.service.write_whole(row, expire=True)),
        "policy": ("HOLD_ALREADY_RESOLVED", lambda: desk.service.write_whole(
            row, [(REVIEWER, RESOLVE, {"decision": "deny", "reason_code": "NO"}), (SECOND, RESOLVE, APPROVE)])),
    }
    code, call = calls[case]
    announced = desk.announced()
    with pytest.raises(GateError) as refused:
        call()
    assert refused.value.code == code, refused.value.message
    assert desk.service.holds.hold(SCOPE, record["decision_id"]) is None
    assert desk.service.holds.history(SCOPE, 10) == [] and desk.announced() == announced


def test_a_hold_nobody_reviews_is_written_expired_by_the_clock_once(desk):
    record, opener = _deferred(desk)
    row = opener.deferred.pop(record["decision_id"])
    desk.clock.at = desk.clock.at + timedelta(days=1)  # the default queue's deadline
    (event,) = desk.service.write_whole(row, expire=True)
    assert (event["action"], event["outcome"], event["actor"], event["deadline_at"]) == (
        "expire", "expired", Principal.clock().actor, row["deadline_at"])
    assert desk.row(record["decision_id"])["state"] == "expired"
    assert desk.service.resolution(SCOPE, record["decision_id"])["resolution"] == event
    with pytest.raises(ValueError, match="written already"):
        desk.service.write_whole(row)
