"""Keeps projections current from a long-running process, on a real scheduler.

Reads call `catch_up()` themselves, so this job is about freshness for other readers
(and for the subscriptions that come later), not about correctness.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from memory_ledger.api import MemoryService
from memory_ledger.errors import InvalidWrite, MemoryLedgerError

if TYPE_CHECKING:  # imported when a scheduler starts: the CLI reads the bounds below
    from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger("memory_ledger.jobs")

# The schedule's bounds, in seconds. A negative or zero interval made the scheduler
# spin (and grow) without end; every bound here is checked before anything starts.
MIN_INTERVAL = 0.05
MAX_INTERVAL = 3600.0
MAX_DURATION = 30 * 24 * 3600.0  # without a duration, run until stopped
MIN_CONSOLIDATE_EVERY = 1.0
MAX_CONSOLIDATE_EVERY = 24 * 3600.0


def check_schedule(
    interval: object, duration: object = None, consolidate_every: object = None
) -> None:
    """Refuse a schedule outside its bounds, or given as anything but a real number
    (bools, NaN and infinities included), with an InvalidWrite; nothing is started."""
    _seconds("interval", interval, MIN_INTERVAL, MAX_INTERVAL)
    if duration is not None:
        _seconds("duration", duration, 0.0, MAX_DURATION, above_low=True)
    if consolidate_every is not None:
        _seconds(
            "consolidate_every", consolidate_every, MIN_CONSOLIDATE_EVERY, MAX_CONSOLIDATE_EVERY
        )


def _seconds(name: str, value: object, low: float, high: float, above_low: bool = False) -> None:
    bound = f"more than {low:.10g}" if above_low else f"at least {low:.10g}"
    wanted = f"{name} must be a number of seconds, {bound} and at most {high:.10g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidWrite(f"{wanted}, not {type(value).__name__}; nothing was started")
    number = float(value)
    too_low = number <= low if above_low else number < low
    if not math.isfinite(number) or too_low or number > high:
        raise InvalidWrite(f"{wanted}; nothing was started")


def start_catchup_scheduler(
    service: MemoryService, interval: float, consolidate_every: float | None = None
) -> BackgroundScheduler:
    """Start a scheduler that runs projection catch-up every `interval` seconds,
    consolidation every `consolidate_every` seconds if given, the verification scan of
    finished forget requests every few minutes, the retention sweep of expired items
    (hourly by default), and, hourly from the start, the closing
    of elapsed verification windows and the VACUUM of SQLite files whose free pages
    have piled up.

    One instance at a time and coalescing: a slow run is never run twice at once.
    """
    check_schedule(interval, None, consolidate_every)
    from apscheduler.schedulers.background import BackgroundScheduler

    from jobs.file_vacuum import ratio_from_env, vacuum_fragmented
    from jobs.retention import every_from_env as retention_every
    from jobs.retention import expire_due
    from jobs.verification_scan import every_from_env, scan_due
    from jobs.verification_window import close_elapsed_windows, window_from_env

    window = window_from_env()  # a bad setting stops the start, not a later tick
    scan_every = every_from_env()
    sweep_every = retention_every()
    ratio = ratio_from_env()
    scheduler = BackgroundScheduler(timezone="UTC")
    # Run at start, then every so many minutes: job id -> (what runs, minutes).
    periodic: dict[str, tuple[Callable[[], None], float]] = {
        "verification-window": (
            _guarded(lambda: close_elapsed_windows(service, window), "verification window"),
            60.0,
        ),
        "file-vacuum": (_guarded(lambda: vacuum_fragmented(service, ratio), "file vacuum"), 60.0),
        "verification-scan": (_guarded(lambda: scan_due(service), "verification scan"), scan_every),
        "retention": (
            _guarded(lambda: expire_due(service, datetime.now(UTC)), "retention sweep"),
            sweep_every,
        ),
    }
    for job_id, (job, minutes) in periodic.items():
        scheduler.add_job(
            job,
            "interval",
            minutes=minutes,
            next_run_time=datetime.now(UTC),
            id=job_id,
            max_instances=1,
            coalesce=True,
        )
    if consolidate_every is not None:
        from jobs.consolidation import Consolidator

        scheduler.add_job(
            _guarded(Consolidator(service).run_all, "consolidation"),
            "interval",
            seconds=consolidate_every,
            id="consolidation",
            max_instances=1,
            coalesce=True,
        )
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
    _guarded(service.runner.catch_up, "projection catch-up")()
    # After the tables: embedding is the slow part, and it must not delay them.
    _guarded(service.vectors.catch_up, "vector index catch-up")()


def _guarded(job: Callable[[], object], name: str) -> Callable[[], None]:
    def run() -> None:
        try:
            job()
        except MemoryLedgerError as exc:
            # One clear line per tick, not a traceback: e.g. a corrupted key entry blocks
            # catch-up until an operator forgets or restores that item.
            log.error("%s failed: %s", name, exc)

    return run


def run_catchup_job(
    service: MemoryService,
    interval: float,
    duration: float | None,
    consolidate_every: float | None = None,
) -> None:
    check_schedule(interval, duration, consolidate_every)
    stop = threading.Event()
    scheduler = start_catchup_scheduler(service, interval, consolidate_every)
    log.info("projection catch-up every %ss", interval)
    try:
        stop.wait(duration)
    except KeyboardInterrupt:
        pass
    finally:
        scheduler.shutdown(wait=True)
        service.runner.catch_up()
        service.vectors.catch_up()
