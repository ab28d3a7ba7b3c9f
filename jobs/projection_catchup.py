"""Keeps projections current from a long-running process, on a real scheduler.

Reads call `catch_up()` themselves, so this job is about freshness for other readers
(and for the subscriptions that come later), not about correctness.
"""

from __future__ import annotations

import logging
import threading

from apscheduler.schedulers.background import BackgroundScheduler

from memory_ledger.api import MemoryService
from memory_ledger.errors import MemoryLedgerError

log = logging.getLogger("memory_ledger.jobs")


def start_catchup_scheduler(service: MemoryService, interval: float) -> BackgroundScheduler:
    """Start a scheduler that runs projection catch-up every `interval` seconds.

    One instance at a time and coalescing: a slow catch-up is never run twice at once.
    """
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(
        _catch_up,
        "interval",
        args=(service,),
        seconds=interval,
        id="projection-catchup",
        max_instances=1,
        coalesce=True,
    )
    scheduler.start()
    return scheduler


def _catch_up(service: MemoryService) -> None:
    try:
        service.runner.catch_up()
    except MemoryLedgerError as exc:
        # One clear line per tick, not a traceback: e.g. a corrupted key entry blocks
        # catch-up until an operator forgets or restores that item.
        log.error("projection catch-up failed: %s", exc)


def run_catchup_job(service: MemoryService, interval: float, duration: float | None) -> None:
    stop = threading.Event()
    scheduler = start_catchup_scheduler(service, interval)
    log.info("projection catch-up every %ss", interval)
    try:
        stop.wait(duration)
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.shutdown(wait=True)
        service.runner.catch_up()
