"""POST /api/decide under load: gunicorn (2 workers) on loopback, driven by `wrk`.

For each ledger (SQLite file; PostgreSQL when it answers) this starts a real `gate serve`,
issues a key with a high rate limit, runs `wrk` against `/api/decide` with the sample request,
then counts the stored records (every 2xx must be a stored, signed record) and verifies the newest.
The baseline, measured in the same run on the same server, is `GET /healthz`: the liveness
route (no ledger, limiter or key), i.e. the ceiling of the HTTP stack itself. Figures are
reported as ratios to it, with the 1-minute load average read before and after each route
beside them (issue 23: a figure without the load beside it says little on a shared host).
During the decide run it also reads `gate_ledger_wait_seconds` from `/metrics`: how many ledger
waits (SQLite's write lock, PostgreSQL's chain-head row lock, a decide's wait for its writer
thread) took over 50 ms, and the histogram bound under which 99% and all of them fell.

Run: .venv/bin/python benchmarks/bench_http.py [--duration 10] [--connections 16[,64]] [--request verdict-yes.json]
Needs: wrk (Debian package `wrk`), Redis on 127.0.0.1:6379 (shared rate limits for 2 workers).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GATE = str(Path(sys.executable).parent / "gate")
PG_ADMIN = os.environ.get("GATE_BENCH_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/test")
REDIS = os.environ.get("GATE_BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")

WRK_POST = """
wrk.method = "POST"
wrk.headers["content-type"] = "application/json"
wrk.headers["x-api-key"] = "{key}"
wrk.body = [==[{body}]==]
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait(url: str) -> None:
    deadline, last = time.time() + 30, "no answer"
    while time.time() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
                last = f"HTTP {response.status}"
        except urllib.error.HTTPError as error:  # a 429 (the public budget) or 503 names itself
            last = f"HTTP {error.code}"
        except OSError as error:
            last = type(error).__name__
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not become ready (last: {last})")


def _settled(pid: int, timeout: float = 60.0) -> None:
    """Wait until every worker has booted: the first answer comes from whichever worker is up,
    and a worker still importing and building the app (seconds on a busy host) would halve the
    baseline and tail the first run. Booting is CPU-bound, so the server's process tree is
    settled once it uses almost no CPU while idle."""
    deadline, quiet = time.time() + timeout, 0
    before = _tree_cpu_seconds(pid)
    while time.time() < deadline and quiet < 2:
        time.sleep(0.5)
        now = _tree_cpu_seconds(pid)
        quiet = quiet + 1 if now - before < 0.05 else 0
        before = now


def _parse_wrk(text: str) -> dict:
    def latency_ms(value: str) -> float:
        number, unit = re.match(r"([\d.]+)(\w+)", value).groups()
        return float(number) * {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]

    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
    percentiles = {p: latency_ms(v) for p, v in re.findall(r"^\s+(50|75|90|99)%\s+(\S+)", text, re.M)}
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", text)
    total = int(re.search(r"(\d+) requests in", text).group(1))
    errors = re.search(r"Socket errors: .*", text)
    return {"requests_per_second": rps, "p50_ms": percentiles.get("50"), "p90_ms": percentiles.get("90"),
            "p99_ms": percentiles.get("99"), "requests": total, "non_2xx": int(non2xx.group(1)) if non2xx else 0,
            "socket_errors": errors.group(0) if errors else None}


def _load1() -> float:
    return os.getloadavg()[0]


