"""The audit chain over HTTP: appends in the decide transaction, the chain view, tampering."""

from __future__ import annotations

import json
import threading
from unittest import mock

import pytest
from sqlalchemy import text, update

from gate.chain.merkle import verify_checkpoint, verify_inclusion
from gate.ledger.tables import chain_links, decisions, merkle_nodes

pytestmark = pytest.mark.usefixtures("backend")


def decide_many(client, key, body, n):
    return [client.post("/api/decide", json=body, headers={"x-api-key": key}).json for _ in range(n)]


def test_every_decision_is_linked_contiguously(client, api_key, sample_request):
    records = decide_many(client, api_key, sample_request, 6)
    chain_ids = {r["audit_chain"]["chain_id"] for r in records}
    assert len(chain_ids) == 1
    assert [r["audit_chain"]["chain_position"] for r in records] == [1, 2, 3, 4, 5, 6]
    assert records[0]["audit_chain"]["merkle_root"] == records[0]["audit_chain"]["leaf_hash"]
    view = client.get(f"/api/decision/chains/{chain_ids.pop()}?limit=4", headers={"x-api-key": api_key}).json
    assert view["chain_size"] == 6 and len(view["links"]) == 4
    assert [link["chain_position"] for link in view["links"]] == [3, 4, 5, 6]
    assert view["head_link_hash"] == records[-1]["audit_chain"]["link_hash"]
    assert view["merkle_root"] == records[-1]["audit_chain"]["merkle_root"]
    assert view["verification"]["valid"] is True, view["verification"]
    assert view["window"]["previous_link_hash"] == records[1]["audit_chain"]["link_hash"]


def test_checkpoint_is_signed_and_stable(client, api_key, sample_request):
    records = decide_many(client, api_key, sample_request, 3)
    url = f"/api/decision/chains/{records[0]['audit_chain']['chain_id']}"
    first = client.get(url, headers={"x-api-key": api_key}).json
    again = client.get(url, headers={"x-api-key": api_key}).json
    assert first["checkpoint"] == again["checkpoint"]
    checkpoint = first["checkpoint"]
    assert checkpoint["tree_size"] == 3 and checkpoint["root_hash"] == first["tree"]["root_hash"]
    registry = client.get("/api/decision/receipt-keys").json
    assert verify_checkpoint(checkpoint, registry["keys"][0]["public_key"])


def test_scopes_have_separate_chains(client, issue_key, sample_request):
    a, b = issue_key("scope_a")["api_key"], issue_key("scope_b")["api_key"]
    ra = decide_many(client, a, sample_request, 2)
    rb = decide_many(client, b, sample_request, 1)
    assert ra[0]["audit_chain"]["chain_id"] != rb[0]["audit_chain"]["chain_id"]
    assert rb[0]["audit_chain"]["chain_position"] == 1
    url = f"/api/decision/chains/{ra[0]['audit_chain']['chain_id']}"
    hidden = client.get(url, headers={"x-api-key": b})
    assert hidden.status_code == 404 and hidden.json["error"] == "CHAIN_NOT_FOUND"
    assert client.get(url).json["error"] == "SVC_CHAIN_UNAUTHORIZED"
    for bad in ("0", "1001", "x"):
        assert client.get(url + f"?limit={bad}", headers={"x-api-key": a}).status_code == 400


def _tamper(app, statement):
    with app.extensions["gate"].ledger.engine.begin() as connection:
        connection.execute(statement)


@pytest.mark.parametrize("what", ["record", "link", "node"])
def test_editing_stored_rows_is_reported(app, client, api_key, sample_request, what):
    records = decide_many(client, api_key, sample_request, 4)
    target = records[2]
    if what == "record":
        edited = dict(target, verdict="no")
        _tamper(app, update(decisions).where(decisions.c.decision_id == target["decision_id"])
                .values(record_json=json.dumps(edited)))
        expected = "decision_hashes"
    elif what == "link":
        row_link = dict(target["audit_chain"])
        link = json.loads(app.extensions["gate"].ledger.chain_link_for(target["decision_id"])["link_json"])
        link["policy_version"] = "forged"
        _tamper(app, update(chain_links).where(chain_links.c.decision_id == target["decision_id"])
                .values(link_json=json.dumps(link)))
        assert row_link["chain_position"] == 3
        expected = "links"
    else:
        _tamper(app, update(merkle_nodes).where(merkle_nodes.c.level == 0).where(merkle_nodes.c.idx == 2)
                .values(hash="0" * 64))
        expected = "tree_leaves"
    view = client.get(f"/api/decision/chains/{target['audit_chain']['chain_id']}", headers={"x-api-key": api_key}).json
    assert view["verification"]["valid"] is False
    assert view["verification"]["checks"][expected] is False
    hosted = client.get(f"/api/decision/{target['decision_id']}/verify", headers={"x-api-key": api_key}).json
    if what != "node":
        assert hosted["verified"] is False
        assert {"record": "record_hash", "link": "chain_link"}[what] in hosted["failed_checks"]


