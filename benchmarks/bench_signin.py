"""Workbench sign-in: what a password-guessing burst costs, before and after issue 18 item 5.

Two servers on loopback, started in this run, each receiving the issue's burst: N wrong
passwords for one user, back to back over one keep-alive connection from 127.0.0.1.

- baseline: Panel's own basic auth (`pn.serve(basic_auth=FILE)`) over a plaintext password file
  (`{"user": "password"}`), what the workbench used before: every guess is compared with `==`;
- ours: `gate workbench --basic-auth FILE` over a scrypt password file (n = 2^15, r = 8, p = 1)
  with the sign-in throttle.

Rows: the burst's wall time and answers per second on each; how many guesses were actually
checked, and per second (baseline: all; ours: the 401s before the block); the median time of one checked
sign-in (401, one scrypt run: a fresh user and source address each time, so the throttle admits it) and
of one throttled sign-in (429, no scrypt run). Ratios: checked/throttled sign-in time, and
checked guesses in the burst, baseline/ours. `/proc/loadavg` is printed before and after, since
the machine may be shared. Results: `benchmarks/results/signin.json`.

Run: .venv/bin/python benchmarks/bench_signin.py [--guesses N]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser.conftest import wait_for  # noqa: E402
from tests.server.support import free_port  # noqa: E402
from workbench.app.passwords import hash_password  # noqa: E402

GATE = str(Path(sys.executable).parent / "gate")
PASSWORD = "correct horse battery staple"
PANEL_BASIC_AUTH = """
import sys, panel as pn
pn.serve({"workbench": lambda: pn.pane.Markdown("x")}, port=int(sys.argv[1]), address="127.0.0.1",
         show=False, basic_auth=sys.argv[2], cookie_secret="bench-" + "x" * 32)
"""


def post(connection: http.client.HTTPConnection, user: str, password: str) -> int:
    connection.request("POST", "/login", urllib.parse.urlencode({"username": user, "password": password}),
                       {"Content-Type": "application/x-www-form-urlencoded"})
    response = connection.getresponse()
    response.read()
    return response.status


def burst(port: int, guesses: int) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    statuses: dict[int, int] = {}
    started = time.perf_counter()
    for guess in range(guesses):
        status = post(connection, "ana", f"guess-{guess}")
        statuses[status] = statuses.get(status, 0) + 1
    seconds = time.perf_counter() - started
    connection.close()
    # A checked guess: the password was compared (Panel's 302 back to the login page, our 401).
    checked = statuses.get(302, 0) + statuses.get(401, 0)
    return {"seconds": round(seconds, 3), "answers_per_s": round(guesses / seconds, 1), "statuses": statuses,
            "checked": checked, "checked_per_s": round(checked / seconds, 1)}


def single(port: int, user: str, source: str) -> float:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120, source_address=(source, 0))
    started = time.perf_counter()
    status = post(connection, user, "wrong")
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed if status in (401, 429) else float("nan")


def serve(command: list[str], port: int, home: Path) -> subprocess.Popen:
    log = home / f"server-{port}.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith("GATE_")} | {"GATE_HOME": str(home)}
    with open(log, "w") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    wait_for(f"http://127.0.0.1:{port}/login", process, log)
    return process


def measure(home: Path, guesses: int) -> dict[str, object]:
    plain, hashed, grants = home / "plain.json", home / "hashed.json", home / "grants.json"
    plain.write_text(json.dumps({"ana": PASSWORD}))
    hashed.write_text(json.dumps({"ana": hash_password(PASSWORD)}))
    grants.write_text(json.dumps({"ana": ["acme"]}))
    port = free_port()
    process = serve([sys.executable, "-c", PANEL_BASIC_AUTH, str(port), str(plain)], port, home)
    try:
        baseline = burst(port, guesses)
    finally:
        process.terminate()
        process.wait(10)
    port = free_port()
    process = serve([GATE, "workbench", "--host", "0.0.0.0", "--port", str(port), "--basic-auth", str(hashed),
                     "--grants", str(grants)], port, home)
    try:
        checked = [single(port, f"user-{index}", f"127.0.1.{index}") for index in range(1, 8)]
        ours = burst(port, guesses)
        throttled = [single(port, "ana", "127.0.0.1") for _ in range(7)]
    finally:
        process.terminate()
        process.wait(10)
    check_ms, throttle_ms = statistics.median(checked) * 1000, statistics.median(throttled) * 1000
    return {"guesses": guesses, "baseline_panel_plaintext": baseline, "ours": ours,
            "checked_signin_ms": round(check_ms, 2), "throttled_signin_ms": round(throttle_ms, 2),
            "checked_over_throttled": round(check_ms / throttle_ms, 1),
            "checked_guesses_baseline_over_ours": round(baseline["checked"] / max(ours["checked"], 1), 1)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--guesses", type=int, default=1200)
    args = parser.parse_args()
    load_before = Path("/proc/loadavg").read_text().strip()
    with tempfile.TemporaryDirectory() as home:
        result = measure(Path(home), args.guesses)
    result["loadavg"] = {"before": load_before, "after": Path("/proc/loadavg").read_text().strip()}
    out = ROOT / "benchmarks" / "results" / "signin.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
