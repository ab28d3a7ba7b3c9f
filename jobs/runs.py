"""Run records and leases of the named jobs, in tables of their own.

Why tables of their own, and where: a run record says when a job ran and what it
did (codes and counts, never content), and a lease says who is running it now. Both
must outlive a `rebuild`, which drops and replays the projections, so on SQLite they
live in `<data_dir>/jobs.sqlite` beside APScheduler's job store, and on PostgreSQL in
the projections' database and schema (tables are never dropped there by a rebuild of
ours: only the projection tables are).

A lease is what makes two schedulers on one store safe: a run takes the job's lease
first, in one transaction with its start record, and a run that cannot take it does
not run the job (and records nothing: it did nothing). The lease is renewed while the
job runs and expires `lease_seconds` after the last renewal, so a killed process
blocks the job for at most that long; its run record keeps `started` with no end and
is shown as `interrupted` from then on (and written so by the next run that takes the
lease). Lease and record times are the processes' own clocks, never a job's injected
`now`: a drill as of 2030 must not hold a lease until 2030.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    JSON,
    Column,
    Engine,
    Index,
    MetaData,
    Table,
    Text,
    delete,
    insert,
    select,
    update,
)
from sqlalchemy.dialects import postgresql, sqlite

from memory_ledger import side_tables
from memory_ledger.bounds import RUNS_KEPT
from memory_ledger.config import Settings
from memory_ledger.errors import InvalidWrite
from memory_ledger.side_tables import create_tables
from memory_ledger.times import canonical_time

JOBS_FILE = "jobs.sqlite"
LEASE_ENV = "MEMORY_LEDGER_JOB_LEASE_SECONDS"
DEFAULT_LEASE_SECONDS = 120.0
MIN_LEASE_SECONDS = 10.0
MAX_LEASE_SECONDS = 3600.0
#: The most counts a run may record, and the longest code and error text.
MAX_COUNTS = 32
MAX_CODE_CHARS = 40
MAX_ERROR_CHARS = 500

STARTED, OK, FAILED, SKIPPED, INTERRUPTED = "started", "ok", "failed", "skipped", "interrupted"
RUNNING = "running"  # shown, never stored: a `started` record whose lease is live

jobs_metadata = MetaData()

job_runs = Table(
    "job_runs",
    jobs_metadata,
    Column("run_id", Text, primary_key=True),
    Column("name", Text, nullable=False),
    Column("started_at", Text, nullable=False),
    Column("ended_at", Text),
    Column("outcome", Text, nullable=False),
    Column("counts", JSON, nullable=False),
    Column("error", Text),
    Column("holder", Text, nullable=False),
)
Index("job_runs_by_name", job_runs.c.name, job_runs.c.started_at)

job_leases = Table(
    "job_leases",
    jobs_metadata,
    Column("name", Text, primary_key=True),
    Column("holder", Text, nullable=False),
    Column("run_id", Text, nullable=False),
    Column("expires_at", Text, nullable=False),
)


def lease_setting(settings: Settings) -> float:
    """Seconds a lease lasts without renewal (10 to 3600): how long a killed process
    keeps others from running its job."""
    return settings.number(
        LEASE_ENV,
        DEFAULT_LEASE_SECONDS,
        lambda s: MIN_LEASE_SECONDS <= s <= MAX_LEASE_SECONDS,
        f"a number of seconds, {MIN_LEASE_SECONDS:.0f}-{MAX_LEASE_SECONDS:.0f}",
    )


def this_holder() -> str:
    """Who holds a lease, as an operator reads it: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def open_engine(settings: Settings) -> Engine:
    """The engine of the job tables: `jobs.sqlite`, or the projections' schema."""
    return side_tables.open_engine(settings, JOBS_FILE)


@dataclass(frozen=True)
class Lease:
    name: str
    holder: str
    run_id: str
    expires_at: str

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


