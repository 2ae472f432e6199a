"""Group commit (gate/ledger/groupcommit.py) over the real app, on both ledgers.

- a burst of concurrent decides: every one answered 200, every created record stored, chain
  positions distinct and gap-free, an idempotency key shared by several requests stored once;
- a batch gathered while the writer is busy commits together: its members' positions follow
  arrival order, and a duplicate key inside the batch is the winner's replay;
- a driver fault injected in the middle of a batch answers 503 to every member and stores none
  of them (no half batch); the next decide continues the chain where it was;
- a batch without refusals runs without savepoints and reads its chain head and confidence
  counts once; a refusal sends the batch back through member-by-member savepoints;
- on SQLite such a batch writes its chain head and its key's usage counter once, with their
  last values; a monthly cap reached inside the batch refuses exactly the members past it, and a
  fault in those last writes answers 503 to every member and stores none of them;
- a batch's announcements (`decision.created`, `hold.opened`) move the scope's event sequence
  once and insert their rows in one INSERT, with the numbers, ids and bytes event by event gives;
  a rerun member by member announces each stored decision once, and a fault in that INSERT
  answers 503 to every member and stores none of them, nor moves the sequence.
"""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import event, func, select

from gate.events.cloudevent import TYPE_PREFIX, cloud_event, event_id
from gate.ledger.tables import (
    chain_heads,
    chain_links,
    decisions,
    event_outbox,
    event_sequences,
    usage_counters,
)
from gate.protocol.canonical import canonical_text
from tests.holds.support import approved_request, held_request

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def app(make_app):
    app = make_app({"GATE_LEDGER_GROUP_COMMIT": "true"})
    assert app.extensions["gate"].ledger.group is not None
    return app


def _post(app, key: str, body: dict, idempotency_key: str | None = None):
    headers = {"x-api-key": key, **({"x-idempotency-key": idempotency_key} if idempotency_key else {})}
    return app.test_client().post("/api/decide", json=body, headers=headers)


def _counts(engine) -> dict[str, int]:
    with engine.connect() as connection:
        return {table.name: connection.execute(select(func.count()).select_from(table)).scalar()
                for table in (decisions, chain_links)}


def _positions(answers) -> list[int]:
    return sorted(a.json["audit_chain"]["chain_position"] for a in answers
                  if a.headers["x-idempotency-status"] == "created")


def test_a_burst_is_stored_whole_gap_free_and_idempotent(app, api_key, sample_request):
    plain = [None] * 40
    shared = ["burst-key-1"] * 6 + ["burst-key-2"] * 6
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(lambda k: _post(app, api_key, sample_request, k), plain + shared))
    assert [a.status_code for a in answers] == [200] * len(answers)
    created = [a for a in answers if a.headers["x-idempotency-status"] == "created"]
    assert len(created) == 42  # 40 plain + one per shared key
    assert _positions(answers) == list(range(1, 43))
    for key in ("burst-key-1", "burst-key-2"):
        ids = {a.json["decision_id"] for a, k in zip(answers, plain + shared, strict=True) if k == key}
        assert len(ids) == 1
    engine = app.extensions["gate"].ledger.engine
    assert _counts(engine) == {"decisions": 42, "chain_links": 42}
    with engine.connect() as connection:
        assert connection.execute(select(chain_heads.c.size)).scalar() == 42
        assert connection.execute(select(usage_counters.c.used)).scalar() == 42
        stored = set(connection.execute(select(decisions.c.decision_id)).scalars())
    assert stored == {a.json["decision_id"] for a in created}


def _gathered(app, calls):
    """Run `calls` concurrently while the writer is busy, so that they form one batch."""
    writer = app.extensions["gate"].ledger.group
    with writer.busy:
        threads = [threading.Thread(target=call) for call in calls]
        for thread in threads:
            thread.start()
        # The idle writer takes the first arrival and waits for `busy` with it in hand, so the
        # others wait in its queue. On a busy host the writer thread can take a while to be
        # scheduled after the first arrival (all callers queued, none taken yet): wait until
        # the queue has held exactly the others for a moment.
        deadline, since = time.monotonic() + 30, None
        while time.monotonic() < deadline:
            if writer.waiting() != len(calls) - 1:
                since = None
            elif since is None:
                since = time.monotonic()
            elif time.monotonic() - since >= 0.2:
                break
            time.sleep(0.01)
        assert writer.waiting() == len(calls) - 1
    for thread in threads:
        thread.join(30)


