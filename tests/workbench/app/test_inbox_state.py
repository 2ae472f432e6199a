"""The Inbox's view-model over a real ledger (issue 43, item 5): the scope's open holds by deadline
then priority with state and queue filters, one hold with its facts, rule, verification and the
closed holds like it, and every step through HoldService with the session's principal and
permissions: a reviewer resolves after confirming, a viewer is refused by the service, a link
only opens a hold, and caller text stays text."""

from __future__ import annotations

import copy
import json
from datetime import timedelta

import pytest

from gate.holds.events import verify_resolution
from gate.principals import Principal
from gate.services.decide import Caller
from tests.holds.support import policy, queue
from tests.workbench.hostile_ledger import HOSTILE_FACT, HOSTILE_VALUE
from tests.workbench.ledger_support import REQUEST, LedgerWriter, MovableClock, at
from tests.workbench.markup_support import markdown_html, parse
from workbench.app.access import Identity, Rights
from workbench.app.state.inbox import InboxState

HOSTILE = "<img src=x onerror=alert(1)>"
ROUTES = [{"policy_id": "pricing_exception", "rule_id": "review_thin_margin", "queue": "finance", "priority": "high"}]


def person(name: str, *roles: str) -> Rights:
    return Rights(Identity.password_user(name), lambda _scope: frozenset(roles))


def _held(writer: LedgerWriter, scope: str, moment, margin: float, *, rulebook_id: str | None = None,
          hostile: bool = False) -> dict:
    writer.clock.set(moment)
    body = copy.deepcopy(REQUEST)
    body["context"]["inputs"].update(discount_percent=15, margin_percent=margin)
    if rulebook_id:
        body["rulebook"]["rulebook_id"] = rulebook_id
    if hostile:
        body["context"]["inputs"][HOSTILE_FACT] = 3
        body["context"]["inputs"]["customer_note"] = HOSTILE_VALUE
    record = writer.service.decide(Caller("key_test", scope, "starter", 1000, 10_000_000), body).record
    assert record["verdict"] == "review"
    return record


@pytest.fixture(scope="module")
def inbox(tmp_path_factory):
    """acme: a hold policy (finance for the thin-margin rule at high priority, escalating to
    leads; default for the rest), eleven open holds (one with hostile facts), three closed ones with
    a hostile note; globex: one open hold; initech: one open hold in a queue that requires a note."""
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from gate.services.root import hold_service
    from workbench.app.store import WorkbenchStore

    home = tmp_path_factory.mktemp("inbox")
    writer = LedgerWriter(f"sqlite:///{home / 'gate.db'}", home / "signing-keys.json")
    holds = hold_service(writer.ledger, writer.service.signing, writer.clock)
    month = 30 * 86_400  # the longest deadline: every open hold is still open at the store's clock
    holds.set_policy("acme", Principal.operator("admin"), frozenset({"admin"}), policy(
        {"default": queue(month), "finance": queue(month, escalate_after=600, escalate_to="leads"),
         "leads": queue(month)}, ROUTES))
    closed = []
    for day, margin, vote in ((1, 11, "approve"), (2, 14, "deny"), (3, 18, "approve")):  # resolved at once
        closed.append(_held(writer, "acme", at(1, day), margin)["decision_id"])
        holds.resolve("acme", Principal.person("password-file", "old", None), frozenset({"resolve"}), closed[-1],
                      {"decision": vote, "reason_code": "EARLIER", "note": f"{HOSTILE} earlier"})
    ids = {"closed": closed, "open": []}
    for day in range(4, 12):
        ids["open"].append(_held(writer, "acme", at(2, day), 14 + (day - 4) / 2)["decision_id"])
    same_moment = at(2, 3)  # the same deadline: the finance hold (high) before the default one (normal)
    ids["high"] = _held(writer, "acme", same_moment, 12)["decision_id"]
    ids["normal"] = _held(writer, "acme", same_moment, 12, rulebook_id="pricing_other")["decision_id"]
    ids["hostile"] = _held(writer, "acme", at(2, 20), 13, hostile=True)["decision_id"]
    ids["globex"] = _held(writer, "globex", at(2, 5), 12)["decision_id"]
    holds.set_policy("initech", Principal.operator("admin"), frozenset({"admin"}),
                     policy({"default": queue(month, justification=True)}))
    ids["justified"] = _held(writer, "initech", at(2, 6), 12)["decision_id"]
    writer.close()
    # The reviewers act on 21 February, before any open hold's deadline (a step after the deadline
    # expires the hold first: gate.services.holds).
    store = WorkbenchStore(Ledger(f"sqlite:///{home / 'gate.db'}"),
                           SigningSetup.load(home / "signing-keys.json", None, "hmac"), home / "dataset",
                           clock=MovableClock(at(2, 21)))
    yield store, ids, home
    store.ledger.dispose()


