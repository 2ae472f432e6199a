"""The Inbox as a triage queue (issue 65, item 3), its view-model over a real ledger: the keys
(j/k move the cursor across pages, Enter opens or confirms, a approve, d deny, c claim, x check,
? lists them), the requester's own hold ("your own request: another reviewer decides", no
approval proposed), bulk deny, claim and reassign (each hold through the service, under its own
four eyes), the poll that reads the page again only when the scope's holds moved, the filters,
and the list's columns (request, reason in words, relative times)."""

from __future__ import annotations

import copy

import pytest

from gate.holds.policy import DEFAULT_REASON_CODES
from gate.principals import Principal
from gate.services.decide import Caller
from tests.holds.support import policy, queue
from tests.workbench.ledger_support import REQUEST, LedgerWriter, MovableClock, at
from workbench.app.access import Identity, Rights
from workbench.app.pages.inbox import (
    _hold_rows,
    _own_banner,
    amount_text,
    keys_markdown,
    reason_words,
    time_left,
)
from workbench.app.state.inbox import OWN_REQUEST, InboxState

ALICE_HOLDER = "person:password-file#alice"  # the holder alice's key states: her holds are her own


def person(name: str, *roles: str) -> Rights:
    return Rights(Identity.password_user(name), lambda _scope: frozenset(roles))


