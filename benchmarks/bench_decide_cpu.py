"""CPU per decide, in one worker process, and where it goes: this tree against another, same run.

A fresh interpreter builds the app over a new SQLite ledger (`--backend postgresql`: a throw-away
PostgreSQL database; the CPU read is this process's, not the database server's), group commit on,
as `gate serve` runs it, answers `--warmup` decides of the sample request through the Flask test client, then
`--decides` more, and reads the process's CPU time (every thread: the request thread and the
ledger's writer thread). The baseline in the same process is `GET /healthz` through the same
client (the HTTP stack's own floor), so each figure is also a ratio to it. `--rev REV` (or
`--tree PATH`) measures another commit in the same run, round by round, so a before/after shares
the machine's load; the 1-minute load average is printed beside each round. `--threads 8` sends
the decides from 8 threads at once (one `gate serve` worker's callers), so the writer stores
several per transaction, as it does under load; the default is one caller after the other.

`--split` adds where the CPU goes in this tree: the decide's stages timed by `cProfile` on thread
CPU time, in the request thread and in the writer thread (one caller, whatever `--threads` says).
The profiler slows Python calls more than C work, so the split is a share, not a cost in µs.

`--parts` times the parts of one decide and of one `/healthz` in this tree (PARTS: the test client,
Flask, the route, the key check, the body, the service, the writer), each on its own thread's CPU
clock by a wrapper instead of a profiler, so the figures are µs (issue 68, item 6).

    .venv/bin/python benchmarks/bench_decide_cpu.py [--decides 2000] [--rounds 3] [--rev a85e481] [--split]
                                                    [--parts] [--threads 8] [--backend postgresql]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_http import _database

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results" / "decide_cpu.json"

WORKER = textwrap.dedent("""
    import dataclasses, json, sys, tempfile, time
    from pathlib import Path
    decides, warmup, mode, threads = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    split = mode == "split"
    PARTS = json.loads(sys.argv[6]) if mode == "parts" else []
    database = sys.argv[5]  # "sqlite" (a file in the temporary home) or a PostgreSQL URL
    from gate_cli.served_app import create_app
    from gate.keys.signing import generate_keyring
    from gate.ledger import Ledger
    from gate.settings import Settings
    from gate_cli.keys_cmd import create_key
    body = Path("gate/data/requests/verdict-yes.json").read_bytes()
    with tempfile.TemporaryDirectory() as home:
        keyring = Path(home) / "signing-keys.json"
        generate_keyring(keyring, "2026-11-01T00:00:00.000Z")
        env = {"GATE_HOME": home, "GATE_DATABASE_URL": f"sqlite:///{home}/gate.db" if database == "sqlite" else database,
               "GATE_SIGNING_KEY_FILE": str(keyring), "GATE_LEDGER_GROUP_COMMIT": "true"}
        Ledger(env["GATE_DATABASE_URL"]).upgrade()
        settings = Settings.from_env(env)
        try:  # as `gate serve` sizes the pool: a connection per caller thread, the writer's and a spare
            from api.serving import LEDGER_POOL_BEYOND_THREADS
            settings = dataclasses.replace(settings, ledger_pool_size=threads + LEDGER_POOL_BEYOND_THREADS)
        except ImportError:  # a tree (--rev, --tree) from before the pool followed the threads
            pass
        profiles = []
        parts = {}
        if mode == "parts":  # each part's own thread CPU, inclusive, with no profiler (PARTS)
            import importlib, functools
            def timed(owner, name, label):
                inner = getattr(owner, name)
                @functools.wraps(inner)
                def wrapper(*args, **kwargs):
                    t = time.thread_time()
                    try:
                        return inner(*args, **kwargs)
                    finally:
                        parts[label] = parts.get(label, 0.0) + time.thread_time() - t
                setattr(owner, name, wrapper)
            for label, where, name in PARTS:
                module, _, cls = where.partition(":")
                owner = importlib.import_module(module)
                timed(getattr(owner, cls) if cls else owner, name, label)
        app = create_app(settings)
        key = create_key(settings, "bench", "scale", 1_000_000_000, None)["api_key"]
        client = app.test_client()
        headers = {"x-api-key": key, "content-type": "application/json"}
        for _ in range(warmup):
            answer = client.post("/api/decide", data=body, headers=headers)
            assert answer.status_code == 200, answer.data
            client.get("/healthz")
        parts.clear()
        if split:
            import cProfile
            from gate.ledger import groupcommit
            run = groupcommit.GroupWriter._run
            def profiled(self, batch):
                profile = cProfile.Profile(time.thread_time)
                profiles.append(profile)
                profile.runcall(run, self, batch)
            groupcommit.GroupWriter._run = profiled
            main = cProfile.Profile(time.thread_time)
            profiles.append(main)
            main.enable()
        def post(_):
            return app.test_client().post("/api/decide", data=body, headers=headers).status_code
        t0 = time.process_time()
        if threads == 1:
            codes = [post(n) for n in range(decides)]
        else:  # concurrent callers: the writer stores them many per transaction, as under load
            from concurrent.futures import ThreadPoolExecutor
            with ThreadPoolExecutor(threads) as pool:
                codes = list(pool.map(post, range(decides)))
        decide = (time.process_time() - t0) / decides
        assert set(codes) == {200}, codes
        decide_parts, _ = dict(parts), parts.clear()
        t1 = time.process_time()
        for _ in range(decides):
            client.get("/healthz")
        healthz = (time.process_time() - t1) / decides
        out = {"decide_ms": decide * 1000, "healthz_ms": healthz * 1000}
        if mode == "parts":
            out["parts"] = {label: 1e6 * seconds / decides for label, seconds in decide_parts.items()}
            out["healthz_parts"] = {label: 1e6 * seconds / decides for label, seconds in parts.items()}
        if split:
            main.disable()
            import pstats
            stats = pstats.Stats(profiles[0])
            for profile in profiles[1:]:
                stats.add(profile)
            out["functions"] = {f"{path}:{name}": (calls, cumulative)
                                for (path, _, name), (_, calls, _, cumulative, _) in stats.stats.items()}
        app.extensions["gate"].ledger.dispose()
        print(json.dumps(out))
