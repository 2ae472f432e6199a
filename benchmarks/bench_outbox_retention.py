"""Does the outbox stay bounded at a sustained rate? 400 events/s for a simulated 40 days, the
retention at its default 30 days, on SQLite and on PostgreSQL (issue 68, item 3; docs/events.md
"Retention", docs/operating.md "Outbox size").

A simulated clock moves in passes of `--pass-hours` (6 h: 160 passes). Each pass, as the
`event-retention` worker would, runs `EventRetention.prune` at the simulated time (on PostgreSQL it
makes the coming days' partitions and drops whole days; on SQLite it returns the freed pages),
then writes the pass's events in bulk, their times spread evenly over the pass, and moves one
subscription's cursor to the head (a receiver keeping up: retention is bound by age alone). To
run in minutes the volume is scaled down: one stored row stands for `--scale` events (default
2,000: 4,320 rows a 6-hour pass), each row a real `decision.created` body's size (about 2 KB of
canonical text, stored in the at-rest encoding). Rows and bytes scale linearly with the rate, so
the shape (flat after day 30) is what is shown; multiply by `--scale` for the full-rate figures.

Reported per simulated day, with the machine's 1-minute load: the outbox's rows, its stored bytes
(`gate_events_outbox_bytes`, counted by the retention pass), the ledger's physical size of the
outbox (SQLite: the file's used pages; PostgreSQL: the partitions' total relation size), the
partitions present, and the pass's time. The summary compares days 31-40 with day 30: the largest
difference of each figure from day 30's, as a share of it.

    .venv/bin/python benchmarks/bench_outbox_retention.py [--days 40] [--scale 2000] [--ledgers sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _database  # noqa: E402  (the throw-away ledger database, as bench_http makes it)

RESULTS = ROOT / "benchmarks" / "results" / "outbox_retention.json"
RATE = 400  # events a second, simulated
START = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = "bench"


class SimulatedClock:
    def __init__(self) -> None:
        self.at = START

    def now(self) -> datetime:
        return self.at


def _body(seq: int, at: str) -> str:
    """A `decision.created` CloudEvent's size and shape (about 2 KB of canonical text)."""
    from gate.protocol.canonical import canonical_text

    record = {"decision_id": f"dec_{seq:012d}", "created_at": at, "verdict": "allow", "scope": SCOPE,
              "inputs": {f"field_{i}": f"value {seq * 7 + i} of the request" for i in range(24)},
              "rule_trace": [{"rule_id": f"rule_{i}", "matched": i % 3 == 0} for i in range(12)],
              "record_hash": f"sha256:{seq:064x}", "receipt_hash": f"sha256:{seq * 3:064x}"}
    return canonical_text({"specversion": "1.0", "id": f"{SCOPE}:{seq}", "source": f"decision-gate/{SCOPE}",
                           "type": "dev.decision-gate.decision.created", "time": at, "data": record})


def _write(ledger: Any, first: int, count: int, start: datetime, span: timedelta) -> None:
    from sqlalchemy import insert, update

    from gate.ledger.tables import event_outbox, event_sequences

    step = span / count
    rows = []
    for n in range(count):
        seq = first + n
        at = (start + step * n).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        rows.append({"scope": SCOPE, "seq": seq, "event_id": f"evt_{seq:016d}", "event_type":
                     "dev.decision-gate.decision.created", "created_at": at, "event_json": _body(seq, at)})
    with ledger.write() as connection:
        for chunk in range(0, len(rows), 2000):
            connection.execute(insert(event_outbox), rows[chunk:chunk + 2000])
        connection.execute(update(event_sequences).where(event_sequences.c.scope == SCOPE)
                           .values(last_seq=first + count - 1))


def _physical(ledger: Any, kind: str) -> tuple[int, int]:
    """(the outbox's physical bytes, the day partitions present)."""
    from sqlalchemy import text

    with ledger.read() as connection:
        if kind == "sqlite":
            pages = connection.exec_driver_sql("PRAGMA page_count").scalar()
            free = connection.exec_driver_sql("PRAGMA freelist_count").scalar()
            size = connection.exec_driver_sql("PRAGMA page_size").scalar()
            return int((pages - free) * size), 0
        size = connection.execute(text(
            "SELECT coalesce(sum(pg_total_relation_size(i.inhrelid)), 0), count(*) FROM pg_inherits i "
            "WHERE i.inhparent = to_regclass('event_outbox')")).one()
        return int(size[0]), int(size[1]) - 1  # the default partition aside


def _ledger(kind: str, days: int, scale: int, pass_hours: int) -> dict[str, Any]:
    from gate.ledger import Ledger
    from gate.services.governance import SafeguardSettings
    from gate.services.root import compose_events

    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-retention-{kind}-"))
    url, drop = _database(kind, home)
    ledger = Ledger(url)
    try:
        ledger.upgrade()
        clock = SimulatedClock()
        service = compose_events(ledger, clock, allow_hosts=("127.0.0.1",), safeguards=SafeguardSettings(ledger))
        with ledger.write() as connection:  # the scope's sequence row, as its first event makes it
            from gate.ledger.tables import event_sequences

            connection.execute(event_sequences.insert().values(scope=SCOPE, last_seq=0))
        view, _ = service.subscribe(SCOPE, "operator:bench", {"url": "http://127.0.0.1:9/hook", "from": "now"})
        per_pass, head, days_out = RATE * pass_hours * 3600 // scale, 0, []
        span = timedelta(hours=pass_hours)
        for _ in range(days * 24 // pass_hours):
            started = time.perf_counter()
            pruned = service.retention.prune()
            _write(ledger, head + 1, per_pass, clock.at, span)
            head += per_pass
            service.outbox.update_subscription(view["subscription_id"], {"cursor": head})
            clock.at += span
            if clock.at.hour == 0:  # a simulated day ends: its figures, after that day's last pass
                figures = service.retention.store.figures()
                physical, partitions = _physical(ledger, kind)
                days_out.append({"day": (clock.at - START).days, "rows": figures["rows"], "bytes": figures["bytes"],
                                 "physical_bytes": physical, "partitions": partitions, "pruned_last_pass": pruned,
                                 "pass_seconds": round(time.perf_counter() - started, 2),
                                 "load1": round(os.getloadavg()[0], 2)})
                print(json.dumps({"ledger": kind, **days_out[-1]}), flush=True)
        return {"ledger": kind, "scale": scale, "rows_per_pass": per_pass, "days": days_out,
                "after_day_30": _flatness(days_out)}
    finally:
        ledger.dispose()
        drop()


def _flatness(days: list[dict[str, Any]]) -> dict[str, float] | None:
    """The largest difference of days 31 on from day 30, per figure, as a share of day 30's."""
    base = next((d for d in days if d["day"] == 30), None)
    later = [d for d in days if d["day"] > 30]
    if base is None or not later:
        return None
    return {name: round(max(abs(d[name] - base[name]) for d in later) / max(1, base[name]), 4)
            for name in ("rows", "bytes", "physical_bytes")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=40)
    parser.add_argument("--scale", type=int, default=2000)
    parser.add_argument("--pass-hours", type=int, default=6)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    rows = []
    for kind in args.ledgers.split(","):
        rows.append(_ledger(kind, args.days, args.scale, args.pass_hours))
        print(json.dumps({"ledger": kind, "after_day_30": rows[-1]["after_day_30"]}), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rate": RATE, "scale": args.scale, "pass_hours": args.pass_hours,
                                   "cores": os.cpu_count(), "ledgers": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
