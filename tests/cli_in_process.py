"""`gate ARGS` run by this test process's `gate_cli.main.main`, answered as `subprocess.run` answers.

A `gate` subprocess costs 0.6 s of start-up (1-2 s on a loaded host) before it does anything; a
test that runs the command a dozen times to check what it prints and exits with, not how a process
starts, runs it here instead. Each command line keeps at least one real subprocess test (its entry
point, its imports, its exit status as a shell sees it) in the file that covers it.

The environment and the working directory are the command's for the duration of the call and are
restored after it, as are `sys.stdout` and `sys.stderr`; `main` reads its settings from the
environment at every call (`Settings.from_env`), so one call never sees another's."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path


def _stream() -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(), encoding="utf-8", newline="")  # a .buffer, as sys.stdout has


def _text(stream: io.TextIOWrapper) -> str:
    stream.flush()
    return stream.buffer.getvalue().decode("utf-8")  # type: ignore[attr-defined]


def gate_in_process(args: Sequence[str], env: Mapping[str, str] | None = None,
                    cwd: str | Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run `gate ARGS` with `env` over this process's environment in `cwd`; its exit status,
    stdout and stderr as a `CompletedProcess` (argparse's usage errors exit 2 as in a process)."""
    from gate_cli.main import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    out, err = _stream(), _stream()
    try:
        os.environ.update(env or {})
        if cwd is not None:
            os.chdir(cwd)
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exit_:  # argparse (usage, --help) and commands that sys.exit
                code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
                if isinstance(exit_.code, str):
                    print(exit_.code, file=sys.stderr)
    finally:
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
    return subprocess.CompletedProcess(["gate", *args], code, _text(out), _text(err))
