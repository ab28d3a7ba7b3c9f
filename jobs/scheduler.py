"""The scheduler of the named jobs: APScheduler 3 with a persistent job store.

Why persistent: a restart keeps each job's schedule (its next run time is read back,
not reset), and runs missed while no scheduler was up are coalesced into one run at
the next start, however many were missed. The store is APScheduler's own table
`apscheduler_jobs`, beside the run records and leases (jobs/runs.py): `jobs.sqlite` in
the data directory, or the projections' PostgreSQL schema.

The store is shared: every scheduler on one store runs from the same rows, so two of
them at once both see a job due. What keeps that safe is the one execution path,
`execute`: take the job's lease, record the start, run, record the end with counts
and outcome, release. The second scheduler finds the lease taken and does nothing.
The last scheduler to start sets the schedule (which jobs, how often) for all of them.

The store pickles each job, so its callable is a textual reference
(`jobs.scheduler:run_named` with the job's name); the process's context is found
through a module-level holder that `start_scheduler` sets and `shutdown` clears.
"""

from __future__ import annotations

import logging
import math
import signal
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from memory_ledger.config import Settings
from memory_ledger.errors import (
    ConfigurationError,
    InvalidTransition,
    InvalidWrite,
    MemoryLedgerError,
)
from memory_ledger.jobs.context import JobContext
from memory_ledger.jobs.projection_catchup import MIN_INTERVAL
from memory_ledger.jobs.registry import JOBS, JobRun, drill_counts, spec_named
from memory_ledger.jobs.runs import (
    FAILED,
    INTERRUPTED,
    OK,
    SKIPPED,
    Lease,
    RunStore,
    check_counts,
    create_tables,
    open_engine,
)
from memory_ledger.projections.events import Progress

if TYPE_CHECKING:
    from memory_ledger.restore.drill import DrillReport

log = logging.getLogger("memory_ledger.jobs")
T = TypeVar("T")

JOB_TABLE = "apscheduler_jobs"
RUN_NAMED = "memory_ledger.jobs.scheduler:run_named"
MIN_EVERY_MINUTES = MIN_INTERVAL / 60
MAX_EVERY_MINUTES = 1440.0


@dataclass(frozen=True)
class RunResult:
    """What one execution did: `skipped` (with the lease's holder) when another run
    held the job, else the outcome and counts recorded under `run_id`."""

    name: str
    outcome: str
    counts: dict[str, int] = field(default_factory=dict)
    run_id: str | None = None
    error: str | None = None
    held_by: Lease | None = None
    #: The CLI's exit code for it: 0, or the MemoryLedgerError's own.
    exit_code: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "run_id": self.run_id,
            "outcome": self.outcome,
            "counts": self.counts,
            "error": self.error,
            "held_by": self.held_by.to_dict() if self.held_by else None,
        }


def execute(
    context: JobContext,
    name: str,
    now: datetime,
    *,
    runs: RunStore,
    progress: Progress | None = None,
    body: JobRun | None = None,
) -> RunResult:
    """Run job `name` as of `now`, once, if no other run holds it: the one path of every
    run, scheduled, `run-once` or by hand (`run_by_hand`: `body` then runs in place of
    the job's own function, with arguments of its own). A MemoryLedgerError ends the
    run `failed` with one log line and no traceback (its message carries no content, so
    it is recorded); any other exception is recorded `failed` by class name only and
    raised, as a bug is. The lease is renewed while the job runs and released when it
    ends, however it ends."""
    spec = spec_named(name)
    run = body or spec.run
    begun = runs.begin(name)
    if isinstance(begun, Lease):
        log.info("%s skipped: %s holds it (lease until %s)", name, begun.holder, begun.expires_at)
        return RunResult(name, SKIPPED, held_by=begun)
    run_id = begun
    stop = threading.Event()
    beat = threading.Thread(
        target=_renew, args=(runs, name, run_id, stop), name=f"lease-{name}", daemon=True
    )
    beat.start()
    outcome, counts, error, code = FAILED, {}, None, 1
    try:
        counts = check_counts(run(context, now, progress))
        outcome, code = OK, 0
    except MemoryLedgerError as exc:
        error, code = f"{type(exc).__name__}: {exc}", exc.exit_code
        log.error("%s failed: %s", name, error)
    except (KeyboardInterrupt, SystemExit):
        outcome = INTERRUPTED
        raise
    except BaseException as exc:
        error = type(exc).__name__
        raise
    finally:
        stop.set()
        beat.join()
        runs.finish(name, run_id, outcome, counts, error)
    return RunResult(name, outcome, counts, run_id, error, exit_code=code)


