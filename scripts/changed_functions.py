#!/usr/bin/env python3
"""The functions and methods of modules whose code changed since a commit, for a partial mutation run.

    scripts/changed_functions.py COMMIT MODULE [MODULE ...]

prints, per module, `MODULE changed/total name,name,...`: every module-level function and class
method whose syntax tree (positions left out, so moving code or editing comments does not count)
differs from the one at COMMIT, or that is new. The names are what `scripts/mutation MODULE
--functions=...` takes: run them after a change instead of the whole module (mutmut mutates
function bodies only). docs/mutation-testing.md says when a full run is needed instead.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path


def functions(text: str) -> dict[str, str]:
    """Qualified name -> the dump of its syntax tree, for functions and methods of top-level classes."""
    found: dict[str, str] = {}

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                found[prefix + child.name] = ast.dump(child, include_attributes=False)
            elif isinstance(child, ast.ClassDef) and not prefix:
                walk(child, child.name + ".")

    walk(ast.parse(text), "")
    return found


def changed(commit: str, module: str) -> tuple[list[str], int]:
    # git from PATH, no shell: the arguments are the caller's own commit and paths
    shown = subprocess.run(["git", "show", f"{commit}:{module}"],  # noqa: S603, S607
                           capture_output=True, text=True, check=False)
    before = functions(shown.stdout) if shown.returncode == 0 else {}
    now = functions(Path(module).read_text(encoding="utf-8"))
    return [name for name, tree in now.items() if before.get(name) != tree], len(now)


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    commit, *modules = argv
    for module in modules:
        names, total = changed(commit, module)
        print(f"{module} {len(names)}/{total} {','.join(names)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
