"""One projection in its own process: `memory-ledger run --projection NAME`.

The scale-out shape on PostgreSQL: each projection is caught up by a process of its
own, tracking its own position (its row of `projection_tracking`, which it alone
locks, so processes of different projections go side by side). Each registers as a
subscriber (`runner-<projection>`) and acknowledges a forget request once its position
has passed the request's tombstones, so a forget waits for every runner the same way it
waits for every host's vector index (memory_ledger/feed/hosts.py): a runner that is
down is named in the request's `partial` status until it catches up or is retired.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memory_ledger.errors import MemoryLedgerError
from memory_ledger.feed.hosts import acknowledge_applied, ensure_registered

if TYPE_CHECKING:
    from memory_ledger.jobs.context import JobContext
    from memory_ledger.projections.runner import ProjectionRunner

log = logging.getLogger("memory_ledger.jobs")
PREFIX = "runner-"


def run_projections(
    context: JobContext,
    names: Sequence[str],
    interval: float,
    duration: float | None = None,
    stop: threading.Event | None = None,
) -> int:
    """Catch the named projections up every `interval` seconds until `duration` passes,
    `stop` is set, or SIGINT/SIGTERM arrives; returns the ticks run."""
    runner = context.runner.only(names)
    stop = stop or threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
    ends = None if duration is None else time.monotonic() + duration
    ticks = 0
    log.info("running projection(s) %s every %ss", ", ".join(names), interval)
    while not stop.is_set():
        try:
            tick(context, runner)
        except MemoryLedgerError as exc:  # logged, and tried again at the next tick
            log.error("projection runner tick failed: %s", exc)
        ticks += 1
        if ends is not None and time.monotonic() >= ends:
            break
        stop.wait(interval if ends is None else max(0.0, min(interval, ends - time.monotonic())))
    return ticks


def tick(context: JobContext, runner: ProjectionRunner) -> None:
    """One catch-up, then the acknowledgements it allows."""
    runner.catch_up()
    for name, position in runner.positions().items():
        subscriber = f"{PREFIX}{name}"
        subscribers = context.subscribers
        if ensure_registered(subscribers, subscriber, holds_copies=True, added_by="runner"):
            acknowledge_applied(subscribers, context.ledger, context.requests, subscriber, position)
