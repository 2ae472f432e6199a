"""What the effectiveness report's `health` costs (issue 22): the report with it against the same
report without it (the report as it was before `health`), in one run.

    .venv/bin/python benchmarks/bench_health.py                       # 100,000 decisions
    .venv/bin/python benchmarks/bench_health.py --decisions 1000000 --repeat 3

The dataset is the demo scenario drawn by `gate demo synth` (synthetic, kept under
benchmarks/results/, git-ignored). Frames are read once per limit and held in memory, as the
workbench holds them, so the rows timed are the report composition alone:

* baseline: `effectiveness_report(..., with_health=False)`;
* with health: `effectiveness_report(...)` (it runs the anomaly detectors over the same frames);
* workbench: the anomaly report and then the effectiveness report handed it (what the Overview
  computes: both cards), against the two reports computed apart before `health`.

Best of `--repeat`, wall clock; ratios to the baseline of the same run, `/proc/loadavg` beside.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from workbench.dataset.load import Frames, from_dataset  # noqa: E402
from workbench.reports.policy import ReportParams, anomaly_report, effectiveness_report  # noqa: E402

POLICY = "refund_approval"


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def loadavg() -> str:
    return Path("/proc/loadavg").read_text().strip()


def dataset(decisions: int) -> Path:
    out = ROOT / "benchmarks" / "results" / f"health-{decisions}"
    if not (out / "manifest.json").exists():
        subprocess.run([str(Path(sys.executable).parent / "gate"), "demo", "synth", "--out", str(out),
                        "--decisions", str(decisions)], check=True)
    return out


def held(path: Path, limit: int | None) -> Frames:
    lazy = from_dataset(path, scopes=None, policy_id=POLICY, limit=limit)
    facts = None if lazy.facts is None else lazy.facts.collect().lazy()
    return Frames(lazy.decisions.collect().lazy(), lazy.outcomes.collect().lazy(), facts, None)


def _runs(frames: Frames, params: ReportParams) -> tuple[Callable[[], object], ...]:
    """The four measured calls over these frames: effectiveness alone, with its health, and the
    Overview's effectiveness and anomalies apart and together (each bound to its own frames)."""
    return (
        lambda: effectiveness_report(frames, POLICY, params, with_health=False),
        lambda: effectiveness_report(frames, POLICY, params),
        lambda: (effectiveness_report(frames, POLICY, params, with_health=False),
                 anomaly_report(frames, POLICY, params)),
        lambda: effectiveness_report(frames, POLICY, params, anomalies=anomaly_report(frames, POLICY, params)),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    path = dataset(args.decisions)
    print(f"loadavg before: {loadavg()}")
    for limit in (1000, None):
        frames, params = held(path, limit), ReportParams(limit=limit or 10_000_000)
        base, health, apart, together = (best(run, args.repeat) for run in _runs(frames, params))
        print(f"limit {limit or 'all'}: effectiveness {base * 1000:.1f} ms; with health {health / base:.2f}x; "
              f"Overview (effectiveness + anomalies) {together / apart:.2f}x of before "
              f"({apart * 1000:.1f} ms before)")
    print(f"loadavg after: {loadavg()}")


if __name__ == "__main__":
    main()
