"""Keeps projections current from a long-running process, on a real scheduler.

Reads call `catch_up()` themselves, so this job is about freshness for other readers
(and for the subscriptions that come later), not about correctness.
"""

from __future__ import annotations

import logging
import threading

from apscheduler.schedulers.background import BackgroundScheduler

from memory_ledger.api import MemoryService

log = logging.getLogger("memory_ledger.jobs")


def start_catchup_scheduler(service: MemoryService, interval: float) -> BackgroundScheduler:
    """Start a scheduler that runs projection catch-up every `interval` seconds.

    One instance at a time and coalescing: a slow catch-up is never run twice at once.
    """
    scheduler = BackgroundScheduler(timezone="UTC")
    scheduler.add_job(
        service.runner.catch_up,
        "interval",
        seconds=interval,
        id="projection-catchup",
        max_instances=1,
        coalesce=True,
    )
    scheduler.start()
    return scheduler


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
