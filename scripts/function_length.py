"""The function-length gate: no function in product code is longer than 60 lines.

Run by `scripts/lint`. Counts a function from its `def` (decorators excluded) to its last line,
docstring included. Landed Alembic migrations (`gate/ledger/migrations/versions/`) are history
and never edited, so they are not measured. Prints every function over the limit and exits 1,
or prints the longest function and exits 0. `--top N` lists the N longest.
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

LIMIT = 60
ROOTS = ("gate", "gate_client", "api", "gate_cli", "workbench")
EXEMPT = ("gate/ledger/migrations/versions/",)


def measure(root: Path) -> list[tuple[int, str]]:
    """(length, "path:line name") of every function under the product packages."""
    rows: list[tuple[int, str]] = []
    for package in ROOTS:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if rel.startswith(EXEMPT):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    rows.append((length, f"{rel}:{node.lineno} {node.name}"))
    return sorted(rows, key=lambda row: (-row[0], row[1]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=0, help="list the N longest functions (default: 0)")
    args = parser.parse_args(argv)
    rows = measure(Path(__file__).resolve().parent.parent)
    for length, where in rows[: args.top]:
        print(f"{length:4d}  {where}")
    over = [row for row in rows if row[0] > LIMIT]
    for length, where in over:
        print(f"function over {LIMIT} lines: {where} ({length} lines)", file=sys.stderr)
    if over:
        return 1
    print(f"function length: all {len(rows)} functions within {LIMIT} lines (longest {rows[0][0]}: {rows[0][1]})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