def _gathered_watched(app, calls, listener) -> None:
    """`calls` gathered into one batch while `listener` sees the writer's statements."""
    engine = app.extensions["gate"].ledger.engine
    event.listen(engine, "before_cursor_execute", listener)
    try:
        _gathered(app, calls)
    finally:
        event.remove(engine, "before_cursor_execute", listener)


def _gathered_posts_watched(app, listener, key: str, body: dict, count: int) -> list:
    """`count` decides gathered into one batch while `listener` sees the writer's statements."""
    answers: list = []
    _gathered_watched(app, [lambda: answers.append(_post(app, key, body)) for _ in range(count)], listener)
    return answers


def test_one_batch_commits_together_and_a_duplicate_in_it_is_the_winners_replay(app, api_key, sample_request):
    assert _post(app, api_key, sample_request).status_code == 200  # the rulebook is bound, the chain exists
    answers: list = []
    keys = [None, "dup", None, "dup", None, None]
    _gathered(app, [lambda k=k: answers.append(_post(app, api_key, sample_request, k)) for k in keys])
    assert [a.status_code for a in answers] == [200] * 6
    assert _positions(answers) == [2, 3, 4, 5, 6]
    dup = [a for a in answers if a.json.get("idempotency_key") == "dup"]
    assert len({a.json["decision_id"] for a in dup}) == 1
    assert sorted(a.headers["x-idempotency-status"] for a in dup) == ["created", "replayed"]
    assert _counts(app.extensions["gate"].ledger.engine) == {"decisions": 6, "chain_links": 6}


def test_a_fault_mid_batch_fails_every_member_and_stores_none(app, api_key, sample_request):
    first = _post(app, api_key, sample_request)
    assert first.status_code == 200
    ledger = app.extensions["gate"].ledger
    before = _counts(ledger.engine)
    seen = {"inserts": 0, "links": 0}
    # The batch's one INSERT of its six decision rows, after its six links were written in the
    # same transaction: it fails like a driver error.
    fail_at = 1

    def fault(connection, cursor, statement, parameters, context, executemany):
        if statement.startswith("INSERT INTO chain_links"):
            seen["links"] += len(parameters) // 6  # rows in its VALUES list
        if "INSERT INTO decisions" in statement:
            seen["inserts"] += 1
            if seen["inserts"] == fail_at:
                raise ledger.engine.dialect.dbapi.OperationalError("injected fault")

    answers = _gathered_posts_watched(app, fault, api_key, sample_request, 6)
    assert seen["inserts"] == fail_at
    assert seen["links"] == 6  # rows written before the fault, in its transaction
    assert [a.status_code for a in answers] == [503] * 6
    assert {a.json["error"] for a in answers} == {"LEDGER_UNAVAILABLE"}
    assert all("verdict" not in a.json for a in answers)
    assert _counts(ledger.engine) == before  # not one member of the batch is stored
    again = _post(app, api_key, sample_request)
    assert again.status_code == 200
    assert again.json["audit_chain"]["chain_position"] == first.json["audit_chain"]["chain_position"] + 1
    chain = app.test_client().get(f"/api/decision/chains/{first.json['audit_chain']['chain_id']}",
                                  headers={"x-api-key": api_key})
    assert chain.json["verification"]["valid"] is True


def _statements_during(app, calls) -> list[str]:
    """The SQL the writer ran while `calls` were gathered into one batch."""
    seen: list[str] = []

    def record(connection, cursor, statement, parameters, context, executemany):
        seen.append(statement)

    _gathered_watched(app, calls, record)
    return seen


def _head_reads(statements: list[str]) -> int:
    return sum(1 for sql in statements if sql.lstrip().upper().startswith("SELECT") and "FROM chain_heads" in sql)


def test_a_batch_without_refusals_runs_without_savepoints_and_reads_shared_rows_once(app, api_key, sample_request):
    assert _post(app, api_key, sample_request).status_code == 200  # the chain exists
    answers: list = []
    statements = _statements_during(app, [lambda: answers.append(_post(app, api_key, sample_request))
                                          for _ in range(6)])
    assert [a.status_code for a in answers] == [200] * 6
    assert _positions(answers) == [2, 3, 4, 5, 6, 7]
    assert not [sql for sql in statements if "SAVEPOINT" in sql]
    assert _head_reads(statements) == 1  # the first member locks it; the others carry it
    # one bucket: its confidence counts are read once for the batch
    assert sum(1 for sql in statements if "FROM confidence_counters" in sql) == 1
    chain = app.test_client().get(f"/api/decision/chains/{answers[0].json['audit_chain']['chain_id']}",
                                  headers={"x-api-key": api_key})
    assert chain.json["verification"]["valid"] is True
    with app.extensions["gate"].ledger.engine.connect() as connection:
        head = connection.execute(select(chain_heads.c.size, chain_heads.c.head_link_hash)).one()
    newest = max(answers, key=lambda a: a.json["audit_chain"]["chain_position"])
    assert tuple(head) == (7, newest.json["audit_chain"]["link_hash"])


