"""How long a test waits on another process, a server or a thread before calling it hung.

Only a hang guard, never a timing assertion: it turns a process that will never answer into
a failure with a message instead of a stalled run. It is generous on purpose, so that a
loaded 2-core machine running the suite on two workers never trips it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

HUNG = 900.0


def until(check: Callable[[], bool], what: str) -> None:
    """Poll `check` until it holds; a hang guard only (`HUNG`), never a timing assertion."""
    deadline = time.monotonic() + HUNG
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"hung waiting for {what}")
        time.sleep(0.02)
