"""A store's health and its repairs, as operators run them: status, a rebuild, the
doctor's checks and repairs, and the background loops (catch-up, consolidation, the
retention sweep).

Some of these work on a store no service can open (the doctor's repairs: a missing
master-key check, a lost ledger): those are module functions over the settings. The
rest are `Maintenance` calls over one open store's parts; the loops in jobs/ arrive
bound to the jobs' context, imported when first called."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select
from sqlalchemy.engine import Engine

from memory_ledger import consistency
from memory_ledger.config import Settings
from memory_ledger.errors import IntegrityError, InvalidWrite
from memory_ledger.event_log import EventLog
from memory_ledger.jobs.context import JobContext
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.projections.runner import (
    Discarded,
    all_projections,
    check_projection_names,
    discard_damaged_projections,
    projections_damage,
    turns_cited_by_consolidation,
)

if TYPE_CHECKING:
    from memory_ledger.forgetting.requests import RequestReport
    from memory_ledger.projections.events import Progress

__all__ = [
    "Discarded",
    "Maintenance",
    "acknowledge_ledger_loss",
    "check_projection_names",
    "check_schedule",
    "discard_damaged_projections",
    "open_finding",
    "projection_names",
    "projections_damage",
    "repair_key_check",
]


def projection_names() -> list[str]:
    """Every projection's name, in the order a batch is applied."""
    return [p.name for p in all_projections()]


def check_schedule(
    interval: object, duration: object = None, consolidate_every: object = None
) -> None:
    """Refuse a catch-up schedule outside its bounds (InvalidWrite); nothing starts."""
    from memory_ledger.jobs.projection_catchup import check_schedule as check

    check(interval, duration, consolidate_every)


def open_finding(code: str, explanation: str, repair: str) -> dict[str, Any]:
    """A problem that keeps the store from opening, in the shape of a Finding's dict."""
    return consistency.Finding(code, repair=repair, detail=explanation).to_dict()


def _open_log(settings: Settings, *, repair_key_check: bool = False) -> EventLog:
    from memory_ledger.crypto import load_master_key

    settings.check_reachable()
    master, _ = load_master_key(settings, allow_dev_key=False)
    with settings.schema_lock():
        return EventLog(settings, master, repair_key_check=repair_key_check)


def repair_key_check(settings: Settings) -> str:
    """Write the master-key check again, after proving the key opens stored keys."""
    log = _open_log(settings, repair_key_check=True)
    log.close()
    return log.key_check_repaired or "the master-key check is present and matches: nothing to do"


def acknowledge_ledger_loss(settings: Settings, by: str | None) -> str:
    """Record in the ledger that its entries for unexplained tombstones are lost."""
    log = _open_log(settings)
    try:
        with LifecycleLedger(settings) as ledger:
            done = consistency.acknowledge_ledger_loss(log, ledger, settings, by)
    finally:
        log.close()
    if done is None:
        return "every tombstone in the log is explained by the ledger: nothing to acknowledge"
    return (
        f"recorded {done.request_id} in the ledger: {done.tombstones_unexplained} tombstone(s) "
        f"up to log position {done.log_position} have no ledger entries"
        + (" (the ledger was empty)" if done.ledger_was_empty else "")
    )


