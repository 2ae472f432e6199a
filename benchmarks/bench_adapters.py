"""Trusted adapters: worker start-up, the warm pool's effect, and a decide with an adapter against a
direct decide, all measured in one run.

Rows (median of N, wall time, `time.perf_counter`):

- worker start-up: `python -I -S -B worker.py` spawned until its ready line (interpreter up,
  limits set, audit hook installed), no job;
- cold run: `AdapterRegistry.run` of the shipped `refund_window` adapter with pool size 0 (every
  run spawns its worker, waits for it, runs, kills and reaps it);
- pooled run, paced: the same with pool size 2 and 150 ms between runs (the replacement worker is
  ready by the next run: the steady state of a server whose decides are not back to back);
- pooled run, back to back: no pause (the replacement may still be starting);
- adapter's own work: the job time inside the worker (send job → result line), reported by the
  executor as `duration_ms`;
- direct decide / adapter decide: `POST /api/decide` through the Flask test client on a SQLite
  ledger, the shipped `pricing-exception` request (context.inputs) against the shipped
  `pricing-margin` request (trusted adapter, pool size 2, paced like above). Each decide stores a
  signed record; idempotency keys are unique so nothing replays.

Ratios: cold / pooled-paced, adapter decide / direct decide, and the adapter decide's overhead
beyond the direct decide in ms. `uptime` load is printed before and after. Results:
`benchmarks/results/adapters.json`.

Run: .venv/bin/python benchmarks/bench_adapters.py [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.adapters import AdapterRegistry, builtin_adapters, executor  # noqa: E402
from gate.adapters.executor import WorkerPool  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
PACE_S = 0.15


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def refund_invocation(registry: AdapterRegistry) -> dict:
    adapter = registry.get("refund_window", "1.0.0")
    return {"adapter_id": adapter.adapter_id, "version": adapter.version, "manifest_hash": adapter.manifest_hash,
            "input": {"purchase_date": "2026-05-01", "request_date": "2026-05-20", "window_days": 30}}


def bench_startup(runs: int) -> list[float]:
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        worker = executor._Worker(256)
        line = worker.read_line(time.perf_counter() + 10)
        samples.append(time.perf_counter() - started)
        assert line and b"ready" in line
        worker.kill()
    return samples


def bench_runs(pool_size: int, runs: int, pace: float) -> tuple[list[float], list[float]]:
    registry = AdapterRegistry(builtin_adapters(), pool=WorkerPool(size=pool_size))
    invocation = refund_invocation(registry)
    if pool_size:
        registry.pool.warm()
        time.sleep(0.5)
    totals, own = [], []
    for _ in range(runs):
        started = time.perf_counter()
        run = registry.run(invocation)
        totals.append(time.perf_counter() - started)
        own.append(run.duration_ms / 1000)
        if pace:
            time.sleep(pace)
    registry.pool.close()
    return totals, own


def bench_decides(runs: int) -> dict[str, list[float]]:
    from benchmarks.gate_app import bench_app, bench_key

    home = Path(tempfile.mkdtemp(prefix="bench_adapters_"))
    settings, app = bench_app(home, env={"GATE_ADAPTER_POOL_SIZE": "2"})
    key = bench_key(settings, None, plan="scale")
    client = app.test_client()
    bodies = {
        "direct": json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text()),
        "adapter": json.loads((ROOT / "gate" / "data" / "requests" / "pricing-margin.json").read_text()),
    }
    app.extensions["gate"].service.adapters.pool.warm()
    time.sleep(0.5)
    samples: dict[str, list[float]] = {"direct": [], "adapter": []}
    for index in range(runs + 3):
        for name in ("direct", "adapter"):
            started = time.perf_counter()
            response = client.post("/api/decide", json=bodies[name],
                                   headers={"x-api-key": key, "x-idempotency-key": f"{name}-{index}"})
            elapsed = time.perf_counter() - started
            assert response.status_code == 200, response.json
            if index >= 3:  # warm-up: first decides bind snapshots, fill caches
                samples[name].append(elapsed)
            time.sleep(PACE_S)
    app.extensions["gate"].service.adapters.pool.close()
    app.extensions["gate"].ledger.dispose()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    load_before = uptime()
    startup = bench_startup(args.runs)
    cold, cold_own = bench_runs(0, args.runs, 0)
    paced, paced_own = bench_runs(2, args.runs, PACE_S)
    back_to_back, _ = bench_runs(2, args.runs, 0)
    decides = bench_decides(args.runs)
    load_after = uptime()
    result = {
        "runs": args.runs,
        "worker_startup_ms": median_ms(startup),
        "cold_run_ms": median_ms(cold),
        "pooled_run_paced_ms": median_ms(paced),
        "pooled_run_back_to_back_ms": median_ms(back_to_back),
        "adapter_own_work_ms": median_ms(cold_own + paced_own),
        "direct_decide_ms": median_ms(decides["direct"]),
        "adapter_decide_ms": median_ms(decides["adapter"]),
    }
    result["ratios"] = {
        "cold_over_pooled_paced": round(result["cold_run_ms"] / result["pooled_run_paced_ms"], 2),
        "adapter_decide_over_direct_decide": round(result["adapter_decide_ms"] / result["direct_decide_ms"], 2),
        "startup_share_of_cold_run": round(result["worker_startup_ms"] / result["cold_run_ms"], 2),
    }
    result["adapter_decide_overhead_ms"] = round(result["adapter_decide_ms"] - result["direct_decide_ms"], 3)
    result["uptime_before"], result["uptime_after"] = load_before, load_after
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "adapters.json").write_text(json.dumps(result, indent=2) + "\n")
    width = max(len(k) for k in result)
    for name, value in result.items():
        print(f"{name:<{width}}  {value}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
