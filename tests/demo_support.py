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


# What scripts/bootstrap's stamp is computed over (the install's inputs), in its order.
INSTALL_INPUTS = ("pyproject.toml", "setup.py", "gate/protocol/_canonical.c", "gate/protocol/_collation.c")


def require_bootstrapped_venv(root: Path) -> None:
    """Fail (not skip) unless root's .venv was installed from these inputs: a test that runs
    scripts/bootstrap from a copy would otherwise reinstall root's .venv from the copy."""
    import hashlib

    import pytest

    stamp = hashlib.sha256(b"".join((root / name).read_bytes() for name in INSTALL_INPUTS)).hexdigest()[:16]
    if not (root / ".venv" / f".installed-{stamp}").exists():
        pytest.fail("this checkout's .venv was installed for another pyproject.toml, setup.py or C source: "
                    "run scripts/bootstrap first")


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