def test_inclusion_proof_from_stored_nodes(app, client, api_key, sample_request):
    records = decide_many(client, api_key, sample_request, 7)
    audit = app.extensions["gate"].audit
    for index, record in enumerate(records):
        proof = audit.record_proof(record["decision_id"], chain_limit=3)
        assert proof.record_position == index + 1
        assert [link["chain_position"] for link in proof.links][-1] == index + 1
        assert verify_inclusion(index, proof.checkpoint["tree_size"], record["audit_chain"]["leaf_hash"],
                                proof.proof, proof.checkpoint["root_hash"])


def test_failed_decide_leaves_the_chain_untouched(app, client, api_key, sample_request):
    first = decide_many(client, api_key, sample_request, 1)[0]
    ledger = app.extensions["gate"].ledger
    with ledger.engine.begin() as connection:
        if ledger.dialect == "sqlite":
            connection.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON decisions BEGIN SELECT RAISE(FAIL, 'x'); END"))
        else:
            connection.execute(text("CREATE OR REPLACE FUNCTION refuse() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'x'; END $$ LANGUAGE plpgsql"))
            connection.execute(text("CREATE TRIGGER refuse BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION refuse()"))
    assert client.post("/api/decide", json=sample_request, headers={"x-api-key": api_key}).status_code == 503
    with ledger.engine.begin() as connection:
        connection.execute(text("DROP TRIGGER refuse" + ("" if ledger.dialect == "sqlite" else " ON decisions")))
    second = decide_many(client, api_key, sample_request, 1)[0]
    assert second["audit_chain"]["chain_position"] == 2
    assert second["audit_chain"]["merkle_root"] != first["audit_chain"]["merkle_root"]
    view = client.get(f"/api/decision/chains/{first['audit_chain']['chain_id']}", headers={"x-api-key": api_key}).json
    assert view["verification"]["valid"] is True


def test_inclusion_and_consistency_proofs_over_http(client, api_key, sample_request, issue_key):
    from gate.chain.merkle import verify_consistency

    records = decide_many(client, api_key, sample_request, 7)
    chain_id = records[0]["audit_chain"]["chain_id"]
    headers = {"x-api-key": api_key}
    key = client.get("/api/decision/receipt-keys").json["keys"][0]["public_key"]
    for index, record in enumerate(records):
        for size in range(index + 1, 8):
            body = client.get(f"/api/decision/chains/{chain_id}/inclusion?decision_id={record['decision_id']}"
                              f"&tree_size={size}", headers=headers).json
            assert body["tree_size"] == size and body["leaf_index"] == index
            assert verify_inclusion(index, size, record["audit_chain"]["leaf_hash"], body["proof"], body["root_hash"])
            assert body["checkpoint"]["root_hash"] == body["root_hash"] and verify_checkpoint(body["checkpoint"], key)
    roots = {}
    for first in range(1, 8):
        for second in range(first, 8):
            body = client.get(f"/api/decision/chains/{chain_id}/consistency?first={first}&second={second}",
                              headers=headers).json
            assert verify_consistency(first, second, body["first_root"], body["second_root"], body["proof"])
            roots.setdefault(second, body["second_root"])
            assert roots[second] == body["second_root"]
    head = client.get(f"/api/decision/chains/{chain_id}", headers=headers).json
    assert roots[7] == head["tree"]["root_hash"]
    for query in ("inclusion", f"inclusion?decision_id={records[0]['decision_id']}&tree_size=99",
                  "consistency", "consistency?first=0", "consistency?first=5&second=3", "consistency?first=x"):
        response = client.get(f"/api/decision/chains/{chain_id}/{query}", headers=headers)
        assert response.status_code == 400, query
    stranger = issue_key("scope_b")["api_key"]
    hidden = client.get(f"/api/decision/chains/{chain_id}/consistency?first=1", headers={"x-api-key": stranger})
    assert hidden.status_code == 404
    other = client.get(f"/api/decision/chains/{chain_id}/inclusion?decision_id=dec_nope", headers=headers)
    assert other.status_code == 404