def _events(store, scope="acme"):
    return store.holds.history_document(scope)["events"]


def test_open_holds_come_by_priority_then_deadline_and_filter_by_state_and_queue(inbox):
    store, ids, _ = inbox
    state = InboxState(store, person("viewer", "viewer"), scope="acme")
    assert state.queues == ["default", "finance", "leads"]
    assert state.counts["open"] == 11 and state.total == 11 and "11 open hold(s) · page 1 of 1" in state.message
    listed = [hold["decision_id"] for hold in state.rows]
    assert listed == [hold["decision_id"] for hold in store.holds.list("acme", limit=25)["holds"]]  # the API's
    keys = [(-["low", "normal", "high", "urgent"].index(hold["priority"]), hold["deadline_at"]) for hold in state.rows]
    assert keys == sorted(keys)  # issue 65: the most urgent first, then the least time left
    assert listed[0] == ids["high"] and listed.index(ids["high"]) < listed.index(ids["normal"])  # one deadline
    state.queue = "default"
    assert [hold["decision_id"] for hold in state.rows] == [ids["normal"]] and state.total == 1
    state.queue, state.state = "", "closed"
    assert {hold["decision_id"] for hold in state.rows} == set(ids["closed"])
    assert {hold["state"] for hold in state.rows} == {"approved", "denied"}
    state.state, state.page_size = "open", 5
    state.page = 3
    assert state.pages == 3 and len(state.rows) == 1 and "page 3 of 3" in state.message
    state.next_page()  # the pager stops at the last page, and at the first
    assert state.page == 3
    state.previous_page()
    assert state.page == 2 and len(state.rows) == 5 and "page 2 of 3" in state.message
    state.page_size = 25
    assert state.page == 1 and len(state.rows) == 11


def test_a_hold_opens_with_its_facts_rule_verification_and_the_closed_holds_like_it(inbox):
    store, ids, _ = inbox
    before = _events(store)
    state = InboxState(store, person("rita", "reviewer"), scope="acme")
    state.open(ids["open"][0])
    detail = state.detail
    hold = detail["hold"]
    assert hold["decision_id"] == ids["open"][0] and hold["queue"] == "finance" and hold["priority"] == "high"
    assert hold["facts"]["margin_percent"] == 14 and hold["facts"]["discount_percent"] == 15
    assert detail["rule"] == {"rule_id": "review_thin_margin", "reason_code": "MARGIN_BELOW_FLOOR",
                              "action": "route_to_finance", "verdict": "review", "policy_id": "pricing_exception",
                              "policy_version": hold["policy_version"], "condition": "margin_percent < 20"}
    assert detail["verification"]["verified"] is True and detail["verification"]["failed_checks"] == []
    assert detail["verification"] == store.decisions.verify("acme", ids["open"][0])  # the Decisions page's, the API's
    assert detail["hold_events"] == {"verified": True, "count": 0, "problems": []} and detail["resolution"] is None
    similar = detail["similar"]
    assert [h["decision_id"] for h in similar] == [h["decision_id"] for h in store.holds.similar("acme", ids["open"][0])]
    assert similar[0]["decision_id"] == ids["closed"][1] and similar[0]["distance"] == 0  # margin 14, denied
    assert similar[0]["state"] == "denied" and similar[0]["resolution"]["note"] == f"{HOSTILE} earlier"
    assert all(h["latest_outcome"] is None for h in similar)
    assert _events(store) == before  # opening read it; nothing was written
    state.open(HOSTILE)
    assert state.detail is None and state.message == f"no hold {HOSTILE!r} in scope 'acme'"
    state.open(ids["globex"])  # another scope's hold is exactly as absent as none
    assert state.detail is None and "no hold" in state.message


