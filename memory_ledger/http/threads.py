"""The hop from the event loop to a worker thread, for the routes an agent calls on
every turn.

A plain `def` route is run by FastAPI through anyio's worker threads, whose hand-off (a
Python-level queue and condition, a cancel scope, a capacity limiter) measured about
150 µs per call on the benchmark machine; the standard library's executor, whose queue
is written in C, about 60 µs. The hot routes are `async def` and hop here, once, for
the work that blocks (the store); everything else stays on FastAPI's path.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")

#: As many as anyio's default limit: enough for every core's store calls to overlap
#: their waits (SQLite's lock, PostgreSQL's round trips), few enough to stay bounded.
WORKERS = 40

_executor: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _executor
    if _executor is None:
        _executor = ThreadPoolExecutor(WORKERS, thread_name_prefix="memory-ledger-http")
    return _executor


async def in_thread(call: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """`call(*args, **kwargs)` in a worker thread; its exception is raised here."""
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_pool(), functools.partial(call, *args, **kwargs))
