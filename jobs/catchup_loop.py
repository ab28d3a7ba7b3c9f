"""`run`: the scheduler with projection catch-up every few seconds (and, if asked,
consolidation), in the foreground or in the background.

Apart from the catch-up job itself (jobs/projection_catchup.py), which the scheduler's
registry lists: this module builds on the scheduler, the job does not.
"""

from __future__ import annotations

import logging

from apscheduler.schedulers.background import BackgroundScheduler

from memory_ledger.jobs.context import JobContext
from memory_ledger.jobs.projection_catchup import check_schedule
from memory_ledger.jobs.scheduler import run_foreground, selected_jobs, start_scheduler

log = logging.getLogger("memory_ledger.jobs")


def catchup_jobs(
    interval: float, consolidate_every: float | None
) -> tuple[list[str], dict[str, float]]:
    """What `run` schedules: every job on by default with projection catch-up every
    `interval` seconds, and consolidation every `consolidate_every` seconds if given."""
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
    names, every = catchup_jobs(interval, consolidate_every)
    log.info("projection catch-up every %ss", interval)
    run_foreground(context, names, every, duration)
    context.runner.catch_up()
    context.catch_up_vectors()