def test_a_reviewer_approves_after_confirming_and_the_signed_resolution_verifies(inbox):
    store, ids, _ = inbox
    rita = person("rita", "reviewer")
    state = InboxState(store, rita, scope="acme")
    target = ids["open"][1]
    state.open(target)
    state.resolve("approve", "CHECKED_WITH_OWNER", "owner confirmed by phone")
    assert state.proposal is not None and store.holds.resolution("acme", target)["state"] == "open"  # not yet sent
    text = state.confirmation_text()
    assert text.split("\n") == [
        f"Approve held action {target} in scope acme?",
        (f"Held by rule review_thin_margin of pricing_exception {state.detail['rule']['policy_version']}: "
         "MARGIN_BELOW_FLOOR (margin_percent < 20)"),
        "Quorum: approval 1 of 1: it closes the hold as approved, and the caller may go ahead with the action",
        ("Reason code CHECKED_WITH_OWNER; note: owner confirmed by phone; signed as person:password-file#rita in the "
         "scope's hold chain.")]
    state.cancel()
    assert state.proposal is None and state.message == "cancelled: nothing was sent"
    assert store.holds.resolution("acme", target)["state"] == "open"
    state.resolve("approve", "CHECKED_WITH_OWNER", "owner confirmed by phone")
    state.confirm()
    assert state.message.startswith(f"{target} is approved: hold event ")
    answer = store.holds.resolution("acme", target)
    assert answer["approved"] is True and answer["state"] == "approved"
    resolution = answer["resolution"]
    assert resolution["actor"] == "person:password-file#rita" and resolution["reason_code"] == "CHECKED_WITH_OWNER"
    assert resolution["note"] == "owner confirmed by phone" and resolution["vote"] == "approve"
    record = json.loads(store.ledger.decision("acme", target).record_json)
    check = verify_resolution(record, resolution, store.signing.trust_anchors())
    assert check.verified and check.approved
    assert state.detail["resolution"] == check.to_json() and state.detail["hold"]["state"] == "approved"
    assert state.detail["hold_events"]["verified"] is True
    assert target not in {hold["decision_id"] for hold in state.rows}  # no longer open
    # A proposal confirmed after another hold was opened is not sent to that hold.
    state.open(ids["open"][2])
    state.resolve("approve", "CHECKED", "")
    state.proposal = {**state.proposal, "decision_id": ids["open"][3]}
    state.confirm()
    assert "nothing was sent" in state.message and store.holds.resolution("acme", ids["open"][2])["state"] == "open"


def test_deny_claim_release_reassign_and_escalate_go_through_the_service(inbox):
    store, ids, _ = inbox
    rita, sam = InboxState(store, person("rita", "reviewer"), scope="acme"), \
        InboxState(store, person("sam", "reviewer"), scope="acme")
    target = ids["open"][4]
    rita.open(target)
    sam.open(target)
    rita.claim()
    assert rita.detail["hold"]["claimed_by"] == "person:password-file#rita" and " claimed: hold event " in rita.message
    sam.resolve("deny", "TOO_THIN", "")
    assert sam.message.startswith("resolve refused (HOLD_CLAIMED)")
    sam.release()
    assert sam.message.startswith("release refused (HOLD_CLAIMED)")
    rita.release()
    assert rita.detail["hold"]["claimed_by"] is None
    rita.reassign("no-such-queue")
    assert rita.message.startswith("reassign refused (HOLD_RESOLUTION_INVALID)")
    rita.escalate()  # finance escalates to leads
    assert rita.detail["hold"]["queue"] == "leads" and f"{target} escalated to queue leads" in rita.message
    rita.escalate()
    assert rita.message.startswith("escalate refused (HOLD_NOT_ESCALABLE)")
    rita.reassign("default", "belongs to the default desk")
    assert rita.detail["hold"]["queue"] == "default"
    assert [e["action"] for e in rita.detail["events"]] == ["claim", "unclaim", "escalate", "reassign"]
    assert rita.detail["events"][-1]["note"] == "belongs to the default desk"
    sam.resolve("deny", HOSTILE, "")  # a reason code is a code, never markup
    assert sam.message.startswith("resolve refused (HOLD_RESOLUTION_INVALID)")
    sam.resolve("deny", "TOO_THIN", f"{HOSTILE} margin")
    assert sam.detail["hold"]["state"] == "denied" and sam.message.startswith(f"{target} is denied: hold event")
    assert sam.detail["events"][-1]["note"] == f"{HOSTILE} margin"
    sam.claim()
    assert sam.message.startswith("claim refused (HOLD_ALREADY_RESOLVED)")


