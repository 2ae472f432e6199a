"""Do webhook deliveries keep up with decide, and what do they cost it? One receiver,
`decision.created` on, a sustained decide burst, on SQLite and on PostgreSQL (issue 53/3, issue 68
item 1; docs/events.md, "Throughput"; docs/operating.md, "Deployment").

For each ledger, one process builds the app over a new ledger (group commit as `gate serve` runs
it, a `gate serve` worker's switch interval), and a receiver in another process on loopback answers
204 at once over HTTP/1.1 keep-alive. Rounds of three arms, each `--seconds` long with 8 caller
threads deciding through the Flask test client, in an order rotated every round (so a drift of the
machine's speed falls on every arm):

- `plain`: the subscription disabled and `decision.created` off, no dispatcher: the baseline;
- `in-process`: the subscription active, the scope opted in to `decision.created`, and the
  dispatcher running as threads of the deciding process (a `gate serve` worker without
  `--no-dispatch`): every decide writes one more outbox row, which it signs and posts;
- `own-process`: the same, the dispatcher a `gate dispatch` process beside it on the same ledger
  (the documented deployment).

Every second of a delivering arm the outbox lag (events after the subscription's cursor) is
sampled; after it, the time for its dispatcher to drain the lag. Reported per round, with the
1-minute load average beside each arm: decides per second, the ratio to `plain` of the same round,
the rates events were written and delivered and their ratio (1 or more keeps the lag bounded), the
lag's maximum and the seconds to drain; the medians of the rounds' ratios close the report.

    .venv/bin/python benchmarks/bench_delivery.py [--seconds 30] [--rounds 3] [--ledgers sqlite,postgresql]
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import _database  # noqa: E402  (the throw-away ledger database, as bench_http makes it)
from gate_app import bench_app, bench_key  # noqa: E402  (the one start-up of a benchmark's gate)

RESULTS = ROOT / "benchmarks" / "results" / "delivery.json"
THREADS = 8
ARMS = ("plain", "in-process", "own-process")
REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())

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


def _lag(app, scope: str, subscription_id: str) -> int:
    outbox = app.extensions["gate"].events.outbox
    row = outbox.subscription(scope, subscription_id)
    return max(0, outbox.head(scope) - row["cursor"])


def _burst(app, headers: dict, seconds: float, sample) -> dict[str, Any]:
    """`THREADS` callers deciding for `seconds`; `sample()` runs every second meanwhile."""
    stop, counts, failures = threading.Event(), [0] * THREADS, [0] * THREADS

    def caller(index: int) -> None:
        client = app.test_client()
        while not stop.is_set():
            ok = client.post("/api/decide", json=REQUEST, headers=headers).status_code == 200
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


class OwnProcess:
    """A `gate dispatch` process on the benchmark's ledger, running once it said so."""

    def __init__(self, settings: Any) -> None:
        env = {**os.environ, "GATE_HOME": str(settings.home), "GATE_DATABASE_URL": settings.database_url,
               "GATE_SIGNING_KEY_FILE": str(settings.signing_key_file), "GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"}
        gate = str(Path(sys.executable).parent / "gate")
        self.process = subprocess.Popen([gate, "dispatch"], env=env, stderr=subprocess.PIPE, text=True)
        line = self.process.stderr.readline()
        assert "gate dispatch: running" in line, line
        self.started_cpu = self.cpu()

    def cpu(self) -> float:
        """The process's CPU seconds so far (user and system)."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self) -> None:
        self.used_cpu = self.cpu() - self.started_cpu
        self.process.terminate()
        self.process.wait(60)


def _arm(app, settings, headers: dict, sub: str, arm: str, seconds: float) -> dict[str, Any]:
    """One arm: its settings, its dispatcher (none, threads, or `gate dispatch`), the burst, the drain."""
    _settings(app.test_client(), headers, sub, arm != "plain")
    outbox = app.extensions["gate"].events.outbox
    dispatcher: Any = None
    if arm == "in-process":  # a new one each time: a stopped worker does not start again
        from gate.services.events import Dispatcher

        dispatcher = Dispatcher(app.extensions["gate"].events, settings.events_interval_ms / 1000,
                                concurrency=settings.events_concurrency)
        dispatcher.start()
    elif arm == "own-process":
        dispatcher = OwnProcess(settings)
    head, cursor = outbox.head("bench"), outbox.subscription("bench", sub)["cursor"]
    sample = (lambda: None) if arm == "plain" else (lambda: _lag(app, "bench", sub))
    result = _burst(app, headers, seconds, sample)
    written, posted = outbox.head("bench") - head, outbox.subscription("bench", sub)["cursor"] - cursor
    drained = time.perf_counter()
    while dispatcher is not None and _lag(app, "bench", sub) and time.perf_counter() - drained < 600:
        time.sleep(0.2)
    lags = [lag for lag in result.pop("samples") if lag is not None]
    if dispatcher is not None:
        result.update(events_written_per_s=round(written / result["seconds"], 1),
                      events_delivered_per_s=round(posted / result["seconds"], 1),
                      delivered_to_written=round(posted / written, 3) if written else None,
                      lag_max=max(lags) if lags else 0, drain_seconds_after=round(time.perf_counter() - drained, 1))
        dispatcher.stop()
        if arm == "own-process" and posted:  # the dispatcher's own CPU per event delivered (burst and drain)
            result["dispatch_cpu_us_per_event"] = round(dispatcher.used_cpu / (posted + _lag_drained(written, posted))
                                                        * 1e6)
    return result


def _lag_drained(written: int, posted: int) -> int:
    """Events delivered during the drain: those written in the burst and not yet delivered by its end."""
    return max(0, written - posted)


def _ledger(kind: str, seconds: float, rounds: int, port: int) -> dict[str, Any]:
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-delivery-{kind}-"))
    url, drop = _database(kind, home)
    try:
        settings, app = bench_app(home, url, {"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"})
        headers = {"x-api-key": bench_key(settings)}
        sub = app.test_client().post("/api/events/subscriptions", json={"url": f"http://127.0.0.1:{port}/hook"},
                                     headers=headers).get_json()["subscription"]["subscription_id"]
        _settings(app.test_client(), headers, sub, False)
        _burst(app, headers, min(10.0, seconds), lambda: None)  # warm-up
        done = []
        for number in range(rounds):
            order = ARMS[number % 3:] + ARMS[:number % 3]
            arms = {arm: _arm(app, settings, headers, sub, arm, seconds) for arm in order}
            for arm in ARMS[1:]:
                arms[arm]["ratio_to_plain"] = round(arms[arm]["decides_per_s"] / arms["plain"]["decides_per_s"], 3)
            done.append({"order": list(order), **arms})
            print(json.dumps({"ledger": kind, "round": number + 1, **done[-1]}), flush=True)
        medians = {arm: statistics.median(r[arm]["ratio_to_plain"] for r in done) for arm in ARMS[1:]}
        return {"ledger": kind, "rounds": done, "median_ratio_to_plain": medians}
    finally:
        drop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ledgers", default="sqlite,postgresql")
    args = parser.parse_args()
    from api.serving import SWITCH_INTERVAL_S

    sys.setswitchinterval(SWITCH_INTERVAL_S)  # as every `gate serve` worker runs (api.serving)
    receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(receiver.stdout.readline())
        rows = []
        for kind in args.ledgers.split(","):
            rows.append(_ledger(kind, args.seconds, args.rounds, port))
            print(json.dumps({"ledger": kind, "median_ratio_to_plain": rows[-1]["median_ratio_to_plain"]}),
                  flush=True)
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps({"seconds": args.seconds, "rounds": args.rounds, "threads": THREADS,
                                       "cores": os.cpu_count(), "ledgers": rows}, indent=2))
    finally:
        receiver.terminate()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