@pytest.fixture
def desk(tmp_path):
    """acme: seven open holds a day apart (two queues), the first three asked for by alice's key."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from gate.services.root import hold_service
    from workbench.app.store import WorkbenchStore

    writer = LedgerWriter(f"sqlite:///{tmp_path / 'gate.db'}", tmp_path / "signing-keys.json")
    holds = hold_service(writer.ledger, writer.service.signing, writer.clock)
    month = 30 * 86_400
    holds.set_policy("acme", Principal.operator("admin"), frozenset({"admin"}),
                     policy({"default": queue(month), "finance": queue(month)}))
    ids = []
    for day in range(7):
        writer.clock.set(at(2, day + 1))
        body = copy.deepcopy(REQUEST)
        body["context"]["inputs"].update(discount_percent=15, margin_percent=12 + day / 4)
        holder = ALICE_HOLDER if day < 3 else None
        caller = Caller("key_alice" if holder else "key_test", "acme", "starter", 1000, 10_000_000, holder=holder)
        record = writer.service.decide(caller, body).record
        assert record["verdict"] == "review"
        ids.append(record["decision_id"])
    clock = MovableClock(at(2, 10))
    store = WorkbenchStore(Ledger(f"sqlite:///{tmp_path / 'gate.db'}"),
                           SigningSetup.load(tmp_path / "signing-keys.json", None, "hmac"), tmp_path / "dataset",
                           clock=clock)
    yield store, ids, writer
    writer.ledger.dispose()
    store.ledger.dispose()


def _ids(state: InboxState) -> list[str]:
    return [hold["decision_id"] for hold in state.rows]


def test_the_keys_move_open_approve_deny_claim_and_check(desk):
    store, ids, _ = desk
    bob = InboxState(store, person("bob", "reviewer"), scope="acme", page_size=5)
    assert bob.cursor == 0 and bob.pages == 2 and _ids(bob) == ids[:5]  # one priority: the least time left first
    for _ in range(4):
        bob.key("j")
    assert bob.cursor == 4 and bob.page == 1
    bob.key("j")  # past the page's last row: the next page's first
    assert (bob.page, bob.cursor, bob.cursor_id()) == (2, 0, ids[5])
    bob.key("k")  # and back
    assert (bob.page, bob.cursor, bob.cursor_id()) == (1, 4, ids[4])
    bob.key("Enter")
    assert bob.selected == ids[4] and bob.detail["hold"]["decision_id"] == ids[4]
    bob.key("a")  # proposes, shows what it approves; nothing is sent yet
    assert bob.proposal["decision_id"] == ids[4] and bob.proposal["reason_code"] == bob.codes["approve"][0]
    assert store.holds.show("acme", ids[4])["events"] == []
    bob.key("Escape")
    assert bob.proposal is None and bob.message == "cancelled: nothing was sent"
    bob.key("a")
    bob.key("Enter")  # confirms
    assert store.holds.show("acme", ids[4])["state"] == "approved" and f"{ids[4]} is approved" in bob.message
    assert bob.cursor_id() == ids[5] and bob.page == 1  # the next hold moved up under the cursor
    bob.deny_code = bob.codes["deny"][1]
    bob.key("d")
    denied = store.holds.show("acme", ids[5])
    assert denied["state"] == "denied" and denied["events"][-1]["reason_code"] == bob.codes["deny"][1]
    bob.key("c")
    assert store.holds.show("acme", ids[6])["claimed_by"] == "person:password-file#bob"
    bob.key("x")
    assert bob.checked == [ids[6]]
    bob.key("x")
    assert bob.checked == []
    bob.key("?")
    assert bob.help_shown and "| `j` | next hold |" in keys_markdown(bob.help_shown)
    bob.key("?")
    before = store.holds.history_document("acme")["events"]
    for junk in ("<script>", "A", "", "Enter Enter", "q"):
        bob.key(junk)  # unknown keys do nothing
    assert store.holds.history_document("acme")["events"] == before and not bob.help_shown


def test_the_requester_sees_her_own_request_and_is_offered_no_approval(desk):
    store, ids, _ = desk
    alice = InboxState(store, person("alice", "reviewer"), scope="acme")
    alice.open(ids[0])
    hold = alice.detail["hold"]
    assert hold["requested_holder"] == ALICE_HOLDER and alice.own(hold)
    assert _own_banner(alice.detail, alice).startswith("**Your own request: another reviewer decides.**")
    alice.key("a")
    assert alice.proposal is None and alice.message == f"{OWN_REQUEST} (four eyes); nothing was sent"
    assert store.holds.show("acme", ids[0])["events"] == []
    bob = InboxState(store, person("bob", "reviewer"), scope="acme")
    bob.open(ids[0])
    assert not bob.own(bob.detail["hold"]) and _own_banner(bob.detail, bob) == ""
    alice.open(ids[3])  # another key's hold: hers to decide
    assert not alice.own(alice.detail["hold"])


def test_bulk_deny_claim_and_reassign_go_hold_by_hold_under_four_eyes(desk):
    store, ids, _ = desk
    alice = InboxState(store, person("alice", "reviewer"), scope="acme")
    alice.checked = [ids[2], ids[3], ids[4]]
    alice.bulk("deny")
    assert alice.message.startswith("bulk deny: 2 of 3 done; ")
    assert f"{ids[2]}: resolve refused (HOLD_FOUR_EYES)" in alice.message and alice.checked == []
    assert [store.holds.show("acme", i)["state"] for i in ids[2:5]] == ["open", "denied", "denied"]
    bob = InboxState(store, person("bob", "reviewer"), scope="acme")
    bob.checked = [ids[0], ids[1]]
    bob.bulk("claim")
    assert bob.message == "bulk claim: 2 of 2 done"
    assert {store.holds.show("acme", i)["claimed_by"] for i in ids[:2]} == {"person:password-file#bob"}
    alice.checked = [ids[0], ids[5]]
    alice.bulk("reassign", "finance")
    assert alice.message == "bulk reassign: 2 of 2 done"
    assert [store.holds.show("acme", i)["queue"] for i in (ids[0], ids[5], ids[6])] == ["finance", "finance", "default"]
    alice.checked = [ids[5], ids[6]]
    alice.bulk("reassign", "finance")
    assert alice.message.startswith("bulk reassign: 1 of 2 done; ")
    assert f"{ids[5]}: reassign refused (HOLD_RESOLUTION_INVALID): the hold is already in this queue" in alice.message
    alice.bulk("claim")
    assert alice.message == "bulk claim: check one or more holds first (x, or the boxes)"
    viewer = InboxState(store, person("vic", "viewer"), scope="acme")
    viewer.checked = [ids[6]]
    viewer.bulk("deny")
    assert viewer.message.startswith("bulk deny: 0 of 1 done; ") and "HOLD_PERMISSION_DENIED" in viewer.message
    assert store.holds.show("acme", ids[6])["state"] == "open"


def test_the_inbox_offers_each_queue_s_reason_codes_and_the_service_holds_them_in_bulk(desk):
    """Issue 65: the lists offered are the cursor hold's queue's (`queues.<q>.reason_codes`, else
    the defaults); a bulk deny with one queue's code is refused for a hold of a queue that does not
    list it (HOLD_RESOLUTION_INVALID, quoted), which stays open."""
    store, ids, _ = desk
    month = 30 * 86_400
    finance = {"approve": ["CHECKED_INVOICE"], "deny": ["NOT_IN_CONTRACT"]}
    admin = Principal.operator("admin")
    store.holds.set_policy("acme", admin, frozenset({"admin"}),
                           policy({"default": queue(month), "finance": {**queue(month), "reason_codes": finance}}))
    store.holds.reassign("acme", admin, frozenset({"resolve"}), ids[5], {"queue": "finance"})
    bob = InboxState(store, person("bob", "reviewer"), scope="acme")
    bob.open(ids[5])
    assert bob.codes == finance and (bob.approve_code, bob.deny_code) == ("CHECKED_INVOICE", "NOT_IN_CONTRACT")
    bob.open(ids[6])
    assert bob.codes == DEFAULT_REASON_CODES and bob.deny_code == DEFAULT_REASON_CODES["deny"][0]
    bob.checked = [ids[5], ids[6]]
    bob.bulk("deny")
    assert bob.message.startswith("bulk deny: 1 of 2 done; "), bob.message
    assert f"{ids[5]}: resolve refused (HOLD_RESOLUTION_INVALID)" in bob.message and "NOT_IN_CONTRACT" in bob.message
    assert [store.holds.show("acme", i)["state"] for i in ids[5:7]] == ["open", "denied"]
    bob.open(ids[5])
    bob.deny_cursor()
    assert store.holds.show("acme", ids[5])["events"][-1]["reason_code"] == "NOT_IN_CONTRACT"


def test_the_poll_reads_again_only_when_the_holds_moved(desk):
    store, ids, writer = desk
    bob = InboxState(store, person("bob", "reviewer"), scope="acme")
    assert bob.poll() is False and bob.total == 7
    writer.clock.set(at(2, 9))
    record = writer.decide("acme", at(2, 9), margin=12)
    assert bob.poll() is True and record["decision_id"] in _ids(bob) and bob.total == 8
    assert bob.poll() is False
    store.holds.resolve("acme", Principal.api_key("key_rev"), frozenset({"resolve"}), ids[1],
                        {"decision": "deny", "reason_code": "ELSEWHERE"})
    assert bob.poll() is True and ids[1] not in _ids(bob) and bob.total == 7
    bob.read_at -= 31  # the relative times are redrawn at least every 30 s
    assert bob.poll() is True


def test_the_filters_mine_unassigned_priority_and_search(desk):
    store, ids, _ = desk
    bob = InboxState(store, person("bob", "reviewer"), scope="acme")
    bob.open(ids[3])
    bob.claim()
    bob.assignee = "mine"
    assert _ids(bob) == [ids[3]]
    bob.assignee = "unassigned"
    assert ids[3] not in _ids(bob) and bob.total == 6
    bob.assignee, bob.priority = "", "urgent"
    assert bob.total == 0
    bob.priority, bob.search = "", ids[5][:-2]
    assert _ids(bob) == [ids[5]]
    bob.search = "x" * 300
    assert bob.rows == [] and "REQUEST_INVALID" in bob.message


def test_the_list_reads_the_request_reason_and_time_as_a_reviewer_does(desk):
    store, ids, _ = desk
    now = "2026-02-10T00:00:00.000Z"
    hold = {**store.holds.show("acme", ids[0]), "request": {
        "requested_action": "issue_refund", "target_system": "billing", "target_object_id": "ord_7731",
        "amount": 1290.5, "currency": "EUR"}}
    frame = _hold_rows([hold], now, 0, (ids[0],))
    row = frame.iloc[0].to_dict()
    assert row["check"] == "▶ ☑" and row["action"] == "issue_refund" and row["target"] == "billing ord_7731"
    assert row["amount"] == "1,290.5 EUR" and row["reason"] == "Margin below floor" and row["status"] == "open"
    assert row["assignee"] == "nobody" and row["age"] == "8 d 12 h"
    assert time_left({**hold, "deadline_at": "2026-02-10T03:05:00.000Z"}, now) == "3 h 5 m"
    assert time_left({**hold, "deadline_at": "2026-02-09T23:58:00.000Z"}, now) == "overdue 2 m"
    assert amount_text({"amount": True}) == "" and amount_text({"amount": 129}) == "129"
    assert reason_words(None) == "no reason code"
    real = _hold_rows([store.holds.show("acme", ids[1])], now).iloc[0].to_dict()  # the signed request's
    assert (real["action"], real["target"], real["amount"]) == ("apply_discount", "billing sub_1042", "")
    bare = _hold_rows([{**hold, "request": None}], now).iloc[0].to_dict()  # no request: dashes
    assert (bare["action"], bare["target"], bare["amount"]) == ("—", "—", "")


def test_the_keys_field_acts_on_each_key_once_in_order():
    from workbench.app.pages.inbox import new_keys

    assert new_keys("1:j 2:k 3:Enter", 0) == (["j", "k", "Enter"], 3)
    assert new_keys("2:k 3:Enter 4:a", 3) == (["a"], 4)  # a merged change: the keys before it are kept
    assert new_keys("6:d 5:c", 4) == (["c", "d"], 6)
    assert new_keys("x:j ９:k 7 :d 99999999999999:a <b>:c", 6) == ([""], 7)  # malformed items are skipped
    assert new_keys("", 7) == ([], 7)
