"""What `decision.created` costs the decide itself, with no subscriber, on SQLite and on
PostgreSQL (issue 53/3; docs/events.md, "Opt-in events"; docs/operating.md).

For each ledger, one process builds the app over a new ledger (group commit as `gate serve` runs
it, the switch interval of a `gate serve` worker), with no subscription and no dispatcher: what
is measured is the decide's own write. Rounds of `--seconds` each, 8 caller threads deciding
through the Flask test client, alternate four arms in an order reversed every other round (so a
drift of the machine's speed falls on both sides of each pair):

- `plain` / `plain+event`: a decide that allows (`verdict-yes.json`), `decision_created` off / on;
- `held` / `held+event`: a decide that holds the action (its hold opens, `hold.opened` is written
  every time), `decision_created` off / on.

Reported per round, with the process's CPU per decide and the 1-minute load average beside each
arm: decides per second, and the ratios of the same round (rate and CPU): plain+event / plain and
held+event / held (what the event costs), held / plain and held+event / plain. The medians of the rounds' ratios close the report.

    .venv/bin/python benchmarks/bench_decide_events.py [--seconds 8] [--rounds 3] [--ledgers sqlite,postgresql]
                                                       [--kept 200000] [--event-id-index]

`--kept N` first fills the outbox with N events of another scope (as 30 days at a sustained rate
keep it; `bench_outbox_insert.fill_outbox`), so the event's write meets a large outbox;
`--event-id-index` puts back the event id's unique index (the schema before migration 0026).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _database  # noqa: E402  (the throw-away ledger database, as bench_http makes it)
from gate_app import bench_app, bench_key  # noqa: E402  (the one start-up of a benchmark's gate)

RESULTS = ROOT / "benchmarks" / "results" / "decide_events.json"
THREADS = 8
PLAIN = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())
HELD = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
HELD["context"]["inputs"]["margin_percent"] = 12  # rule `review_thin_margin` holds it (as bench_unread_closes)
ARMS = (("plain", PLAIN, False), ("plain+event", PLAIN, True), ("held", HELD, False), ("held+event", HELD, True))


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _app(home: Path, database_url: str):
    settings, app = bench_app(home, database_url, {"GATE_EVENTS_DISPATCH": "0"})
    return app, bench_key(settings)


def _burst(app, headers: dict, request: dict, verdict: str, seconds: float) -> dict[str, Any]:
    """`THREADS` callers deciding for `seconds`; every answer must be a 200 with `verdict`."""
    stop, counts, wrong = threading.Event(), [0] * THREADS, [0] * THREADS

    def caller(index: int) -> None:
        client = app.test_client()
        while not stop.is_set():
            answer = client.post("/api/decide", json=request, headers=headers)
            ok = answer.status_code == 200 and answer.get_json()["verdict"] == verdict
            counts[index] += ok
            wrong[index] += not ok

    load = os.getloadavg()[0]
    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(THREADS)]
    cpu, started = _cpu(), time.perf_counter()
    for thread in threads:
        thread.start()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    cpu, wall = _cpu() - cpu, time.perf_counter() - started
    if sum(wrong):
        raise RuntimeError(f"{sum(wrong)} decides did not answer 200 {verdict}")
    return {"decides": sum(counts), "decides_per_s": round(sum(counts) / wall, 1),
            "cpu_ms_per_decide": round(1000 * cpu / max(1, sum(counts)), 3), "load1": round(load, 2)}


def _mirror(client, headers: dict, on: bool) -> None:
    answer = client.put("/api/events/settings", json={"decision_created": on, "anomaly_every_seconds": None},
                        headers=headers)
    assert answer.status_code == 200, answer.get_json()
    time.sleep(2.1)  # the decide path reads the opt-ins at most every 2 s


def _ratios(round_: dict[str, dict[str, Any]]) -> dict[str, float]:
    pairs = (("plain+event", "plain"), ("held+event", "held"), ("held", "plain"), ("held+event", "plain"))
    return {f"{arm}/{base} {what}": round(round_[arm][field] / round_[base][field], 3)
            for arm, base in pairs for what, field in (("rate", "decides_per_s"), ("cpu", "cpu_ms_per_decide"))}


def _ledger(kind: str, seconds: float, rounds: int, kept: int = 0, indexed: bool = False) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-decide-events-{kind}-"))
    url, drop = _database(kind, home)
    try:
        app, key = _app(home, url)
        headers, client = {"x-api-key": key}, app.test_client()
        if kept or indexed:  # an outbox as a sustained rate keeps it (bench_outbox_insert.fill_outbox)
            from bench_outbox_insert import fill_outbox

            sample = client.post("/api/decide", json=PLAIN, headers=headers).get_json()
            fill_outbox(app.extensions["gate"].ledger, "bench-history", kept, sample, indexed)
        _mirror(client, headers, False)
        _burst(app, headers, PLAIN, "yes", min(5.0, seconds))  # warm-up
        _burst(app, headers, HELD, "review", min(3.0, seconds))
        rows = []
        for number in range(rounds):
            measured: dict[str, dict[str, Any]] = {}
            for name, request, on in (ARMS if number % 2 == 0 else tuple(reversed(ARMS))):
                _mirror(client, headers, on)
                measured[name] = _burst(app, headers, request, "yes" if request is PLAIN else "review", seconds)
            rows.append({"arms": measured, "ratios": _ratios(measured)})
            print(json.dumps({"ledger": kind, **rows[-1]}), flush=True)
        medians = {name: statistics.median(row["ratios"][name] for row in rows) for name in rows[0]["ratios"]}
        return {"ledger": kind, "rounds": rows, "median_ratios": medians}
    finally:
        drop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    parser.add_argument("--kept", type=int, default=0, help="events already in the outbox (another scope's)")
    parser.add_argument("--event-id-index", action="store_true",
                        help="put back the event id's unique index (the schema before migration 0026)")
    args = parser.parse_args()
    from api.serving import SWITCH_INTERVAL_S

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as every `gate serve` worker runs (api.serving)
    results = []
    for kind in args.ledgers.split(","):
        results.append(_ledger(kind, args.seconds, args.rounds, args.kept, args.event_id_index))
        print(json.dumps({"ledger": kind, "median_ratios": results[-1]["median_ratios"]}), flush=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"seconds": args.seconds, "threads": THREADS, "cores": os.cpu_count(),
                                   "ledgers": results}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
