"""The lifecycle jobs as operators see them: the list with each job's schedule and last
runs, one run now (under its lease, recorded), and the scheduler in the foreground.

The list reads the job tables only, so it works from the settings alone (no master key,
no service: `job_listing`); running a job needs the open store, which `Jobs` receives
given the jobs' context (jobs/context.py) and import the job code when they run."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from memory_ledger.config import Settings
from memory_ledger.jobs.context import JobContext
from memory_ledger.jobs.runs import RUNNING, RUNS_KEPT, RunRecord, RunStore

if TYPE_CHECKING:  # the scheduler (apscheduler) is imported only by a call that runs a job
    from memory_ledger.jobs.scheduler import RunResult
    from memory_ledger.projections.events import Progress

__all__ = ["RUNNING", "RUNS_KEPT", "Jobs", "RunRecord", "job_listing", "job_names"]


def job_listing(settings: Settings, runs: int, now: datetime) -> list[dict[str, Any]]:
    """Every job: what it does, how often, its next run, its lease and its last `runs`
    runs, newest first (the job tables only)."""
    from memory_ledger.jobs.status import job_rows

    with RunStore(settings) as store:
        return job_rows(settings, store, runs, now)


def job_names(names: Sequence[str] | None, duration: float | None = None) -> list[str]:
    """The jobs a scheduler runs (`names` checked; default: every job on by default),
    and a `duration` checked against its bounds: InvalidWrite before anything opens."""
    from memory_ledger.jobs.projection_catchup import check_duration
    from memory_ledger.jobs.scheduler import selected_jobs

    if duration is not None:
        check_duration(duration)
    return selected_jobs(names)


class Jobs:
    """The jobs of one open store."""

    def __init__(
        self,
        settings: Settings,
        context: Callable[[], JobContext],
    ) -> None:
        self._settings = settings
        self._context = context

    def rows(self, runs: int, now: datetime) -> list[dict[str, Any]]:
        return job_listing(self._settings, runs, now)

    def schedule(self, name: str) -> tuple[float, datetime | None]:
        """How often a job runs (minutes) and its next run; None for the next run when no
        scheduler has the job, or its schedule cannot be read (it is information: the
        store being unreadable must not fail the page that shows it)."""
        from memory_ledger.jobs.registry import JOBS
        from memory_ledger.jobs.scheduler import scheduled_jobs

        try:
            found = scheduled_jobs(self._settings).get(name)
        except Exception:
            found = None
        if found is None:
            return JOBS[name].every_minutes(self._settings), None
        return found.every_minutes, found.next_run_time

    @staticmethod
    def check(name: str) -> None:
        """InvalidWrite, listing the jobs there are, unless `name` is one of them."""
        from memory_ledger.jobs.registry import spec_named

        spec_named(name)

    def run_once(self, name: str, now: datetime, progress: Progress | None = None) -> RunResult:
        """Run one job now, under its lease and recorded (InvalidWrite: no such job)."""
        from memory_ledger.jobs.scheduler import execute

        self.check(name)
        with RunStore(self._settings) as store:
            return execute(self._context(), name, now, runs=store, progress=progress)

    def run_foreground(self, names: Sequence[str], duration: float | None) -> None:
        """The scheduler in this process until `duration` or SIGTERM/SIGINT."""
        from memory_ledger.jobs.scheduler import run_foreground

        run_foreground(self._context(), names, None, duration)
