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


# The run's shared folder (tests/conftest.py makes it before any xdist worker starts): the demo
# home is seeded there once per run, whichever worker asks first, and copied by every caller.
SHARED_ENV = "DECISION_GATE_TESTS_SHARED"
_PRISTINE: list[Path] = []  # this process's pristine home, when the run has no shared folder


def _seed_demo_home(home: Path) -> None:
    """The demo home as a newcomer's CLI makes it: signing keys, `gate demo seed`, `gate export`."""
    env = gate_env(home)
    subprocess.run([GATE, "keys", "signing-init"], env=env, check=True, capture_output=True, timeout=120)
    subprocess.run([GATE, "demo", "seed", "--decisions", str(DEMO_DECISIONS), "--seed", str(DEMO_SEED)],
                   env=env, check=True, capture_output=True, timeout=900)
    subprocess.run([GATE, "export", "--out", str(home / "dataset")], env=env, check=True,
                   capture_output=True, timeout=600)


def _pristine_home() -> Path:
    """The demo home as the CLI makes it, built once per run (five modules use it; each seed of
    1,500 decisions and export took 25-170 s, once in each xdist worker before it was shared).
    With the run's shared folder, the first worker to ask builds it under a lock (in a side folder,
    renamed into place whole), and the others wait for it; without one (this module used outside
    pytest), once per process, removed at exit."""
    import shutil
    import tempfile

    shared = os.environ.get(SHARED_ENV)
    if shared and Path(shared).is_dir():
        import fcntl

        home = Path(shared) / "demo-home"
        with open(Path(shared) / "demo-home.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or the process dies
            if not home.is_dir():
                building = Path(tempfile.mkdtemp(prefix="demo-home-building-", dir=shared))
                _seed_demo_home(building)
                building.rename(home)
        return home
    if not _PRISTINE:
        import atexit

        home = Path(tempfile.mkdtemp(prefix="gate-demo-home-")) / "home"
        atexit.register(shutil.rmtree, home.parent, True)
        home.mkdir()
        _seed_demo_home(home)
        _PRISTINE.append(home)
    return _PRISTINE[0]


def build_demo_home(home: Path) -> dict[str, Path]:
    """Seed the demo ledger and export it; returns the home, ledger and dataset paths. Each caller
    gets its own copy of this process's one pristine home (what it writes stays its own)."""
    import shutil

    home.parent.mkdir(parents=True, exist_ok=True)
    if home.exists() and not any(home.iterdir()):
        home.rmdir()
    shutil.copytree(_pristine_home(), home)
    return {"home": home, "dataset": home / "dataset", "ledger": home / "gate.db"}