def test_a_refusal_in_a_batch_reruns_it_member_by_member(app, api_key, sample_request):
    assert _post(app, api_key, sample_request).status_code == 200
    answers: list = []
    keys = [None, None, "taken", "taken", None]
    statements = _statements_during(app, [lambda k=k: answers.append(_post(app, api_key, sample_request, k))
                                          for k in keys])
    assert [a.status_code for a in answers] == [200] * 5
    assert _positions(answers) == [2, 3, 4, 5]
    # the first run stopped at the second "taken" and rolled back; the second ran each in a savepoint
    assert sum(1 for sql in statements if sql.startswith("SAVEPOINT")) == 5
    assert sum(1 for sql in statements if sql.startswith("ROLLBACK TO SAVEPOINT")) == 1
    assert _counts(app.extensions["gate"].ledger.engine) == {"decisions": 5, "chain_links": 5}


def test_a_batch_writes_its_head_and_usage_once_with_their_last_values(app, api_key, sample_request):
    first = _post(app, api_key, sample_request)  # the chain and the counter exist
    remaining = int(first.headers["X-Usage-Monthly-Remaining"])  # the cap less 1
    answers: list = []
    statements = _statements_during(app, [lambda: answers.append(_post(app, api_key, sample_request))
                                          for _ in range(5)])
    assert [a.status_code for a in answers] == [200] * 5
    assert sum(1 for sql in statements if sql.startswith("UPDATE chain_heads")) == 1
    assert sum(1 for sql in statements if "usage_counters" in sql) == 2  # the first member's upsert, the last count
    # the batch's links, tree nodes and decisions: one INSERT each, of all five members' rows
    # (and the first member's upsert of the counter), on both ledgers
    assert sorted(sql.split(" (")[0] for sql in statements if sql.startswith("INSERT INTO")) == [
        "INSERT INTO chain_links", "INSERT INTO decisions", "INSERT INTO merkle_nodes", "INSERT INTO usage_counters"]
    # each member was answered its own count (2 … 6 records this month)
    assert sorted(remaining + 1 - int(a.headers["X-Usage-Monthly-Remaining"]) for a in answers) == [2, 3, 4, 5, 6]
    with app.extensions["gate"].ledger.engine.connect() as connection:
        head = connection.execute(select(chain_heads.c.size, chain_heads.c.head_link_hash)).one()
        used = connection.execute(select(usage_counters.c.used)).scalar()
    newest = max(answers, key=lambda a: a.json["audit_chain"]["chain_position"])
    assert tuple(head) == (6, newest.json["audit_chain"]["link_hash"])
    assert used == 6
    again = _post(app, api_key, sample_request)  # the next batch reads the head the flush wrote
    assert again.json["audit_chain"]["chain_position"] == 7
    chain = app.test_client().get(f"/api/decision/chains/{again.json['audit_chain']['chain_id']}",
                                  headers={"x-api-key": api_key})
    assert chain.json["verification"]["valid"] is True


def test_a_monthly_cap_reached_inside_a_batch_refuses_exactly_the_members_past_it(app, issue_key, sample_request):
    key = issue_key(scope="tenant_cap", monthly_cap=4)["api_key"]
    assert _post(app, key, sample_request).status_code == 200  # used: 1
    answers: list = []
    _gathered(app, [lambda: answers.append(_post(app, key, sample_request)) for _ in range(5)])
    assert sorted(a.status_code for a in answers) == [200, 200, 200, 429, 429]
    assert {a.json["error"] for a in answers if a.status_code == 429} == {"SVC_API_MONTHLY_CAP_EXCEEDED"}
    with app.extensions["gate"].ledger.engine.connect() as connection:
        used = connection.execute(select(usage_counters.c.used)).scalar()
        stored = connection.execute(select(func.count()).select_from(decisions)).scalar()
    assert (used, stored) == (4, 4)


