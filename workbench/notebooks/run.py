"""`scripts/notebooks`: execute every notebook under `notebooks/` against the dataset and write
the executed copies (outputs and plots included) to `$GATE_HOME/notebooks/` (`var/notebooks/`).

    python -m workbench.notebooks.run [--only NAME …] [--lab]

The dataset is found as the notebooks find it (`workbench.notebooks.support`): `GATE_DATASET`,
else `$GATE_HOME/dataset`, else `var/dataset` under the project root. Without one it writes
nothing and exits 2 with the commands that make one. Each notebook runs in a fresh kernel
whose working folder is the output folder (not the project root), importing this checkout.
A notebook whose cell fails is still written (up to the failing cell); the run then exits 1
naming the notebook, the cell (its number and first line of code) and the exception with its message. `--lab` opens JupyterLab on the output folder afterwards (loopback only).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from workbench.notebooks.support import (
    NotebookPaths,
    NotebookSetupError,
    notebook_paths,
    require_dataset,
)

PLOT_TYPES = ("image/png", "image/svg+xml")
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _seconds(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 86_400:
        raise argparse.ArgumentTypeError("must be a whole number of seconds from 1 to 86400")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="scripts/notebooks", description=__doc__.split("\n\n")[0])
    p.add_argument("--only", nargs="+", metavar="NAME", default=None,
                   help="run only these notebooks (file names under notebooks/ without .py; default: every one)")
    p.add_argument("--timeout", type=_seconds, default=600, help="seconds one cell may run (default %(default)s)")
    p.add_argument("--lab", action="store_true",
                   help="then open JupyterLab on the executed notebooks (127.0.0.1 only; default: do not)")
    return p


def _sources(paths: NotebookPaths, only: list[str] | None) -> list[Path]:
    found = {p.stem: p for p in sorted((paths.root / "notebooks").glob("*.py"))}
    if only is None:
        return list(found.values())
    unknown = [name for name in only if name not in found]
    if unknown:
        raise NotebookSetupError(f"no notebook named {', '.join(unknown)} (there are: {', '.join(found)})")
    return [found[name] for name in only]


def _count(notebook: Any, kinds: tuple[str, ...]) -> int:  # an nbformat NotebookNode (untyped)
    return sum(1 for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])
               if any(kind in output.get("data", {}) for kind in kinds))


def failed_cell(notebook: Any, failure: Exception) -> str:
    """Which cell failed and why: "cell N of M (its first line of code): ExceptionName: message",
    from the error the kernel recorded in the cell's outputs (nbclient's own message ends with a
    hint about the traceback, not the exception)."""
    cells = notebook.cells
    for number, cell in enumerate(cells, start=1):
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            if output.get("output_type") == "error":
                code = next((line.strip() for line in cell.source.splitlines()
                             if line.strip() and not line.lstrip().startswith("#")), "")
                why = " ".join(ANSI.sub("", str(output.get("evalue", ""))).split())
                where = f"cell {number} of {len(cells)} ({code[:80] + ('…' if len(code) > 80 else '')})"
                return f"{where}: {output.get('ename', 'Error')}: {why[:600]}"
    name, value = getattr(failure, "ename", type(failure).__name__), getattr(failure, "evalue", "")
    return f"{name}: {' '.join(ANSI.sub('', str(value)).split())[:600]}"


def execute(source: Path, paths: NotebookPaths, timeout: int) -> tuple[Path, str | None, int]:
    """Run one notebook; returns where it was written, the error (None when every cell ran)
    and how many plots it shows."""
    # Jupyter's libraries take seconds to import: only when a notebook runs.
    import jupytext
    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    notebook = jupytext.read(source)
    client = NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(paths.output)}})
    error = None
    try:
        client.execute()
    except CellExecutionError as failure:
        error = failed_cell(notebook, failure)
    target = paths.output / f"{source.stem}.ipynb"
    nbformat.write(notebook, target)  # type: ignore[no-untyped-call]  # nbformat.write has no annotations
    return target, error, _count(notebook, PLOT_TYPES)


def _kernel_environment(paths: NotebookPaths) -> None:
    """The kernels inherit this process's environment: they import this checkout first."""
    current = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(paths.root) + (os.pathsep + current if current else "")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        paths = require_dataset(notebook_paths())
        sources = _sources(paths, args.only)
    except NotebookSetupError as problem:
        print(f"scripts/notebooks: {problem}", file=sys.stderr)
        return 2
    paths.output.mkdir(parents=True, exist_ok=True)
    _kernel_environment(paths)
    print(f"dataset {paths.dataset}; executed notebooks go to {paths.output}", flush=True)
    failed = []
    for source in sources:
        started = time.monotonic()
        target, error, plots = execute(source, paths, args.timeout)
        took = time.monotonic() - started
        if error:
            failed.append(source.stem)
            print(f"FAILED {source.stem}: {error} (written up to the failing cell: {target})", flush=True)
        else:
            print(f"ok {source.stem}: {plots} plots, {took:.1f} s -> {target}", flush=True)
    if failed:
        print(f"scripts/notebooks: {len(failed)} of {len(sources)} notebooks failed: {', '.join(failed)}",
              file=sys.stderr)
        return 1
    print(f"open them: .venv/bin/jupyter lab {paths.output}   (or: scripts/notebooks --lab)", flush=True)
    if args.lab:
        lab = Path(sys.executable).parent / "jupyter"
        # This venv's own jupyter in place of this process, with fixed arguments and no shell.
        os.execv(str(lab), [str(lab), "lab", "--ip", "127.0.0.1", "--no-browser", str(paths.output)])  # noqa: S606
    return 0


if __name__ == "__main__":
    sys.exit(main())
