"""MCP `tools/call` over HTTP: gunicorn (2 workers) on loopback, driven by `wrk`.

Starts a real `gate serve --workers 2` (Redis for the shared per-client windows, the limit set
far above the load), checks one call end to end (a JSON-RPC result with `isError: false` and
the expected verdict), then drives `POST /api/mcp` with a `refund_eligibility` call. Baselines
in the same run on the same server: `GET /openapi.json` (a cached document, the ceiling of the
HTTP stack) and `GET /api/decision/status` (the readiness route). Figures are ratios to them.

Target: p99 < 20 ms for tools/call on 2 workers.

Run: .venv/bin/python benchmarks/bench_mcp.py [--duration 10] [--connections 4]
Needs: wrk (Debian package `wrk`), Redis on 127.0.0.1:6379.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import GATE, REDIS, ROOT, _port, _wait, _wrk

CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "refund_eligibility", "arguments": {"vendor": "Adobe", "region": "US", "plan": "annual",
                                                               "days_since_purchase": 10}}}
WRK_POST = """
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["accept"] = "application/json, text/event-stream"
wrk.body = [==[{body}]==]
"""


def _call_once(base: str) -> dict:
    request = urllib.request.Request(base + "/api/mcp", method="POST", data=json.dumps(CALL).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def run(duration: int, connections: int) -> dict:
    home = Path(tempfile.mkdtemp(prefix="gate-bench-mcp-"))
    env = {**os.environ, "GATE_HOME": str(home), "GATE_DATABASE_URL": f"sqlite:///{home / 'gate.db'}",
           "GATE_REDIS_URL": REDIS, "GATE_SIGNING_KEY_FILE": str(home / "keys.json"),
           "GATE_POLICYCHECK_RATE_LIMIT": "1000000"}
    server = None
    try:
        subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True)
        port = _port()
        server = subprocess.Popen([GATE, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "2"],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        _wait(base + "/api/decision/status")
        answer = _call_once(base)
        result = answer["result"]
        assert result["isError"] is False and result["structuredContent"]["verdict"] == "ALLOWED", answer
        script = home / "call.lua"
        script.write_text(WRK_POST.format(body=json.dumps(CALL)))
        _wrk(base + "/api/mcp", script, 2, connections)  # warm-up
        static = _wrk(base + "/openapi.json", None, duration, connections)
        status = _wrk(base + "/api/decision/status", None, duration, connections)
        call = _wrk(base + "/api/mcp", script, duration, connections)
        return {
            "baseline_openapi": static, "baseline_status": status, "tools_call": call,
            "p99_ratio_vs_openapi": round(call["p99_ms"] / static["p99_ms"], 2),
            "p99_ratio_vs_status": round(call["p99_ms"] / status["p99_ms"], 2),
            "rps_ratio_vs_openapi": round(call["requests_per_second"] / static["requests_per_second"], 3),
            "target_p99_ms": 20, "meets_target": call["p99_ms"] < 20 and call["non_2xx"] == 0,
            "load_average": os.getloadavg(),
        }
    finally:
        if server:
            server.terminate()
            server.wait(timeout=15)
        shutil.rmtree(home, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", type=int, default=4)
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    r = run(args.duration, args.connections)
    print(f"{'route':24} {'rps':>8} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8}")
    for name, key in (("GET /openapi.json", "baseline_openapi"), ("GET /api/decision/status", "baseline_status"),
                      ("POST /api/mcp tools/call", "tools_call")):
        m = r[key]
        print(f"{name:24} {m['requests_per_second']:8.0f} {m['p50_ms']:8.2f} {m['p99_ms']:8.2f} {m['non_2xx']:8d}")
    print(f"p99 tools/call ÷ openapi {r['p99_ratio_vs_openapi']}, ÷ status {r['p99_ratio_vs_status']}; "
          f"rps ÷ openapi {r['rps_ratio_vs_openapi']}; p99 < 20 ms: {r['meets_target']}; "
          f"load {tuple(round(x, 2) for x in r['load_average'])}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "mcp.json").write_text(json.dumps(r, indent=2))
    return 0  # the verdict on the target is printed; benchmarks/run keeps going either way


if __name__ == "__main__":
    sys.exit(main())