@pytest.mark.parametrize("table", ["chain_heads", "usage_counters"])
def test_a_fault_in_the_batchs_last_writes_fails_every_member_and_stores_none(app, api_key, sample_request, table):
    first = _post(app, api_key, sample_request)
    assert first.status_code == 200
    ledger = app.extensions["gate"].ledger
    before = _counts(ledger.engine)
    seen = {"faults": 0}

    def fault(connection, cursor, statement, parameters, context, executemany):
        # The batch's one write of the row, after every member ran: it fails as a driver error.
        if statement.startswith(f"UPDATE {table}"):
            seen["faults"] += 1
            raise ledger.engine.dialect.dbapi.OperationalError("injected fault")

    answers = _gathered_posts_watched(app, fault, api_key, sample_request, 5)
    assert seen["faults"] == 1
    assert [a.status_code for a in answers] == [503] * 5
    assert {a.json["error"] for a in answers} == {"LEDGER_UNAVAILABLE"}
    assert _counts(ledger.engine) == before
    with ledger.engine.connect() as connection:
        assert connection.execute(select(usage_counters.c.used)).scalar() == 1
        assert connection.execute(select(chain_heads.c.size)).scalar() == 1
    again = _post(app, api_key, sample_request)
    assert again.status_code == 200
    assert again.json["audit_chain"]["chain_position"] == 2


def test_a_key_claimed_meanwhile_is_the_winners_replay_when_found_by_the_batchs_last_writes(
        app, api_key, sample_request, monkeypatch):
    # The second request missed the winner in the idempotency fast path (as in a race); on
    # SQLite its row is refused by the batch's one INSERT of decisions, after its member ran.
    first = _post(app, api_key, sample_request, "raced")
    assert first.headers["x-idempotency-status"] == "created"
    pipeline = app.extensions["gate"].service.pipeline
    monkeypatch.setattr(pipeline, "replay_known", lambda claim: None)
    again = _post(app, api_key, sample_request, "raced")
    assert again.status_code == 200
    assert again.headers["x-idempotency-status"] == "replayed"
    assert again.json["decision_id"] == first.json["decision_id"]
    assert _counts(app.extensions["gate"].ledger.engine) == {"decisions": 1, "chain_links": 1}
    with app.extensions["gate"].ledger.engine.connect() as connection:
        assert connection.execute(select(chain_heads.c.size)).scalar() == 1
        assert connection.execute(select(usage_counters.c.used)).scalar() == 1


def _mirrored(app, issue_key) -> str:
    """A deciding key of a scope opted in to `decision.created` (read afresh by every decide)."""
    admin = issue_key(permissions="decide,admin")["api_key"]
    answer = app.test_client().put("/api/events/settings", json={"decision_created": True,
                                                                "anomaly_every_seconds": None},
                                   headers={"x-api-key": admin})
    assert answer.status_code == 200
    app.extensions["gate"].service.pipeline.mirror.ttl = 0
    return admin


def _outbox(app) -> list[dict]:
    with app.extensions["gate"].ledger.engine.connect() as connection:
        rows = connection.execute(select(event_outbox).order_by(event_outbox.c.seq)).mappings().all()
        last = connection.execute(select(event_sequences.c.last_seq)).scalar()
    assert last == (rows[-1]["seq"] if rows else None)  # the sequence is where its last event is
    return [dict(row) for row in rows]


