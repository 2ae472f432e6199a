"""Merkle proofs from a node store vs recomputing the tree from every leaf (gate.chain.merkle).

Builds the RFC 6962 node store of a 100,000-leaf chain in memory (a dict keyed by
(level, index), exactly the rows a ledger would keep), then measures, in the same run:

* producing an inclusion proof / a consistency proof / the root from stored nodes, and
  verifying those proofs (what a ledger and a verifier do per request);
* the baseline: recomputing the root with `mth` over all 100,000 leaves (what a ledger without
  a node store must do at least once per proof), and the list-based `inclusion_proof`.

Medians over many random indices; ratios are baseline time / operation time. Results go to
benchmarks/results/chain.json.

Run: .venv/bin/python benchmarks/bench_chain.py [--leaves 100000] [--samples 300] [--baseline-runs 7]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gate.chain.merkle import (  # noqa: E402
    complete_subtrees,
    consistency_proof_from_nodes,
    inclusion_proof,
    inclusion_proof_from_nodes,
    mth,
    nodes_needed_for_consistency,
    nodes_needed_for_inclusion,
    root_from_nodes,
    verify_consistency,
    verify_inclusion,
)

RESULTS = ROOT / "benchmarks" / "results" / "chain.json"


def median_us(function, arguments) -> float:
    """Median wall time in microseconds of `function(*args)` over the argument tuples."""
    timings = []
    for args in arguments:
        start = time.perf_counter_ns()
        function(*args)
        timings.append(time.perf_counter_ns() - start)
    return statistics.median(timings) / 1000


def build(leaf_count: int):
    leaves = [hashlib.sha256(f"leaf {i}".encode()).hexdigest() for i in range(leaf_count)]
    start = time.perf_counter()
    store = {(node.level, node.index): node.hash for node in complete_subtrees(leaves)}
    return leaves, store, time.perf_counter() - start


def measure(leaf_count: int, samples: int, baseline_runs: int) -> dict:
    leaves, store, build_seconds = build(leaf_count)
    get_node = lambda level, index: store[(level, index)]  # noqa: E731
    rng = random.Random(6962)
    n = leaf_count
    indices = [rng.randrange(n) for _ in range(samples)]
    sizes = [rng.randrange(1, n) for _ in range(samples)]
    root_n = root_from_nodes(n, get_node)
    roots_m = {m: root_from_nodes(m, get_node) for m in sizes}
    inclusion = {i: inclusion_proof_from_nodes(i, n, get_node) for i in indices}
    consistency = {m: consistency_proof_from_nodes(m, n, get_node) for m in sizes}
    assert all(verify_inclusion(i, n, leaves[i], inclusion[i], root_n) for i in indices)
    assert all(verify_consistency(m, n, roots_m[m], root_n, consistency[m]) for m in sizes)

    baseline_us = median_us(mth, [(leaves,)] * baseline_runs)
    rows = {
        "root_from_nodes": median_us(root_from_nodes, [(n, get_node)] * samples),
        "inclusion_proof_from_nodes": median_us(inclusion_proof_from_nodes, [(i, n, get_node) for i in indices]),
        "verify_inclusion": median_us(verify_inclusion, [(i, n, leaves[i], inclusion[i], root_n) for i in indices]),
        "consistency_proof_from_nodes": median_us(consistency_proof_from_nodes, [(m, n, get_node) for m in sizes]),
        "verify_consistency": median_us(verify_consistency, [(m, n, roots_m[m], root_n, consistency[m]) for m in sizes]),
        "inclusion_proof (list-based, all leaves)": median_us(
            inclusion_proof, [(i, leaves) for i in indices[:baseline_runs]]),
    }
    rows["inclusion: produce + verify"] = rows["inclusion_proof_from_nodes"] + rows["verify_inclusion"]
    rows["consistency: produce + verify"] = rows["consistency_proof_from_nodes"] + rows["verify_consistency"]
    reads = {
        "inclusion_max": max(len(nodes_needed_for_inclusion(i, n)) for i in indices),
        "consistency_max": max(len(nodes_needed_for_consistency(m, n)) for m in sizes),
    }
    return {
        "leaves": n,
        "stored_nodes": len(store),
        "store_build_seconds": round(build_seconds, 3),
        "samples": samples,
        "baseline": {"name": "mth over all leaves", "median_us": round(baseline_us, 1), "runs": baseline_runs},
        "operations": {
            name: {"median_us": round(us, 2), "baseline_ratio": round(baseline_us / us, 1)} for name, us in rows.items()
        },
        "node_reads": reads,
        "python": platform.python_version(),
        "machine": platform.machine(),
    }


def print_table(result: dict) -> None:
    print(f"{result['leaves']:,} leaves, {result['stored_nodes']:,} stored nodes "
          f"(built in {result['store_build_seconds']} s); node reads per proof <= "
          f"{result['node_reads']['inclusion_max']} (inclusion), {result['node_reads']['consistency_max']} (consistency)")
    print(f"baseline: {result['baseline']['name']}: median {result['baseline']['median_us']:,.1f} us")
    print(f"{'operation':44} {'median us':>12} {'baseline / op':>14}")
    for name, row in result["operations"].items():
        print(f"{name:44} {row['median_us']:>12,.2f} {row['baseline_ratio']:>13,.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=100_000)
    parser.add_argument("--samples", type=int, default=300)
    parser.add_argument("--baseline-runs", type=int, default=7)
    options = parser.parse_args()
    result = measure(options.leaves, options.samples, options.baseline_runs)
    print_table(result)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