def test_a_viewer_sees_the_inbox_and_the_service_refuses_every_step(inbox):
    store, ids, _ = inbox
    before = _events(store)
    viewer = InboxState(store, person("carol", "viewer"), scope="acme")
    assert viewer.rows and not viewer.may_act()
    target = ids["open"][5]
    viewer.open(target)
    assert viewer.detail["hold"]["state"] == "open"
    viewer.resolve("approve", "CHECKED", "")
    assert viewer.proposal is None and viewer.message.startswith("approve refused (HOLD_PERMISSION_DENIED)")
    viewer.proposal = {"decision_id": target, "decision": "approve", "reason_code": "CHECKED", "note": None}
    viewer.confirm()  # a forged confirmation: the service decides with the session's permissions
    assert viewer.message.startswith("resolve refused (HOLD_PERMISSION_DENIED)")
    for step in (lambda: viewer.resolve("deny", "NO", ""), viewer.claim, viewer.release, viewer.escalate,
                 lambda: viewer.reassign("default")):
        viewer.message = ""
        step()
        assert "refused (HOLD_PERMISSION_DENIED)" in viewer.message
    author = InboxState(store, person("alice", "author", "releaser", "approver"), scope="acme")
    author.open(target)
    author.claim()
    assert author.message.startswith("claim refused (HOLD_PERMISSION_DENIED)")
    assert _events(store) == before and store.holds.resolution("acme", target)["state"] == "open"


def test_a_link_opens_the_hold_after_its_filters_and_never_resolves_it(inbox, tmp_path):
    from workbench.app.pages import Session
    from workbench.app.pages.links import hold_href

    store, ids, _ = inbox
    before = _events(store)
    session = Session(store, ["acme"], tmp_path, rights=person("rita", "reviewer"))
    target = ids["open"][6]
    assert hold_href("acme", target) == f"?scope=acme&page=inbox&hold={target}"
    session.links.param.update(scope="acme", page="inbox", hold=target, state="all", queue="finance")
    assert session.page == "inbox" and session.inbox.selected == target
    assert session.inbox.detail["hold"]["decision_id"] == target
    assert session.inbox.state == "all" and session.inbox.queue == "finance"
    assert _events(store) == before and session.inbox.proposal is None  # opened, nothing else
    session.inbox.open(ids["open"][7])
    assert session.links.hold == ids["open"][7]  # the session writes the open hold back into the link
    session.inbox.state = "closed"
    assert session.links.state == "closed"
    session.links.param.update(hold=ids["globex"], queue=HOSTILE, state=HOSTILE)  # another scope; not a queue
    assert session.inbox.detail is None and session.inbox.queue == "finance" and session.inbox.state == "closed"
    session.links.param.update(hold={"x": 1})  # the wrong type: ignored
    assert session.inbox.selected == ids["globex"]
    session.scope = ""
    assert session.inbox.selected == "" and session.inbox.rows == []


def test_caller_and_reviewer_text_renders_as_text(inbox):
    from workbench.app.pages.inbox import event_rows, similar_rows, summary_markdown, verification_markdown

    store, ids, _ = inbox
    state = InboxState(store, person("rita", "reviewer"), scope="acme")
    state.open(ids["hostile"])
    detail = state.detail
    assert detail["hold"]["facts"][HOSTILE_FACT] == 3 and detail["hold"]["facts"]["customer_note"] == HOSTILE_VALUE
    detail = copy.deepcopy(detail)
    detail["hold_events"]["problems"] = [f"hold_events[0]: {HOSTILE}"]
    for markdown in (summary_markdown(detail), verification_markdown(detail)):
        html = parse(markdown_html(markdown))
        assert not {tag for tag, _ in html.tags} & {"img", "script", "a"}
    text = "".join(parse(markdown_html(summary_markdown(detail))).text)
    assert HOSTILE_FACT in text and HOSTILE_VALUE in text
    assert HOSTILE in "".join(parse(markdown_html(verification_markdown(detail))).text)
    notes = set(similar_rows(detail)["note"])
    assert f"{HOSTILE} earlier" in notes  # table cells: Tabulator shows them as text
    assert list(event_rows(None).columns) == ["#", "at", "action", "by", "vote", "reason", "note", "queue", "outcome"]


def test_a_hold_from_the_default_outcome_names_it_not_an_empty_rule(inbox):
    # Issue 56: a record no rule matched (matched_rule_id null) read "held by rule ****".
    from workbench.app.pages.inbox import summary_markdown

    store, ids, _ = inbox
    state = InboxState(store, person("rita", "reviewer"), scope="acme")
    state.open(ids["open"][7])
    detail = copy.deepcopy(state.detail)
    named = summary_markdown(detail)
    assert "held by rule review_thin_margin of" in "".join(parse(markdown_html(named)).text)
    detail["rule"].update(rule_id=None, reason_code=None, condition=None)
    text = "".join(parse(markdown_html(summary_markdown(detail))).text)
    assert "****" not in summary_markdown(detail)
    assert "held by the default outcome (no rule matched) of" in text and "reason no reason code" in text


