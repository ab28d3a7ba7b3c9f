"""What `jobs list` and `GET /v1/ops/jobs` show of each job: what it does, how often,
its next run in the job store, its lease, and its last runs (counts, never content)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.jobs.registry import JOBS
from memory_ledger.jobs.runs import RunStore
from memory_ledger.jobs.scheduler import Scheduled, scheduled_jobs
from memory_ledger.times import canonical_time


def job_rows(settings: Settings, store: RunStore, runs: int, now: datetime) -> list[dict[str, Any]]:
    """One row per registered job, each with its last `runs` runs, newest first."""
    schedule = scheduled_jobs(settings)
    return [_job_row(name, store, schedule.get(name), runs, now) for name in JOBS]


def _job_row(
    name: str, store: RunStore, scheduled: Scheduled | None, limit: int, now: datetime
) -> dict[str, Any]:
    spec = JOBS[name]
    recent = store.recent(name, limit, now)
    lease = store.lease(name, now)
    return {
        "name": name,
        "description": spec.describe,
        "every_minutes": scheduled.every_minutes
        if scheduled
        else spec.every_minutes(store.settings),
        "scheduled": scheduled is not None,
        "next_run": (
            canonical_time(scheduled.next_run_time)
            if scheduled and scheduled.next_run_time
            else None
        ),
        "default_on": spec.default_on,
        "lease": lease.to_dict() if lease else None,
        "last_run": recent[0].to_dict() if recent else None,
        "runs": [r.to_dict() for r in recent],
    }
