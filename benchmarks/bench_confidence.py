"""POST /api/decide with decide-time confidence on vs off, on one ledger, driven by `wrk`.

For each ledger (SQLite file; PostgreSQL when it answers): one key and scope, 200 decisions of
the sample request with Outcome Records (so every new decision of that policy, verdict and
action carries a signed `decision_confidence` block), then `gate serve` (2 workers) is started
alternately with `GATE_DECIDE_CONFIDENCE=false` (the baseline: no counter read, no block) and
`true` (order off-on, on-off, … so a load trend favours neither), `--rounds` times each, and
`wrk` posts the sample request over `--connections` connections (16 by default: with a handful,
the kernel may hand every connection to one of the two workers, which halves a run's throughput
whatever it measures). The figures are the ratio of the median decide throughput with confidence
to the median without, and the median of each round's own on/off ratio (the two runs of a round
are adjacent in time), with `uptime` load beside them; and, less sensitive to scheduling noise,
the CPU the machine spends per decide outside wrk (server workers and database; /proc/stat's
busy time minus wrk's own rusage), whose off/on ratio is the throughput ratio of a CPU-bound
server. The target (issue 9): at or above 0.90.

Run: .venv/bin/python benchmarks/bench_confidence.py [--duration 8] [--rounds 7] [--connections 16]
Needs: wrk, Redis on 127.0.0.1:6379 (shared rate limits for 2 workers).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import GATE, REDIS, ROOT, WRK_POST, _database, _port, _wait, _wrk

OUTCOMES = ("succeeded", "succeeded", "succeeded", "failed", "succeeded")


def _post(url: str, body: dict, key: str) -> dict:
    request = urllib.request.Request(url, method="POST", data=json.dumps(body).encode(),
                                     headers={"content-type": "application/json", "x-api-key": key})
    with urllib.request.urlopen(request) as response:
        return {"body": json.loads(response.read()), "headers": dict(response.headers)}


def _serve(env: dict, confidence: bool) -> tuple[subprocess.Popen, str]:
    port = _port()
    server = subprocess.Popen(
        [GATE, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
        env={**env, "GATE_DECIDE_CONFIDENCE": "true" if confidence else "false"},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    _wait(base + "/api/decision/status")
    return server, base


def _stop(server: subprocess.Popen) -> None:
    server.terminate()
    server.wait(timeout=15)


def _busy_seconds() -> float:
    """CPU time the whole machine has spent busy (every core; /proc/stat, all but idle and iowait)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def _children_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _measured_wrk(url: str, script: Path, duration: int, connections: int) -> dict:
    """A wrk run, plus the CPU the machine spent per request outside wrk itself: the server's
    workers and, on PostgreSQL, its backends (wrk's own CPU is a finished child's rusage)."""
    busy, children = _busy_seconds(), _children_seconds()
    result = _wrk(url, script, duration, connections)
    busy, children = _busy_seconds() - busy, _children_seconds() - children
    result["cpu_ms_per_request"] = 1000 * max(busy - children, 0.0) / max(result["requests"], 1)
    return result


def run_backend(kind: str, duration: int, rounds: int, connections: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-conf-{kind}-"))
    url, drop = _database(kind, home)
    env = {**os.environ, "GATE_HOME": str(home), "GATE_DATABASE_URL": url, "GATE_REDIS_URL": REDIS,
           "GATE_SIGNING_KEY_FILE": str(home / "keys.json")}
    try:
        subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True)
        key = json.loads(subprocess.run([GATE, "keys", "create", "--scope", "bench", "--rate-limit", "100000000",
                                         "--monthly-cap", "100000000", "--json"], env=env, check=True,
                                        capture_output=True, text=True).stdout)["api_key"]
        request = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
        server, base = _serve(env, True)
        try:
            for index in range(200):
                record = _post(base + "/api/decide", request, key)["body"]
                _post(f"{base}/api/decision/{record['decision_id']}/outcome",
                      {"outcome_status": OUTCOMES[index % len(OUTCOMES)], "action_executed": True,
                       "decision_record_hash": record["record_hash"]}, key)
            probe = _post(base + "/api/decide", request, key)
            block = probe["body"]["decision_confidence"]
        finally:
            _stop(server)
        script = home / "post.lua"
        script.write_text(WRK_POST.format(key=key, body=json.dumps(request)))
        runs: dict[str, list[float]] = {"off": [], "on": []}
        cpu: dict[str, list[float]] = {"off": [], "on": []}
        loads = []
        for index in range(rounds):
            # ABBA order: a load trend on a busy machine does not favour either side.
            for label in (("off", "on") if index % 2 == 0 else ("on", "off")):
                server, base = _serve(env, label == "on")
                try:
                    _wrk(base + "/api/decide", script, 2, connections)  # warm-up
                    result = _measured_wrk(base + "/api/decide", script, duration, connections)
                    if result["non_2xx"]:
                        raise RuntimeError(f"{result['non_2xx']} non-2xx answers with confidence {label}")
                    runs[label].append(result["requests_per_second"])
                    cpu[label].append(round(result["cpu_ms_per_request"], 3))
                finally:
                    _stop(server)
                loads.append(os.getloadavg()[0])
        off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
        # Each round's two runs are adjacent in time: the median of the rounds' own ratios is less
        # sensitive to the machine's drift than the ratio of the two medians.
        paired = statistics.median(b / a for a, b in zip(runs["off"], runs["on"], strict=True))
        return {"backend": kind, "rps_without_confidence": runs["off"], "rps_with_confidence": runs["on"],
                "median_without": off, "median_with": on, "ratio_with_vs_without": round(on / off, 3),
                "median_paired_ratio": round(paired, 3),
                "cpu_ms_per_decide_without": cpu["off"], "cpu_ms_per_decide_with": cpu["on"],
                # CPU-bound, throughput is inversely proportional to the CPU one decide costs.
                "cpu_ratio_without_vs_with": round(statistics.median(cpu["off"]) / statistics.median(cpu["on"]), 3),
                "load_1min": [round(value, 2) for value in loads],
                "block_sample": {k: block[k] for k in ("score", "level", "similar_decisions", "policy_stability")}}
    finally:
        drop()
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    results = [run_backend(kind, args.duration, args.rounds, args.connections) for kind in args.backends.split(",")]
    print(f"{'backend':12} {'rps off':>9} {'rps on':>9} {'on/off':>7} {'paired':>7} {'cpu ms off':>10} "
          f"{'cpu ms on':>9} {'off/on':>7}  load (1 min) per run")
    for r in results:
        cpu_off, cpu_on = (statistics.median(r[k]) for k in ("cpu_ms_per_decide_without", "cpu_ms_per_decide_with"))
        print(f"{r['backend']:12} {r['median_without']:9.0f} {r['median_with']:9.0f} "
              f"{r['ratio_with_vs_without']:7.3f} {r['median_paired_ratio']:7.3f} {cpu_off:10.3f} {cpu_on:9.3f} "
              f"{r['cpu_ratio_without_vs_with']:7.3f}  {r['load_1min']}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "confidence.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
