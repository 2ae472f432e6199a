"""The README's notebook command runs from a fresh clone (issue 22, item 3).

A copy of the checkout's files (what a clone holds: tracked and new files, nothing ignored, no
`var/`), with this checkout's installed `.venv` beside it (so `scripts/bootstrap` has nothing
to install) and the demo dataset where `scripts/demo` leaves it (`var/dataset`). The README's
command, read from the README itself, runs there as a subprocess with no GATE_* variable set:
every notebook must be written to `var/notebooks/` with no error, at least one plot and a
table, having read the clone's dataset although its kernel ran in `var/notebooks/`. Without a
dataset the command writes nothing and says how to make one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.demo_support import require_bootstrapped_venv

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))

pytestmark = [pytest.mark.notebook, pytest.mark.slow]


def readme_command() -> list[str]:
    """The one command of the README's "Notebooks" section."""
    section = (ROOT / "README.md").read_text(encoding="utf-8").split("### Notebooks", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "the Notebooks section shows one command"
    lines = [line for line in blocks[0].splitlines() if line.strip()]
    assert len(lines) == 1
    return lines[0].split()


def clean_env() -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("GATE_")}
    env.pop("PYTHONPATH", None)
    return env


@pytest.fixture
def clone(tmp_path_factory) -> Path:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    target = tmp_path_factory.mktemp("fresh") / "decision-gate"
    for name in filter(None, listed):
        source = ROOT / name
        if source.is_file():
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target / name)
    # scripts/notebooks runs scripts/bootstrap, which reinstalls when the venv's stamp does not
    # name this pyproject.toml: from the clone, that would point this checkout's .venv at a
    # temporary copy. Refuse instead, and say how to put it right.
    # The stamp is over what the install builds from, as scripts/bootstrap computes it.
    require_bootstrapped_venv(ROOT)
    (target / ".venv").symlink_to(ROOT / ".venv")
    return target


def run(command: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800, check=False)


def test_without_a_dataset_nothing_is_written_and_the_message_says_how_to_make_one(clone):
    result = run(readme_command(), clone, clean_env())
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"no dataset at {clone / 'var' / 'dataset'}" in result.stderr
    assert "scripts/demo" in result.stderr and "gate export --out" in result.stderr
    assert not (clone / "var" / "notebooks").exists()


def test_a_missing_gate_dataset_is_named(clone, tmp_path):
    missing = tmp_path / "no <such> dataset"
    result = run(readme_command(), clone, {**clean_env(), "GATE_DATASET": str(missing)})
    assert result.returncode == 2
    assert f"no dataset at {missing} (GATE_DATASET" in result.stderr
    assert not (clone / "var" / "notebooks").exists()


def test_an_unknown_notebook_is_refused(clone, demo_dataset, tmp_path):
    result = run([*readme_command(), "--only", "anomaly_investigation", "../../etc/passwd"], clone,
                 {**clean_env(), "GATE_DATASET": str(demo_dataset["dataset"]), "GATE_HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "no notebook named ../../etc/passwd" in result.stderr
    assert not (tmp_path / "notebooks").exists()


@pytest.mark.parametrize("timeout", ["0", "-5", "1e3", "90000", "٣"])
def test_a_bad_timeout_is_refused(clone, demo_dataset, tmp_path, timeout):
    result = run([*readme_command(), "--timeout", timeout], clone,
                 {**clean_env(), "GATE_DATASET": str(demo_dataset["dataset"]), "GATE_HOME": str(tmp_path)})
    assert result.returncode == 2
    assert "--timeout: must be a whole number of seconds from 1 to 86400" in result.stderr
    assert not (tmp_path / "notebooks").exists()


def outputs(notebook: dict) -> list[dict]:
    return [output for cell in notebook["cells"] if cell["cell_type"] == "code" for output in cell.get("outputs", [])]


def test_the_readme_command_runs_every_notebook_from_a_fresh_clone(clone, demo_dataset):
    # What scripts/demo leaves in var/: the signed dataset and the keyring that signed it.
    shutil.copytree(demo_dataset["dataset"], clone / "var" / "dataset")
    shutil.copy2(demo_dataset["home"] / "signing-keys.json", clone / "var" / "signing-keys.json")
    result = run(readme_command(), clone, clean_env())
    assert result.returncode == 0, result.stdout + result.stderr
    written = clone / "var" / "notebooks"
    assert sorted(p.stem for p in written.glob("*.ipynb")) == NOTEBOOKS
    for name in NOTEBOOKS:
        shown = outputs(json.loads((written / f"{name}.ipynb").read_text()))
        assert not [o for o in shown if o["output_type"] == "error"], name
        assert [o for o in shown if "image/png" in o.get("data", {})], f"{name} shows no plot"
        assert [o for o in shown if "<table" in "".join(o.get("data", {}).get("text/html", ""))], name
        printed = "".join("".join(o["text"]) for o in shown if o["output_type"] == "stream")
        # The kernel ran in var/notebooks/, yet the notebook read the clone's dataset.
        assert f"dataset: {clone / 'var' / 'dataset'}" in printed, name
        assert f"ok {name}:" in result.stdout