@dataclass(frozen=True)
class RunRecord:
    """One run of one job. `outcome` is `running` or `interrupted` for a record with
    no end, depending on whether its lease is still live when it is read."""

    run_id: str
    name: str
    started_at: str
    ended_at: str | None
    outcome: str
    counts: dict[str, int]
    error: str | None
    holder: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_counts(counts: object) -> dict[str, int]:
    """A run's counts as recorded: at most MAX_COUNTS codes (lower-case ASCII, digits
    and `_`) mapped to whole numbers. Anything else is refused with an InvalidWrite (the
    run is recorded `failed`): a job must never record content."""
    if not isinstance(counts, Mapping):
        raise InvalidWrite(f"a job's counts must be a mapping, not {type(counts).__name__}")
    if len(counts) > MAX_COUNTS:
        raise InvalidWrite(f"a job may record at most {MAX_COUNTS} counts, not {len(counts)}")
    checked: dict[str, int] = {}
    for code, value in counts.items():
        if not (
            isinstance(code, str)
            and 0 < len(code) <= MAX_CODE_CHARS
            and code.isascii()
            and code.replace("_", "").isalnum()
            and code == code.lower()
        ):
            raise InvalidWrite("a job's count names must be short lower-case codes")
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 2**62:
            raise InvalidWrite(f"a job's count {code} must be a whole number")
        checked[code] = value
    return checked


