"""Decide latency beside clients that never read their answer (issue 53, defect 1).

A real `gate serve --workers 1` (its default 8 threads; Redis for the windows) over a new ledger
of each backend. A prober makes a keyed `POST /api/decide` every `--every` seconds, each on a
new connection with a `--timeout` s limit, through three phases of `--seconds` each (longer than
gunicorn's 30 s worker timeout, so a worker whose loop stalls is killed within a phase):

- quiet: nothing else (the baseline, in the same run on the same server);
- unread closes: 25 connections send `GET /healthz` with `Connection: close` and then neither
  read nor close, and 25 more every 5 s (the issue's script, repeated as the public rate limit
  allows);
- unread long-polls: 100 connections long-poll a held decision (`wait=2`) with `Connection:
  close` and never read; 100 more every 10 s.

Printed per phase: decides answered and failed, p50/p99/max latency and their ratios to the quiet
phase, how long after the phase a decide was answered again (`after s`: a stalled worker
recovers or is killed and replaced meanwhile), whether the worker was killed during the phase
or that wait (`WORKER TIMEOUT` in the server's log, or a new worker pid), and the 1-minute load
average before and after. With `--stock` the same phases run first
against gunicorn's own graceful close (`TConn.close`, which waits for the client on the worker's
main loop), for the figure before the fix; `api.lingering` is the fix.

Run: .venv/bin/python benchmarks/bench_unread_closes.py [--backends sqlite,postgresql] [--seconds 35]
                                                       [--every 0.1] [--stock]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_http import GATE, REDIS, ROOT, _database, _port, _settled

RESULTS = ROOT / "benchmarks" / "results" / "unread_closes.json"
# `gate serve` with gunicorn's stock graceful close on the main loop (the behaviour before the fix).
STOCK = ("import sys; import api.serving as s; s.GateConn.close = s.TConn.close; "
         "from gate_cli.main import main; sys.exit(main(sys.argv[1:]))")
DECIDE = json.loads((ROOT / "gate" / "data" / "requests" / "verdict-yes.json").read_text())  # as bench_http
HELD = json.loads((ROOT / "gate" / "data" / "requests" / "pricing-exception.json").read_text())
HELD["context"]["inputs"]["margin_percent"] = 12  # rule `review_thin_margin` holds it (the long-polls' hold)


@dataclass
class Gate:
    base: str
    port: int
    key: str
    master: subprocess.Popen[bytes]
    log: Path

    def workers(self) -> list[int]:
        return [int(p) for p in Path(f"/proc/{self.master.pid}/task/{self.master.pid}/children").read_text().split()]

    def killed(self) -> int:
        return self.log.read_text(errors="replace").count("WORKER TIMEOUT")


def _post(base: str, path: str, body: dict, key: str, timeout: float) -> tuple[int, dict]:
    request = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", "x-api-key": key})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, {}


@contextmanager
def served(kind: str, stock: bool) -> Iterator[Gate]:
    home = Path(tempfile.mkdtemp(prefix=f"gate-bench-unread-{kind}-"))
    url, drop = _database(kind, home)
    env = {**os.environ, "GATE_HOME": str(home), "GATE_DATABASE_URL": url, "GATE_REDIS_URL": REDIS,
           "GATE_SIGNING_KEY_FILE": str(home / "keys.json"), "GATE_PUBLIC_RATE_LIMIT": "1000000",
           "PYTHONPATH": str(ROOT)}
    master = None
    try:
        subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True)
        key = json.loads(subprocess.run([GATE, "keys", "create", "--scope", "bench", "--rate-limit", "100000000",
                                         "--monthly-cap", "100000000", "--json"], env=env, check=True,
                                        capture_output=True, text=True).stdout)["api_key"]
        port, log = _port(), home / "server.log"
        command = [sys.executable, "-c", STOCK] if stock else [GATE]
        with open(log, "ab") as out:
            master = subprocess.Popen(command + ["serve", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
                                      env=env, stdout=out, stderr=subprocess.STDOUT)
        base = f"http://127.0.0.1:{port}"
        _ready(base + "/api/decision/status")
        _settled(master.pid)
        yield Gate(base, port, key, master, log)
    finally:
        if master:
            master.terminate()
            master.wait(timeout=30)
        drop()
        shutil.rmtree(home, ignore_errors=True)


def _ready(url: str, limit: float = 180.0) -> None:
    """Wait for the first 200 (bench_http's 30 s was too short for a new ledger on a loaded host)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.HTTPError):
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not become ready in {limit} s")


def unread(port: int, count: int, request: bytes, into: list[socket.socket]) -> None:
    """`count` connections that send `request` and then neither read nor close (kept in `into`)."""
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=5)
            sock.sendall(request)
            into.append(sock)
        except OSError:
            pass  # a stalled worker's backlog is full: that client is refused, the others still count


