"""Do webhook deliveries keep up with decide? One receiver, `decision.created` on, a sustained
decide burst, on SQLite and on PostgreSQL (issue 53/3; docs/events.md, "Throughput").

For each ledger, one process builds the app over a new ledger (group commit as `gate serve` runs
it) with its event dispatcher running (as in every `gate serve` worker), and a receiver in another
process on loopback answers 204 at once over HTTP/1.1 keep-alive. Two rounds, each `--seconds`
long with 8 caller threads deciding through the Flask test client:

- `plain`: the subscription disabled and `decision.created` off: the baseline decide rate;
- `delivered`: the subscription active and the scope opted in to `decision.created`: every decide
  writes one more outbox row, which the dispatcher signs and posts. Every second the outbox lag
  (events after the subscription's cursor) is sampled; after the burst, the time to drain it.

Reported per ledger, with the 1-minute load average beside each round: decides per second of
both rounds and their ratio (delivered / plain), the rate events were written and delivered during
the burst and its ratio (delivered / written: 1 or more keeps the lag bounded), the lag's maximum,
its value at each quarter of the burst, and the seconds to drain after it.

    .venv/bin/python benchmarks/bench_delivery.py [--seconds 60] [--ledgers sqlite,postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
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

RESULTS = ROOT / "benchmarks" / "results" / "delivery.json"
THREADS = 8

RECEIVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204); self.end_headers()
    def log_message(self, *a): pass
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
s.daemon_threads = True
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def _app(home: Path, database_url: str):
    settings, app = bench_app(home, database_url, {"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"})
    return app, bench_key(settings)


def _lag(app, scope: str, subscription_id: str) -> int:
    outbox = app.extensions["gate"].events.outbox
    row = outbox.subscription(scope, subscription_id)
    return max(0, outbox.head(scope) - row["cursor"])


def _burst(app, headers: dict, request: dict, seconds: float, sample) -> dict[str, Any]:
    """`THREADS` callers deciding for `seconds`; `sample()` runs every second meanwhile."""
    stop, counts, failures = threading.Event(), [0] * THREADS, [0] * THREADS

    def caller(index: int) -> None:
        client = app.test_client()
        while not stop.is_set():
            ok = client.post("/api/decide", json=request, headers=headers).status_code == 200
            counts[index] += ok
            failures[index] += not ok

    load = os.getloadavg()[0]
    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(THREADS)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    samples = []
    while time.perf_counter() - started < seconds:
        time.sleep(1.0)
        samples.append(sample())
    stop.set()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"decides": sum(counts), "refused": sum(failures), "decides_per_s": round(sum(counts) / wall, 1),
            "seconds": round(wall, 1), "load1": round(load, 2), "samples": samples}


def _settings(client, headers: dict, subscription_id: str, on: bool) -> None:
    client.patch(f"/api/events/subscriptions/{subscription_id}", json={"status": "active" if on else "disabled"},
                 headers=headers)
    answer = client.put("/api/events/settings", json={"decision_created": on, "anomaly_every_seconds": None},
                        headers=headers)
    assert answer.status_code == 200, answer.get_json()
    time.sleep(2.1)  # the decide path reads the opt-ins at most every 2 s


def _ledger(kind: str, seconds: float, port: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-delivery-{kind}-"))
    url, drop = _database(kind, home)
    try:
        app, key = _app(home, url)
        headers, client = {"x-api-key": key}, app.test_client()
        request = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())
        sub = client.post("/api/events/subscriptions", json={"url": f"http://127.0.0.1:{port}/hook"},
                          headers=headers).get_json()["subscription"]["subscription_id"]
        dispatcher = app.extensions["gate"].dispatcher
        dispatcher.start()
        outbox = app.extensions["gate"].events.outbox
        _settings(client, headers, sub, False)
        _burst(app, headers, request, min(10.0, seconds), lambda: None)  # warm-up
        plain = _burst(app, headers, request, seconds, lambda: None)
        _settings(client, headers, sub, True)
        head, cursor = outbox.head("bench"), outbox.subscription("bench", sub)["cursor"]
        delivered = _burst(app, headers, request, seconds, lambda: _lag(app, "bench", sub))
        head_after, cursor_after = outbox.head("bench"), outbox.subscription("bench", sub)["cursor"]
        drained = time.perf_counter()
        while _lag(app, "bench", sub) and time.perf_counter() - drained < 600:
            time.sleep(0.2)
        drain_seconds = round(time.perf_counter() - drained, 1)
        dispatcher.stop()
        return _row(kind, plain, delivered, head_after - head, cursor_after - cursor, drain_seconds)
    finally:
        drop()


def _row(kind: str, plain: dict, delivered: dict, written: int, posted: int, drain_seconds: float) -> dict:
    lags = delivered.pop("samples")
    plain.pop("samples")
    quarters = [lags[max(0, len(lags) * q // 4 - 1)] for q in (1, 2, 3, 4)] if lags else []
    written_per_s, posted_per_s = written / delivered["seconds"], posted / delivered["seconds"]
    return {"ledger": kind, "plain": plain, "delivered": delivered,
            "decide_rate_ratio": round(delivered["decides_per_s"] / plain["decides_per_s"], 3),
            "events_written_per_s": round(written_per_s, 1), "events_delivered_per_s": round(posted_per_s, 1),
            "delivered_to_written_ratio": round(posted_per_s / written_per_s, 3) if written else None,
            "lag_max": max(lags) if lags else 0, "lag_at_quarters": quarters, "drain_seconds_after": drain_seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    from api.serving import SWITCH_INTERVAL_S

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as every `gate serve` worker runs (api.serving)
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())
        rows = []
        for kind in args.ledgers.split(","):
            rows.append(_ledger(kind, args.seconds, port))
            print(json.dumps(rows[-1]), flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"seconds": args.seconds, "threads": THREADS, "cores": os.cpu_count(),
                                       "ledgers": rows}, indent=2))
    finally:
        receiver.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