def test_a_batchs_announcements_move_the_sequence_once_and_insert_once_as_event_by_event(app, issue_key):
    # With the scope opted in, every decide announces `decision.created` and a held one `hold.opened`
    # too, all in the writer's batch: one upsert of the scope's sequence (the first event), its last
    # number written once, the events' rows in one INSERT; numbers, ids and bytes as one by one.
    key = _mirrored(app, issue_key)
    assert _post(app, key, approved_request()).status_code == 200
    before = _outbox(app)
    answers: list = []
    bodies = [approved_request(), held_request(), approved_request(), held_request(), approved_request()]
    statements = _statements_during(app, [lambda b=b: answers.append(_post(app, key, b)) for b in bodies])
    assert [a.status_code for a in answers] == [200] * 5
    assert sum(1 for sql in statements if sql.startswith("INSERT INTO event_sequences")) == 1
    assert sum(1 for sql in statements if sql.startswith("UPDATE event_sequences")) == 1
    assert sum(1 for sql in statements if sql.startswith("INSERT INTO event_outbox")) == 1
    rows = _outbox(app)[len(before):]
    assert [row["seq"] for row in rows] == list(range(before[-1]["seq"] + 1, before[-1]["seq"] + 8))
    by_position = sorted((a.json for a in answers), key=lambda r: r["audit_chain"]["chain_position"])
    expected = []
    for record in by_position:  # in chain order: a held decision's hold opening, then the decision
        if record["verdict"] == "review":
            expected.append(("dev.decision-gate.hold.opened", record["decision_id"]))
        expected.append(("dev.decision-gate.decision.created", record["decision_id"]))
    assert [(row["event_type"], json.loads(row["event_json"])["subject"]) for row in rows] == expected
    for row in rows:
        event = json.loads(row["event_json"])
        again = cloud_event("tenant_a", row["seq"], event["type"].removeprefix(TYPE_PREFIX), event["subject"],
                            event["time"], event["data"])
        assert row["event_json"] == canonical_text(again) and row["event_id"] == event_id("tenant_a", row["seq"])
        if event["type"].endswith("decision.created"):
            assert event["data"]["record"] == next(r for r in by_position if r["decision_id"] == event["subject"])
    again = _post(app, key, approved_request())  # the next batch counts on from the number written
    assert again.status_code == 200
    assert _outbox(app)[-1]["seq"] == rows[-1]["seq"] + 1


def test_a_refused_batch_rerun_member_by_member_announces_each_stored_decision_once(app, issue_key):
    key = _mirrored(app, issue_key)
    assert _post(app, key, approved_request()).status_code == 200
    answers: list = []
    keys = [None, "taken", "taken", None]
    _gathered(app, [lambda k=k: answers.append(_post(app, key, held_request(), k)) for k in keys])
    assert [a.status_code for a in answers] == [200] * 4
    created = {a.json["decision_id"] for a in answers if a.headers["x-idempotency-status"] == "created"}
    assert len(created) == 3
    rows = _outbox(app)
    assert [row["seq"] for row in rows] == list(range(1, len(rows) + 1))  # gap-free
    announced = [json.loads(row["event_json"])["subject"] for row in rows
                 if row["event_type"].endswith("decision.created")]
    assert sorted(announced[1:]) == sorted(created)  # once each, none for the replay


def test_a_fault_in_the_batchs_event_insert_fails_every_member_and_stores_none(app, issue_key):
    key = _mirrored(app, issue_key)
    assert _post(app, key, approved_request()).status_code == 200
    ledger = app.extensions["gate"].ledger
    before, events = _counts(ledger.engine), _outbox(app)

    def fault(connection, cursor, statement, parameters, context, executemany):
        if statement.startswith("INSERT INTO event_outbox"):
            raise ledger.engine.dialect.dbapi.OperationalError("injected fault")

    answers = _gathered_posts_watched(app, fault, key, held_request(), 4)
    assert [a.status_code for a in answers] == [503] * 4
    assert _counts(ledger.engine) == before and _outbox(app) == events  # the sequence did not move either
    again = _post(app, key, approved_request())
    assert again.status_code == 200
    assert _outbox(app)[-1]["seq"] == events[-1]["seq"] + 1


def test_on_postgresql_a_batchs_deferred_writes_are_sent_in_one_round_trip(app, issue_key, backend):
    # psycopg's pipeline mode (`gate.ledger.prepared.pipelined`): the links, decisions, heads,
    # counters and the announcements' rows and sequence are queued and their answers read once.
    if backend != "postgresql":
        pytest.skip("pipeline mode is psycopg's; SQLite runs the same statements one at a time")
    key = _mirrored(app, issue_key)
    assert _post(app, key, approved_request()).status_code == 200
    seen: list[tuple[str, int]] = []

    def record(connection, cursor, statement, parameters, context, executemany):
        seen.append((statement.split("(")[0].strip(), int(connection.connection.driver_connection.info.pipeline_status)))

    answers = _gathered_posts_watched(app, record, key, held_request(), 4)
    assert [a.status_code for a in answers] == [200] * 4
    flushed = {sql: status for sql, status in seen if sql.startswith((
        "INSERT INTO chain_links", "INSERT INTO decisions", "UPDATE chain_heads", "UPDATE usage_counters",
        "INSERT INTO event_outbox", "UPDATE event_sequences"))}
    assert len(flushed) == 6 and set(flushed.values()) == {1}, seen  # 1: PipelineStatus.ON
    # what needs its answer at once is sent alone: the head's lock, the sequence's first number
    assert {status for sql, status in seen if sql.startswith(("SELECT", "INSERT INTO event_sequences"))} == {0}
