"""scripts/bootstrap installs one extra (issue 45, item 9): scripts/demo the `analytics` extra (what it
serves), scripts/test and the others `dev`; a venv installed with `dev` already holds `analytics`.
Run on a copy of the files the install builds from, with a `.venv/bin/python` that records each pip
call instead of installing."""

from __future__ import annotations

import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.demo_support import INSTALL_INPUTS

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def checkout(tmp_path):
    for name in ("scripts/bootstrap", "scripts/demo", *INSTALL_INPUTS):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, tmp_path / name)
    python = tmp_path / ".venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text('#!/bin/sh\necho "$@" >> "$(dirname "$0")/../pip-calls"\n')
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    return tmp_path


def bootstrap(checkout: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(checkout / "scripts" / "bootstrap"), *extra], cwd=checkout, capture_output=True,
                          text=True, timeout=60)


def installs(checkout: Path) -> list[str]:
    calls = checkout / ".venv" / "pip-calls"
    return [line for line in calls.read_text().splitlines() if " -e " in line] if calls.exists() else []


def test_the_demo_installs_analytics_and_the_tests_install_dev(checkout):
    assert "scripts/bootstrap analytics" in (checkout / "scripts" / "demo").read_text()
    assert bootstrap(checkout, "analytics").returncode == 0
    assert installs(checkout) == ["-m pip install --quiet -e .[analytics]"]
    assert bootstrap(checkout, "analytics").returncode == 0 and len(installs(checkout)) == 1  # stamped
    assert bootstrap(checkout).returncode == 0  # scripts/test: dev, the default
    assert installs(checkout)[-1] == "-m pip install --quiet -e .[dev]"
    assert bootstrap(checkout, "analytics").returncode == 0 and len(installs(checkout)) == 2  # dev holds it
    assert bootstrap(checkout, "dev").returncode == 0 and len(installs(checkout)) == 2


def test_an_unknown_extra_is_refused_and_installs_nothing(checkout):
    done = bootstrap(checkout, "everything")
    assert done.returncode == 2 and "unknown extra 'everything' (dev or analytics)" in done.stderr
    assert installs(checkout) == []
