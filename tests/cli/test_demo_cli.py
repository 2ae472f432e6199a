"""`gate demo seed`, `gate demo synth` and first-run seeding of `gate demo`, as subprocesses."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

GATE = str(Path(sys.executable).parent / "gate")


def gate(args, env, timeout=300):
    return subprocess.run([GATE, *args], env={**os.environ, **env}, capture_output=True, text=True, timeout=timeout)


def test_seed_then_refuse_a_second_seed_then_export(gate_env, tmp_path):
    done = gate(["demo", "seed", "--decisions", "40", "--seed", "3"], gate_env)
    assert done.returncode == 0, done.stderr
    assert "seeded 40 decisions and" in done.stdout and "demo, acme-retail" in done.stdout
    again = gate(["demo", "seed", "--decisions", "40"], gate_env)
    assert again.returncode == 2 and "already holds decisions" in again.stderr
    bad = gate(["demo", "seed", "--decisions", "0"], {**gate_env, "GATE_DATABASE_URL": f"sqlite:///{tmp_path / 'x.db'}"})
    assert bad.returncode == 2 and "decisions must be" in bad.stderr
    exported = json.loads(gate(["export", "--out", str(tmp_path / "ds"), "--json"], gate_env).stdout)
    assert exported["rows"]["decisions"] == 40 and exported["rows"]["outcomes"] > 0


def test_synth_writes_a_synthetic_dataset_and_refuses_a_used_location(gate_env, tmp_path):
    out = tmp_path / "syn"
    done = gate(["demo", "synth", "--out", str(out), "--decisions", "2000", "--chunk", "700"], gate_env)
    assert done.returncode == 0, done.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["synthetic"] is True and manifest["tables"]["decisions"]["rows"] == 2000
    again = gate(["demo", "synth", "--out", str(out), "--decisions", "10"], gate_env)
    assert again.returncode == 2 and "not empty" in again.stderr


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.slow
def test_demo_seeds_on_the_first_run_only(gate_env):
    def start():
        port = free_port()
        process = subprocess.Popen([GATE, "demo", "--port", str(port), "--seed-decisions", "25", "--workbench-port", "0"],
                                   env={**os.environ, **gate_env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True)
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/openapi.json", timeout=2):
                    break
            except OSError:
                time.sleep(0.5)
        process.terminate()
        out, _ = process.communicate(timeout=60)
        return out

    first = start()
    assert "first run: seeding the demo ledger (25 decisions" in first and "seeded 25 decisions" in first
    second = start()
    assert "seeding" not in second and "Demo API key" in second
    # The demo key is a growth key: the walkthrough and the four policy reports fit its cost
    # window (a starter key answered 429 to the reports right after the walkthrough).
    keys = subprocess.run([GATE, "keys", "list"], env={**os.environ, **gate_env}, capture_output=True, text=True,
                          timeout=120)
    active = [line for line in keys.stdout.splitlines() if " active " in line and "scope=demo" in line]
    assert len(active) == 1 and "plan=growth" in active[0], keys.stdout