""")

# Stages of a decide (inclusive thread-CPU time of these functions), in the order they run.
STAGES = [
    ("request body read and parsed", "api/jsonio.py:read_json"),
    ("request prepared (validation)", "gate/protocol/requests.py:prepare_decision_request"),
    ("request fingerprint (canonical text + sha256)", "gate/services/pipeline.py:fingerprint"),
    ("rulebook evaluated", ">:evaluate"),
    ("record built (hashes, attestation, signature)", "gate/protocol/records.py:build_rulebook_record"),
    ("release observation", "gate/services/decide.py:_observe_release"),
    ("row sealed (row hash + signature)", "gate/chain/rowseal.py:sealed_decision_row"),
    ("writer: chain link and record text (under the head)", "gate/services/pipeline.py:seal"),
    ("writer: the batch's transaction (begin, statements, commit)", "gate/ledger/groupcommit.py:_all_at_once"),
    ("writer: the whole batch (statements + commit)", "gate/ledger/groupcommit.py:_run"),
    ("response written", "api/errors.py:json_text_response"),
    ("checkpoint cadence", "api/routes/decide.py:_witness_on_cadence"),
    ("metrics", "api/metrics.py:record_decision"),
    ("canonical JSON (all calls)", "gate/protocol/canonical.py:canonical_text"),
    ("Ed25519 signatures (all calls)", "gate/keys/signing.py:sign"),
    ("the decide route (everything under Flask's dispatch)", "api/routes/decide.py:decide"),
]


# Parts of a decide (and of a `/healthz`), each timed on its own thread's CPU clock, inclusive,
# by a wrapper (`--parts`; about a microsecond per call, no profiler): (label, "module:Class", function).
PARTS = [
    ("request thread: the test client's request, whole", "flask.testing:FlaskClient", "open"),
    ("Flask from the WSGI call (hooks, context, response)", "flask.app:Flask", "wsgi_app"),
    ("Flask's dispatch with its before/after hooks", "flask.app:Flask", "full_dispatch_request"),
    ("the route (everything under Flask's dispatch)", "flask.app:Flask", "dispatch_request"),
    ("route: key check", "api.auth:Authenticator", "authenticate"),
    ("route: body read and parsed", "api.routes.decide", "read_json"),
    ("route: response written", "api.routes.decide", "json_text_response"),
    ("the decide service", "gate.services.decide:DecisionService", "decide"),
    ("service: record built and sealed", "gate.services.decide", "build_rulebook_record"),
    ("service: row seal and hand-off to the writer", "gate.services.pipeline:DecisionPipeline", "store_sealed"),
    ("writer thread: the batch, whole", "gate.ledger.groupcommit:GroupWriter", "_run"),
    ("writer: DecisionWriter._store_one", "gate.ledger.decision_write:DecisionWriter", "_store_one"),
]


def _once(tree: Path, decides: int, warmup: int, split: bool | str, threads: int = 1, backend: str = "sqlite") -> dict:
    database, drop = ("sqlite", lambda: None) if backend == "sqlite" else _database(backend, Path(tempfile.gettempdir()))
    mode = split if isinstance(split, str) else ("split" if split else "-")
    try:
        done = subprocess.run([sys.executable, "-c", WORKER, str(decides), str(warmup), mode,
                               str(threads), database, json.dumps(PARTS)],
                              cwd=tree, capture_output=True, text=True, check=True,
                              env={**os.environ, "PYTHONPATH": str(tree)}, timeout=900)
    finally:
        drop()
    return json.loads(done.stdout.strip().splitlines()[-1])


def _stages(functions: dict[str, list], decides: int) -> list[tuple[str, float, int]]:
    """(stage, thread-CPU ms per decide under the profiler, calls per decide) of each stage."""
    rows = []
    for label, wanted in STAGES:
        path, name = wanted.rsplit(":", 1)
        found = [(calls, seconds) for key, (calls, seconds) in functions.items()
                 if key.endswith(f"{path}:{name}") or (path == ">" and key.startswith("<rulebook ")
                                                        and key.endswith(f":{name}"))]
        calls = sum(calls for calls, _ in found)
        seconds = max((seconds for _, seconds in found), default=0.0)  # recursion counts once
        rows.append((label, 1000 * seconds / decides, round(calls / decides)))
    return rows


def _checkout(rev: str, where: Path) -> Path:
    archive = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive, check=True)
    source = where / "gate" / "protocol" / "_canonical.c"
    if source.exists():  # a commit with the C canonical writer: build it there too (as setup.py would)
        import sysconfig
        target = source.with_name("_canonical" + sysconfig.get_config_var("EXT_SUFFIX"))
        subprocess.run([sysconfig.get_config_var("CC").split()[0], "-shared", "-fPIC", "-O2",
                        f"-I{sysconfig.get_paths()['include']}", str(source), "-o", str(target)],
                       check=True, capture_output=True)
    return where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decides", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rev", help="a commit to measure beside this tree (extracted with git archive)")
    parser.add_argument("--tree", type=Path, help="another checkout to measure beside this tree")
    parser.add_argument("--split", action="store_true", help="also profile this tree's stages")
    parser.add_argument("--parts", action="store_true",
                        help="also time this tree's parts (PARTS) on thread CPU, in µs per decide and per /healthz")
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"],
                        help="the ledger: a SQLite file, or a throw-away PostgreSQL database (GATE_BENCH_PG_ADMIN_URL); "
                             "the CPU read is this process's, not PostgreSQL's own")
    parser.add_argument("--threads", type=int, default=1,
                        help="concurrent callers in the worker (8 = one gunicorn worker's threads): the writer "
                             "then stores several decides per transaction")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-decide-cpu-") as scratch:
        other = args.tree or (_checkout(args.rev, Path(scratch)) if args.rev else None)
        return _measure(args, other)


def _measure(args: argparse.Namespace, other: Path | None) -> int:
    trees = {"this tree": ROOT} | ({f"other ({args.rev or args.tree})": other} if other else {})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    print(f"{args.decides} decides of verdict-yes.json per round, {args.backend}, group commit, Flask test client, "
          f"{args.threads} caller thread(s)")
    print(f"{'round':>5} {'tree':<28} {'decide ms':>10} {'healthz ms':>11} {'ratio':>7} {'load1':>6}")
    for number in range(1, args.rounds + 1):
        for name, tree in trees.items():
            run = _once(tree, args.decides, args.warmup, False, args.threads, args.backend)
            run["load1"] = os.getloadavg()[0]
            runs[name].append(run)
            print(f"{number:>5} {name:<28} {run['decide_ms']:>10.3f} {run['healthz_ms']:>11.3f} "
                  f"{run['decide_ms'] / run['healthz_ms']:>7.1f} {run['load1']:>6.2f}", flush=True)
    summary = {name: {"decide_ms": statistics.median(r["decide_ms"] for r in rs),
                      "healthz_ms": statistics.median(r["healthz_ms"] for r in rs),
                      "loads": [round(r["load1"], 2) for r in rs]} for name, rs in runs.items()}
    print("medians:")
    for name, figures in summary.items():
        print(f"  {name:<28} decide {figures['decide_ms']:.3f} ms CPU, healthz {figures['healthz_ms']:.3f} ms, "
              f"decide/healthz {figures['decide_ms'] / figures['healthz_ms']:.1f}, loads {figures['loads']}")
    if other:
        mine, theirs = summary["this tree"]["decide_ms"], summary[next(iter(list(trees)[1:]))]["decide_ms"]
        print(f"  this tree / other: {mine / theirs:.2f} of the CPU per decide")
    result: dict = {"decides": args.decides, "threads": args.threads, "backend": args.backend, "rounds": runs,
                    "medians": summary}
    if args.split:
        run = _once(ROOT, args.decides, args.warmup, True, 1, args.backend)  # one caller: the profiler sees its thread
        stages = _stages(run["functions"], args.decides)
        route = next(ms for label, ms, _ in stages if label.startswith("the decide route"))
        writer = next(ms for label, ms, _ in stages if label.startswith("writer: the whole batch"))
        print(f"where this tree's decide goes (cProfile on thread CPU time, load {os.getloadavg()[0]:.2f}; "
              "% of the route's thread plus the writer's):")
        for label, ms, calls in stages:
            print(f"  {label:<56} {100 * ms / (route + writer):5.1f}%  ({calls} call(s) per decide)")
        result["split"] = [{"stage": label, "ms_profiled": ms, "calls": calls} for label, ms, calls in stages]
    if args.parts:
        result["parts"] = _parts(args)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def _parts(args: argparse.Namespace) -> list[dict]:
    """Each part's thread CPU per decide and per `/healthz` (µs, medians of `--rounds` runs of one
    caller, so the request thread's parts are one request's and the writer's one batch of one)."""
    runs = [_once(ROOT, args.decides, args.warmup, "parts", 1, args.backend) for _ in range(args.rounds)]
    print(f"parts of this tree's decide (thread CPU, inclusive, µs; median of {args.rounds}, one caller, "
          f"load {os.getloadavg()[0]:.2f}):")
    print(f"  {'part':<56} {'decide':>8} {'/healthz':>9}")
    rows = []
    for label, _, _ in PARTS:
        decide = statistics.median(run["parts"].get(label, 0.0) for run in runs)
        healthz = statistics.median(run["healthz_parts"].get(label, 0.0) for run in runs)
        print(f"  {label:<56} {decide:>8.0f} {healthz:>9.0f}")
        rows.append({"part": label, "decide_us": decide, "healthz_us": healthz})
    process = statistics.median(run["decide_ms"] for run in runs), statistics.median(run["healthz_ms"] for run in runs)
    print(f"  {'the process (every thread)':<56} {1000 * process[0]:>8.0f} {1000 * process[1]:>9.0f}")
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
