"""The engines on a local Dask cluster against one process, at N decisions (default 1,000,000).

    .venv/bin/python benchmarks/bench_cluster.py [--decisions N] [--workers 2]

Three workloads, each run in this process and on a LocalCluster of `--workers` worker processes
(one thread each), the cluster's start timed apart; every pair's results are checked equal first:

* reports: every report kind of one policy over the whole history, the engines' partials from
  the rows (the single-process path with the dataset's rollups put aside, `rollup=None`),
  against `workbench.cluster.reports.cluster_frames`;
* dry-run: `benchmarks/dryrun_data.py`'s history (same N), `dry_run(…)` against `dry_run(…, cluster=)`;
* rollup rebuild: `workbench.dataset.rebuild.rebuild_rollups` against `workbench.cluster.rebuild`.

Figures are wall seconds and the ratio cluster / one process, with the load average (`uptime`)
before and after: on a shared 2-core machine the ratio says more about the machine than the code.
Results: benchmarks/results/cluster.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import dryrun_data  # noqa: E402

from gate.reports.registry import REPORTS, Cohort  # noqa: E402
from workbench.cluster import LOCAL, connect  # noqa: E402
from workbench.cluster.rebuild import cluster_rebuild  # noqa: E402
from workbench.cluster.reports import cluster_frames  # noqa: E402
from workbench.dataset.load import from_dataset  # noqa: E402
from workbench.dataset.rebuild import rebuild_rollups  # noqa: E402
from workbench.dataset.synth import synthesize  # noqa: E402
from workbench.migration import dry_run  # noqa: E402
from workbench.reports.policy import ReportParams, build_report  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
POLICY = "refund_approval"
NOW = "2026-11-22T00:00:00.000Z"
PARAMS = ReportParams(limit=None)


def load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def timed(call):
    started = time.perf_counter()
    value = call()
    return value, time.perf_counter() - started


def datasets(n: int) -> tuple[Path, Path]:
    synth, history = RESULTS / "data" / f"cluster-synth-{n}", RESULTS / "data" / f"dryrun-{n}"
    if not (synth / "manifest.json").exists():
        shutil.rmtree(synth, ignore_errors=True)
        _, seconds = timed(lambda: synthesize(str(synth), decisions=n, seed=7))
        print(f"synthesized {n:,} decisions in {seconds:.1f} s", flush=True)
    if not (history / "manifest.json").exists() or json.loads((history / "manifest.json").read_text()).get(
            "decisions") != n:
        shutil.rmtree(history, ignore_errors=True)
        _, seconds = timed(lambda: dryrun_data.generate(history, n))
        print(f"generated the dry-run history ({n:,}) in {seconds:.1f} s", flush=True)
    return synth, history


def reports(client, root: Path) -> dict[str, float]:
    cohort = Cohort(own_scope="", opted_in=frozenset())
    names = [name for name, kind in REPORTS.items() if not kind.cohort]

    def single():
        return {n: build_report(REPORTS[n], replace(from_dataset(root, policy_id=POLICY, limit=None), rollup=None),
                                POLICY, PARAMS, cohort) for n in names}

    def clustered():
        frames = cluster_frames(client, root, policy_id=POLICY)
        return {n: build_report(REPORTS[n], frames, POLICY, PARAMS, cohort) for n in names}

    a, one = timed(single)
    b, many = timed(clustered)
    assert a == b, "cluster reports differ"
    return {"single_s": round(one, 2), "cluster_s": round(many, 2), "ratio": round(many / one, 2)}


def dry_runs(client, root: Path) -> dict[str, float]:
    draft = dryrun_data.rulebooks()[1]
    a, one = timed(lambda: dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW).manifest)
    b, many = timed(lambda: dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=root, created_at=NOW,
                                    cluster=client).manifest)
    assert a == b, "cluster dry-run differs"
    return {"single_s": round(one, 2), "cluster_s": round(many, 2), "ratio": round(many / one, 2),
            "result_hash_equal": a["dry_run"]["result_hash"] == b["dry_run"]["result_hash"]}


def rebuilds(client, root: Path) -> dict[str, float]:
    here, there = RESULTS / "data" / "cluster-rebuild-a", RESULTS / "data" / "cluster-rebuild-b"
    for copy in (here, there):
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(root, copy)
    a, one = timed(lambda: rebuild_rollups(str(here), signer=None))
    b, many = timed(lambda: cluster_rebuild(client, str(there), signer=None))
    assert a["rollups"]["rows"] == b["rollups"]["rows"]
    return {"single_s": round(one, 2), "cluster_s": round(many, 2), "ratio": round(many / one, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--decisions", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    synth, history = datasets(args.decisions)
    out = {"decisions": args.decisions, "workers": args.workers, "threads_per_worker": 1,
           "cpus": os.cpu_count(), "load_before": load()}
    started = time.perf_counter()
    with connect(LOCAL, workers=args.workers) as client:
        out["cluster_start_s"] = round(time.perf_counter() - started, 2)
        for name, run in (("reports", lambda: reports(client, synth)), ("dry_run", lambda: dry_runs(client, history)),
                          ("rollup_rebuild", lambda: rebuilds(client, synth))):
            out[name] = run()
            print(name, out[name], "load", load(), flush=True)
    out["load_after"] = load()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "cluster.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
