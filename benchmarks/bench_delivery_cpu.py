"""CPU per delivered webhook event, in the dispatcher's process: this tree against another, same run.

A fresh interpreter per round and tree builds the app over a new SQLite ledger (as `gate serve`
runs it), subscribes one receiver on loopback (another process answering 204 over HTTP/1.1
keep-alive, as `bench_delivery.py`'s), opts the scope in to `decision.created`, stores `--events`
decides of the sample request, and then delivers the backlog with the dispatcher's ordered walk
(`WebhookDelivery.dispatch_once`, one subscription's turns one after another) until nothing is left.
It reads the process's CPU time over the delivery only (the decides are not counted) and the wall
time, per event delivered. `--tree PATH` measures another checkout (for instance `git worktree add
DIR main~1`) round by round in turn, the order swapped every round, with the 1-minute load beside
each; the ratios this tree ÷ the other are taken round by round, and their median closes the
report (issue 68, item 1: what one delivery costs the cores the decides share).

    .venv/bin/python benchmarks/bench_delivery_cpu.py [--events 1500] [--rounds 6] [--tree DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ROUND = r"""
import json, subprocess, sys, tempfile, time
from pathlib import Path
tree, events = Path(sys.argv[1]), int(sys.argv[2])
sys.path[:0] = [str(tree), str(tree / "benchmarks")]
from bench_delivery import RECEIVER, REQUEST
from gate_app import bench_app, bench_key
receiver = subprocess.Popen([sys.executable, "-c", RECEIVER], stdout=subprocess.PIPE, text=True)
try:
    port = int(receiver.stdout.readline())
    settings, app = bench_app(Path(tempfile.mkdtemp(prefix="bench-delivery-cpu-")), None,
                              {"GATE_WEBHOOK_ALLOW_HOSTS": "127.0.0.1"})
    client, headers = app.test_client(), {"x-api-key": bench_key(settings)}
    client.post("/api/events/subscriptions", json={"url": f"http://127.0.0.1:{port}/hook"}, headers=headers)
    answer = client.put("/api/events/settings", json={"decision_created": True, "anomaly_every_seconds": None},
                        headers=headers)
    assert answer.status_code == 200, answer.get_json()
    time.sleep(2.1)  # the decide path reads the opt-ins at most every 2 s
    for _ in range(events):
        assert client.post("/api/decide", json=REQUEST, headers=headers).status_code == 200
    service = app.extensions["gate"].events
    cpu, wall, posted = time.process_time(), time.perf_counter(), 0
    while (made := service.delivery.dispatch_once("bench")):
        posted += made
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    print(json.dumps({"posted": posted, "cpu_us": cpu / posted * 1e6, "wall_us": wall / posted * 1e6}))
finally:
    receiver.terminate()
"""


def _once(tree: Path, events: int) -> dict[str, float]:
    python = tree / ".venv" / "bin" / "python"
    done = subprocess.run([str(python if python.exists() else sys.executable), "-c", ROUND, str(tree), str(events)],
                          capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"a round in {tree} failed:\n{done.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    assert figures["posted"] >= events, figures  # every decide's event (and any earlier one) was delivered
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--tree", type=Path, help="another checkout to measure beside this tree")
    args = parser.parse_args()
    trees = {"this tree": ROOT} | ({f"other ({args.tree})": args.tree} if args.tree else {})
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    print(f"{args.events} decision.created events delivered per round, SQLite, one receiver on loopback")
    print(f"{'round':>5} {'tree':<40} {'CPU µs/event':>13} {'wall µs/event':>14} {'load1':>6}")
    for number in range(1, args.rounds + 1):
        order = list(trees.items()) if number % 2 else list(reversed(trees.items()))
        for name, tree in order:
            run = _once(tree, args.events) | {"load1": os.getloadavg()[0]}
            runs[name].append(run)
            print(f"{number:>5} {name:<40} {run['cpu_us']:>13.0f} {run['wall_us']:>14.0f} {run['load1']:>6.2f}",
                  flush=True)
    for name, rs in runs.items():
        print(f"median {name:<33} CPU {statistics.median(r['cpu_us'] for r in rs):.0f} µs/event, "
              f"wall {statistics.median(r['wall_us'] for r in rs):.0f} µs/event")
    if args.tree:
        this, other = runs["this tree"], next(rs for name, rs in runs.items() if name != "this tree")
        for figure in ("cpu_us", "wall_us"):
            ratios = sorted(a[figure] / b[figure] for a, b in zip(this, other, strict=True))
            print(f"this tree ÷ other, {figure[:-3]}: median {statistics.median(ratios):.2f} "
                  f"(rounds {', '.join(f'{r:.2f}' for r in ratios)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
