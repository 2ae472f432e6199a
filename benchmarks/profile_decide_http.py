"""Where a decide's CPU goes on a real server, part by part (issue 23: "stated with what each part costs").

For each ledger this starts `gate serve` as `bench_http.py` does (2 workers × 8 threads, Redis,
a key with high limits), then:

1. drives `POST /api/decide` with `wrk` for `--duration` seconds and reads the server's CPU per
   answered decide from /proc (the profiler is not attached: this is the figure to share out);
2. drives it again while `py-spy record --gil --subprocesses` samples every worker, keeping only
   the samples of the thread that holds a worker's GIL (a thread waiting on a lock, the disk or
   the network costs no CPU and is not sampled);
3. gives each sample to the innermost part of the decide its stack is in (`PARTS`, matched on
   py-spy's frame names, `function (file)`), and prints each part's share of the samples and
   that share of the CPU per decide, in µs.

The shares are of interpreter time, so native work (a signature, a hash, the driver's C code)
counts in the part that called it. A sample no part matches is counted as "other": a function
renamed by a refactor shows up there, so keep `PARTS` in step with the code when it grows.
Run it on a quiet host; the load average is printed beside each ledger.

Run: .venv/bin/python benchmarks/profile_decide_http.py [--backends sqlite,postgresql] [--connections 16]
                                                      [--duration 10] [--rate 400] [--raw RAW.txt]
Needs: wrk, py-spy (the `dev` extra; it reads the workers' memory, so run as root or with ptrace
allowed), Redis on 127.0.0.1:6379, PostgreSQL on 127.0.0.1:5432 for the PostgreSQL row.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_http import ROOT, _load1, _wrk, served_gate

RESULTS = ROOT / "benchmarks" / "results" / "profile_decide_http.json"
PY_SPY = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")

# (part, pattern of a frame name). A sample belongs to the part of its innermost matching frame.
PARTS: tuple[tuple[str, str], ...] = (
    ("gunicorn: request parse, environ, response write, keep-alive", r"^GateWorker\.handle \("),
    ("Flask and the app's hooks around the route", r"^Flask\.wsgi_app "),
    ("route: the rest (headers read, metrics, views, the decide's own lines)", r"^decide \(api/routes/decide"),
    ("route: key check (cached)", r"^Authenticator\.authenticate "),
    ("route: rate limit (one Redis round trip)", r"^_rate_checked "),
    ("route: body read and strictly parsed", r"^read_json "),
    ("route: the scope's data map read and the log masker made (issue 67)", r"^PrivacyService\.masker "),
    ("route: response and its headers", r"^(json_text_response|_record_headers) "),
    ("service: the rest (snapshot, release, ids, the store's arguments)", r"^DecisionService\.decide "),
    ("service: request prepared, fingerprint, evaluation",
     r"^(prepare_decision_request|fingerprint|get_evaluator|check_evaluation_cost) |evaluate \(<rulebook"),
    ("service: the record built (hashes, attestation and receipt signatures)", r"^build_rulebook_record "),
    ("service: row seal (hash and signature)", r"^sealed_decision_row "),
    ("service: hand-off to the writer and the wake-up", r"^GroupWriter\.submit "),
    ("writer: statements, at-rest encoding, begin and commit", r"^GroupWriter\._serve "),
    ("writer: chain link, audit-chain signature, record text (under the lock)", r"^record_chain\.<locals>\.seal "),
    ("the cadence checkpoint (every Nth decide, after its answer)", r"^_cadence_witness\.<locals>\.witness "),
)
OTHER = "other (the worker's loop, frames no part names)"
_LINE = re.compile(r":\d+\)$")


def share_out(raw: str) -> tuple[Counter[str], int]:
    """Samples per part of py-spy's raw output (`frame;frame;… count` per line, outermost first)."""
    compiled = [(name, re.compile(pattern)) for name, pattern in PARTS]
    counts: Counter[str] = Counter()
    total = 0
    for line in raw.splitlines():
        stack, _, number = line.rstrip().rpartition(" ")
        if not stack or not number.isdigit():
            continue
        samples = int(number)
        total += samples
        part = OTHER
        for raw in stack.split(";"):
            frame = _LINE.sub(")", raw)
            part = next((name for name, pattern in compiled if pattern.search(frame)), part)
        counts[part] += samples
    return counts, total


def profile(kind: str, connections: int, duration: int, rate: int, raw: Path | None = None) -> dict:
    with served_gate(kind) as served:
        plain = _wrk(served.base + "/api/decide", served.script, duration, connections, served.pid)
        with tempfile.TemporaryDirectory() as scratch:
            out = Path(scratch) / "samples.txt"
            driven: dict = {}
            load = threading.Thread(target=lambda: driven.update(
                _wrk(served.base + "/api/decide", served.script, duration + 4, connections)))
            load.start()
            threading.Event().wait(2)  # wrk's connections are open and busy
            subprocess.run([PY_SPY, "record", "--gil", "--subprocesses", "--rate", str(rate),
                            "--duration", str(duration), "--format", "raw", "--output", str(out),
                            "--pid", str(served.pid)], check=True, capture_output=True)
            load.join()
            counts, total = share_out(out.read_text())
            if raw is not None:
                shutil.copyfile(out, raw.with_name(f"{raw.stem}-{kind}{raw.suffix}"))
    cpu_ms = plain["server_cpu_ms_per_request"]
    parts = [{"part": name, "share": counts[name] / total if total else 0.0,
              "us": 1000 * cpu_ms * counts[name] / total if total else 0.0}
             for name in [*(name for name, _ in PARTS), OTHER]]
    return {"backend": kind, "connections": connections, "decides_per_second": plain["requests_per_second"],
            "server_cpu_ms_per_decide": cpu_ms, "postgres_cpu_ms_per_decide": plain["postgres_cpu_ms_per_request"],
            "load1": _load1(), "samples": total, "parts": parts}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--rate", type=int, default=400, help="py-spy samples per second and worker")
    parser.add_argument("--raw", type=Path, help="keep py-spy's raw samples as RAW-<backend>.txt (for a finer split)")
    args = parser.parse_args()
    missing = [tool for tool, path in (("wrk", shutil.which("wrk")), ("py-spy", PY_SPY)) if not path or
               not os.access(path, os.X_OK)]
    if missing:
        print(f"missing: {', '.join(missing)} (apt-get install wrk; pip install py-spy, part of the dev extra)",
              file=sys.stderr)
        return 2
    results = [profile(kind, args.connections, args.duration, args.rate, args.raw) for kind in args.backends.split(",")]
    for result in results:
        print(f"{result['backend']}, {result['connections']} connections: {result['decides_per_second']:.0f} "
              f"decides/s, {result['server_cpu_ms_per_decide']:.3f} ms of server CPU a decide "
              f"(+ {result['postgres_cpu_ms_per_decide']:.3f} in PostgreSQL), load {result['load1']:.2f}, "
              f"{result['samples']} samples")
        for part in result["parts"]:
            print(f"  {100 * part['share']:5.1f}%  {part['us']:5.0f} µs  {part['part']}")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