def _tree_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and its descendants so far (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime (fields 14 and 15)
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(child) for child in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


def _postgres_cpu_seconds() -> float:
    """User + system CPU seconds of every `postgres` process on this host so far (its backends serve
    the benchmark's connections; the server's own tree does not include them)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name, _, rest = text.partition(" (")[2].rpartition(")")
        if name == "postgres":
            fields = rest.split()
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _wrk(url: str, script: Path | None, duration: int, connections: int, server_pid: int | None = None) -> dict:
    # wrk needs at least one connection per thread: two threads, or one for a single connection.
    args = ["wrk", f"-t{min(2, connections)}", f"-c{connections}", f"-d{duration}s", "--latency", "--timeout", "5s"]
    if script:
        args += ["-s", str(script)]
    load_before = _load1()
    cpu_before = _tree_cpu_seconds(server_pid) if server_pid else None
    database_before = _postgres_cpu_seconds()
    done = subprocess.run(args + [url], capture_output=True, text=True, check=True)
    result = {**_parse_wrk(done.stdout), "load1_before": load_before, "load1_after": _load1()}
    answered = max(result["requests"], 1)
    if server_pid:  # the server's CPU per answered request: what a request costs, whatever else the host runs
        result["server_cpu_ms_per_request"] = round(1000 * (_tree_cpu_seconds(server_pid) - cpu_before) / answered, 3)
    # PostgreSQL's CPU in the same window (0 on SQLite, but for other users of the host's PostgreSQL)
    result["postgres_cpu_ms_per_request"] = round(1000 * (_postgres_cpu_seconds() - database_before) / answered, 3)
    return result


def _ledger_waits(base: str) -> dict[str, dict[str, float]]:
    """`gate_ledger_wait_seconds` from `/metrics` (both workers' files): per wait, its count and
    the cumulative count of each bucket bound (`le`)."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(base + "/metrics") as response:
        families = text_string_to_metric_families(response.read().decode())
    found: dict[str, dict[str, float]] = {}
    for family in families:
        if family.name == "gate_ledger_wait_seconds":
            for sample in family.samples:
                if sample.name.endswith("_bucket"):
                    found.setdefault(sample.labels["wait"], {})[sample.labels["le"]] = sample.value
    return found


def _waits_added(before: dict, after: dict) -> dict[str, dict]:
    """Per wait during the run: how many, how many over 50 ms, and the bucket bound under which
    99% and all of them fell (a histogram's resolution: 1, 2.5, 5, 10, 20, 50, 100, 250 ms …)."""
    out = {}
    for wait, buckets in after.items():
        added = {le: value - before.get(wait, {}).get(le, 0.0) for le, value in buckets.items()}
        total = added.get("+Inf", 0.0)
        if not total:
            continue
        bounds = sorted((float(le), count) for le, count in added.items())
        out[wait] = {"count": int(total), "over_50_ms": int(total - added["0.05"]),
                     "p99_ms_at_most": _bound_under(bounds, 0.99 * total), "max_ms_at_most": _bound_under(bounds, total)}
    return out


def _bound_under(bounds: list[tuple[float, float]], count: float) -> str:
    """The least bucket bound (ms) with at least `count` waits at or under it."""
    bound = next(le for le, cumulative in bounds if cumulative >= count)
    return "inf" if bound == float("inf") else f"{bound * 1000:g}"


def _database(kind: str, home: Path) -> tuple[str, callable]:
    if kind == "sqlite":
        return f"sqlite:///{home / 'gate.db'}", lambda: None
    import psycopg

    name = f"gate_bench_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')

    def drop():
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    return PG_ADMIN.rsplit("/", 1)[0] + "/" + name, drop


@dataclass(frozen=True)
class Served:
    """A running `gate serve` of `served_gate`: its address, the benchmark key's wrk script, the
    server's process id and its ledger URL."""

    base: str
    script: Path
    pid: int
    url: str


@contextmanager
def served_gate(kind: str, workers: int = 2, threads: int = 8,
                request_file: str = "verdict-yes.json") -> Iterator[Served]:
    """`gate serve` over a new ledger of `kind` (a SQLite file, or a throw-away PostgreSQL
    database), Redis for the shared windows, a key with high limits and the wrk script that
    posts `request_file` with it; every worker booted and a first decide run made (the warm-up).
    Stopped, and its ledger dropped, on exit."""
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-{kind}-"))
    url, drop = _database(kind, home)
    env = {**os.environ, "GATE_HOME": str(home), "GATE_DATABASE_URL": url, "GATE_REDIS_URL": REDIS,
           "GATE_SIGNING_KEY_FILE": str(home / "keys.json"),
           "GATE_PUBLIC_RATE_LIMIT": "1000000"}  # /healthz counts against the per-client public budget
    server = None
    try:
        subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True)
        key = json.loads(subprocess.run([GATE, "keys", "create", "--scope", "bench", "--rate-limit", "100000000",
                                         "--monthly-cap", "100000000", "--json"], env=env, check=True,
                                        capture_output=True, text=True).stdout)["api_key"]
        port = _port()
        server = subprocess.Popen([GATE, "serve", "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
                                   "--threads", str(threads)],
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        _wait(base + "/api/decision/status")
        _settled(server.pid)
        body = json.dumps(json.loads((ROOT / "gate" / "data" / "requests" / request_file).read_text()))
        script = home / "post.lua"
        script.write_text(WRK_POST.format(key=key, body=body))
        _wrk(base + "/api/decide", script, 2, 16)  # warm-up (also warms the compile cache)
        yield Served(base, script, server.pid, url)
    finally:
        if server:
            server.terminate()
            server.wait(timeout=15)
        drop()
        shutil.rmtree(home, ignore_errors=True)


def run_backend(kind: str, duration: int, connections: int, request_file: str, workers: int = 2,
                threads: int = 8) -> dict:
    with served_gate(kind, workers, threads, request_file) as served:
        baseline = _wrk(served.base + "/healthz", None, duration, connections, served.pid)
        waits_before = _ledger_waits(served.base)
        decide = _wrk(served.base + "/api/decide", served.script, duration, connections, served.pid)
        decide["ledger_waits"] = _waits_added(waits_before, _ledger_waits(served.base))
        stored, verified = _stored_and_verified(served)
    return {"backend": kind, "connections": connections, "workers": workers, "threads": threads,
            "request": request_file, "baseline_healthz": baseline,
            "decide": decide, "stored_records": stored, "sample_verified": verified,
            "ratio_rps_vs_healthz": round(decide["requests_per_second"] / baseline["requests_per_second"], 3)}


def _stored_and_verified(served: Served) -> tuple[int, bool]:
    """How many records the ledger holds, and whether the newest verifies (hosted verify)."""
    from sqlalchemy import create_engine, text

    from gate.ledger.codec import decode
    from gate.ledger.engine import normalize_url

    engine = create_engine(normalize_url(served.url))
    with engine.connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM decisions")).scalar()
        sample = conn.execute(text("SELECT record_json FROM decisions ORDER BY created_at DESC LIMIT 1")).scalar()
    engine.dispose()
    request = urllib.request.Request(served.base + "/api/decision/verify", method="POST",
                                     data=json.dumps({"record": json.loads(decode(sample))}).encode(),
                                     headers={"content-type": "application/json"})
    with urllib.request.urlopen(request) as response:
        return int(stored or 0), bool(json.loads(response.read())["verified"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=int, default=10)
    parser.add_argument("--connections", default="16",
                        help="wrk connections, or several separated by commas (issue 23: 16; locks up to 64)")
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--request", default="verdict-yes.json", help="a file of gate/data/requests/")
    parser.add_argument("--workers", type=int, default=2, help="gate serve --workers (issue 23 measures 2)")
    parser.add_argument("--threads", type=int, default=8, help="gate serve --threads, per worker")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        print("wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 2
    counts = [int(count) for count in args.connections.split(",")]
    results = [run_backend(kind, args.duration, connections, args.request, args.workers, args.threads)
               for connections in counts for kind in args.backends.split(",")]
    print(f"{args.duration} s per route, request {args.request}, {args.workers} workers × {args.threads} threads")
    print(f"{'backend':10} {'conns':>5} {'route':8} {'rps':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>8} {'non-2xx':>7} "
          f"{'load1':>11} {'cpu ms':>6} {'pg ms':>6} {'stored':>7} {'ratio':>6}")
    for r in results:
        for route, w in (("healthz", r["baseline_healthz"]), ("decide", r["decide"])):
            tail = (f"{r['stored_records']:7d} {r['ratio_rps_vs_healthz']:6.3f}  verified={r['sample_verified']}"
                    if route == "decide" else "")
            print(f"{r['backend']:10} {r['connections']:5d} {route:8} {w['requests_per_second']:7.0f} {w['p50_ms']:7.2f} "
                  f"{w['p90_ms']:7.2f} {w['p99_ms']:8.2f} {w['non_2xx']:7d} {w['load1_before']:5.2f}→{w['load1_after']:<5.2f} "
                  f"{w['server_cpu_ms_per_request']:6.3f} {w['postgres_cpu_ms_per_request']:6.3f} {tail}")
    print("ledger waits during the decide run (gate_ledger_wait_seconds; issue 23: none over 50 ms):")
    for r in results:
        for wait, w in r["decide"]["ledger_waits"].items():
            print(f"  {r['backend']:10} {r['connections']:3d} conns {wait:12} {w['count']:8d} waits, "
                  f"{w['over_50_ms']:6d} over 50 ms, p99 ≤ {w['p99_ms_at_most']} ms, max ≤ {w['max_ms_at_most']} ms")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "http.json").write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