def attacks(gate: Gate, held_id: str) -> dict[str, tuple[int, float, bytes]]:
    """Each hostile phase: (connections per wave, seconds between waves, the request sent)."""
    poll = (f"GET /api/decision/{held_id}/resolution?wait=2 HTTP/1.1\r\nHost: x\r\nx-api-key: {gate.key}\r\n"
            "Connection: close\r\n\r\n").encode()
    return {"unread closes": (25, 5.0, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            "unread long-polls": (100, 10.0, poll)}


def phase(gate: Gate, args: argparse.Namespace, hostile: Callable[[float], None] | None) -> dict:
    """Decides every `args.every` s for `args.seconds`, `hostile(elapsed)` run beside them."""
    workers, killed, load = gate.workers(), gate.killed(), os.getloadavg()[0]
    latencies, failed, stop = [], 0, threading.Event()
    attacker = None
    if hostile is not None:
        def run() -> None:
            started = time.monotonic()
            while not stop.is_set():
                hostile(time.monotonic() - started)
                stop.wait(0.1)
        attacker = threading.Thread(target=run, daemon=True)
        attacker.start()
    started = time.monotonic()
    while time.monotonic() - started < args.seconds:
        begun = time.monotonic()
        try:
            status, _ = _post(gate.base, "/api/decide", DECIDE, gate.key, args.timeout)
        except OSError:  # timed out, or the worker was killed under it
            status = 0
        elapsed = time.monotonic() - begun
        if status == 200:
            latencies.append(elapsed)
        else:
            failed += 1
        time.sleep(max(0.0, args.every - elapsed))
    stop.set()
    if attacker is not None:
        attacker.join()
    recovery = _recovery(gate, args)  # a stalled worker is killed (or recovers) before the next phase
    return {"answered": len(latencies), "failed": failed, **_percentiles(latencies), "recovery_s": recovery,
            "worker_killed": gate.killed() > killed or gate.workers() != workers,
            "load_before": round(load, 1), "load_after": round(os.getloadavg()[0], 1)}


def _recovery(gate: Gate, args: argparse.Namespace, limit: float = 90.0) -> float:
    """Seconds after the phase until a decide is answered again within its timeout (the worker
    was stalled, or killed and replaced, meanwhile)."""
    started = time.monotonic()
    while time.monotonic() - started < limit:
        try:
            if _post(gate.base, "/api/decide", DECIDE, gate.key, args.timeout)[0] == 200:
                break
        except OSError:
            pass
    time.sleep(1.0)  # the arbiter notices a dead worker within a second
    return round(time.monotonic() - started - 1.0, 1)


def _percentiles(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"p50_ms": None, "p99_ms": None, "max_ms": None}
    ordered = sorted(values)

    def at(share: float) -> float:
        return round(1000 * ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)

    return {"p50_ms": at(0.50), "p99_ms": at(0.99), "max_ms": round(1000 * ordered[-1], 1)}


def run_backend(kind: str, stock: bool, args: argparse.Namespace) -> dict[str, dict]:
    with served(kind, stock) as gate:
        status, record = _post(gate.base, "/api/decide", HELD, gate.key, 30)
        if status != 200 or record.get("verdict") != "review":
            raise RuntimeError(f"the held decide answered {status}: {record}")
        results = {"quiet": phase(gate, args, None)}
        for name, (count, every, request) in attacks(gate, record["decision_id"]).items():
            socks: list[socket.socket] = []

            def hostile(elapsed: float, count=count, every=every, request=request, socks=socks) -> None:
                if len(socks) < count * (1 + int(elapsed // every)):
                    unread(gate.port, count, request, socks)
            try:
                results[name] = phase(gate, args, hostile) | {"hostile_connections": len(socks)}
            finally:
                for sock in socks:
                    sock.close()
            time.sleep(3.0)  # the worker closes what is left of them before the next phase
        quiet = results["quiet"]
        for row in results.values():
            for figure in ("p50_ms", "p99_ms"):
                if row[figure] is not None and quiet[figure]:
                    row[figure.replace("_ms", "_x_quiet")] = round(row[figure] / quiet[figure], 2)
        return results


def _print(kind: str, stack: str, results: dict[str, dict]) -> None:
    print(f"\n{kind}, {stack}")
    print(f"{'phase':<18} {'answered':>8} {'failed':>6} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>9} "
          f"{'p50 x':>6} {'p99 x':>6} {'after s':>7} {'killed':>6} {'load':>10}")
    for name, row in results.items():
        print(f"{name:<18} {row['answered']:>8} {row['failed']:>6} {row['p50_ms']!s:>8} {row['p99_ms']!s:>8} "
              f"{row['max_ms']!s:>9} {row.get('p50_x_quiet', 1.0)!s:>6} {row.get('p99_x_quiet', 1.0)!s:>6} "
              f"{row['recovery_s']:>7} "
              f"{'yes' if row['worker_killed'] else 'no':>6} {row['load_before']:>4}-{row['load_after']:<5}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument("--seconds", type=float, default=35.0, help="each phase; past gunicorn's 30 s timeout")
    parser.add_argument("--every", type=float, default=0.1, help="seconds between decides")
    parser.add_argument("--timeout", type=float, default=10.0, help="a decide's client timeout")
    parser.add_argument("--stock", action="store_true", help="also run gunicorn's stock close first")
    args = parser.parse_args()
    report: dict[str, dict] = {}
    for kind in args.backends.split(","):
        for stock in ([True] if args.stock else []) + [False]:
            stack = "gthread stock close" if stock else "gate serve (lingering closes)"
            results = run_backend(kind, stock, args)
            _print(kind, stack, results)
            report[f"{kind} / {stack}"] = results
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=2))
    target = all(row["failed"] == 0 and not row["worker_killed"] and (row["p99_ms"] or 0) < 1000
                 for name, results in report.items() if "stock" not in name for row in results.values())
    print(f"\ntarget (every decide answered, p99 under 1 s, no worker killed): {'met' if target else 'MISSED'}")
    return 0 if target else 1


if __name__ == "__main__":
    raise SystemExit(main())
