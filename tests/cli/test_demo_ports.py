"""`gate demo` (what `scripts/demo` runs) with busy ports, as subprocesses: a busy API or
workbench port stops it before anything is seeded, with one line naming the port, what wanted
it and the variable or flag that picks another; the banner names only what is served."""

from __future__ import annotations

import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gate.ledger import Ledger, stream
from tests.server.support import call

GATE = str(Path(sys.executable).parent / "gate")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def occupied() -> socket.socket:
    """A listening socket on a loopback port nobody else serves (close it when done)."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    return holder


def demo(args: list[str], env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([GATE, "demo", *args], env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=120, check=False)


def assert_nothing_written(env: dict) -> None:
    ledger = Ledger(env["GATE_DATABASE_URL"])
    try:
        ledger.upgrade()
        assert stream.scopes(ledger) == [] and ledger.list_api_keys() == []
    finally:
        ledger.dispose()


def assert_one_line(done: subprocess.CompletedProcess, *needles: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "seed" not in done.stdout and "Demo API key" not in done.stdout, done.stdout


def test_a_busy_api_port_stops_the_demo_before_seeding(gate_env):
    with occupied() as holder:
        port = holder.getsockname()[1]
        done = demo(["--port", str(port), "--workbench-port", str(free_port()), "--seed-decisions", "5"], gate_env)
    assert_one_line(done, f"gate demo: CLI_REFUSED: port {port} on 127.0.0.1 is busy (wanted by the API)",
                    "PORT=N scripts/demo", "gate demo --port N")
    assert_nothing_written(gate_env)


def test_a_busy_workbench_port_stops_the_demo_before_seeding(gate_env):
    with occupied() as holder:
        port = holder.getsockname()[1]
        done = demo(["--port", str(free_port()), "--workbench-port", str(port), "--seed-decisions", "5"], gate_env)
    assert_one_line(done, f"gate demo: CLI_REFUSED: port {port} on 127.0.0.1 is busy (wanted by the policy workbench)",
                    "WORKBENCH_PORT=N scripts/demo", "gate demo --workbench-port N", "0: the API alone")
    assert_nothing_written(gate_env)


@pytest.mark.parametrize("args,needle", [
    (["--port", "0"], "port 0 of the API is out of range (1 to 65535)"),
    (["--port", "70000"], "port 70000 of the API is out of range"),
    (["--workbench-port", "-1"], "port -1 of the policy workbench is out of range (0 to 65535)"),
    (["--port", "8123", "--workbench-port", "8123"], "port 8123 is wanted by both the API and the policy workbench"),
    (["--host", "no-such-host.invalid"], "does not resolve"),
])
def test_ports_it_cannot_serve_are_refused_in_one_line(gate_env, args, needle):
    assert_one_line(demo([*args, "--seed-decisions", "5"], gate_env), needle)
    assert_nothing_written(gate_env)


class Running:
    """A `gate demo` in the background; its stdout lines are read as they come."""

    def __init__(self, args: list[str], env: dict) -> None:
        self.process = subprocess.Popen([GATE, "demo", *args], env={**os.environ, **env}, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, start_new_session=True)
        self.lines: queue.Queue = queue.Queue()
        self.seen: list[str] = []
        self.errors: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.errors.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def stderr_says(self, needle: str, seconds: float = 90) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if any(needle in line for line in list(self.errors)):
                return True
            time.sleep(0.5)
        return False

    def until(self, predicate, seconds: float = 120) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=1)
            except queue.Empty:
                continue
            if line is None:
                break
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError("not printed:\n" + "\n".join(self.seen))

    def stop(self) -> None:
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(timeout=60)


def answers(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(2)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_the_api_alone_is_announced_once_it_listens_and_the_workbench_not_at_all(gate_env):
    port = free_port()
    running = Running(["--port", str(port), "--workbench-port", "0", "--seed-decisions", "0"], gate_env)
    try:
        running.until(lambda line: line.startswith("API reference:"))
        assert answers(port)  # the walkthrough is printed after the API's socket is bound
        # Deliveries, notices and sweeps run in `gate dispatch` beside the server (issue 68, item 1).
        assert running.stderr_says("gate dispatch: running webhooks"), "".join(running.errors)
        workers = [w["name"] for w in call("GET", f"http://127.0.0.1:{port}/api/decision/status")[2]
                   ["workers"]["workers"]]
        assert "webhooks" not in workers and "hold-sweeper" not in workers, workers
        time.sleep(1)
    finally:
        running.stop()
    printed = "\n".join(running.seen)
    assert f"http://127.0.0.1:{port}/api/decide" in printed and "Demo API key" in printed
    assert "workbench" not in printed.lower() and ":5006" not in printed


@pytest.mark.slow
def test_the_workbench_is_announced_once_it_listens_or_said_not_to_have_started(gate_env, tmp_path):
    port, workbench = free_port(), free_port()
    running = Running(["--port", str(port), "--workbench-port", str(workbench), "--seed-decisions", "0"], gate_env)
    try:
        running.until(lambda line: line.startswith("Policy workbench (dashboard):"))
        assert answers(workbench)
        assert f"http://127.0.0.1:{workbench}/workbench" in running.seen[-1]
    finally:
        running.stop()
    # A workbench that cannot start (its dataset location is a file) is never advertised.
    home = tmp_path / "other-home"
    home.mkdir()
    (home / "dataset").write_text("not a folder")
    port, workbench = free_port(), free_port()
    running = Running(["--port", str(port), "--workbench-port", str(workbench), "--seed-decisions", "0"],
                      {**gate_env, "GATE_HOME": str(home)})
    try:
        running.until(lambda line: line.startswith("API reference:"))
        said = running.stderr_says(f"the policy workbench did not start on port {workbench}")
    finally:
        running.stop()
    assert said, "".join(running.errors)
    assert "Policy workbench (dashboard)" not in "\n".join(running.seen) and not answers(workbench)


ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("variable,wanted_by", [("PORT", "the API"), ("WORKBENCH_PORT", "the policy workbench")])
def test_scripts_demo_names_the_variable_that_picks_another_port(gate_env, variable, wanted_by):
    other = {"PORT": "WORKBENCH_PORT", "WORKBENCH_PORT": "PORT"}[variable]
    with occupied() as holder:
        port = holder.getsockname()[1]
        done = subprocess.run([str(ROOT / "scripts" / "demo")], env={**os.environ, **gate_env, variable: str(port),
                                                                       other: str(free_port())},
                              capture_output=True, text=True, timeout=300, check=False)
    assert_one_line(done, f"port {port} on 127.0.0.1 is busy (wanted by {wanted_by})", f"{variable}=N scripts/demo")
    assert_nothing_written(gate_env)
