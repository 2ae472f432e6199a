"""What the issue 18 item 4 ledger checks cost, as ratios to the reads they were added to.

One process, one SQLite ledger in a temporary GATE_HOME, a real app (`gate_cli.served_app.create_app`) and
its Flask test client. After `--decisions` decisions (each with two execution receipts on the
first), one checkpoint is published to the gate's checkpoint log. Then, interleaved, each
`--samples` times:

* hosted verify `GET /api/decision/{id}/verify` (the baseline of the hosted checks), and the
  checks this item added to it, alone: `chain_head_integrity` (newest link, peaks, stored-node
  root), `rulebook_snapshot_check` (snapshot re-read and re-hashed) and `witness_failures`
  (held checkpoint, consistency proof from stored nodes);
* the chain view `GET /api/decision/chains/{id}?limit=20` and its added checks alone (the same
  head and witness checks, and the window's snapshot checks);
* packet export `GET /api/decision/{id}/packet` and its added reads alone (`consistent_head`
  and the signed receipt head);
* `POST /api/decide` with `GATE_CHECKPOINT_EVERY=1` (a checkpoint published and logged after
  every decision: the worst case) against `GATE_CHECKPOINT_EVERY=0` (two apps on the same ledger).

Figures are medians; `/proc/loadavg` is recorded before and after (the machine is shared:
compare ratios, not times). Results go to benchmarks/results/tamper_checks.json.

Run: .venv/bin/python benchmarks/bench_tamper_checks.py [--decisions 300] [--samples 41]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.gate_app import bench_key, bench_settings  # noqa: E402
from gate.services.chains import (  # noqa: E402
    chain_head_integrity,
    chain_tree_root,
    rulebook_snapshot_check,
)
from gate_cli.served_app import create_app  # noqa: E402

REQUEST = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "unavailable"


def timed(function) -> float:
    start = time.perf_counter_ns()
    function()
    return (time.perf_counter_ns() - start) / 1e6


def make_apps(home: Path):
    settings = bench_settings(home, env={"GATE_POLICY_DIR": str(ROOT / "gate" / "data" / "rulebooks"),
                                         "GATE_CHECKPOINT_EVERY": "0"})
    quiet = create_app(settings)
    every = create_app(settings.with_(checkpoint_every=1))
    key = bench_key(settings, None, plan="scale")
    return quiet, every, key


def seed(client, key: str, count: int) -> dict:
    headers = {"x-api-key": key}
    records = [client.post("/api/decide", json=REQUEST, headers=headers).json for _ in range(count)]
    first = records[0]
    for ref in ("run-1", "run-2"):
        client.post(f"/api/decision/{first['decision_id']}/execution", headers=headers, json={
            "execution_status": "executed", "decision_record_hash": first["record_hash"],
            "decision_receipt_hash": first["receipt_hash"], "external_ref": ref})
    chain_id = first["audit_chain"]["chain_id"]
    assert client.get(f"/api/decision/chains/{chain_id}/checkpoint", headers=headers).status_code == 200
    return {"record": records[len(records) // 2], "chain_id": chain_id}


def measure(app, every_app, key: str, target: dict, samples: int) -> dict[str, list[float]]:
    client, every_client = app.test_client(), every_app.test_client()
    headers = {"x-api-key": key}
    rt = app.extensions["gate"]
    ledger, audit, lifecycle = rt.ledger, rt.audit, rt.lifecycle
    record, chain_id = target["record"], target["chain_id"]
    decision_id = record["decision_id"]
    scope = ledger.chain_head(chain_id)["scope"]

    def added_hosted():
        head = ledger.chain_head(chain_id)
        chain_head_integrity(ledger, chain_id, head)
        rulebook_snapshot_check(ledger, scope, record)
        audit.witness_failures(chain_id, head["size"], chain_tree_root(head))

    def added_view():
        added_hosted()  # the window's 20 decisions share one snapshot: one re-hash, as in the view

    def added_packet():
        audit.consistent_head(chain_id)
        lifecycle.store.receipt_head(decision_id)

    rows: dict[str, list[float]] = {name: [] for name in (
        "hosted_verify", "hosted_added", "chain_view", "chain_view_added", "packet_export", "packet_added",
        "decide_every_0", "decide_every_1")}
    for _ in range(samples):
        rows["hosted_verify"].append(timed(lambda: client.get(f"/api/decision/{decision_id}/verify", headers=headers)))
        rows["hosted_added"].append(timed(added_hosted))
        rows["chain_view"].append(timed(lambda: client.get(f"/api/decision/chains/{chain_id}?limit=20",
                                                           headers=headers)))
        rows["chain_view_added"].append(timed(added_view))
        rows["packet_export"].append(timed(lambda: client.get(f"/api/decision/{decision_id}/packet",
                                                              headers=headers)))
        rows["packet_added"].append(timed(added_packet))
        rows["decide_every_0"].append(timed(lambda: client.post("/api/decide", json=REQUEST, headers=headers)))
        rows["decide_every_1"].append(timed(lambda: every_client.post("/api/decide", json=REQUEST,
                                                                      headers=headers)))
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=300)
    parser.add_argument("--samples", type=int, default=41)
    args = parser.parse_args()
    before = loadavg()
    with tempfile.TemporaryDirectory() as folder:
        quiet, every, key = make_apps(Path(folder))
        target = seed(quiet.test_client(), key, args.decisions)
        rows = measure(quiet, every, key, target, args.samples)
        for app in (quiet, every):
            app.extensions["gate"].ledger.dispose()
    medians = {name: statistics.median(values) for name, values in rows.items()}
    ratios = {
        "hosted_verify_added_share": medians["hosted_added"] / medians["hosted_verify"],
        "chain_view_added_share": medians["chain_view_added"] / medians["chain_view"],
        "packet_export_added_share": medians["packet_added"] / medians["packet_export"],
        "decide_checkpoint_every_1_over_0": medians["decide_every_1"] / medians["decide_every_0"],
    }
    ratios["decide_checkpoint_every_100_over_0"] = 1 + (ratios["decide_checkpoint_every_1_over_0"] - 1) / 100
    result = {"decisions": args.decisions, "samples": args.samples, "loadavg_before": before,
              "loadavg_after": loadavg(), "median_ms": medians, "ratios": ratios}
    out = ROOT / "benchmarks" / "results" / "tamper_checks.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    for name, value in ratios.items():
        print(f"{name:40s} {value:6.3f}")
    print(f"loadavg before: {before}\nloadavg after:  {result['loadavg_after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
