"""A decide's cost with one webhook subscription delivering, and with the scope mirrored
(`decision.created` for every decision, delivered too), against none, in one run (issue 44).

One process builds the app over a new SQLite ledger (group commit on, as `gate serve` runs it) with
its event dispatcher thread running (as in every `gate serve` worker), and a receiver in another
process on loopback. A background thread moves a release (shadow, halt, …) about 20 times a second
throughout, so events are written in every round. Rounds alternate: the subscription disabled
("none"), enabled ("subscribed", the dispatcher posting each event, signed, to the receiver) and
enabled with the scope opted in to `decision.created` ("mirrored": one more outbox row per decide,
with the record, written in the writer's batch, and one more delivery);
each round sends `--decides` decides from 8 caller threads through the Flask test client and reads
the process's CPU time (every thread: callers, the ledger's writer, the dispatcher). Reported: CPU
per decide and decides per second of each round, the ratios subscribed / none and mirrored / none,
and the 1-minute load average beside each round.

    .venv/bin/python benchmarks/bench_events.py [--decides 1500] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "events.json"

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def _cpu() -> float:
    times = os.times()
    return times.user + times.system


def _load1() -> float:
    return os.getloadavg()[0]


def _app(home: Path):
    from benchmarks.gate_app import bench_app, bench_key

    settings, app = bench_app(home, env={"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1", "GATE_EVENTS_INTERVAL_MS": "200"})
    return app, bench_key(settings, "decide,publish,release,approve,admin")


def _releases(client, headers: dict, stop: threading.Event) -> None:
    from tests.releases.support import version

    for name, limit in (("v1", 20), ("v2", 10)):
        client.post("/api/decision/rulebooks", json=version(name, approve_limit=limit), headers=headers)
    client.post("/api/decision/rulebooks/pricing_exception/release", json={"action": "activate", "version": "v1"},
                headers=headers)
    while not stop.is_set():
        for body in ({"action": "shadow", "version": "v2"}, {"action": "halt"}):
            client.post("/api/decision/rulebooks/pricing_exception/release", json=body, headers=headers)
        stop.wait(0.1)


def _round(app, headers: dict, request: dict, decides: int) -> dict:
    client = app.test_client()
    load = _load1()
    cpu, wall = _cpu(), time.perf_counter()
    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(lambda _: client.post("/api/decide", json=request, headers=headers).status_code,
                                 range(decides)))
    cpu, wall = _cpu() - cpu, time.perf_counter() - wall
    assert statuses.count(200) == decides, statuses[:5]
    return {"cpu_ms_per_decide": round(1000 * cpu / decides, 3), "decides_per_s": round(decides / wall, 1),
            "load1": round(load, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decides", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())
        home = Path(tempfile.mkdtemp(prefix="gate-bench-events-"))
        app, key = _app(home)
        headers = {"x-api-key": key}
        client = app.test_client()
        request = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())
        sub = client.post("/api/events/subscriptions", json={"url": f"http://127.0.0.1:{port}/hook"},
                          headers=headers).get_json()["subscription"]["subscription_id"]
        dispatcher = app.extensions["gate"].dispatcher
        dispatcher.start()
        stop = threading.Event()
        mover = threading.Thread(target=_releases, args=(app.test_client(), headers, stop), daemon=True)
        mover.start()
        _round(app, headers, request, 300)  # warm-up
        rows = []
        for _ in range(args.rounds):
            pair = {}
            for mode, status, mirrored in (("none", "disabled", False), ("subscribed", "active", False),
                                           ("mirrored", "active", True)):
                client.patch(f"/api/events/subscriptions/{sub}", json={"status": status}, headers=headers)
                client.put("/api/events/settings", json={"decision_created": mirrored, "anomaly_every_seconds": None},
                           headers=headers)
                time.sleep(2.1)  # the decide path reads the opt-ins at most every 2 s
                pair[mode] = _round(app, headers, request, args.decides)
            pair["cpu_ratio"] = round(pair["subscribed"]["cpu_ms_per_decide"] / pair["none"]["cpu_ms_per_decide"], 3)
            pair["rate_ratio"] = round(pair["subscribed"]["decides_per_s"] / pair["none"]["decides_per_s"], 3)
            pair["mirrored_cpu_ratio"] = round(
                pair["mirrored"]["cpu_ms_per_decide"] / pair["none"]["cpu_ms_per_decide"], 3)
            rows.append(pair)
            print(json.dumps(pair))
        stop.set()
        dispatcher.stop()
        report = client.get(f"/api/events/subscriptions/{sub}/deliveries", headers=headers).get_json()
        summary = {"rounds": rows, "median_cpu_ratio": statistics.median(r["cpu_ratio"] for r in rows),
                   "median_mirrored_cpu_ratio": statistics.median(r["mirrored_cpu_ratio"] for r in rows),
                   "median_rate_ratio": statistics.median(r["rate_ratio"] for r in rows),
                   "deliveries": {"attempts": report["attempts"], "succeeded": report["succeeded"]}}
        print(json.dumps({k: v for k, v in summary.items() if k != "rounds"}))
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(summary, indent=2))
    finally:
        receiver.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
