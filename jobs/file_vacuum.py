"""Scheduled VACUUM of our SQLite files once free pages pile up.

Why a job: the scheduled verification scan reads every byte of our files, free pages
included (`secure_delete` zeroes them, but they are still read). A file does not
shrink when rows go: after a tenant is offboarded or a retention job expires many items,
every later scan would read the freed pages as well. A file rebuilt without them makes
every later scan cheaper, and gives the space back to the disk. VACUUM rewrites the
whole file and holds the write lock while it does (seconds at 100,000 items), so it runs
on the `run` command's schedule (hourly), and only on a file whose free share has passed
a threshold, never on a request's path. (A verification scan that finds residue in a
file rebuilds it at once; that is a different reason, see `ResidueCheck`.)

PostgreSQL reclaims dead tuples with its own autovacuum; this job does nothing there.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from memory_ledger.config import Settings
from memory_ledger.forgetting.residue_check import rewrite_sqlite_file
from memory_ledger.jobs.context import JobContext

log = logging.getLogger("memory_ledger.jobs")

RATIO_ENV = "MEMORY_LEDGER_VACUUM_FREE_RATIO"
DEFAULT_RATIO = 0.2
#: Files smaller than this are left alone: their free pages cost a forget microseconds.
MIN_FREE_BYTES = 4 << 20


@dataclass(frozen=True)
class FileSpace:
    path: Path
    pages: int
    free_pages: int
    page_size: int

    @property
    def free_ratio(self) -> float:
        return self.free_pages / self.pages if self.pages else 0.0

    @property
    def free_bytes(self) -> int:
        return self.free_pages * self.page_size


def ratio_setting(settings: Settings) -> float:
    return settings.number(
        RATIO_ENV, DEFAULT_RATIO, lambda r: 0 < r <= 1, "a share of the file above 0, up to 1"
    )


def file_space(path: Path) -> FileSpace | None:
    """Page counts as the latest commit has them (WAL included), read without a lock."""
    if not path.exists():
        return None
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    try:
        pages, free, size = (
            int(conn.execute(f"PRAGMA {name}").fetchone()[0])
            for name in ("page_count", "freelist_count", "page_size")
        )
    finally:
        conn.close()
    return FileSpace(path, pages, free, size)


def vacuum_fragmented(
    context: JobContext, ratio: float = DEFAULT_RATIO, min_free_bytes: int = MIN_FREE_BYTES
) -> list[FileSpace]:
    """VACUUM each of the log's and the projections' files whose free pages are at least
    `ratio` of it and `min_free_bytes`; returns the files rebuilt, as they were before.
    The ledger is append-only: it has no free pages to give back."""
    settings = context.settings
    if settings.postgres is not None:
        return []
    rebuilt = []
    for path in (settings.events_path, settings.projections_path):
        space = file_space(path)
        if space is None or space.free_ratio < ratio or space.free_bytes < min_free_bytes:
            continue
        if rewrite_sqlite_file(settings, context.engine, context.log, path):
            log.info(
                "rebuilt %s: %d of %d pages were free", path.name, space.free_pages, space.pages
            )
            rebuilt.append(space)
    return rebuilt
