"""The dry-run at scale (issue 24, item 4): wall time, peak memory and how the time splits, at
`--decisions` (10M by default; 100M is the target), with identical figures on a sample.

Measured in one run on the synthetic history of `benchmarks/dryrun_data.py` (generated once
per size under benchmarks/results/data/, git-ignored; about 5 minutes per 10M on a loaded
2-core machine, a symbolic link to a folder elsewhere is followed):

- end to end: `dry_run` + `write_dry_run` in a child process (streaming engine), its wall time,
  CPU time and its own peak RSS (`VmHWM`, see bench_dry_run.big_run);
- with `--before DIR` (a checkout of the code before a change: `git worktree add DIR <commit>`
  or `git archive <commit> | tar -x -C DIR`), the same end to end with that code, right after,
  on the same history: the ratios of time and peak memory, and whether both `migration.json`
  are the same bytes;
- the split, each a streaming pass over the same history timed afterwards in this process:
  load (every listed file checked against its digest, and the rulebook's versions counted:
  `load_history`, the first time in this process), read (every base column decoded), read +
  evaluate (the draft's pick per decision), the replay pass of the dry-run (read + evaluate +
  group, the selected rows written to a file) and the outcomes pass (the records of the
  selected decisions kept, `flips.outcome_records`); evaluate = (read + evaluate) − read,
  group = replay pass − (read + evaluate), the rest (the scalar rows, the flips classified in
  buckets, summary, writing) = end to end − load − replay pass − outcomes;
- identical figures: on `--sample` decisions spread over the history, every new verdict,
  application verdict, action, reason and rule of the vectorized replay equals the scalar
  evaluator's (`bench_dry_run.scalar_replay`, one by one), read in chunks.

Figures are printed with the load average beside them, and a linear extrapolation to
`--target` decisions (time and the part of peak memory that grows with the history).

`--warm`: the end-to-end child keeps a digest store (an empty one: every file is still hashed),
then a second child runs with it, as a second `gate dry-run` of the same files runs (each file
stat'ed and found unchanged, not hashed again); both `migration.json` must be the same bytes.

Run: .venv/bin/python benchmarks/bench_dry_run_scale.py [--decisions 10000000] [--sample 20000] [--before DIR] [--warm]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
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
from workbench.migration import flips  # noqa: E402
from workbench.migration.draft import load_draft  # noqa: E402
from workbench.migration.run import load_history  # noqa: E402


def timed(fn) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def split(root: Path, draft: dict) -> dict[str, float]:
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    started = time.perf_counter()
    history = load_history(dryrun_data.RULEBOOK_ID, None, dataset=root, ledger=None, paths=compiled.polars.paths)
    load = time.perf_counter() - started
    table = rp.outcome_table(compiled.polars)
    read = timed(lambda: history.base.select(pl.all().is_not_null().sum()).collect(engine="streaming"))
    evaluate = timed(lambda: rp.with_pick(history.base, compiled.polars).select(pl.col(rp.PICK).is_null().sum())
                     .collect(engine="streaming"))
    with tempfile.TemporaryDirectory(dir=bench_dry_run.RESULTS) as folder:
        selected = Path(folder) / "selected.parquet"
        passes = timed(lambda: computing._replay_pass(history, compiled, table, selected))
        outcomes = timed(lambda: flips.outcome_records(history.outcomes, pl.scan_parquet(selected),
                                                       Path(folder) / "outcomes.parquet"))
    return {"load": load, "read": read, "evaluate": evaluate - read, "group": passes - evaluate,
            "outcomes": outcomes, "passes": passes}


def before_and_after(n: int, before: Path, after: dict) -> dict:
    """The dry-run with the code of `before` on the same history, and its ratios to `after`."""
    old = bench_dry_run.big_run(n, before, bench_dry_run.RESULTS / "dry-run-big-before")
    same = ((bench_dry_run.RESULTS / "dry-run-big-before" / "migration.json").read_bytes()
            == (bench_dry_run.RESULTS / "dry-run-big" / "migration.json").read_bytes())
    return {"before": old, "time_ratio": round(old["seconds"] / after["seconds"], 2),
            "cpu_ratio": round(old["cpu_seconds"] / after["cpu_seconds"], 2),
            "peak_ratio": round(old["peak_rss_bytes"] / after["peak_rss_bytes"], 2), "same_migration_json": same}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--decisions", type=int, default=10_000_000)
    parser.add_argument("--sample", type=int, default=20_000)
    parser.add_argument("--target", type=int, default=100_000_000)
    parser.add_argument("--before", type=Path, help="a checkout of the code before a change, run on the same history")
    parser.add_argument("--warm", action="store_true",
                        help="the end-to-end run keeps a digest store, then runs again with it, as `gate dry-run` does")
    args = parser.parse_args()
    _, draft = dryrun_data.rulebooks()
    root = bench_dry_run.dataset(args.decisions)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as stores:
        store = Path(stores) / "dataset-digests.json" if args.warm else None
        big = bench_dry_run.big_run(args.decisions, digest_store=store)  # cold: every file hashed
        compared = before_and_after(args.decisions, args.before, big) if args.before else None
        warm = (bench_dry_run.big_run(args.decisions, out=bench_dry_run.RESULTS / "dry-run-big-warm", digest_store=store)
                if store is not None else None)
    if warm is not None:
        warm["same_migration_json"] = ((bench_dry_run.RESULTS / "dry-run-big-warm" / "migration.json").read_bytes()
                                       == (bench_dry_run.RESULTS / "dry-run-big" / "migration.json").read_bytes())
    load_compared = os.getloadavg()
    parts = split(root, draft)
    parts["rest"] = big["seconds"] - parts["load"] - parts["passes"] - parts["outcomes"]
    compiled = load_draft(draft, dryrun_data.RULEBOOK_ID)
    rows = bench_dry_run.sample_rows(root, args.decisions, args.sample)
    _, _, scalar = bench_dry_run.scalar_replay(rows, compiled.scalar.evaluate)
    vector = bench_dry_run.vector_results(root, draft, rows["decision_id"].to_list())
    identical = vector == scalar
    scale = args.target / args.decisions
    result = {"decisions": args.decisions, "end_to_end_s": big["seconds"], "cpu_s": big["cpu_seconds"],
              "peak_rss_bytes": big["peak_rss_bytes"], "flips": big["changed"], "before": compared, "warm": warm,
              "load_after_end_to_end": load_compared,
              "split_s": {k: round(v, 3) for k, v in parts.items()}, "sample": len(scalar),
              "identical_on_sample": identical, "load_before": load_before, "load_after": os.getloadavg(),
              "extrapolated_target_s": round(big["seconds"] * scale, 1), "target": args.target}
    bench_dry_run.RESULTS.mkdir(parents=True, exist_ok=True)
    (bench_dry_run.RESULTS / f"dry_run_scale_{args.decisions}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"dry-run over {big['decisions']:,} decisions ({big['changed']:,} flips): {big['seconds']:.2f} s end to end "
          f"(CPU {big['cpu_seconds']:.1f} s), peak RSS {big['peak_rss_bytes'] / 2**30:.2f} GiB; load {load_before} -> "
          f"{load_compared} -> {os.getloadavg()}")
    if compared:
        old = compared["before"]
        print(f"  before ({args.before}): {old['seconds']:.2f} s (CPU {old['cpu_seconds']:.1f} s), peak RSS "
              f"{old['peak_rss_bytes'] / 2**30:.2f} GiB: {compared['time_ratio']}x the time, {compared['cpu_ratio']}x "
              f"the CPU, {compared['peak_ratio']}x the peak; same migration.json: {compared['same_migration_json']}")
    if warm is not None:
        print(f"  again with the digest store (files stat'ed, not hashed, as a second `gate dry-run`): {warm['seconds']:.2f} s "
              f"(CPU {warm['cpu_seconds']:.1f} s), peak RSS {warm['peak_rss_bytes'] / 2**30:.2f} GiB; "
              f"same migration.json: {warm['same_migration_json']}")
    print("  split: " + ", ".join(f"{k} {v:.2f} s" for k, v in parts.items() if k != "passes"))
    print(f"  identical on {len(scalar):,} sampled decisions (scalar evaluator, one by one): {identical}")
    print(f"  linear extrapolation to {args.target:,}: {big['seconds'] * scale:.0f} s (same load)")
    same = (compared is None or compared["same_migration_json"]) and (warm is None or warm["same_migration_json"])
    return 0 if identical and same else 1


if __name__ == "__main__":
    sys.exit(main())
