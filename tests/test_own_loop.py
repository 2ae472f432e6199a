"""Every synchronous test that needs an event loop goes through `tests.own_loop` (its docstring says
why): a direct `asyncio.run` passes alone and fails in the full suite whenever xdist places the test
on a worker that ran a browser test first (the CI run of 2026-11-28 lost 13 tests that way)."""

from __future__ import annotations

import ast
import asyncio
import time
from pathlib import Path

import pytest

from tests.own_loop import run_on_own_loop

TESTS = Path(__file__).resolve().parent


def _direct_runs(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "run"
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio"]


def test_no_test_calls_asyncio_run_itself():
    found = {str(path.relative_to(TESTS)): lines for path in sorted(TESTS.rglob("*.py"))
             if path.name not in ("own_loop.py", "test_own_loop.py") and "node_modules" not in path.parts
             and (lines := _direct_runs(path))}
    assert found == {}, f"use tests.own_loop.run_on_own_loop instead of asyncio.run: {found}"


def test_a_coroutine_runs_even_while_a_loop_is_marked_running_on_this_thread():
    async def inner() -> str:
        return "ran"

    async def outer() -> str:
        # this thread's loop is running now, as a Playwright sync fixture leaves it
        return run_on_own_loop(inner())

    assert asyncio.run(outer()) == "ran"  # the one place a test starts a loop on purpose


def test_what_the_coroutine_raises_reaches_the_caller():
    async def fails() -> None:
        raise LookupError("from the coroutine")

    try:
        run_on_own_loop(fails())
    except LookupError as error:
        assert str(error) == "from the coroutine"
    else:  # pragma: no cover - the assertion's failure path
        raise AssertionError("the coroutine's error was lost")


def test_a_coroutine_that_hangs_fails_the_test_at_its_timeout():
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        run_on_own_loop(asyncio.sleep(5), timeout=0.2)
    assert time.monotonic() - started < 3  # the caller is not held until the coroutine ends