@pytest.mark.parametrize("count", [1, 399, 400, 401, 2_500])
def test_stored_nodes_are_read_for_any_number_of_refs(app, count):
    """One OR condition per ref in one statement: SQLite refused 1,000 of them ("Expression tree
    is too large"), so a chain view of 1,000 links answered 503. Refs are read in bounded parts."""
    from sqlalchemy import insert

    ledger = app.extensions["gate"].ledger
    rows = [{"chain_id": "chain_big", "level": i % 3, "idx": i, "hash": f"{i:064x}"} for i in range(count)]
    with ledger.engine.begin() as connection:
        connection.execute(insert(merkle_nodes), rows)
    refs = [(i % 3, i) for i in range(count)] + [(5, 0)]  # and one that is not stored
    assert ledger.merkle_nodes("chain_big", refs) == {(i % 3, i): f"{i:064x}" for i in range(count)}


@pytest.mark.parametrize("backend", ["sqlite"])  # counts SQLite's virtual machine steps
def test_a_node_read_costs_the_same_on_a_long_chain(app, backend):
    """Each level's nodes are found through the primary key (chain_id, level, idx). Reading the
    levels with one `OR` made SQLite search on chain_id alone and read every node of the chain:
    13.7 ms a read at 100,000 links, paid by every cadence checkpoint, so decide's CPU grew with
    the chain. The work of a read is counted here in SQLite's virtual machine steps."""
    from sqlalchemy import event, insert

    ledger = app.extensions["gate"].ledger
    assert ledger.dialect == "sqlite"
    rows = [{"chain_id": chain, "level": i % 4, "idx": i // 4, "hash": f"{i:064x}"}
            for chain, count in (("chain_short", 40), ("chain_long", 40_000)) for i in range(count)]
    with ledger.engine.begin() as connection:
        connection.execute(insert(merkle_nodes), rows)
    steps: list[int] = []
    event.listen(ledger.engine, "connect",
                 lambda connection, _record: connection.set_progress_handler(lambda: steps.append(1), 10))
    ledger.engine.dispose()  # every connection from here on counts
    refs = [(0, 1), (0, 2), (1, 3), (2, 0), (3, 5), (7, 0)]  # four levels, and one not stored

    def work(chain: str) -> int:
        steps.clear()
        found = ledger.merkle_nodes(chain, refs)
        assert found == {(level, idx): f"{4 * idx + level:064x}" for level, idx in refs[:-1]}
        return len(steps)

    short, long = work("chain_short"), work("chain_long")
    assert short > 0  # the counter counts
    assert long <= short + 10, (short, long)  # a B-tree twice as deep, not a thousand times the rows


@pytest.mark.parametrize("route", ["checkpoint", "view"])
def test_a_decide_committed_between_the_head_and_its_links_is_no_contradiction(app, api_key, sample_request, route):
    """The checkpoint and chain routes read the chain head, then its newest link and nodes. A decide that
    commits between those reads (forced here: it runs, to its commit, just before the newest
    link is read) must not read as a head contradicting its links: a 409 `CHAIN_INTEGRITY_FAILED` for a
    chain that is whole, and a checkpoint the cadence then skips. Found under concurrent load."""
    client = app.test_client()
    records = decide_many(client, api_key, sample_request, 3)
    chain_id = records[0]["audit_chain"]["chain_id"]
    ledger = app.extensions["gate"].ledger
    read_last_link = type(ledger).chain_last_link
    raced: list[int] = []

    def a_decide_then_the_last_link(self, wanted):
        if not raced:  # once, from another thread, committed before the newest link is read
            answer: dict = {}
            caller = threading.Thread(target=lambda: answer.update(status=app.test_client().post(
                "/api/decide", json=sample_request, headers={"x-api-key": api_key}).status_code))
            caller.start()
            caller.join(30)
            raced.append(answer["status"])
        return read_last_link(self, wanted)

    url = f"/api/decision/chains/{chain_id}" + ("/checkpoint" if route == "checkpoint" else "")
    with mock.patch.object(type(ledger), "chain_last_link", a_decide_then_the_last_link):
        answer = client.get(url, headers={"x-api-key": api_key})
    assert raced == [200]
    assert answer.status_code == 200, answer.json
    assert answer.json["checkpoint"]["tree_size"] == 3  # the head as it was when the read began
    if route == "view":
        assert answer.json["verification"]["valid"] is True, answer.json["verification"]
        assert answer.json["chain_size"] == 3 and len(answer.json["links"]) == 3
    after = client.get(url, headers={"x-api-key": api_key})
    assert after.status_code == 200 and after.json["checkpoint"]["tree_size"] == 4
