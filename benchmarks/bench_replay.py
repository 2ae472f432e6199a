"""Historical replay of one stored decision (issue 8): median latency against a baseline, one run.

Through the Flask test client on a fresh SQLite ledger with a signing keyring, for a direct
decision and for an adapter decision (a fake in-process adapter: its own work is ~0, so the
figure is replay's cost beyond adapter work):

* baseline: `GET /api/decision/{id}` (auth, scoped read, JSON parse, projection, response);
* `POST /api/decision/{id}/replay` (historical): the same read plus the snapshot (cached,
  immutable), the stored-input hash check, re-preparation, evaluation, the record rebuild and
  its hashes, the comparison and the response;
* `POST /api/decision/{id}/diff` (current mode: one more snapshot read, the scope's current one).

The target is replay − baseline < 5 ms median. Results go to benchmarks/results/replay.json;
`uptime` load is printed beside them (the machine is shared).

Run: .venv/bin/python benchmarks/bench_replay.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "replay.json"
TARGET_MS = 5.0


def medians_ms(calls: dict, n: int) -> dict[str, float]:
    """Median wall time of each call, measured interleaved (round robin) so that load changes on a
    shared machine hit every call alike."""
    for call in calls.values():
        for _ in range(20):  # warm caches (snapshot, evaluator, canonical sort keys)
            call()
    timings: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            response = call()
            timings[name].append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200, response.get_data(as_text=True)
    return {name: statistics.median(values) for name, values in timings.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()

    from benchmarks.gate_app import embedded_app
    from gate_cli.keys_cmd import create_key
    from tests.fake_adapters import FakeRegistry, adapter_request

    with embedded_app(adapters=FakeRegistry()) as (settings, app):
        key = create_key(settings, "bench", "starter", 1_000_000, None)["api_key"]
        client, headers = app.test_client(), {"x-api-key": key}
        direct = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
        rows = []
        for name, body in (("direct", direct), ("adapter", adapter_request())):
            decision_id = client.post("/api/decide", json=body, headers=headers).json["decision_id"]
            figures = medians_ms({
                "get": lambda decision_id=decision_id: client.get(f"/api/decision/{decision_id}", headers=headers),
                "replay": lambda decision_id=decision_id: client.post(f"/api/decision/{decision_id}/replay",
                                                                      headers=headers),
                "diff": lambda decision_id=decision_id: client.post(f"/api/decision/{decision_id}/diff",
                                                                    headers=headers),
            }, args.n)
            base, replay, diff = figures["get"], figures["replay"], figures["diff"]
            check = client.post(f"/api/decision/{decision_id}/replay", headers=headers).json
            assert check["replay_status"] == "matched"
            row = {"decision": name, "baseline_get_ms": round(base, 3), "historical_replay_ms": round(replay, 3),
                   "current_diff_ms": round(diff, 3), "replay_minus_baseline_ms": round(replay - base, 3),
                   "ratio": round(replay / base, 2), "target_met": replay - base < TARGET_MS}
            rows.append(row)
            print(f"{name:8} GET {base:6.2f} ms  replay {replay:6.2f} ms  diff {diff:6.2f} ms  "
                  f"replay-GET {replay - base:5.2f} ms (target < {TARGET_MS} ms: "
                  f"{'met' if row['target_met'] else 'MISSED'})  ratio {replay / base:4.2f}")
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("load:", load)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "cpus": os.cpu_count(), "uptime": load, "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
