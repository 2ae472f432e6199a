"""The dry-run at scale (issue 24, item 4): wall time, peak memory and how the time splits, at
`--decisions` (10M by default; 100M is the target), with identical figures on a sample.

Measured in one run on the synthetic history of `benchmarks/dryrun_data.py` (generated once
per size under benchmarks/results/data/, git-ignored; about 5 minutes per 10M on a loaded
2-core machine):

- end to end: `dry_run` + `write_dry_run` in a child process (streaming engine), its wall time
  and its own peak RSS (`VmHWM`, see bench_dry_run.big_run);
- the split, each a streaming pass over the same history aggregated to a few numbers:
  read (every base column decoded), read + evaluate (the draft's pick per decision), the
  replay passes of the dry-run (read + evaluate + group), and the outcomes pass (the latest
  outcome of every flipped decision, ids from the child's `flips.parquet`); evaluate = (read +
  evaluate) − read, group = passes − (read + evaluate), the rest (scalar rows, summary,
  writing) = end to end − passes − outcomes;
- identical figures: on `--sample` decisions spread over the history, every new verdict,
  application verdict, action, reason and rule of the vectorized replay equals the scalar
  evaluator's (`bench_dry_run.scalar_replay`, one by one), read in chunks.

Figures are printed with the load average beside them, and a linear extrapolation to
`--target` decisions (time and the part of peak memory that grows with the history).

Run: .venv/bin/python benchmarks/bench_dry_run_scale.py [--decisions 10000000] [--sample 20000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_dry_run  # noqa: E402
import dryrun_data  # noqa: E402
import polars as pl  # noqa: E402

from workbench.engines import rulebook_polars as rp  # noqa: E402
from workbench.migration import compute as computing  # noqa: E402
from workbench.migration.draft import load_draft  # noqa: E402
from workbench.migration.run import load_history  # noqa: E402


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def split(root: Path, draft: dict) -> dict[str, float]:
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    history = load_history(dryrun_data.RULEBOOK_ID, None, dataset=root, ledger=None, paths=compiled.polars.paths)
    table = rp.outcome_table(compiled.polars)
    read = timed(lambda: history.base.select(pl.all().is_not_null().sum()).collect(engine="streaming"))
    evaluate = timed(lambda: rp.with_pick(history.base, compiled.polars).select(pl.col(rp.PICK).is_null().sum())
                     .collect(engine="streaming"))
    passes = timed(lambda: computing._replay_passes(history, compiled, table))
    flipped = pl.read_parquet(bench_dry_run.RESULTS / "dry-run-big" / "flips.parquet", columns=["decision_id"])
    outcomes = timed(lambda: computing.latest_outcomes(history.outcomes.filter(
        pl.col("decision_id").is_in(flipped["decision_id"].implode()))).collect(engine="streaming"))
    return {"read": read, "evaluate": evaluate - read, "group": passes - evaluate, "outcomes": outcomes,
            "passes": passes}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=10_000_000)
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--target", type=int, default=100_000_000)
    args = parser.parse_args()
    _, draft = dryrun_data.rulebooks()
    root = bench_dry_run.dataset(args.decisions)
    load_before = os.getloadavg()
    big = bench_dry_run.big_run(args.decisions)
    parts = split(root, draft)
    parts["rest"] = big["seconds"] - parts["passes"] - parts["outcomes"]
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    rows = bench_dry_run.sample_rows(root, args.decisions, args.sample)
    _, _, scalar = bench_dry_run.scalar_replay(rows, compiled.scalar.evaluate)
    vector = bench_dry_run.vector_results(root, draft, rows["decision_id"].to_list())
    identical = vector == scalar
    scale = args.target / args.decisions
    result = {"decisions": args.decisions, "end_to_end_s": big["seconds"], "peak_rss_bytes": big["peak_rss_bytes"],
              "split_s": {k: round(v, 3) for k, v in parts.items()}, "sample": len(scalar),
              "identical_on_sample": identical, "load_before": load_before, "load_after": os.getloadavg(),
              "extrapolated_target_s": round(big["seconds"] * scale, 1), "target": args.target}
    bench_dry_run.RESULTS.mkdir(parents=True, exist_ok=True)
    (bench_dry_run.RESULTS / f"dry_run_scale_{args.decisions}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"dry-run over {big['decisions']:,} decisions: {big['seconds']:.2f} s end to end, peak RSS "
          f"{big['peak_rss_bytes'] / 2**30:.2f} GiB; load {load_before} -> {os.getloadavg()}")
    print("  split: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items() if k != "passes"))
    print(f"  identical on {len(scalar):,} sampled decisions (scalar evaluator, one by one): {identical}")
    print(f"  linear extrapolation to {args.target:,}: {big['seconds'] * scale:.0f} s (same load)")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
