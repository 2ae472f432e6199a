"""The rules of direction (docs/architecture.md): the import-linter contracts in pyproject.toml (layers
and forbidden arrows), and no file-level import circle in product code."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_import_contracts_hold():
    done = subprocess.run([str(Path(sys.executable).parent / "lint-imports")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "broken" not in done.stdout.lower().replace("0 broken", "")


PRODUCT_PACKAGES = ("gate", "gate_client", "api", "gate_cli", "workbench")


def _import_cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iteratively), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports[target]))))
                elif target in on_stack:
                    low[module] = min(low[module], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    return cycles


def test_the_cycle_finder_finds_a_circle_and_only_a_circle():
    imports = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set(), "f": {"g"}, "g": {"f", "e"}}
    assert sorted(_import_cycles(imports)) == [["a", "b", "c"], ["f", "g"]]
    assert _import_cycles({"a": {"b"}, "b": set()}) == []


def test_no_product_module_imports_itself_through_others():
    """No file-level import circle in product code: following imports from any module never
    leads back to it. Imports inside functions and under `TYPE_CHECKING` count: a circle a reader
    must follow is one whether or not Python runs it at start-up. (The package-level order is
    the `layers` contracts in pyproject.toml.)"""
    import grimp

    graph = grimp.build_graph(*PRODUCT_PACKAGES, cache_dir=None)
    ours = {m for m in graph.modules if m.split(".")[0] in PRODUCT_PACKAGES}
    imports = {m: graph.find_modules_directly_imported_by(m) & ours for m in ours}
    cycles = _import_cycles(imports)
    details = [" ⇄ ".join(cycle) + ": " + "; ".join(
        f"{m} -> {t}" for m in cycle for t in sorted(imports[m] & set(cycle))) for cycle in cycles]
    assert not cycles, "\n".join(details)
