"""Decision Packet verification (gate.packets.verify_packet) vs recomputing the whole chain.

Builds, once and in memory, a caller chain of 100,000 links (`gate.chain.links.new_link`) with its
RFC 6962 node store (`gate.chain.merkle.CompactRange`), and one real decision near the head with
1,000 execution receipts, 30 outcomes and 10 CRM syncs (`gate.receipts` builders). Its packet
is exported with execution_limit 1000 and chain_limit 20 (window of 20 links, an inclusion
proof of ~17 hashes, a signed checkpoint), then measured in the same run:

* `verify_packet` with the full key registry (every step: packet hash, record hashes and
  signature, 1,000 receipt hashes and links, reports, 20 links, inclusion proof, checkpoint),
  and the same decision exported without receipts (the chain part alone);
* baseline 1: `verify_links` over all 100,000 links (what checking the rolling chain costs
  without a Merkle proof);
* baseline 2: `mth` over all 100,000 leaf hashes (recomputing the tree root).

Figures are medians; ratios are an operation's time / verify_packet's time (full packet, and
the chain part alone). Target: verify_packet median under
50 ms. Results go to benchmarks/results/packet.json.

Run: .venv/bin/python benchmarks/bench_packet.py [--links 100000] [--receipts 1000] [--samples 31] [--check]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "packets"))  # the realistic part builders of the packet tests

from packet_support import (  # noqa: E402
    Chain,
    anchors,
    at,
    chained_record,
    crm_syncs,
    executions,
    intelligence_reports,
    make_record,
    outcomes,
)

from gate.chain.links import verify_links  # noqa: E402
from gate.chain.merkle import mth  # noqa: E402
from gate.packets import PacketOptions, build_packet, verify_packet  # noqa: E402
from gate.protocol.canonical import canonical_text  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "packet.json"
TARGET_MS = 50.0


def timed_ms(function, runs: int) -> list[float]:
    timings = []
    for _ in range(runs):
        gc.collect()
        start = time.perf_counter_ns()
        function()
        timings.append((time.perf_counter_ns() - start) / 1e6)
    return timings


def build(links: int, receipts: int):
    start = time.perf_counter()
    chain = Chain()
    position = links - 10
    chain.filler(position - 1, start_seconds=-100_000)
    record = chained_record(chain, make_record())
    chain.filler(links - position, start_seconds=30)
    chain_seconds = time.perf_counter() - start
    options = PacketOptions(execution_limit=1000, outcome_limit=1000, chain_limit=20)
    start = time.perf_counter()
    packet = build_packet(
        record=record, exported_at=at(7200), options=options,
        executions=executions(record, receipts), outcomes=outcomes(record, 30), crm_syncs=crm_syncs(record, 10),
        chain=chain.excerpt(position, options.chain_limit), intelligence_reports=intelligence_reports(record),
    )
    build_seconds = time.perf_counter() - start
    # The same decision exported without receipts: what the chain part of a packet costs.
    bare = build_packet(record=record, exported_at=at(7200), options=options,
                        chain=chain.excerpt(position, options.chain_limit))
    return chain, packet, bare, position, chain_seconds, build_seconds


def measure(link_count: int, receipt_count: int, samples: int, baseline_runs: int) -> dict:
    chain, packet, bare, position, chain_seconds, build_seconds = build(link_count, receipt_count)
    trust = anchors()
    result = verify_packet(packet, anchors=trust)
    assert result.verified, result.failed_checks
    assert verify_links(chain.links).valid
    leaves = [link["leaf_hash"] for link in chain.links]
    assert mth(leaves) == chain.tree.root() == packet["audit_chain"]["checkpoint"]["root_hash"]

    assert verify_packet(bare, anchors=trust).verified
    verify = timed_ms(lambda: verify_packet(packet, anchors=trust), samples)
    verify_bare = timed_ms(lambda: verify_packet(bare, anchors=trust), samples)
    rolling = timed_ms(lambda: verify_links(chain.links), baseline_runs)
    tree = timed_ms(lambda: mth(leaves), baseline_runs)
    verify_ms = statistics.median(verify)
    bare_ms = statistics.median(verify_bare)
    rows = {
        "verify_packet (chain_limit 20, execution_limit 1000)": verify,
        "verify_packet, same decision without receipts": verify_bare,
        "baseline: verify_links over all links": rolling,
        "baseline: mth over all leaves": tree,
    }
    return {
        "links": link_count,
        "record_position": position,
        "execution_receipts": receipt_count,
        "packet_bytes": len(canonical_text(packet).encode("utf-8")),
        "components": packet["packet_manifest"]["components"],
        "chain_build_seconds": round(chain_seconds, 2),
        "packet_build_ms": round(build_seconds * 1000, 1),
        "samples": samples,
        "baseline_runs": baseline_runs,
        "target_ms": TARGET_MS,
        "operations": {
            name: {
                "median_ms": round(statistics.median(times), 2),
                "min_ms": round(min(times), 2),
                "ratio_to_verify_packet": round(statistics.median(times) / verify_ms, 1),
                "ratio_to_chain_part": round(statistics.median(times) / bare_ms, 1),
            }
            for name, times in rows.items()
        },
        "verify_packet_median_ms": round(verify_ms, 2),
        "meets_target": verify_ms < TARGET_MS,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def print_table(result: dict) -> None:
    print(f"{result['links']:,}-link chain (built in {result['chain_build_seconds']} s), record at position "
          f"{result['record_position']:,}, {result['execution_receipts']:,} execution receipts; packet "
          f"{result['packet_bytes']:,} bytes, built in {result['packet_build_ms']} ms")
    print(f"{'operation':56} {'median ms':>10} {'min ms':>9} {'/ verify':>9} {'/ chain part':>13}")
    for name, row in result["operations"].items():
        print(f"{name:56} {row['median_ms']:>10,.2f} {row['min_ms']:>9,.2f} {row['ratio_to_verify_packet']:>8,.1f}x"
              f" {row['ratio_to_chain_part']:>12,.1f}x")
    verdict = "meets" if result["meets_target"] else "MISSES"
    print(f"verify_packet median {result['verify_packet_median_ms']} ms: {verdict} the {result['target_ms']:.0f} ms target")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--links", type=int, default=100_000)
    parser.add_argument("--receipts", type=int, default=1000)
    parser.add_argument("--samples", type=int, default=31)
    parser.add_argument("--baseline-runs", type=int, default=5)
    parser.add_argument("--check", action="store_true", help="exit 1 when the target is missed")
    options = parser.parse_args()
    result = measure(options.links, options.receipts, options.samples, options.baseline_runs)
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    return 0 if result["meets_target"] or not options.check else 1


if __name__ == "__main__":
    sys.exit(main())
