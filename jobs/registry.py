"""The named lifecycle jobs: one registry that the scheduler, `run`, `jobs list` and
`jobs run-once` all read, so a job is added in one place (one entry in `JOBS`).

Each job is given its `JobContext` (jobs/context.py: the parts of the store that jobs
use, never the service itself), the time it runs as of (`now`, injected: a job never
reads the clock, so tests and drills decide what is due) and a progress callback (or
None), and returns counts: short codes mapped to whole numbers, never content, which
are what its run record keeps (jobs/runs.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.jobs import backup_retention, decay, retention, verification_scan
from memory_ledger.jobs.context import JobContext
from memory_ledger.jobs.file_vacuum import ratio_setting, vacuum_fragmented
from memory_ledger.jobs.projection_catchup import catch_up_all, catchup_seconds_setting
from memory_ledger.jobs.vector_compaction import compact_due, share_setting
from memory_ledger.jobs.verification_window import close_elapsed_windows, window_setting
from memory_ledger.projections.events import Progress

if TYPE_CHECKING:
    from memory_ledger.restore.drill import DrillReport

#: What a job runs: (context, now, progress) -> counts.
JobRun = Callable[[JobContext, datetime, Progress | None], dict[str, int]]

CONSOLIDATION_ENV = "MEMORY_LEDGER_CONSOLIDATION_MINUTES"
DEFAULT_CONSOLIDATION_MINUTES = 10.0


def _no_settings(settings: Settings) -> None:
    return None


@dataclass(frozen=True)
class JobSpec:
    """One named job.

    `every_minutes` and `check` resolve the job's settings from the `Settings`; the
    scheduler calls both before it starts, so a bad setting stops the start rather
    than a later tick. `default_on` is whether `jobs run` schedules it without being
    asked (consolidation writes inferred memories: an operator opts in)."""

    name: str
    describe: str
    every_minutes: Callable[[Settings], float]
    run: JobRun
    check: Callable[[Settings], object] = _no_settings
    default_on: bool = True


# -- what each job runs ---------------------------------------------------------------


def _retention(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    # The sweep reads the projections: catching them up here is the long part on a
    # store that is behind, and the only part that can report its progress.
    context.runner.catch_up(progress)
    return retention.sweep_counts(retention.expire_due(context, now, progress))


def _backup_retention(
    context: JobContext, now: datetime, progress: Progress | None
) -> dict[str, int]:
    return backup_retention.destroy_expired(context, now)


def _drill(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    from memory_ledger.restore.store import registered

    if not registered(context.settings.data_dir):
        return {"drills": 0}
    return drill_counts(context.drill(now, None, "drill_job", False))


def drill_counts(report: DrillReport) -> dict[str, int]:
    return {
        "drills": 1,
        "passed": int(report.passed),
        "findings": len(report.findings),
        "erasures_checked": report.erasures_checked,
    }


def _daily(settings: Settings) -> float:
    return 1440.0


def _decay(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    context.runner.catch_up(progress)
    return decay.decay_pass(context, now)


def _verification_scan(
    context: JobContext, now: datetime, progress: Progress | None
) -> dict[str, int]:
    due = verification_scan.due_requests(context)
    # First the vector index's dead rows: all of them when requests are due, so the scan
    # reads the vector files after their bytes went (jobs/vector_compaction.py).
    compaction = compact_due(context, now, everything=bool(due))
    done = verification_scan.scan_due(context, progress, due)
    statuses = list(done.values())
    return {
        "requests": len(done),
        "ok": statuses.count("ok"),
        "residue": statuses.count("failed"),
        # Due, but nothing to scan with (their fingerprints are gone): not verified.
        "not_checked": statuses.count("not run"),
        **compaction.counts(),
    }


def _vector_compaction(
    context: JobContext, now: datetime, progress: Progress | None
) -> dict[str, int]:
    return compact_due(context, now).counts()


def _verification_window(
    context: JobContext, now: datetime, progress: Progress | None
) -> dict[str, int]:
    return {"closed": len(close_elapsed_windows(context, window_setting(context.settings), now))}


def _file_vacuum(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    rebuilt = vacuum_fragmented(context, ratio_setting(context.settings))
    return {"files_rebuilt": len(rebuilt), "free_pages": sum(f.free_pages for f in rebuilt)}


def _consolidation(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    # Imported here, not at the top: importing it adds `consolidated_turns` to the
    # projections' tables, which every process would then create when it opens a store
    # (and two opening at once would race to). Consolidator creates it when it runs.
    from memory_ledger.jobs.consolidation import consolidate_all

    return consolidate_all(context, now)


def _dedupe(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    from memory_ledger.jobs.dedupe import merge_duplicates  # lazily, for the reason above

    return merge_duplicates(context, now)


def _audit_head(context: JobContext, now: datetime, progress: Progress | None) -> dict[str, int]:
    from memory_ledger.jobs.audit_head import sign_and_keep

    return sign_and_keep(context)


def _projection_catchup(
    context: JobContext, now: datetime, progress: Progress | None
) -> dict[str, int]:
    return catch_up_all(context, progress)


def _consolidation_every(settings: Settings) -> float:
    return settings.number(
        CONSOLIDATION_ENV,
        DEFAULT_CONSOLIDATION_MINUTES,
        lambda m: 1 <= m <= 1440,
        "a number of minutes, 1-1440",
    )


def _hourly(settings: Settings) -> float:
    return 60.0


def _catchup_every(settings: Settings) -> float:
    return catchup_seconds_setting(settings) / 60


JOBS: dict[str, JobSpec] = {
    spec.name: spec
    for spec in (
        JobSpec(
            "retention",
            "erase items whose retention has run out (one forget request per namespace)",
            retention.every_setting,
            _retention,
        ),
        JobSpec(
            "backup-retention",
            "destroy backups past their expiry (the last sealed copies of what was erased)",
            _hourly,
            _backup_retention,
        ),
        JobSpec(
            "drill",
            "restore the newest backup into a scratch copy and prove nothing erased came back",
            _daily,
            _drill,
            default_on=False,
        ),
        JobSpec(
            "decay",
            "archive items whose strength decayed; bring back reinforced ones (once a period)",
            _hourly,
            _decay,
        ),
        JobSpec(
            "verification-scan",
            "scan every file for what each completed forget request erased",
            verification_scan.every_setting,
            _verification_scan,
        ),
        JobSpec(
            "vector-compaction",
            "rewrite vector segments without the rows erasures listed dead; prove the bytes gone",
            _hourly,
            _vector_compaction,
            check=share_setting,
        ),
        JobSpec(
            "verification-window",
            "close verification windows that have elapsed (destroy their fingerprints)",
            _hourly,
            _verification_window,
            check=window_setting,
        ),
        JobSpec(
            "file-vacuum",
            "VACUUM SQLite files whose free pages have piled up",
            _hourly,
            _file_vacuum,
            check=ratio_setting,
        ),
        JobSpec(
            "consolidation",
            "extract inferred facts and preferences from turns not read yet",
            _consolidation_every,
            _consolidation,
            default_on=False,
        ),
        JobSpec(
            "dedupe",
            "merge near-duplicate facts and preferences into one derived item",
            _consolidation_every,
            _dedupe,
            default_on=False,
        ),
        JobSpec(
            "audit-head",
            "sign the lifecycle ledger's tree head and keep it in audit-heads.jsonl",
            _hourly,
            _audit_head,
        ),
        JobSpec(
            "projection-catchup",
            "apply new events to the projections, then to the vector index",
            _catchup_every,
            _projection_catchup,
        ),
    )
}


def spec_named(name: str) -> JobSpec:
    """The job called `name`, or an InvalidWrite that lists the names there are."""
    spec = JOBS.get(name)
    if spec is None:
        raise InvalidWrite(f"unknown job {name!r}; the jobs are: {', '.join(JOBS)}")
    return spec
