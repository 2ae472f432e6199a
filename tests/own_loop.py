"""One home for running a coroutine from a synchronous test.

In the full suite a browser test's Playwright sync API keeps an event loop marked running on the
main thread of its xdist worker for as long as its browser fixture lives, and `asyncio.run` refuses
to start there ("cannot be called from a running event loop"). Which tests share a worker with a
browser test changes whenever tests are added, so every synchronous test that needs a loop runs its
coroutine here: `asyncio.run` on a thread of its own, the coroutine's result or exception handed back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def run_on_own_loop(coroutine: Coroutine[Any, Any, T], timeout: float = 120) -> T:
    """`asyncio.run(coroutine)` on a fresh thread; raises what the coroutine raised, or
    `TimeoutError` after `timeout` seconds."""
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="own-loop")
    try:
        return pool.submit(asyncio.run, coroutine).result(timeout=timeout)
    finally:
        # not `with`: its exit waits for the thread, so a coroutine that hangs would hang the test
        # past `timeout`; the thread is left to end on its own
        pool.shutdown(wait=False)