def run_by_hand(
    context: JobContext,
    name: str,
    work: Callable[[], T],
    counts: Callable[[T], dict[str, int]],
    *,
    runs: RunStore,
) -> T:
    """Do a job's work by hand, with arguments of its own (a `drill --backup`), as a
    run of that job: under its lease and recorded (`execute`), so `jobs list` shows it
    as the job's last run, as it shows a scheduled one. Returns what `work` returned
    and raises what it raised (a MemoryLedgerError is recorded as the run's failure
    first); InvalidTransition, with nothing done, while another run holds the job."""
    done: list[T] = []
    raised: list[MemoryLedgerError] = []

    def body(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
        try:
            done.append(work())
        except MemoryLedgerError as exc:
            raised.append(exc)
            raise
        return counts(done[0])

    result = execute(context, name, datetime.now(UTC), runs=runs, body=body)
    if result.held_by is not None:
        held = result.held_by
        raise InvalidTransition(
            f"the {name} job is running on {held.holder} (its lease lasts until "
            f"{held.expires_at}); nothing was done: run it again once that run has ended"
        )
    if raised:
        raise raised[0]
    return done[0]


def _renew(runs: RunStore, name: str, run_id: str, stop: threading.Event) -> None:
    """Keep the lease of a running job: renewed three times per lease length."""
    while not stop.wait(runs.lease_seconds / 3):
        try:
            if not runs.renew(name, run_id):
                log.warning("%s lost its lease (it expired and another run took it)", name)
                return
        except Exception as exc:  # the database is unreachable: try again next time
            log.warning("could not renew the lease of %s: %s", name, type(exc).__name__)


# -- the process's scheduler -----------------------------------------------------------


@dataclass(frozen=True)
class _Current:
    scheduler: JobScheduler
    context: JobContext
    runs: RunStore


_current: _Current | None = None
_current_lock = threading.Lock()


class JobScheduler(BackgroundScheduler):
    """A BackgroundScheduler whose shutdown also lets go of the process's context."""

    def shutdown(self, wait: bool = True) -> None:  # type: ignore[override]
        """Stop; with `wait`, running jobs finish first (and release their leases)."""
        global _current
        try:
            super().shutdown(wait)
        finally:
            with _current_lock:
                if _current is not None and _current.scheduler is self:
                    _current.runs.close()
                    _current = None


def run_named(name: str) -> None:
    """What the job store calls, by its textual reference, at each scheduled run."""
    current = _current
    if current is None:
        log.error("%s: no scheduler runs in this process; nothing was run", name)
        return
    try:
        execute(current.context, name, datetime.now(UTC), runs=current.runs)
    except MemoryLedgerError as exc:  # not the job's: e.g. a name no longer registered
        log.error("%s was not run: %s", name, exc)


def selected_jobs(names: Iterable[str] | None = None) -> list[str]:
    """The jobs a scheduler runs: `names` (checked), or every job that is on by default."""
    if names is None:
        return [name for name, spec in JOBS.items() if spec.default_on]
    chosen = list(dict.fromkeys(names))
    for name in chosen:
        spec_named(name)
    return chosen


def start_scheduler(
    context: JobContext,
    names: Iterable[str] | None = None,
    every: Mapping[str, float] | None = None,
) -> JobScheduler:
    """Start a background scheduler of `names` (default: the jobs on by default), each
    every `every[name]` minutes or its setting's. A job runs at once the first time it
    is scheduled on a store; after that its stored next run time holds (or one interval
    from now, if the interval became shorter), and a job overdue since runs once.
    Every setting is checked first: a bad one stops the start, not a later tick."""
    global _current
    chosen = selected_jobs(names)
    intervals: dict[str, float] = {}
    for name in chosen:
        spec = JOBS[name]
        minutes = every[name] if every and name in every else spec.every_minutes(context.settings)
        _check_every(name, minutes)
        spec.check(context.settings)
        intervals[name] = float(minutes)
    with _current_lock:
        if _current is not None:
            raise ConfigurationError(
                "a scheduler is already running in this process; nothing was started"
            )
        runs = RunStore(context.settings)
        try:
            scheduler = _build(context.settings, intervals)
            _current = _Current(scheduler, context, runs)
            scheduler.start()
        except BaseException:
            _current = None
            runs.close()
            raise
    return scheduler


def _build(settings: Settings, intervals: Mapping[str, float]) -> JobScheduler:
    store = _job_store(settings)
    stored = {job.id: job.next_run_time for job in store.get_all_jobs()}
    for job_id in stored.keys() - intervals.keys():
        store.remove_job(job_id)  # not chosen this time: the store is the schedule
    scheduler = JobScheduler(timezone=UTC, jobstores={"default": store})
    now = datetime.now(UTC)
    for name, minutes in intervals.items():
        interval = timedelta(minutes=minutes)
        previous = stored.get(name)
        when = now if previous is None else min(previous, now + interval)
        scheduler.add_job(
            RUN_NAMED,
            IntervalTrigger(seconds=interval.total_seconds(), timezone=UTC),
            args=(name,),
            id=name,
            name=name,
            replace_existing=True,
            coalesce=True,
            max_instances=1,
            misfire_grace_time=None,
            next_run_time=when,
        )
    return scheduler


def _job_store(settings: Settings) -> SQLAlchemyJobStore:
    store = SQLAlchemyJobStore(engine=open_engine(settings), tablename=JOB_TABLE)
    create_tables(store.engine, settings, [store.jobs_t])
    return store


def _check_every(name: str, minutes: object) -> None:
    low, high = MIN_EVERY_MINUTES, MAX_EVERY_MINUTES
    if (
        isinstance(minutes, bool)
        or not isinstance(minutes, int | float)
        or not math.isfinite(minutes)
        or not low <= minutes <= high
    ):
        raise InvalidWrite(
            f"{name} must run every {low:.4g} to {high:.10g} minutes; nothing was started"
        )


@dataclass(frozen=True)
class Scheduled:
    """A job as the job store has it."""

    every_minutes: float
    next_run_time: datetime | None


def scheduled_jobs(settings: Settings) -> dict[str, Scheduled]:
    """The schedule in the store (what `jobs list` shows): job -> interval, next run."""
    store = _job_store(settings)
    try:
        found = {}
        for job in store.get_all_jobs():
            interval = getattr(job.trigger, "interval", None)
            if isinstance(interval, timedelta):
                found[job.id] = Scheduled(interval.total_seconds() / 60, job.next_run_time)
        return found
    finally:
        store.shutdown()


# -- in the foreground -------------------------------------------------------------------


def run_foreground(
    context: JobContext,
    names: Iterable[str] | None = None,
    every: Mapping[str, float] | None = None,
    duration: float | None = None,
) -> None:
    """Run the scheduler until `duration` seconds have passed or SIGTERM or SIGINT
    arrives. Graceful: running jobs finish and release their leases before this
    returns. A second signal acts as it normally would (SIGTERM kills at once)."""
    stop = threading.Event()
    scheduler = start_scheduler(context, names, every)
    try:
        with _stop_on_signals(stop):
            stop.wait(duration)
    except KeyboardInterrupt:  # not the main thread: no handlers could be installed
        pass
    finally:
        scheduler.shutdown(wait=True)


@contextmanager
def _stop_on_signals(stop: threading.Event) -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    signals = (signal.SIGTERM, signal.SIGINT)
    previous = {s: signal.getsignal(s) for s in signals}

    def handle(signum: int, frame: FrameType | None) -> None:
        log.info("%s: stopping after the running jobs finish", signal.Signals(signum).name)
        for s, handler in previous.items():
            signal.signal(s, handler)
        stop.set()

    for s in signals:
        signal.signal(s, handle)
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def drill_by_hand(
    context: JobContext,
    now: datetime,
    backup_path: Path | None = None,
    run_by: str = "operator",
    keep_scratch: bool = False,
) -> DrillReport:
    """A drill an operator asked for (`drill`, `POST /v1/ops/drills`), run as a run of
    the `drill` job (`run_by_hand`): `jobs list` then says when the
    last drill ran, whoever started it, rather than `never run` beside a fresh report."""
    with RunStore(context.settings) as runs:
        return run_by_hand(
            context,
            "drill",
            lambda: context.drill(now, backup_path, run_by, keep_scratch),
            drill_counts,
            runs=runs,
        )
