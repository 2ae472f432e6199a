"""A gate worker's start-up: import `api.app`, build the app, answer one decide; then its first report.

Each figure is a fresh interpreter (what every `gate serve` worker and every server test pays),
the median of `--rounds`, beside the baseline measured in the same run: an interpreter that only
imports Flask and SQLAlchemy (the floor any worker of this design pays). `--tree PATH` measures
another checkout (for example the commit before a change) in the same run, so a before/after
is two trees, one machine state. Peak memory is the interpreter's max RSS.

    .venv/bin/python benchmarks/bench_startup.py [--rounds 5] [--tree /path/to/other/checkout]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "startup.json"

BASELINE = textwrap.dedent("""
    import json, resource, time
    t0 = time.perf_counter()
    import flask, sqlalchemy
    print(json.dumps({"boot_s": time.perf_counter() - t0, "decide_s": 0.0, "report_s": 0.0,
                      "rss_boot_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                      "rss_report_mb": 0.0}))
""")

WORKER = textwrap.dedent("""
    import json, resource, sys, tempfile, time
    t0 = time.perf_counter()
    from pathlib import Path
    from gate_cli.served_app import create_app
    from gate.keys.signing import generate_keyring
    from gate.ledger import Ledger
    from gate.settings import Settings
    with tempfile.TemporaryDirectory() as home:
        keyring = Path(home) / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        env = {"GATE_HOME": home, "GATE_DATABASE_URL": f"sqlite:///{home}/gate.db", "GATE_SIGNING_KEY_FILE": str(keyring)}
        Ledger(env["GATE_DATABASE_URL"]).upgrade()
        app = create_app(Settings.from_env(env))
        boot = time.perf_counter() - t0  # imports and the app (the keyring and the ledger file included)
        rss_boot = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        from gate_cli.keys_cmd import create_key
        key = create_key(Settings.from_env(env), "bench", "scale", 1000, None)["api_key"]
        client, headers = app.test_client(), {"x-api-key": key}
        body = json.loads(Path("gate/data/requests/verdict-yes.json").read_text())
        t2 = time.perf_counter()
        decided = client.post("/api/decide", json=body, headers=headers)
        decide = time.perf_counter() - t2
        t3 = time.perf_counter()
        report = client.get(f"/api/decision/policies/{decided.json['policy_id']}/effectiveness", headers=headers)
        report_s = time.perf_counter() - t3
        assert decided.status_code == 200 and report.status_code == 200, (decided.status_code, report.status_code)
        print(json.dumps({"boot_s": boot, "decide_s": decide, "report_s": report_s, "rss_boot_mb": rss_boot,
                          "rss_report_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
        app.extensions["gate"].ledger.dispose()
""")


def _once(code: str, tree: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(tree)}, timeout=300)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _median(code: str, tree: Path, rounds: int) -> dict[str, float]:
    runs = [_once(code, tree) for _ in range(rounds)]
    return {name: round(statistics.median(run[name] for run in runs), 3) for name in runs[0]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tree", type=Path, help="another checkout to measure in the same run (e.g. before a change)")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]
    rows = {"baseline (flask + sqlalchemy only)": _median(BASELINE, ROOT, args.rounds)}
    trees = {"this tree": ROOT, **({f"other tree ({args.tree})": args.tree} if args.tree else {})}
    # The trees alternate round by round, so both see the same machine.
    per_tree: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    for _round in range(args.rounds):
        for name, tree in trees.items():
            per_tree[name].append(_once(WORKER, tree))
    for name, runs in per_tree.items():
        rows[name] = {key: round(statistics.median(run[key] for run in runs), 3) for key in runs[0]}
    base = rows["baseline (flask + sqlalchemy only)"]["boot_s"]
    load_after = os.getloadavg()[0]
    print(f"{'':40} {'boot s':>8} {'x base':>7} {'decide s':>9} {'1st report s':>13} {'RSS boot MB':>12} {'RSS report MB':>14}")
    for name, row in rows.items():
        print(f"{name:40} {row['boot_s']:8.3f} {row['boot_s'] / base:7.1f} {row['decide_s']:9.3f} "
              f"{row['report_s']:13.3f} {row['rss_boot_mb']:12.1f} {row['rss_report_mb']:14.1f}")
    print(f"medians of {args.rounds} fresh interpreters; load average {load_before:.2f} -> {load_after:.2f}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"rounds": args.rounds, "loadavg": [load_before, load_after], "rows": rows},
                                  indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