def test_a_step_after_the_deadline_finds_the_hold_expired_and_the_page_shows_it(inbox):
    store, ids, _ = inbox
    target = ids["open"][7]
    state = InboxState(store, person("rita", "reviewer"), scope="acme")
    state.open(target)
    assert state.detail["hold"]["state"] == "open"
    clock = store.clock
    moment = clock.now()
    clock.set(moment + timedelta(days=40))  # past every open hold's month-long deadline
    try:
        state.resolve("deny", "TOO_LATE", "")
    finally:
        clock.set(moment)
    assert state.message == "resolve refused (HOLD_ALREADY_RESOLVED): this hold is already expired"
    assert state.detail["hold"]["state"] == "expired" and state.detail["resolution"]["approved"] is False
    assert state.detail["resolution"]["verified"] is True and state.detail["events"][-1]["action"] == "expire"
    assert target not in {hold["decision_id"] for hold in state.rows}


def _click(table, row: int, column: str = "action") -> None:
    """A click on a cell of the Inbox's list, as Tabulator sends it."""
    from panel.models.tabulator import CellClickEvent

    table._process_event(CellClickEvent(model=None, column=column, row=row))


def test_the_highlighted_row_is_the_cursors_and_a_click_on_any_row_opens_it(inbox):
    # Issue 56: after Approve → Confirm the highlight stayed on the row's index, now the next
    # hold's, while the detail showed the closed one, and clicking that row did nothing. Issue 65:
    # the highlight is the cursor's (what the keys act on); after a step it rests on the hold that
    # took the closed one's place, and a click on any row, highlighted or not, opens its hold.
    from workbench.app.pages.inbox import _hold_table

    store, ids, _ = inbox
    state = InboxState(store, person("rita", "reviewer"), scope="acme")
    table = _hold_table(state)
    listed = [hold["decision_id"] for hold in state.rows]
    target = ids["open"][3]
    index = listed.index(target)
    assert index + 1 < len(listed) and table.selection == [0] and state.selected == ""
    _click(table, index)
    assert state.selected == target and state.detail["hold"]["decision_id"] == target
    assert table.selection == [index] and state.cursor == index
    state.resolve("approve", "CHECKED_WITH_OWNER", "owner confirmed")
    state.confirm()
    assert state.detail["hold"]["state"] == "approved" and target not in [h["decision_id"] for h in state.rows]
    assert table.selection == [index] and state.cursor_id() == listed[index + 1]  # the cursor's row: the next hold
    _click(table, index)  # a click on the highlighted row opens its hold
    assert state.selected == listed[index + 1] == table.value.iloc[index]["decision_id"]
    assert state.detail["hold"]["decision_id"] == listed[index + 1]
    table.selection = []  # a click that unselects: the cursor's row stays highlighted
    assert table.selection == [index] and state.selected == listed[index + 1]
    state.open(ids["high"])  # opened by its id: the cursor moves to its row
    assert table.selection == [[h["decision_id"] for h in state.rows].index(ids["high"])]
    _click(table, 2, "check")  # a click on a row's box checks it, and opens nothing
    assert state.checked == [state.rows[2]["decision_id"]] and state.selected == ids["high"]
    assert table.value.iloc[2]["check"] == "▶ ☑"


def test_an_approval_without_a_required_note_is_refused_before_its_confirmation(inbox):
    # Issue 56: the confirmation opened and the service refused only after Confirm.
    store, ids, _ = inbox
    target = ids["justified"]
    state = InboxState(store, person("rita", "reviewer"), scope="initech")
    state.open(target)
    assert state.detail["hold"]["require_justification"] is True
    before = _events(store, "initech")
    state.resolve("approve", "CHECKED_WITH_OWNER", "   ")
    assert state.proposal is None and state.confirmation_text() == ""
    assert state.message == ("approve refused (HOLD_RESOLUTION_INVALID): this queue requires a written justification "
                             "(note); write one in Note. Nothing was sent")
    assert _events(store, "initech") == before and store.holds.resolution("initech", target)["state"] == "open"
    state.resolve("approve", "CHECKED_WITH_OWNER", "owner confirmed by phone")  # with a note: confirm, then sent
    assert state.proposal is not None and "note: owner confirmed by phone" in state.confirmation_text()
    state.confirm()
    assert state.message.startswith(f"{target} is approved: hold event ")
    assert store.holds.resolution("initech", target)["resolution"]["note"] == "owner confirmed by phone"