class Maintenance:
    """Status, rebuild, checks and repairs of one open store."""

    def __init__(
        self,
        settings: Settings,
        log: EventLog,
        ledger: LifecycleLedger,
        engine: Engine,
        catch_up: Callable[[], object],
        *,
        status: Callable[[], dict[str, Any]],
        rebuild: Callable[[Sequence[str] | None, Progress | None], int],
        jobs: Callable[[], JobContext],
    ) -> None:
        self._settings = settings
        self._log = log
        self._ledger = ledger
        self._engine = engine
        self._catch_up = catch_up
        self._status = status
        self._rebuild = rebuild
        self._jobs = jobs

    def status(self) -> dict[str, Any]:
        """Backend, counts, positions, and the consistency check."""
        return self._status()

    def rebuild(self, names: Sequence[str] | None, progress: Progress | None = None) -> int:
        """Replay the log into the named projections (all, and the vector index, by
        default); returns the events replayed."""
        return self._rebuild(names, progress)

    def check(self, *, chain: bool = False) -> consistency.ConsistencyReport:
        """The log, the key store and the ledger against each other (with `chain`, the
        ledger's hash chain recomputed too)."""
        return consistency.check(self._log, self._ledger, self._settings, chain=chain)

    def close_lost_window(self, request_id: str) -> str:
        """Record a request's verification window as closed when its fingerprints are
        lost (the only such request `check` reports); InvalidWrite for any other."""
        report = self.check()
        lost = {
            r for f in report.findings if f.code == "fingerprints_missing" for r in f.request_ids
        }
        if request_id not in lost:
            raise InvalidWrite(
                f"request {request_id} has no lost fingerprints: its verification window is "
                "closed by `memory-ledger run` once it has elapsed; nothing was changed"
            )
        consistency.close_lost_verification(self._ledger, request_id)
        return f"recorded the verification window of {request_id} as closed (fingerprints lost)"

    def projection_findings(self) -> list[consistency.Finding]:
        """The catalog, which forget scopes resolve from, read against the log."""
        from memory_ledger.forgetting.target_check import catalog_disagreements

        self._catch_up()
        with self._engine.connect() as conn:
            wrong, missing = catalog_disagreements(self._log, conn)
        rebuild = "memory-ledger rebuild (the projections are replayed from the log)"
        return [
            consistency.Finding(code, tuple(ids), repair=rebuild)
            for code, ids in (
                ("catalog_disagrees_with_log", wrong),
                ("catalog_missing_items", missing),
            )
            if ids
        ]

    def kept_head_findings(self) -> list[consistency.Finding]:
        """The ledger against the last head the audit-head job kept: a rollback or fork
        since is a finding here, as it fails the job (memory_ledger/audit/kept.py)."""
        from memory_ledger.audit.heads import Auditor
        from memory_ledger.audit.kept import REPAIR, problems_since_kept

        auditor = Auditor(self._ledger, self._log.master)
        try:
            _, problem = problems_since_kept(auditor, self._settings.data_dir)
        except IntegrityError:  # no tree to compare: the chain's own finding says why
            return []
        if not problem:
            return []
        return [consistency.Finding("audit_head_not_extended", repair=REPAIR, detail=problem)]

    def restore_consolidated_turns(self) -> int:
        """After a discarded projections file: the consolidation job's list of turns it
        has read went with it; restore it from the log, so that conclusions that were
        erased or suppressed are not derived again from their turns."""
        from memory_ledger.jobs.consolidation import consolidated
        from memory_ledger.projections.base import metadata

        turns = turns_cited_by_consolidation(self._log)
        if not turns:
            return 0
        metadata.create_all(self._engine, tables=[consolidated])
        with self._engine.begin() as conn:
            known = set(conn.execute(select(consolidated.c.item_id)).scalars())
            new = [{"item_id": t} for t in turns if t not in known]
            if new:
                conn.execute(consolidated.insert(), new)
        return len(new)

    # -- the background loops and one-off passes -----------------------------------------

    def catch_up_loop(
        self, interval: float, duration: float | None, consolidate_every: float | None
    ) -> None:
        """Keep the projections caught up (and consolidate) until told to stop."""
        from memory_ledger.jobs.catchup_loop import run_catchup_job

        run_catchup_job(self._jobs(), interval, duration, consolidate_every)

    def run_projections(
        self, names: Sequence[str], interval: float, duration: float | None
    ) -> None:
        """Run just these projections in this process (the scale-out shape)."""
        from memory_ledger.jobs.projection_runner import run_projections

        run_projections(self._jobs(), names, interval, duration)

    def consolidate(self) -> tuple[int, int]:
        """Consolidate the turns not read yet, once: (written, refused as stale)."""
        from memory_ledger.jobs.consolidation import Consolidator

        return Consolidator(self._jobs()).run_all()

    def expire(self, now: datetime) -> list[RequestReport]:
        """Erase every item whose retention has run out at `now`."""
        from memory_ledger.jobs.retention import expire_due

        return expire_due(self._jobs(), now)
