"""Bytes per `decision.created` outbox row against the decision's own rows, on SQLite and
PostgreSQL (issue 53: the outbox stored each event uncompressed, 7.8 KB a row against the record's
3.4 KB).

    .venv/bin/python benchmarks/bench_outbox_storage.py [--n 500] [--backends sqlite,postgresql]

One child process per backend builds the app over a new ledger (`gate.db` in a temporary home, or
a throw-away PostgreSQL database), turns `decision.created` on for the key's scope
(`PUT /api/events/settings`, applied at once: the scope requires no approvals), waits the 2 s the
decide path takes to read the opt-ins, then sends `n` decides of `gate/data/requests/verdict-yes.json`
through the Flask test client. The ledger is measured as `bench_storage.py` measures it (SQLite:
checkpoint, VACUUM, `dbstat` pages; PostgreSQL: VACUUM FULL, `pg_table_size` + `pg_indexes_size`)
and again empty, before the decides. Reported per backend:

* `outbox/event`: `event_outbox` (table and indexes, marginal over the empty ledger) divided by the
  number of `decision.created` rows written;
* `decisions/decision`: the `decisions` table the same way (the record and its request, both in
  the at-rest encoding), the figure an event row is compared with;
* `event text`: the mean length of the stored CloudEvent's canonical text (what a plain row holds);
* the ratio outbox/event ÷ decisions/decision, and the 1-minute load average before and after.

Run it on the code before a storage change and after, in the same minutes: the figures are sizes,
not times, so the load changes nothing but how long the run takes. Results:
benchmarks/results/outbox_storage.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "outbox_storage.json"
REQUEST = ROOT / "gate" / "data" / "requests" / "verdict-yes.json"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import PG_ADMIN, _database  # noqa: E402  (the throw-away ledger database)
from bench_storage import _sizes, bytes_per_row  # noqa: E402  (the same measurement of tables and indexes)
from gate_app import bench_app, bench_key  # noqa: E402  (the one start-up of a benchmark's gate)


def _load1() -> float:
    return round(os.getloadavg()[0], 2)


def fill(url: str, home: Path, n: int) -> tuple[int, int]:
    """`decision.created` on, then `n` decides; (events written, their canonical text's bytes)."""
    from sqlalchemy import select

    from gate.ledger.tables import event_outbox

    settings, app = bench_app(home, url, {"GATE_EVENTS_DISPATCH": "false"})
    try:
        key = bench_key(settings)
        client, headers = app.test_client(), {"x-api-key": key}
        answer = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                            headers=headers)
        if answer.status_code != 200:
            raise RuntimeError(f"settings answered {answer.status_code}: {answer.get_data(as_text=True)[:300]}")
        time.sleep(2.1)  # the decide path reads the opt-ins at most every 2 s
        request = json.loads(REQUEST.read_text())
        for _ in range(n):
            answer = client.post("/api/decide", json=request, headers=headers)
            if answer.status_code != 200:
                raise RuntimeError(f"decide answered {answer.status_code}: {answer.get_data(as_text=True)[:300]}")
        with app.extensions["gate"].ledger.read() as connection:
            texts = connection.execute(select(event_outbox.c.event_json).where(
                event_outbox.c.event_type == "dev.decision-gate.decision.created")).scalars().all()
        return len(texts), sum(len(t.encode("utf-8")) for t in texts)
    finally:
        app.extensions["gate"].ledger.dispose()


def child(kind: str, n: int) -> dict[str, Any]:
    from gate.ledger import Ledger

    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-outbox-{kind}-"))
    url, drop = _database(kind, home)
    try:
        ledger = Ledger(url)
        ledger.upgrade()
        ledger.dispose()
        empty = _sizes(kind, url, home)
        load_before = _load1()
        events, text_bytes = fill(url, home, n)
        full = _sizes(kind, url, home)
        return {"backend": kind, "n": n, "events": events, "event_text_bytes": text_bytes,
                "load1_before": load_before, "load1_after": _load1(), "empty": empty, "full": full}
    finally:
        drop()
        import shutil

        shutil.rmtree(home, ignore_errors=True)


def summary(result: dict[str, Any]) -> dict[str, Any]:
    events = max(1, result["events"])
    outbox = bytes_per_row(result, "event_outbox", events)
    decisions = bytes_per_row(result, "decisions", result["n"])
    return {"outbox_per_event": round(outbox), "decisions_per_decision": round(decisions),
            "event_text": round(result["event_text_bytes"] / events), "ratio": round(outbox / decisions, 2)}


def measure(kind: str, n: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--child", kind, "--n", str(n)], check=False,
                          capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"{kind} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    result["summary"] = summary(result)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--child", choices=("sqlite", "postgresql"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    if args.child:
        print(json.dumps(child(args.child, args.n)))
        return 0
    results = []
    for kind in args.backends.split(","):
        if kind == "postgresql":
            try:
                import psycopg

                psycopg.connect(PG_ADMIN, connect_timeout=3).close()
            except Exception as exc:  # noqa: BLE001 - a missing server skips the backend
                print(f"postgresql skipped: {type(exc).__name__}")
                continue
        results.append(measure(kind, args.n))
    print(f"{'backend':10} {'events':>6} {'outbox/event':>12} {'decisions/decision':>18} {'event text':>10} "
          f"{'ratio':>6} {'load1':>11}")
    for result in results:
        s = result["summary"]
        print(f"{result['backend']:10} {result['events']:>6} {s['outbox_per_event']:>12,} "
              f"{s['decisions_per_decision']:>18,} {s['event_text']:>10,} {s['ratio']:>6} "
              f"{result['load1_before']:>5}-{result['load1_after']:<5}")
    print("(bytes: each table with its indexes, marginal over the empty ledger; ratio = outbox/event ÷ "
          "decisions/decision)")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"cpus": os.cpu_count(), "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
