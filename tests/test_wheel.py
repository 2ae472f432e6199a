"""The wheel serves: built from this checkout and installed into a fresh virtual environment
outside it, the package finds its schemas and data as package data (gate/resources.py) and runs
`gate keys signing-init`, `gate demo seed`, `gate serve` (decides answer), the workbench and the
notebooks' data lookup (issue 54, item 5).

The wheel is built with `pip wheel --no-deps --no-build-isolation` from a copy of the packages
(the checkout stays clean; C extensions compiled by the wheel, never copied from the tree). The
new environment gets the project's installed dependencies through a `.pth` line placed after its
own site-packages, so nothing is reinstalled and `gate` itself can only come from the wheel; every
command runs with PYTHONPATH unset from a folder outside the checkout.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import time
import urllib.request
import zipfile
from pathlib import Path

import pytest

from tests.server.support import free_port

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("gate", "api", "gate_cli", "gate_client", "workbench")
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE")
pytestmark = pytest.mark.slow


class Installed:
    """A virtual environment holding only the built wheel, a home folder and a working folder."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.venv = base / "venv"
        self.run_dir = base / "run"
        self.home = self.run_dir / "home"
        self.wheel: Path | None = None

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("GATE_") and k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
        env["GATE_HOME"] = str(self.home)
        return env

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.bin / args[0]), *args[1:]], cwd=self.run_dir, env=self.env(),
                              capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{args}: {done.stdout}\n{done.stderr}"
        return done

    def start(self, args: list[str], log: Path) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen([str(self.bin / args[0]), *args[1:]], cwd=self.run_dir, env=self.env(),
                                    stdout=out, stderr=subprocess.STDOUT)


def _build_wheel(base: Path) -> Path:
    source = base / "src"
    source.mkdir()
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.so"))
    wheels = base / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                           "--no-index", "--quiet", "--wheel-dir", str(wheels), str(source)],
                          cwd=base, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = wheels.glob("decision_gate-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    assert ROOT not in base.parents
    target = Installed(base)
    target.wheel = _build_wheel(base)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(target.venv)], check=True, timeout=120)
    purelib = subprocess.run([str(target.bin / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # The project's dependencies, already installed beside this interpreter: searched after the
    # new environment's own site-packages (a .pth line is appended to sys.path; the .pth files
    # of that folder, the checkout's editable install among them, are not processed).
    Path(purelib, "project-dependencies.pth").write_text(
        str(Path(sysconfig.get_paths()["purelib"]).resolve()) + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(target.bin / "python"), "install", "--quiet",
                    "--no-deps", "--no-index", str(target.wheel)], check=True, capture_output=True, timeout=300)
    target.run_dir.mkdir()
    target.run("gate", "keys", "signing-init")
    target.run("gate", "demo", "seed", "--decisions", "40", timeout=300)
    return target


def _wait_for(url: str, process: subprocess.Popen[bytes], log: Path, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited with {process.returncode}:\n{log.read_text()}"
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"no answer at {url}:\n{log.read_text()}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)


def test_the_wheel_carries_the_schemas_the_data_and_both_compiled_extensions(installed):
    names = set(zipfile.ZipFile(installed.wheel).namelist())
    for folder in ("schemas", "data"):
        shipped = {f"gate/{path.relative_to(ROOT / 'gate').as_posix()}"
                   for path in (ROOT / "gate" / folder).rglob("*") if path.is_file()}
        assert shipped and shipped <= names, sorted(shipped - names)
    for extension in ("_canonical", "_collation"):
        assert any(n.startswith(f"gate/protocol/{extension}.") and n.endswith(".so") for n in names), extension
    assert {"gate/ledger/dictionaries/ledger-1.zdict", "gate/ledger/migrations/script.py.mako"} <= names


PROBE = """
import json, sys
import api, gate, gate_cli, gate_client, workbench
import gate.protocol._canonical, gate.protocol._collation
from gate.policychecks.tables import load_tables
from gate.resources import data_path, schemas_dir
from gate.rulebook import SCHEMA_PATH, schema_hash
from gate.rulebook.patterns import load_patterns
from workbench.demo.scenario import RULEBOOK_DIR
from workbench.notebooks.support import notebook_paths
paths = notebook_paths({})
print(json.dumps({
    "modules": [m.__file__ for m in (api, gate, gate_cli, gate_client, workbench)],
    "sys_path": sys.path,
    "files": [str(p) for p in (SCHEMA_PATH, schemas_dir(), data_path("requests"), RULEBOOK_DIR, paths.rulebooks)],
    "schema_hash": schema_hash(),
    "tables": len(load_tables()),
    "patterns": len(load_patterns().patterns),
    "notebook_rulebooks": sorted(p.name for p in paths.rulebooks.glob("*.json")),
    "notebook_root": str(paths.root),
}))
"""


def test_the_installed_package_reads_its_own_files_not_the_checkouts(installed):
    seen = json.loads(installed.run("python", "-c", PROBE).stdout)
    venv = str(installed.venv)
    assert all(path.startswith(venv) for path in seen["modules"]), seen["modules"]
    assert ROOT not in {Path(entry).resolve() for entry in seen["sys_path"] if entry}  # the checkout is not importable
    assert all(path.startswith(venv) for path in seen["files"]), seen["files"]
    from gate.rulebook import schema_hash

    assert seen["schema_hash"] == schema_hash()  # the same bytes as the checkout's
    assert seen["tables"] == 4 and seen["patterns"] == 4
    # The notebooks' data lookup: the rulebooks the package ships, the working folder as root.
    assert seen["notebook_rulebooks"] == sorted(p.name for p in (ROOT / "gate" / "data" / "rulebooks").glob("*.json"))
    assert Path(seen["notebook_root"]) == installed.run_dir


def test_the_installed_gate_serves_decides_its_schemas_and_the_workbench(installed, tmp_path):
    key = json.loads(installed.run("gate", "keys", "create", "--scope", "demo", "--plan", "growth",
                                   "--json").stdout)["api_key"]
    port, bench_port = free_port(), free_port()
    log, bench_log = tmp_path / "serve.log", tmp_path / "workbench.log"
    # Both start at once (each takes seconds to import its stack); each is checked on its own.
    server = installed.start(["gate", "serve", "--port", str(port), "--workers", "1"], log)
    bench = installed.start(["gate", "workbench", "--port", str(bench_port)], bench_log)
    try:
        base = f"http://127.0.0.1:{port}"
        _wait_for(f"{base}/healthz", server, log)
        requests = ROOT / "gate" / "data" / "requests"
        # A direct rulebook decision each way, and one through an adapter (its sandboxed worker).
        for name, verdict in (("verdict-yes", "yes"), ("verdict-no", "no"), ("pricing-margin", "yes")):
            call = urllib.request.Request(f"{base}/api/decide", data=(requests / f"{name}.json").read_bytes(),
                                          headers={"x-api-key": key, "content-type": "application/json"})
            with urllib.request.urlopen(call, timeout=60) as answer:
                record = json.loads(answer.read())
            assert (answer.status, record["c"], record["status"]) == (200, verdict, "ok"), (name, record)
        with urllib.request.urlopen(f"{base}/schemas/rulebook-v1.schema.json", timeout=30) as answer:
            assert answer.read() == (ROOT / "gate" / "schemas" / "rulebook-v1.schema.json").read_bytes()
        page = f"http://127.0.0.1:{bench_port}/workbench"
        _wait_for(page, bench, bench_log)
        with urllib.request.urlopen(page, timeout=60) as answer:
            assert answer.status == 200 and b"<html" in answer.read().lower()
    finally:
        _stop(server)
        _stop(bench)
