"""Compaction of the vector index: the bytes of rows that erasures listed dead go.

An erasure does not rewrite the vector index's segments: it lists the erased rows dead
in the manifest (one write), after the key store destroyed their items' keys, so their
ciphertext stays in the segment files, unreadable, until a compaction rewrites those
segments without them and proves the bytes gone (`VectorIndex.compact`: the rewritten
files read back, every file of the index searched for the dropped rows' ciphertext).

Two callers. This job, hourly: the segments whose dead rows are more than a share of
them (`MEMORY_LEDGER_VECTOR_DEAD_SHARE`, default 0.2), and any dead row older than the
verification window. And the scheduled verification scan (jobs/registry.py), before it
reads every file for the requests that are due: every dead row then (so the scan that
proves a request's bytes gone covers the vector files after compaction), or, with no
request due, the rows older than the window. A dead row therefore never outlives the
verification window while either job runs.
"""

from __future__ import annotations

from datetime import datetime

from memory_ledger.config import Settings
from memory_ledger.jobs.context import JobContext
from memory_ledger.jobs.verification_window import window_setting
from memory_ledger.projections.vector_index import DEAD_SHARE
from memory_ledger.projections.vector_rows import VectorCompaction

SHARE_ENV = "MEMORY_LEDGER_VECTOR_DEAD_SHARE"


def share_setting(settings: Settings) -> float:
    """The dead share above which a segment is compacted (above 0, up to 1)."""
    return settings.number(
        SHARE_ENV, DEAD_SHARE, lambda r: 0 < r <= 1, "a share of a segment above 0, up to 1"
    )


def compact_due(
    context: JobContext, now: datetime, *, everything: bool = False
) -> VectorCompaction:
    """Compact the segments due (see the module's docstring); `everything`: every
    segment holding a dead row."""
    settings = context.settings
    older_than = (now - window_setting(settings)).timestamp()
    return context.vectors.compact(
        older_than=older_than, share=share_setting(settings), everything=everything
    )
