"""The size gate: no function in product code is longer than 60 lines, no class longer than 300.

Run by `scripts/lint`. Counts a function from its `def` (decorators excluded) to its last line,
docstring included, and a class from its `class` line to its last line the same way (issue 66, item
6: a class past 300 lines is several things that change apart; split it along what changes
together, not into mixins that only move the lines). Landed Alembic migrations
(`gate/ledger/migrations/versions/`) are history and never edited, so they are not measured. Prints
everything over its limit and exits 1, or prints the longest of each and exits 0. `--top N` lists
the N longest functions and classes; `--root DIR` measures another tree (the gate's own test).
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

LIMIT = 60
CLASS_LIMIT = 300
ROOTS = ("gate", "gate_client", "api", "gate_cli", "workbench")
EXEMPT = ("gate/ledger/migrations/versions/",)
Rows = list[tuple[int, str]]


def _longest_first(row: tuple[int, str]) -> tuple[int, str]:
    return -row[0], row[1]


def measure_both(root: Path) -> tuple[Rows, Rows]:
    """(functions, classes): (length, "path:line name") of each under the product packages,
    longest first."""
    functions: Rows = []
    classes: Rows = []
    for package in ROOTS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(EXEMPT):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    rows = classes if isinstance(node, ast.ClassDef) else functions
                    rows.append((length, f"{rel}:{node.lineno} {node.name}"))
    return sorted(functions, key=_longest_first), sorted(classes, key=_longest_first)


def _over(rows: Rows, limit: int, kind: str) -> bool:
    over = [row for row in rows if row[0] > limit]
    for length, where in over:
        print(f"{kind} over {limit} lines: {where} ({length} lines)", file=sys.stderr)
    return bool(over)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="list the N longest functions and classes (default: 0)")
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the tree to measure (default: this checkout)")
    args = parser.parse_args(argv)
    functions, classes = measure_both(args.root)
    for length, where in functions[: args.top] + classes[: args.top]:
        print(f"{length:4d}  {where}")
    failed = _over(functions, LIMIT, "function")
    failed = _over(classes, CLASS_LIMIT, "class") or failed
    if failed:
        return 1
    longest_function = functions[0] if functions else (0, "none")
    longest_class = classes[0] if classes else (0, "none")
    print(f"function length: all {len(functions)} functions within {LIMIT} lines (longest {longest_function[0]}: "
          f"{longest_function[1]}); all {len(classes)} classes within {CLASS_LIMIT} (longest {longest_class[0]}: "
          f"{longest_class[1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
