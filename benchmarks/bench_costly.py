"""What the costly keyed routes cost, as ratios to a small decide measured in the same run (issue 18, item 7).

The cost weights of `api/costs.py` are set from these ratios. Through the Flask test client on a
fresh SQLite ledger with a signing keyring and one policy with `--decisions` stored decisions
(default 1,000, the reports' default `limit`), each call is timed interleaved (round robin) so
that load changes on the shared machine hit every call alike; the figure is the median.

* baseline: `POST /api/decide` with the sample pricing-exception request (about 1 KiB);
* replay, diff (no body, and with an `input` override of 1,000 / 10,000 / 50,000 keys, with
  the cost per KiB of body), counterfactuals with 1 and 20 scenarios;
* the four policy reports at `limit=1000`, policy alerts, packet export, the chain view,
  stored-record verification and a plain read;
* in another scope, replay, verify and packet export of a decision stored with 10,000 extra facts
  (~150 KiB), and an anomaly report of that scope's 51 decisions of the policy (one of them
  that wide): a report's cost grows with the width of the facts, which its weight does not see.

The app charges as in production, with a key whose cost window is never reached; the table prints
each call's ratio beside the units `api/costs.py` charged for it (`X-RateLimit-Cost`), which is
how the weights were chosen (one unit is about one small decide).

Results go to benchmarks/results/costly.json with /proc/loadavg beside them.

Run: .venv/bin/python benchmarks/bench_costly.py [--n 15] [--decisions 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

RESULTS = ROOT / "benchmarks" / "results" / "costly.json"


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def medians_ms(calls: dict, n: int, charged: dict[str, str]) -> dict[str, float]:
    """Median ms of each call; `charged` receives each call's X-RateLimit-Cost (units charged)."""
    for name, call in list(calls.items()):  # warm caches (snapshots, evaluators, canonical keys)
        response = call()
        charged[name] = response.headers.get("X-RateLimit-Cost", "-")
        if response.status_code != 200:  # reported, not timed
            print(f"{name}: HTTP {response.status_code} {response.get_data(as_text=True)[:200]}")
            del calls[name]
    timings: dict[str, list[float]] = {name: [] for name in calls}
    for _ in range(n):
        for name, call in calls.items():
            start = time.perf_counter()
            response = call()
            timings[name].append((time.perf_counter() - start) * 1000)
            assert response.status_code == 200, (name, response.get_data(as_text=True)[:300])
    return {name: statistics.median(values) for name, values in timings.items()}


def wide_input(base: dict, keys: int) -> dict:
    """The sample facts plus `keys` extra number facts (what a caller controls in a diff)."""
    return {**base, **{f"f{i}": i for i in range(keys)}}


def calls_for(client, headers: dict, wide_headers: dict, decision_id: str, policy_id: str, chain_id: str,
              facts: dict) -> dict:
    sample = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
    post = client.post
    calls = {
        "decide (baseline)": lambda: post("/api/decide", json=sample, headers=headers),
        "read record": lambda: client.get(f"/api/decision/{decision_id}", headers=headers),
        "verify stored": lambda: client.get(f"/api/decision/{decision_id}/verify", headers=headers),
        "replay": lambda: post(f"/api/decision/{decision_id}/replay", headers=headers),
        "diff": lambda: post(f"/api/decision/{decision_id}/diff", headers=headers),
    }
    for keys in (1_000, 10_000, 50_000):
        body = json.dumps({"input": wide_input(facts, keys)}).encode()
        calls[f"diff, {keys} keys ({len(body) // 1024} KiB)"] = (
            lambda body=body: post(f"/api/decision/{decision_id}/diff", data=body,
                                   headers={**headers, "Content-Type": "application/json"}))
    for count in (1, 20):
        scenarios = [{"scenario_id": f"s{i}", "context_patch": {"inputs": {"discount_percent": i}}}
                     for i in range(count)]
        calls[f"counterfactuals, {count}"] = (
            lambda scenarios=scenarios: post(f"/api/decision/{decision_id}/counterfactuals",
                                             json={"scenarios": scenarios}, headers=headers))
    for kind in ("effectiveness", "confidence", "anomalies", "benchmarks"):
        calls[f"report {kind}"] = (lambda kind=kind: client.get(
            f"/api/decision/policies/{policy_id}/{kind}?limit=1000", headers=headers))
    calls["policy alerts"] = lambda: client.get("/api/policy-alerts", headers=headers)
    calls["packet"] = lambda: client.get(f"/api/decision/{decision_id}/packet", headers=headers)
    calls["chain, limit=1000"] = lambda: client.get(f"/api/decision/chains/{chain_id}?limit=1000", headers=headers)
    calls["chain, limit=20"] = lambda: client.get(f"/api/decision/chains/{chain_id}", headers=headers)
    # Another scope: 50 sample decisions and one stored with 10,000 extra facts (about 150 KiB of
    # request): what re-reading it costs, and what one wide decision does to a report of its policy.
    for _ in range(50):
        post("/api/decide", json=sample, headers=wide_headers)
    wide = {**sample, "context": {**sample["context"], "inputs": wide_input(facts, 10_000)}}
    wide_id = post("/api/decide", json=wide, headers=wide_headers).json["decision_id"]
    calls["replay, stored 10000 keys"] = lambda: post(f"/api/decision/{wide_id}/replay", headers=wide_headers)
    calls["verify stored, 10000 keys"] = lambda: client.get(f"/api/decision/{wide_id}/verify", headers=wide_headers)
    calls["packet, stored 10000 keys"] = lambda: client.get(f"/api/decision/{wide_id}/packet", headers=wide_headers)
    calls["report anomalies, 51 (1 wide)"] = lambda: client.get(
        f"/api/decision/policies/{policy_id}/anomalies?limit=1000", headers=wide_headers)
    return calls


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=15)
    parser.add_argument("--decisions", type=int, default=1000)
    args = parser.parse_args()

    from benchmarks.gate_app import embedded_app
    from gate_cli.keys_cmd import create_key

    with embedded_app() as (settings, app):
        key = create_key(settings, "bench", "scale", 10_000_000, None)["api_key"]
        client, headers = app.test_client(), {"x-api-key": key}
        sample = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
        record = None
        for i in range(args.decisions):
            facts = {**sample["context"]["inputs"], "discount_percent": i % 40}
            record = client.post("/api/decide", json={**sample, "context": {**sample["context"], "inputs": facts}},
                                 headers=headers).json
        load_before = loadavg()
        wide_headers = {"x-api-key": create_key(settings, "bench-wide", "scale", 10_000_000, None)["api_key"]}
        calls = calls_for(client, headers, wide_headers, record["decision_id"], record["policy_id"],
                          record["audit_chain"]["chain_id"],
                          sample["context"]["inputs"])
        charged: dict[str, str] = {}
        figures = medians_ms(calls, args.n, charged)
        load_after = loadavg()
    base = figures["decide (baseline)"]
    rows = [{"call": name, "median_ms": round(ms, 2), "ratio_to_decide": round(ms / base, 1),
             "units_charged": charged[name]} for name, ms in figures.items()]
    print(f"{'call':40} {'median':>12}  {'ratio':>9}  units charged (api/costs.py; uncapped: this key's window is huge)")
    for row in rows:
        print(f"{row['call']:40} {row['median_ms']:9.2f} ms  {row['ratio_to_decide']:7.1f} x  {row['units_charged']}")
    print("loadavg before:", load_before, " after:", load_after)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"n": args.n, "decisions": args.decisions, "cpus": os.cpu_count(),
                                   "loadavg": [load_before, load_after], "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
