"""Issue 65, item 3: the inbox is one order over every open hold, not a page's: the most urgent
first (priority as the hold policy ranks it), then the least time left, then decision id; its
filters (assignee mine or unassigned, queue, priority, policy, search) and their refusals; and the
cheap version the workbench polls. On SQLite and PostgreSQL (`backend`), through `HoldService`
(the one home the API, the CLI and the workbench read) and through HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from gate.errors import GateError
from gate.holds.policy import PRIORITIES
from gate.services.decide import Caller
from tests.holds.service_support import REQUESTER, RESOLVE, REVIEWER, SCOPE, SECOND, Desk, build_desk
from tests.holds.support import Holds, held_request, policy, queue

QUEUES = {"fast": 3600, "mid": 7200, "slow": 4 * 3600}


@pytest.fixture
def desk(backend, database_url, tmp_path):
    built = build_desk(database_url, tmp_path)
    yield built
    built.ledger.dispose()


def _plan() -> list[tuple[str, str]]:
    """Thirty holds' (priority, queue), mixed so that deadline order and priority order disagree."""
    names = list(QUEUES)
    return [(PRIORITIES[(i * 7 + i // 4) % 4], names[(i * 5 + 1) % 3]) for i in range(30)]


def _open_mixed(desk: Desk) -> list[dict[str, Any]]:
    """Thirty-one holds: a probe (`normal` in `default`) then thirty, each routed by the policy in
    force when it was decided; the clock moves a minute between decides. Their views."""
    probe = desk.held()
    policy_id = probe["policy_id"]
    views = [desk.service.show(SCOPE, probe["decision_id"])]
    for priority, name in _plan():
        routed = policy({**{q: queue(deadline=d) for q, d in QUEUES.items()}, "default": queue(deadline=QUEUES["mid"])},
                        routes=[{"policy_id": policy_id, "rule_id": None, "queue": name, "priority": priority}])
        desk.set_policy(routed)
        desk.clock.advance(60)
        record = desk.held()
        views.append(desk.service.show(SCOPE, record["decision_id"]))
    return views


def _expected(views: list[dict[str, Any]]) -> list[str]:
    ranked = sorted(views, key=lambda v: (-PRIORITIES.index(v["priority"]), v["deadline_at"], v["decision_id"]))
    return [v["decision_id"] for v in ranked]


def _ids(page: dict[str, Any]) -> list[str]:
    return [hold["decision_id"] for hold in page["holds"]]


def test_thirty_mixed_holds_come_back_by_priority_then_time_left_across_pages(desk):
    views = _open_mixed(desk)
    expected = _expected(views)
    paged = []
    for offset in range(0, 31, 7):
        page = desk.service.list(SCOPE, limit=7, offset=offset)
        assert page["total"] == 31 and page["count"] == len(page["holds"]) == min(7, 31 - offset)
        paged += _ids(page)
    assert paged == expected
    ranks = [PRIORITIES.index(hold["priority"]) for hold in desk.service.list(SCOPE, limit=500)["holds"]]
    assert ranks == sorted(ranks, reverse=True) and ranks[0] == PRIORITIES.index("urgent") and ranks[-1] == 0
    # the deadlines disagree with the priorities: a deadline-first order would differ
    by_deadline = [v["decision_id"] for v in sorted(views, key=lambda v: (v["deadline_at"], v["decision_id"]))]
    assert [i for i in paged if i in by_deadline] != by_deadline
    # one priority, one queue: the same order, filtered
    urgent = desk.service.list(SCOPE, filters={"priority": "urgent"}, limit=500)
    assert _ids(urgent) == [i for i in expected if desk.service.show(SCOPE, i)["priority"] == "urgent"]
    assert urgent["total"] == sum(1 for p, _ in _plan() if p == "urgent") > 0
    fast = desk.service.list(SCOPE, queue="fast", filters={"priority": "low"}, limit=500)
    assert _ids(fast) == [v["decision_id"] for v in sorted(
        (v for v in views if v["queue"] == "fast" and v["priority"] == "low"),
        key=lambda v: (v["deadline_at"], v["decision_id"]))] and fast["total"] > 0


def test_the_filters_mine_unassigned_policy_and_search(desk):
    records = [desk.held(margin=12 - n / 10) for n in range(6)]
    ids = [r["decision_id"] for r in records]
    for decision_id in ids[:2]:
        desk.service.claim(SCOPE, REVIEWER, RESOLVE, decision_id)
    desk.service.claim(SCOPE, SECOND, RESOLVE, ids[2])

    def listed(**filters: str) -> list[str]:
        return _ids(desk.service.list(SCOPE, filters=filters, reader=REVIEWER.actor, limit=500))

    assert sorted(listed(assignee="mine")) == sorted(ids[:2])
    assert sorted(listed(assignee="unassigned")) == sorted(ids[3:])
    assert sorted(_ids(desk.service.list(SCOPE, filters={"assignee": "mine"}, reader=SECOND.actor))) == [ids[2]]
    desk.clock.advance(31 * 60)  # a claim lapses after 30 minutes: no one's any more
    assert listed(assignee="mine") == [] and sorted(listed(assignee="unassigned")) == sorted(ids)
    assert sorted(listed(policy=records[0]["policy_id"])) == sorted(ids) and listed(policy="other_policy") == []
    assert listed(search=ids[4]) == [ids[4]] and listed(search=f"  {ids[4]} ") == [ids[4]]
    prefix = ids[5][: len(ids[5]) - 3]
    assert ids[5] in listed(search=prefix) and all(i.startswith(prefix) for i in listed(search=prefix))
    assert listed(search="%") == [] and listed(search="_") == []  # LIKE's wildcards are text
    assert listed(search="") == listed()
    # the target object and the source record (exact, indexed; issue 65's request columns)
    body = held_request(11, subject="ticket_5521")
    body["context"]["target_object_id"] = "ord_7731"
    special = desk.decisions.decide(Caller(REQUESTER, SCOPE, "starter", 1_000_000, 1_000_000_000), body).record
    assert listed(search="ord_7731") == [special["decision_id"]] == listed(search="ticket_5521")
    assert listed(search="ord_77") == [] and sorted(listed(search="sub_1042")) == sorted(ids)
    for filters, reader, message in (
            ({"assignee": "theirs"}, REVIEWER.actor, "assignee must be one of mine, unassigned"),
            ({"assignee": "mine"}, None, "assignee must be one of mine, unassigned"),
            ({"priority": "URGENT"}, None, "priority must be one of low, normal, high, urgent"),
            ({"search": "dec\nx"}, None, "search must be one line of at most 200 characters"),
            ({"search": "d" * 201}, None, "search must be one line of at most 200 characters"),
            ({"sort": "priority"}, None, "unknown filter(s): sort")):
        with pytest.raises(GateError) as refused:
            desk.service.list(SCOPE, filters=filters, reader=reader)
        assert (refused.value.code, refused.value.message) == ("REQUEST_INVALID", message)


def test_the_version_moves_with_an_opened_hold_and_every_step_only(desk):
    empty = desk.service.version(SCOPE)
    record = desk.held()
    opened = desk.service.version(SCOPE)
    assert opened != empty and desk.service.version(SCOPE) == opened  # reading moves nothing
    desk.service.list(SCOPE)
    assert desk.service.version(SCOPE) == opened
    desk.service.claim(SCOPE, REVIEWER, RESOLVE, record["decision_id"])
    claimed = desk.service.version(SCOPE)
    assert claimed not in (opened, empty)
    desk.service.resolve(SCOPE, REVIEWER, RESOLVE, record["decision_id"], {"decision": "deny", "reason_code": "NO"})
    assert desk.service.version(SCOPE) not in (claimed, opened, empty)
    assert desk.service.version("elsewhere") == (0, 0)


@pytest.fixture
def keyed(make_app, issue_key, backend):
    app = make_app()
    caller = Holds(app.test_client(), issue_key(permissions="decide")["api_key"])
    reviewer = Holds(app.test_client(), issue_key(permissions="decide,resolve")["api_key"])
    return caller, reviewer


def test_the_api_orders_filters_and_refuses_bad_query_values(keyed):
    caller, reviewer = keyed
    ids = []
    for n in range(4):
        answer = caller.decide(held_request(12 - n / 10))
        assert answer.status_code == 200 and answer.get_json()["verdict"] == "review"
        ids.append(answer.get_json()["decision_id"])
    assert reviewer.act(ids[1], "claim").status_code == 201
    mine = reviewer.inbox("?assignee=mine").get_json()
    assert mine["total"] == 1 and mine["holds"][0]["decision_id"] == ids[1]
    assert caller.inbox("?assignee=mine").get_json()["total"] == 0  # the claim is the reviewer key's
    assert reviewer.inbox("?assignee=unassigned").get_json()["total"] == 3
    assert [h["decision_id"] for h in reviewer.inbox(f"?search={ids[2]}").get_json()["holds"]] == [ids[2]]
    assert reviewer.inbox("?priority=normal&policy=nope").get_json()["total"] == 0
    whole = [h["decision_id"] for h in reviewer.inbox("?limit=500").get_json()["holds"]]
    paged = [h["decision_id"] for offset in (0, 2) for h in reviewer.inbox(f"?limit=2&offset={offset}").get_json()["holds"]]
    assert paged == whole and sorted(whole) == sorted(ids)
    for query, field in (("?assignee=everyone", "assignee"), ("?priority=top", "priority"),
                         ("?search=" + "x" * 201, "search"), ("?limit=0", "limit")):
        refused = reviewer.inbox(query)
        assert refused.status_code == 400, (query, refused.get_json())
        body = refused.get_json()
        assert body["error"] == "REQUEST_INVALID" and field in body["message"], body
