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
    pass

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
