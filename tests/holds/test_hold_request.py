"""The request on every hold (issue 65 item 1, docs/holds.md "The request on a hold"): what the
caller asked, read from the stored canonical request bound to the record's `input_hash`, in the
API's hold answer; a stored request changed after the decide is not shown as signed."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, update

from gate.holds import request as hold_request
from gate.ledger import Ledger
from gate.ledger.tables import decisions, holds
from tests.holds.support import Holds

ROOT = Path(__file__).resolve().parents[2]
REQUESTER = "service:support-agent"


def refund_held() -> dict[str, Any]:
    """`gate/data/requests/refund-window.json` asked back 40 days after purchase: past the 30-day
    window, inside the 45-day grace, so rule `review_grace_period` holds it."""
    body = json.loads((ROOT / "gate" / "data" / "requests" / "refund-window.json").read_text())
    body = copy.deepcopy(body)
    body["adapter"]["input"]["request_date"] = "2026-06-10"
    return body


SIGNED = {"question": refund_held()["question"], "requested_action": "issue_refund", "target_system": "billing",
          "target_object_id": "ord_7731", "amount": 129, "currency": None, "source_record_id": "ticket_5521",
          "workflow": "support_refunds", "requester": REQUESTER, "signed": True}


@pytest.fixture
def keys(issue_key):
    return {"caller": issue_key(permissions="decide", holder=REQUESTER)["api_key"],
            "reviewer": issue_key(permissions="decide,resolve")["api_key"]}


@pytest.fixture
def gate(make_app):
    return make_app()


def held(gate: Any, keys: dict[str, str], body: dict[str, Any] | None = None) -> dict[str, Any]:
    answer = Holds(gate.test_client(), keys["caller"]).decide(body or refund_held())
    assert answer.status_code == 200, answer.get_json()
    record = answer.get_json()
    assert record["verdict"] == "review", record
    return record


def test_the_hold_answer_carries_the_signed_request_with_the_requesters_holder(gate, keys, database_url):
    record = held(gate, keys)
    reviewer = Holds(gate.test_client(), keys["reviewer"])
    shown = reviewer.show(record["decision_id"]).get_json()["hold"]
    assert shown["request"] == SIGNED
    assert reviewer.inbox().get_json()["holds"][0]["request"] == SIGNED
    resolution = reviewer.resolution(record["decision_id"]).get_json()
    assert resolution["hold"]["request"] == SIGNED
    # the row keeps the summary at open time and its two searchable members
    ledger = Ledger(database_url)
    try:
        with ledger.engine.connect() as connection:
            row = connection.execute(select(holds.c.request_json, holds.c.target_object_id, holds.c.source_record_id)
                                     .where(holds.c.decision_id == record["decision_id"])).one()
    finally:
        ledger.dispose()
    assert json.loads(row[0]) == SIGNED and tuple(row[1:]) == ("ord_7731", "ticket_5521")


def _tamper(database_url: str, decision_id: str, change: Any) -> None:
    ledger = Ledger(database_url)
    try:
        with ledger.engine.begin() as connection:
            text = connection.execute(select(decisions.c.request_json)
                                      .where(decisions.c.decision_id == decision_id)).scalar_one()
            connection.execute(update(decisions).where(decisions.c.decision_id == decision_id)
                               .values(request_json=json.dumps(change(json.loads(text)))))
    finally:
        ledger.dispose()


def _changed_target(request: dict[str, Any]) -> dict[str, Any]:
    request["context"]["target_object_id"] = "ord_0001"
    request["context"]["amount"] = 12_900
    return request


def test_a_stored_request_changed_after_the_decide_is_shown_as_nothing_signed(gate, keys, database_url):
    record = held(gate, keys)
    _tamper(database_url, record["decision_id"], _changed_target)
    reviewer = Holds(gate.test_client(), keys["reviewer"])
    shown = reviewer.show(record["decision_id"]).get_json()["hold"]["request"]
    assert shown == hold_request.unsigned(REQUESTER) and shown["signed"] is False
    assert "ord_0001" not in json.dumps(reviewer.inbox().get_json())  # the changed request is never shown
    # the row's copy (made at open time from the signed request) is not shown either: it is side data
    assert reviewer.inbox().get_json()["holds"][0]["request"]["target_object_id"] is None


def test_a_hold_opened_before_the_request_columns_reads_its_request_from_its_decision(gate, keys, database_url):
    record = held(gate, keys)
    ledger = Ledger(database_url)
    try:
        with ledger.engine.begin() as connection:  # as migration 0021 leaves a hold opened before it
            connection.execute(update(holds).where(holds.c.decision_id == record["decision_id"])
                               .values(request_json=None, target_object_id=None, source_record_id=None))
    finally:
        ledger.dispose()
    assert Holds(gate.test_client(), keys["reviewer"]).show(record["decision_id"]).get_json()["hold"]["request"] == SIGNED


def test_the_summary_reads_only_what_the_context_states_as_text_or_a_number():
    request = {"question": "Refund?", "context": {"requested_action": "issue_refund", "target_object_id": 7731,
                                                  "amount": True, "currency": ["EUR"], "workflow": None}}
    assert hold_request.summarize(request, "h") == {
        "question": "Refund?", "requested_action": "issue_refund", "target_system": None, "target_object_id": "7731",
        "amount": None, "currency": None, "source_record_id": None, "workflow": None, "requester": "h", "signed": True}
    assert hold_request.summarize({"question": 3, "context": "x"}, "h")["question"] is None
    text = json.dumps(request)
    assert hold_request.bound(text, "0" * 64) is None and hold_request.bound("{", "0" * 64) is None
    assert hold_request.bound(None, "a") is None and hold_request.bound(text) is None
    long_id = {**hold_request.unsigned("h"), "target_object_id": "x" * 201}
    assert hold_request.searchable(long_id, "target_object_id") is None


def test_a_show_names_exactly_the_request_s_members_and_disclose_masks_the_rest():
    """The policy schema's request names are HoldRequest's (but `signed`); `disclose` states what
    `show` names, masks the rest, and reads nothing of a request not read as signed."""
    from gate import bodies
    from gate.disclosure import MASK, disclose

    item = bodies.schema("hold-policy")["properties"]["queues"]["additionalProperties"]["properties"]["show"]["items"]
    assert tuple(item["anyOf"][0]["enum"]) == (*hold_request.MEMBERS, "requester")
    assert tuple(hold_request.HoldRequest.__annotations__) == (*hold_request.MEMBERS, "requester", "signed")
    shown = disclose(["requested_action", "facts.b"], SIGNED, {"b": 1, "a": 2})
    assert dict(shown.request)["requested_action"] == "issue_refund" and dict(shown.request)["amount"] == MASK
    assert "currency" not in dict(shown.request)  # no value: nothing to state or mask
    assert shown.facts == (("a", MASK), ("b", 1)) and shown.signed
    assert shown.masked == len(shown.request) - 1 + 1
    unsigned = disclose(["question"], hold_request.unsigned("h"), {"b": 1})
    assert unsigned.request == () and not unsigned.signed and unsigned.facts == (("b", MASK),)
    assert disclose([], None, {}).request == ()
