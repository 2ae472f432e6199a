"""`scripts/function_length.py`, the size gate `scripts/lint` runs before the suite, as a
subprocess over a tree of its own: a function past 60 lines or a class past 300 fails it with the
place named; within both it passes; landed migrations are not measured."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "function_length.py"


def _function(name: str, lines: int) -> str:
    return f"def {name}():\n" + "    x = 1\n" * (lines - 1)


def _class(name: str, lines: int) -> str:
    return f"class {name}:\n" + "    x = 1\n" * (lines - 1)


def _gate(tmp_path: Path, files: dict[str, str]) -> subprocess.CompletedProcess[str]:
    for rel, text in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return subprocess.run([sys.executable, str(SCRIPT), "--root", str(tmp_path)], capture_output=True,
                          text=True, timeout=60)


def test_within_both_limits_passes(tmp_path):
    done = _gate(tmp_path, {"gate/a.py": _function("f", 60) + _class("C", 300)})
    assert done.returncode == 0, done.stderr
    assert "longest 60: gate/a.py:1 f" in done.stdout and "longest 300: gate/a.py:61 C" in done.stdout


def test_a_class_one_line_past_300_fails_with_its_place(tmp_path):
    done = _gate(tmp_path, {"workbench/b.py": _class("Big", 301)})
    assert done.returncode == 1
    assert "class over 300 lines: workbench/b.py:1 Big (301 lines)" in done.stderr


def test_a_function_one_line_past_60_fails_with_its_place(tmp_path):
    done = _gate(tmp_path, {"api/c.py": _function("long", 61)})
    assert done.returncode == 1
    assert "function over 60 lines: api/c.py:1 long (61 lines)" in done.stderr


def test_landed_migrations_are_not_measured(tmp_path):
    done = _gate(tmp_path, {"gate/ledger/migrations/versions/0001_x.py": _class("Old", 400) + _function("g", 90)})
    assert done.returncode == 0, done.stderr