class RunStore:
    """The job tables of one store, opened by each process that runs or lists jobs."""

    def __init__(self, settings: Settings, lease_seconds: float | None = None) -> None:
        self.settings = settings
        self.lease_seconds = lease_seconds if lease_seconds is not None else lease_setting(settings)
        if not MIN_LEASE_SECONDS <= self.lease_seconds <= MAX_LEASE_SECONDS:
            raise InvalidWrite(
                f"a lease lasts {MIN_LEASE_SECONDS:.0f} to {MAX_LEASE_SECONDS:.0f} seconds"
            )
        self.holder = this_holder()
        self.engine = open_engine(settings)
        try:
            create_tables(self.engine, settings, [job_runs, job_leases])
        except Exception:
            self.engine.dispose()
            raise

    def begin(self, name: str, at: datetime | None = None) -> str | Lease:
        """Take `name`'s lease and record the run's start, in one transaction. Returns
        the new run id, or the live lease of whoever holds the job.

        Atomic on both backends without a table lock: the conditional UPDATE takes an
        expired lease (PostgreSQL re-checks its WHERE on the row a concurrent taker
        committed, so only one of two takers matches), and INSERT ... ON CONFLICT DO
        NOTHING takes a lease nobody has had (the unique key lets one of two inserts
        in). On SQLite the UPDATE is the transaction's first statement, so it waits for
        the write lock before it reads anything."""
        now = at or datetime.now(UTC)
        started, expires = canonical_time(now), self._expiry(now)
        run_id = f"run-{uuid.uuid4().hex[:16]}"
        lease = {"holder": self.holder, "run_id": run_id, "expires_at": expires}
        with self.engine.begin() as conn:
            # RETURNING, not rowcount: psycopg reports no rowcount for ON CONFLICT.
            taken = conn.execute(
                update(job_leases)
                .where(job_leases.c.name == name, job_leases.c.expires_at <= started)
                .values(**lease)
                .returning(job_leases.c.name)
            ).first()
            if taken is None:
                dialect = postgresql if self.settings.postgres is not None else sqlite
                taken = conn.execute(
                    dialect.insert(job_leases)
                    .values(name=name, **lease)
                    .on_conflict_do_nothing(index_elements=["name"])
                    .returning(job_leases.c.name)
                ).first()
            if taken is None:
                row = conn.execute(select(job_leases).where(job_leases.c.name == name)).one()
                return Lease(row.name, row.holder, row.run_id, row.expires_at)
            # Holding the lease, every other unfinished run of this job is dead: its
            # lease expired (a process that ends well finishes its record first).
            conn.execute(
                update(job_runs)
                .where(
                    job_runs.c.name == name,
                    job_runs.c.outcome == STARTED,
                    job_runs.c.run_id != run_id,
                )
                .values(outcome=INTERRUPTED)
            )
            conn.execute(
                insert(job_runs).values(
                    run_id=run_id,
                    name=name,
                    started_at=started,
                    outcome=STARTED,
                    counts={},
                    holder=self.holder,
                )
            )
        return run_id

    def renew(self, name: str, run_id: str, at: datetime | None = None) -> bool:
        """Extend the lease of a run still going; False if it was lost (it expired and
        another run took it)."""
        expires = self._expiry(at or datetime.now(UTC))
        with self.engine.begin() as conn:
            kept = conn.execute(
                update(job_leases)
                .where(job_leases.c.name == name, job_leases.c.run_id == run_id)
                .values(expires_at=expires)
                .returning(job_leases.c.name)
            ).first()
        return kept is not None

    def finish(
        self,
        name: str,
        run_id: str,
        outcome: str,
        counts: Mapping[str, int],
        error: str | None = None,
        at: datetime | None = None,
    ) -> None:
        """Record the run's end and release its lease (only if it still holds it), in
        one transaction; then keep only the newest RUNS_KEPT records of the job."""
        if outcome not in (OK, FAILED, INTERRUPTED):
            raise InvalidWrite(f"a run ends ok, failed or interrupted, not {outcome!r}")
        ended = canonical_time(at or datetime.now(UTC))
        with self.engine.begin() as conn:
            conn.execute(
                update(job_runs)
                .where(job_runs.c.run_id == run_id)
                .values(
                    ended_at=ended,
                    outcome=outcome,
                    counts=dict(counts),
                    error=error[:MAX_ERROR_CHARS] if error else None,
                )
            )
            conn.execute(
                delete(job_leases).where(job_leases.c.name == name, job_leases.c.run_id == run_id)
            )
            newest = (
                select(job_runs.c.run_id)
                .where(job_runs.c.name == name)
                .order_by(job_runs.c.started_at.desc(), job_runs.c.run_id.desc())
                .limit(RUNS_KEPT)
            )
            conn.execute(
                delete(job_runs).where(
                    job_runs.c.name == name, job_runs.c.run_id.not_in(newest.scalar_subquery())
                )
            )

    def lease(self, name: str, at: datetime | None = None) -> Lease | None:
        """`name`'s lease if it is live at `at` (default: now)."""
        now = canonical_time(at or datetime.now(UTC))
        with self.engine.connect() as conn:
            row = conn.execute(
                select(job_leases).where(job_leases.c.name == name, job_leases.c.expires_at > now)
            ).one_or_none()
        return None if row is None else Lease(row.name, row.holder, row.run_id, row.expires_at)

    def recent(self, name: str, limit: int = 1, at: datetime | None = None) -> list[RunRecord]:
        """The newest `limit` runs of `name` (1 to RUNS_KEPT), newest first."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= RUNS_KEPT:
            raise InvalidWrite(f"runs to show must be a whole number from 1 to {RUNS_KEPT}")
        live = self.lease(name, at)
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(job_runs)
                .where(job_runs.c.name == name)
                .order_by(job_runs.c.started_at.desc(), job_runs.c.run_id.desc())
                .limit(limit)
            ).all()
        records = []
        for row in rows:
            outcome = row.outcome
            if outcome == STARTED:
                outcome = RUNNING if live is not None and live.run_id == row.run_id else INTERRUPTED
            counts = row.counts if isinstance(row.counts, dict) else json.loads(row.counts or "{}")
            records.append(
                RunRecord(
                    row.run_id,
                    row.name,
                    row.started_at,
                    row.ended_at,
                    outcome,
                    counts,
                    row.error,
                    row.holder,
                )
            )
        return records

    def _expiry(self, now: datetime) -> str:
        return canonical_time(now + timedelta(seconds=self.lease_seconds))

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> RunStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
