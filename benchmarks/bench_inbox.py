"""The Inbox as a triage queue at 10,000 open holds (issue 65, "Done when": first rows < 1 s, a
keyboard action < 200 ms), against a baseline of 100 open holds measured in the same run.

A ledger (SQLite by default; `--database-url` for PostgreSQL, which must be empty) holds one real
held decide (made `urgent`, so it is the first row) and `--holds` open holds written straight
into the `holds` table (spread deadlines, priorities low, normal and high, two queues), plus 3,000
closed ones. What is timed is what the served page runs for each step, server side, through the
view-model and the list's frame (`InboxState`, `workbench.app.pages.inbox._hold_rows`):

* first rows: a new `InboxState` (the version read, the page query in the service's order over
  every hold, the counts, the queues, the reason codes) and the 25 rows' frame;
* the poll with nothing new (`InboxState.poll`: one version read);
* keys: `j` (the cursor down), `c` (claim: a signed hold event, the page read again), `d` (deny:
  a signed event that closes the hold, the page read again), `k`, and `Enter` (open the real
  hold: its detail, with a fresh verification of the record); then, on the page's next tick,
  the closed holds like it (the slowest read, shown after the rest; not bounded).

Each figure is the median of `--rounds` rounds (a fresh hold under the cursor each round); the
1-minute load average is printed before and after (2 shared cores: it says how much a figure
means). The browser's drawing is not in these figures (tests/browser/test_inbox_triage.py shows
the page end to end).

Run: .venv/bin/python benchmarks/bench_inbox.py [--holds 10000] [--baseline 100] [--rounds 7]
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert, update  # noqa: E402

from gate.clock import FixedClock, iso_ms  # noqa: E402
from gate.keys.config import SigningSetup  # noqa: E402
from gate.keys.signing import generate_keyring  # noqa: E402
from gate.ledger import Ledger  # noqa: E402
from gate.ledger.tables import holds as holds_table  # noqa: E402
from gate.services.decide import Caller  # noqa: E402
from gate.services.root import decision_services  # noqa: E402
from workbench.app.access import Identity, Rights  # noqa: E402
from workbench.app.pages.inbox import _hold_rows  # noqa: E402
from workbench.app.state.inbox import InboxState  # noqa: E402
from workbench.app.store import WorkbenchStore  # noqa: E402

SCOPE = "acme"
NOW = datetime(2026, 3, 1, tzinfo=UTC)
PRIORITIES = ("low", "normal", "high")
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())


def _rows(count: int, state: str, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows = []
    for index in range(count):
        opened = NOW - timedelta(seconds=rng.randrange(86_400))
        priority = rng.choice(PRIORITIES)
        rows.append({
            "decision_id": f"dec_{state[:2]}{seed}{index:020d}", "scope": SCOPE, "record_hash": "0" * 64,
            "policy_id": "pricing_exception", "policy_version": "2026-11-01", "rule_id": "review_thin_margin",
            "reason_code": "MARGIN_BELOW_FLOOR", "requested_by": "key_load", "queue": rng.choice(("default", "finance")),
            "priority": priority, "priority_rank": ("low", "normal", "high", "urgent").index(priority),
            "opened_at": iso_ms(opened), "deadline_at": iso_ms(opened + timedelta(days=rng.randrange(2, 30))),
            "escalate_at": None, "approvals_needed": 1, "require_justification": 0, "four_eyes": 1, "state": state,
            "claimed_by": None, "claimed_at": None, "approvals_json": "[]",
            "resolved_at": iso_ms(opened) if state != "open" else None,
            "resolved_by": "person:load#r" if state != "open" else None, "resolution_seq": None, "row_version": 0,
            "facts_json": json.dumps({"margin_percent": rng.randrange(5, 20), "discount_percent": rng.randrange(5, 26)}),
            "request_json": None, "target_object_id": f"ord_{index}", "source_record_id": f"ticket_{index}",
            "requested_holder": None})
    return rows


def build(url: str, home: Path, open_holds: int) -> WorkbenchStore:
    """A ledger at `url` with the real held decide and `open_holds` open (and 3,000 closed) rows."""
    keyring = home / "signing-keys.json"
    if not keyring.exists():
        generate_keyring(keyring, "2026-01-01T00:00:00.000Z")
    signing = SigningSetup.load(keyring, None, "hmac")
    ledger = Ledger(url)
    ledger.upgrade()
    body = copy.deepcopy(REQUEST)
    body["context"]["inputs"].update(discount_percent=15, margin_percent=12)
    clock = FixedClock(NOW - timedelta(hours=1))
    record = decision_services(ledger, signing, clock=clock, releases=False).decisions.decide(
        Caller("key_test", SCOPE, "starter", 1000, 10_000_000), body).record
    assert record["verdict"] == "review", record["verdict"]
    with ledger.write() as connection:
        connection.execute(update(holds_table).where(holds_table.c.decision_id == record["decision_id"])
                           .values(priority="urgent", priority_rank=3))
        for state, count, seed in (("open", open_holds, 1), ("approved", 1500, 2), ("denied", 1500, 3)):
            rows = _rows(count, state, seed)
            for start in range(0, len(rows), 2000):
                connection.execute(insert(holds_table), rows[start:start + 2000])
    return WorkbenchStore(ledger, signing, home / "dataset", clock=FixedClock(NOW))


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _first_rows(store: WorkbenchStore, rights: Rights) -> InboxState:
    state = InboxState(store, rights, scope=SCOPE)
    _hold_rows(state.rows, state.now, state.cursor, tuple(state.checked))
    return state


def _round(store: WorkbenchStore, rights: Rights, times: dict[str, list[float]]) -> None:
    """One round of every step, each appended to its list (seconds)."""
    started = time.perf_counter()
    state = _first_rows(store, rights)
    times["first rows"].append(time.perf_counter() - started)
    assert state.rows and state.rows[0]["priority"] == "urgent", "the real hold is the first row"
    later: list[Callable[[], None]] = []
    state.defer = later.append  # as the served page does: the similar holds on the next tick
    times["poll, nothing new"].append(_timed(state.poll))
    for key in ("j", "c", "d", "k", "Enter"):
        before = state.message
        times["key Enter (open)" if key == "Enter" else f"key {key}"].append(_timed(partial(state.key, key)))
        if key in "cd":
            assert state.message != before and "refused" not in state.message, state.message
    started = time.perf_counter()
    for step in later:
        step()
    times["then its similar holds"].append(time.perf_counter() - started)
    assert state.detail is not None and state.detail["verification"]["verified"] is True
    assert state.detail["similar"] is not None


def measure(store: WorkbenchStore, rounds: int) -> dict[str, float]:
    """Median milliseconds of each step (see the module docstring)."""
    rights = Rights(Identity.password_user("rita"), lambda _scope: frozenset({"reviewer"}))
    names = ("first rows", "poll, nothing new", "key j", "key c", "key d", "key k", "key Enter (open)",
             "then its similar holds")
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(rounds):
        _round(store, rights, times)
    return {name: statistics.median(values) * 1000 for name, values in times.items()}


def _load() -> str:
    return f"{os.getloadavg()[0]:.2f}" if hasattr(os, "getloadavg") else "n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--holds", type=int, default=10_000)
    parser.add_argument("--baseline", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--database-url", default=None, help="an empty PostgreSQL database (default: SQLite)")
    args = parser.parse_args()
    figures = {}
    loads = [_load()]
    with tempfile.TemporaryDirectory() as folder:
        for label, count in (("baseline", args.baseline), ("load", args.holds)):
            home = Path(folder) / label
            home.mkdir()
            url = args.database_url if args.database_url and label == "load" else f"sqlite:///{home / 'gate.db'}"
            store = build(url, home, count)
            try:
                figures[label] = measure(store, args.rounds)
            finally:
                store.ledger.dispose()
            loads.append(_load())
    backend = "PostgreSQL" if args.database_url else "SQLite"
    print(f"Inbox at {args.holds:,} open holds ({backend}) against {args.baseline:,} (SQLite), medians of "
          f"{args.rounds} rounds, load average {' → '.join(loads)}")
    print(f"| step | {args.baseline:,} holds ms | {args.holds:,} holds ms | ratio | bound |")
    print("|---|---:|---:|---:|---|")
    bounds = {"first rows": 1000.0, "then its similar holds": float("inf")}
    for name, value in figures["load"].items():
        base = figures["baseline"][name]
        bound = bounds.get(name, 200.0)
        verdict = "ok" if value < bound else "OVER"
        limit = f"< {bound:.0f} ms {verdict}" if bound != float("inf") else "after the answer"
        print(f"| {name} | {base:.1f} | {value:.1f} | {value / base:.2f} | {limit} |")


if __name__ == "__main__":
    main()
