"""Keeps projections current from a long-running process: `memory-ledger run`.

Reads call `catch_up()` themselves, so this job is about freshness for other readers
(and for the subscriptions that come later), not about correctness. `run` is the
scheduler of jobs/scheduler.py with the catch-up's interval (and consolidation's) given
on its command line; the bounds of that schedule live here, where the CLI reads them
without importing APScheduler.
"""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from memory_ledger.bounds import (
    MAX_CONSOLIDATE_EVERY,
    MAX_DURATION,
    MAX_INTERVAL,
    MIN_CONSOLIDATE_EVERY,
    MIN_INTERVAL,
)
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite, MemoryLedgerError
from memory_ledger.jobs.context import JobContext
from memory_ledger.projections.events import Progress

if TYPE_CHECKING:  # imported when a scheduler starts: the CLI reads the bounds below
    from apscheduler.schedulers.background import BackgroundScheduler

log = logging.getLogger("memory_ledger.jobs")

# The schedule's bounds (MIN_INTERVAL ... MAX_CONSOLIDATE_EVERY, in seconds) live in
# memory_ledger/bounds.py, imported above; every one is checked before anything starts.
CATCHUP_ENV = "MEMORY_LEDGER_CATCHUP_SECONDS"
DEFAULT_CATCHUP_SECONDS = 1.0


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


def check_duration(duration: object) -> None:
    """Refuse a `jobs run --duration` outside (0, MAX_DURATION], as `check_schedule` does."""
    _seconds("duration", duration, 0.0, MAX_DURATION, above_low=True)


def _seconds(name: str, value: object, low: float, high: float, above_low: bool = False) -> None:
    bound = f"more than {low:.10g}" if above_low else f"at least {low:.10g}"
    wanted = f"{name} must be a number of seconds, {bound} and at most {high:.10g}"
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidWrite(f"{wanted}, not {type(value).__name__}; nothing was started")
    number = float(value)
    too_low = number <= low if above_low else number < low
    if not math.isfinite(number) or too_low or number > high:
        raise InvalidWrite(f"{wanted}; nothing was started")


def catchup_seconds_setting(settings: Settings) -> float:
    """Seconds between catch-ups under `jobs run` (`run` takes `--interval`), within
    the schedule's bounds."""
    return settings.number(
        CATCHUP_ENV,
        DEFAULT_CATCHUP_SECONDS,
        lambda s: MIN_INTERVAL <= s <= MAX_INTERVAL,
        f"a number of seconds, {MIN_INTERVAL:.10g}-{MAX_INTERVAL:.10g}",
    )


def catch_up_all(context: JobContext, progress: Progress | None = None) -> dict[str, int]:
    """The `projection-catchup` job: the tables, then the vector index (embedding is
    the slow part, and it must not delay them). A failure of one does not keep the
    other from running: the first is raised once both were tried (the run's one log
    line says it), a second gets a line of its own. E.g. a corrupted key entry blocks
    catch-up until an operator forgets or restores that item."""
    counts = {"events": 0, "vector_events": 0}
    failed: list[tuple[str, MemoryLedgerError]] = []
    for code, label, step in (
        ("events", "projection catch-up", lambda: context.runner.catch_up(progress)),
        ("vector_events", "vector index catch-up", context.catch_up_vectors),
    ):
        try:
            counts[code] = step()
        except MemoryLedgerError as exc:
            failed.append((label, exc))
    for label, exc in failed[1:]:
        log.error("%s failed: %s", label, exc)
    if failed:
        raise failed[0][1]
    return counts


def _catch_up(context: JobContext) -> None:
    """One catch-up outside the scheduler; a failure is logged, not raised."""
    try:
        catch_up_all(context)
    except MemoryLedgerError as exc:
        log.error("catch-up failed: %s", exc)


def catchup_jobs(
    interval: float, consolidate_every: float | None
) -> tuple[list[str], dict[str, float]]:
    """What `run` schedules: every job on by default with projection catch-up every
    `interval` seconds, and consolidation every `consolidate_every` seconds if given."""
    from memory_ledger.jobs.scheduler import selected_jobs

    names = selected_jobs()
    every = {"projection-catchup": interval / 60}
    if consolidate_every is not None:
        names.append("consolidation")
        every["consolidation"] = consolidate_every / 60
    return names, every


def start_catchup_scheduler(
    context: JobContext, interval: float, consolidate_every: float | None = None
) -> BackgroundScheduler:
    """Start the scheduler of `run` (jobs/scheduler.py) in the background: projection
    catch-up every `interval` seconds, consolidation every `consolidate_every` seconds
    if given, and the other jobs on by default (the verification scan, the retention
    sweep, the closing of elapsed verification windows, the VACUUM of fragmented SQLite
    files) on their settings' schedules.

    One instance of a job at a time, missed runs coalesced, and each run under the
    job's lease, so another scheduler on the same store does not run it at once.
    """
    check_schedule(interval, None, consolidate_every)
    from memory_ledger.jobs.scheduler import start_scheduler

    names, every = catchup_jobs(interval, consolidate_every)
    return start_scheduler(context, names, every)


def run_catchup_job(
    context: JobContext,
    interval: float,
    duration: float | None,
    consolidate_every: float | None = None,
) -> None:
    """`run`: the scheduler in the foreground until `duration` or SIGINT/SIGTERM, then
    one last catch-up, so what was written before the stop is projected."""
    check_schedule(interval, duration, consolidate_every)
    from memory_ledger.jobs.scheduler import run_foreground

    names, every = catchup_jobs(interval, consolidate_every)
    log.info("projection catch-up every %ss", interval)
    run_foreground(context, names, every, duration)
    context.runner.catch_up()
    context.catch_up_vectors()
