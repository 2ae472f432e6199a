"""Every keyed route that names a stored item, derived from the routes' declarations: another scope's
item is a 404 (the same body as an id that does not exist), the owner's answers, nothing is
written for the foreign caller. A new keyed route with a path parameter fails here until it has
a case below (so no route can skip the check)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from api.openapi import endpoints
from gate.ledger.tables import decisions, lifecycle_receipts
from tests.api.test_lifecycle import KIND_CASES

pytestmark = pytest.mark.usefixtures("backend")

SCENARIO = {"scenarios": [{"scenario_id": "s1", "label": "smaller discount",
                           "context_patch": {"inputs": {"discount_percent": 5}}}]}


def _body(method: str, path: str, record: dict):
    """A body the owner's request is accepted with, so that only the scope decides the answer."""
    if method == "get":
        return None
    tail = path.rsplit("/", 1)[-1]
    if tail in KIND_CASES:
        return KIND_CASES[tail][0](record)
    return {"verify": {}, "replay": {}, "diff": {}, "counterfactuals": SCENARIO, "claim": None, "unclaim": None,
            "escalate": None, "reassign": {"queue": "leads"},
            "resolve": {"decision": "approve", "reason_code": "CHECKED"}}[tail]


def _is_hold_route(path: str) -> bool:
    return path.startswith("/api/holds/") or path.endswith("/resolution")


def _held_record(client, issue_key, path: str) -> tuple[dict, str, str]:
    """A held decision of scope_a (made by another key: four eyes), a reviewer of scope_a, one of
    scope_b, and a policy with somewhere to escalate and reassign to."""
    from tests.holds.support import held_request, policy, queue

    owner = issue_key("scope_a", permissions="decide,resolve")["api_key"]
    stranger = issue_key("scope_b", permissions="decide,resolve")["api_key"]
    admin, decider = issue_key("scope_a", permissions="admin")["api_key"], issue_key("scope_a")["api_key"]
    client.put("/api/holds/policy", json=policy({"default": queue(escalate_after=60, escalate_to="leads"),
                                                 "leads": queue()}), headers={"x-api-key": admin})
    record = client.post("/api/decide", json=held_request(), headers={"x-api-key": decider}).json
    if path.endswith("/unclaim"):
        client.post(f"/api/holds/{record['decision_id']}/claim", headers={"x-api-key": owner})
    return record, owner, stranger


def _url(path: str, record: dict) -> str:
    chain = record["audit_chain"]["chain_id"]
    url = path.replace("{decision_id}", record["decision_id"]).replace("{chain_id}", chain)
    if url.endswith("/inclusion"):
        url += f"?decision_id={record['decision_id']}&tree_size=1"
    elif url.endswith("/consistency"):
        url += "?first=1&second=1"
    return url


ROUTES = [(e.method, e.path) for e in endpoints() if e.auth and ("{decision_id}" in e.path or "{chain_id}" in e.path)]


def test_the_matrix_covers_every_keyed_item_route():
    assert len(ROUTES) >= 16  # 13 decision routes and 3 chain routes when this test was written
    assert {path.rsplit("/", 1)[-1] for _, path in ROUTES} >= {"replay", "diff", "counterfactuals", "packet",
                                                              "execution", "outcome", "crm-sync", "inclusion"}


def _count(app) -> tuple[int, int]:
    with app.extensions["gate"].ledger.read() as connection:
        return tuple(connection.execute(select(func.count()).select_from(t)).scalar_one()
                     for t in (decisions, lifecycle_receipts))


@pytest.mark.parametrize("method,path", ROUTES, ids=[f"{m.upper()} {p}" for m, p in ROUTES])
def test_another_scopes_item_is_404_and_the_owners_is_served(app, client, issue_key, sample_request, method, path):
    if _is_hold_route(path):
        record, owner, stranger = _held_record(client, issue_key, path)
    else:
        owner, stranger = issue_key("scope_a")["api_key"], issue_key("scope_b")["api_key"]
        record = client.post("/api/decide", json=sample_request, headers={"x-api-key": owner}).json
    # the stranger has a chain of its own, so a chain route cannot answer 404 for "no chain at all"
    client.post("/api/decide", json=sample_request, headers={"x-api-key": stranger})
    url, body = _url(path, record), _body(method, path, record)
    before = _count(app)
    foreign = client.open(url, method=method.upper(), json=body, headers={"x-api-key": stranger})
    assert foreign.status_code == 404, (url, foreign.status_code, foreign.json)
    assert foreign.json["c"] == "unclear" and foreign.json["error"].endswith("_NOT_FOUND"), foreign.json
    assert _count(app) == before  # nothing written for the foreign caller
    missing = dict(record, decision_id="dec_" + "0" * 32,
                   audit_chain=dict(record["audit_chain"], chain_id="chain_" + "0" * 32))
    absent = client.open(_url(path, missing), method=method.upper(), json=body, headers={"x-api-key": stranger})
    assert (absent.status_code, absent.json["error"]) == (404, foreign.json["error"])  # indistinguishable
    own = client.open(url, method=method.upper(), json=body, headers={"x-api-key": owner})
    assert own.status_code in (200, 201), (url, own.status_code, own.json)


REPORTS = [e.path for e in endpoints() if e.auth and "{policy_id}" in e.path]


@pytest.mark.parametrize("path", REPORTS)
def test_a_policy_report_counts_only_the_callers_scope(client, issue_key, sample_request, path):
    """A policy id is a name, not an item of one scope: every scope may ask for a report on it,
    and each gets its own sample (benchmarks add only opted-in cohorts, never raw records)."""
    if _is_hold_route(path):
        record, owner, stranger = _held_record(client, issue_key, path)
    else:
        owner, stranger = issue_key("scope_a")["api_key"], issue_key("scope_b")["api_key"]
        if path.endswith("/holds"):  # the hold report considers held decisions: a thin margin holds this one
            sample_request = {**sample_request, "context": {**sample_request["context"], "inputs": {
                **sample_request["context"]["inputs"], "margin_percent": 12}}}
        record = client.post("/api/decide", json=sample_request, headers={"x-api-key": owner}).json
    url = path.replace("{policy_id}", record["policy_id"])
    mine = client.get(url, headers={"x-api-key": owner})
    theirs = client.get(url, headers={"x-api-key": stranger})
    assert mine.status_code == theirs.status_code == 200
    assert mine.json["sample"]["decisions_considered"] == 1
    assert theirs.json["sample"]["decisions_considered"] == 0
    assert record["decision_id"] not in str(theirs.json)
