"""Issue 43, item 5: with 10,000 open holds the Inbox's data load answers in under 0.5 s.

The holds are rows written directly into the ledger's `holds` table (10,000 open ones in two
queues with spread deadlines and priorities, and 3,000 closed ones of the same policy and rule,
the candidates of "holds like this one"), beside one hold opened by a real decide. What is timed
is what feeds the page: `WorkbenchStore.hold_page` (the paged query, the counts per state and
the queues) on the first page, on the last page and filtered by queue, and the view-model's
refresh; the open hold's detail (fresh verification, hold events, the five nearest of the newest
2,000 closed holds) is timed and printed beside it, under a looser bound. Over SQLite, and
PostgreSQL where it answers. Measured on the 2-core development host (medians): first page 2 ms
(SQLite) and 15 ms (PostgreSQL), last page 23 and 25 ms, a queue 13 and 9 ms, the open hold's
detail 54 and 47 ms.
"""

from __future__ import annotations

import json
import random
import statistics
import time
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import insert, text

from gate.clock import iso_ms
from gate.ledger.tables import holds as holds_table
from tests.workbench.ledger_support import LedgerWriter, at
from workbench.app.access import Identity, Rights
from workbench.app.state.inbox import InboxState

OPEN_HOLDS, CLOSED_HOLDS = 10_000, 3_000
BOUND_S = 0.5  # the figure, asserted on the median of five loads and on the first
PRIORITIES = ("low", "normal", "high", "urgent")


def _rows(count: int, state: str, seed: int) -> list[dict]:
    rng = random.Random(seed)
    start = datetime(2026, 3, 1, tzinfo=UTC)
    rows = []
    for index in range(count):
        opened = start + timedelta(seconds=rng.randrange(30 * 86_400))
        priority = rng.choice(PRIORITIES)
        facts = {"margin_percent": rng.randrange(5, 20), "discount_percent": rng.randrange(5, 26),
                 "account_tier": "annual", "owner_approved": rng.random() < 0.5}
        rows.append({
            "decision_id": f"dec_{state[:2]}{seed}{index:020d}", "scope": "acme", "record_hash": "0" * 64,
            "policy_id": "pricing_exception", "policy_version": "2026-11-01", "rule_id": "review_thin_margin",
            "reason_code": "MARGIN_BELOW_FLOOR", "requested_by": "key_load", "queue": rng.choice(("default", "finance")),
            "priority": priority, "priority_rank": PRIORITIES.index(priority), "opened_at": iso_ms(opened),
            "deadline_at": iso_ms(opened + timedelta(hours=rng.randrange(1, 72))), "escalate_at": None,
            "approvals_needed": 1, "require_justification": 0, "four_eyes": 1, "state": state, "claimed_by": None,
            "claimed_at": None, "approvals_json": "[]", "resolved_at": iso_ms(opened) if state != "open" else None,
            "resolved_by": "person:load#r" if state != "open" else None, "resolution_seq": None, "row_version": 0,
            "facts_json": json.dumps(facts, sort_keys=True, separators=(",", ":"))})
    return rows


@pytest.fixture
def loaded(tmp_path, backend, database_url):
    from gate.keys.config import SigningSetup
    from gate.ledger import Ledger
    from workbench.app.store import WorkbenchStore

    writer = LedgerWriter(database_url, tmp_path / "signing-keys.json")
    record = writer.decide("acme", at(4, 1), discount=15, margin=12)
    assert record["verdict"] == "review"
    with writer.ledger.write() as connection:
        for state, count, seed in (("open", OPEN_HOLDS, 1), ("approved", CLOSED_HOLDS // 2, 2),
                                   ("denied", CLOSED_HOLDS - CLOSED_HOLDS // 2, 3)):
            connection.execute(insert(holds_table), _rows(count, state, seed))
    if backend == "postgresql":  # the statistics autovacuum keeps of a table this size (issue 65: with the
        # bulk insert's stale ones the planner took 1 row for 10,000 and sorted them on disk)
        with writer.ledger.write() as connection:
            connection.execute(text("ANALYZE holds"))
    writer.close()
    store = WorkbenchStore(Ledger(database_url), SigningSetup.load(tmp_path / "signing-keys.json", None, "hmac"),
                           tmp_path / "dataset")
    yield store, record["decision_id"], backend
    store.ledger.dispose()


def _timed(call, runs: int = 5) -> tuple[float, float, object]:
    """(first, median of `runs` more) seconds of `call()`, and its last answer."""
    started = time.perf_counter()
    answer = call()
    first = time.perf_counter() - started
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - started)
    return first, statistics.median(times), answer


def test_ten_thousand_open_holds_load_in_under_half_a_second(loaded, record_property):
    store, real, backend = loaded
    figures = {}
    first, median, page = _timed(lambda: store.desk.hold_page("acme", limit=25))
    assert page["total"] == OPEN_HOLDS + 1 and len(page["holds"]) == 25
    assert page["counts"] == {"open": OPEN_HOLDS + 1, "approved": CLOSED_HOLDS // 2,
                              "denied": CLOSED_HOLDS - CLOSED_HOLDS // 2}
    keys = [(-PRIORITIES.index(hold["priority"]), hold["deadline_at"]) for hold in page["holds"]]
    assert keys == sorted(keys)  # issue 65: the most urgent first, then the least time left
    figures["first page"] = (first, median)
    figures["last page"] = _timed(lambda: store.desk.hold_page("acme", offset=OPEN_HOLDS - 24, limit=25))[:2]
    figures["queue finance"] = _timed(lambda: store.desk.hold_page("acme", queue="finance", limit=25))[:2]
    state = InboxState(store, Rights(Identity.password_user("rita"), lambda _scope: frozenset({"reviewer"})),
                       scope="acme")
    figures["view-model refresh"] = _timed(state.refresh)[:2]
    assert state.total == OPEN_HOLDS + 1 and len(state.rows) == 25
    detail_first, detail_median, detail = _timed(lambda: store.desk.hold_detail("acme", real), runs=3)
    assert detail is not None and detail["verification"]["verified"] is True and len(detail["similar"]) == 5
    lines = [f"{name}: first {a * 1000:.0f} ms, median {b * 1000:.0f} ms" for name, (a, b) in figures.items()]
    lines.append(f"open hold detail: first {detail_first * 1000:.0f} ms, median {detail_median * 1000:.0f} ms")
    print(f"\ninbox load over {backend}, {OPEN_HOLDS:,} open + {CLOSED_HOLDS:,} closed holds:\n  " + "\n  ".join(lines))
    record_property("inbox_load_ms", {name: round(b * 1000, 1) for name, (_a, b) in figures.items()})
    for name, (first_s, median_s) in figures.items():
        assert first_s < BOUND_S and median_s < BOUND_S, (name, first_s, median_s)
    assert detail_median < 2 * BOUND_S  # a generous bound: it verifies the record afresh (about 60 ms here)
