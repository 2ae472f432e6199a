"""The demo ledger as a newcomer gets it: `gate demo seed` then `gate export`, both run as the
CLI (subprocesses), into a throw-away home. Used by the notebook and browser tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GATE = str(Path(sys.executable).parent / "gate")
DEMO_DECISIONS = int(os.environ.get("GATE_TEST_DEMO_DECISIONS", "1500"))
DEMO_SEED = 7


def gate_env(home: Path) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATE_")}
    env["GATE_HOME"] = str(home)
    return env


def build_demo_home(home: Path) -> dict[str, Path]:
    """Seed the demo ledger and export it; returns the home, ledger and dataset paths."""
    home.mkdir(parents=True, exist_ok=True)
    env = gate_env(home)
    subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True, timeout=120)
    subprocess.run([GATE, "demo", "seed", "--decisions", str(DEMO_DECISIONS), "--seed", str(DEMO_SEED)],
                   env=env, check=True, capture_output=True, timeout=900)
    subprocess.run([GATE, "export", "--out", str(home / "dataset")], env=env, check=True,
                   capture_output=True, timeout=600)
    return {"home": home, "dataset": home / "dataset", "ledger": home / "gate.db"}
