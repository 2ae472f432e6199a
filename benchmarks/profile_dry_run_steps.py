"""The dry-run's steps, each timed inside one end-to-end run (wall and CPU seconds), and each
thread's CPU at the end: where the time goes, and whether it is spread over the cores.

Unlike `bench_dry_run_scale.py`'s split (each step a separate pass afterwards), the steps here are
the run's own calls, wrapped (`check_files`, `history_of_files`, `_replay_pass`, `_scalar_rows`,
`outcome_records`, `_flip_aggregates`, which takes the buckets, `compute`, `summarize`). CPU
seconds are the process's (every thread) while the step runs; the outcome pass runs beside the
scalar rows and the cube on a second thread, so its figure includes theirs.

Run: .venv/bin/python benchmarks/profile_dry_run_steps.py CODE_ROOT DATASET_DIR
(CODE_ROOT: this checkout or another, e.g. `git worktree add DIR main`, to compare on the same history)
"""

from __future__ import annotations

import functools
import glob
import os
import sys
import tempfile
import time
from pathlib import Path


def main() -> int:
    code, dataset = sys.argv[1], sys.argv[2]
    sys.path[:0] = [code, f"{code}/benchmarks"]
    import dryrun_data

    import workbench.migration.compute as computing
    import workbench.migration.flips as flips
    import workbench.migration.history as history
    import workbench.migration.run as running

    times: dict[str, list[float]] = {}

    def wrap(module, name: str) -> None:
        inner = getattr(module, name)

        @functools.wraps(inner)
        def timed(*args, **kwargs):
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return inner(*args, **kwargs)
            finally:
                slot = times.setdefault(name, [0.0, 0.0, 0])
                slot[0] += time.perf_counter() - wall
                slot[1] += time.process_time() - cpu
                slot[2] += 1

        setattr(module, name, timed)

    for module, name in ((history, "check_files"), (history, "history_of_files"), (computing, "_replay_pass"),
                         (computing, "_scalar_rows"), (flips, "outcome_records"), (computing, "_flip_aggregates"),
                         (running, "compute"), (running, "summarize")):
        wrap(module, name)
    _, draft = dryrun_data.rulebooks()
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        wall, cpu = time.perf_counter(), time.process_time()
        run = running.dry_run(draft, dryrun_data.RULEBOOK_ID, dataset=dataset, created_at="2026-11-22T00:00:00.000Z",
                              flips_path=out / "flips.parquet")
        running.write_dry_run(out, run.manifest, None)
        print(f"total {time.perf_counter() - wall:.2f} s, CPU {time.process_time() - cpu:.2f} s, load {os.getloadavg()}")
    for name, (step_wall, step_cpu, calls) in times.items():
        print(f"  {name:20s} wall {step_wall:7.2f}  CPU {step_cpu:7.2f}  ×{calls}")
    status = Path("/proc/self/status").read_text().splitlines()
    peak = next(line.split()[1] for line in status if line.startswith("VmHWM"))
    print(f"peak RSS {int(peak) / 2**20:.2f} GiB; CPU seconds per thread (over 0.05 s):")
    tick = os.sysconf("SC_CLK_TCK")
    for task in sorted(glob.glob("/proc/self/task/*")):
        stat = Path(f"{task}/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        seconds = (int(fields[11]) + int(fields[12])) / tick
        if seconds > 0.05:
            print(f"  {stat[stat.index('(') + 1:stat.rindex(')')]:20s} {seconds:7.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
