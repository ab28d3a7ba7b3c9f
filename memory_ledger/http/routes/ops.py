"""Operations over HTTP, for ops tokens: backups (take, list, verify), restore drills,
restore itself, and the lifecycle jobs (their state, and one run now).

They act on the store as a whole, as the CLI's commands do. A backup is named by its id,
never by a path (restore/store.py `resolve`, ids only), so a caller reaches only the
backups this store knows, and no answer names a host path. A
restore replaces the store this process serves: the gate (memory_ledger/http/serving.py)
closes, the requests in flight end, and nothing is served until the replay is verified.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path as FilePath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, status
from pydantic import Field, StrictBool, StrictInt

from memory_ledger.access import Access
from memory_ledger.config import Settings
from memory_ledger.errors import Forbidden, InvalidTransition, InvalidWrite, NotFound
from memory_ledger.http.auth import Caller, Service
from memory_ledger.jobs.runs import RUNS_KEPT
from memory_ledger.restore.backup import (
    BACKUP_ID,
    DEFAULT_KEEP_DAYS,
    MAX_KEEP_DAYS,
    STORE_ID,
    Backup,
)
from memory_ledger.write_policy import StrictModel

router = APIRouter(prefix="/v1/ops", tags=["ops"])


async def _ops(caller: Caller) -> Access:
    if caller.role != "ops":
        raise Forbidden("operations need an ops token")
    return caller


Operator = Annotated[Access, Depends(_ops)]


def _backup(settings: Settings, backup_id: str) -> FilePath:
    """The directory of the backup of that id (NotFound if this store knows none)."""
    from memory_ledger.restore.store import resolve

    return resolve(settings.data_dir, backup_id, paths=False)


def _shown(backup: Backup) -> dict[str, Any]:
    """A backup without its path: where the files lie is the host's business."""
    return {k: v for k, v in backup.to_dict().items() if k not in ("path", "wrapped_file_key")}


class BackupBody(StrictModel):
    keep_days: Annotated[StrictInt, Field(ge=1, le=MAX_KEEP_DAYS)] = DEFAULT_KEEP_DAYS


@router.get("/backups")
def backups(service: Service, _: Operator) -> dict[str, Any]:
    """The backups of this store, oldest first."""
    from memory_ledger.restore.store import known

    return {"backups": [_shown(b) for b in known(service.settings.data_dir)]}


@router.post("/backups", status_code=status.HTTP_201_CREATED)
def take_backup(service: Service, caller: Operator, body: BackupBody) -> dict[str, Any]:
    """Take a consistent, encrypted copy of the event and key store while writes go on."""
    from memory_ledger.restore.backup import create

    made = create(
        service.settings,
        service.log.master,
        service.ledger,
        datetime.now(UTC),
        None,
        body.keep_days,
        taken_by=f"token:{caller.token_id}",
    )
    return _shown(made)


@router.post("/backups/{backup_id}/verify")
def verify_backup(
    service: Service, _: Operator, backup_id: Annotated[str, Path(pattern=BACKUP_ID)]
) -> dict[str, Any]:
    """Check a backup: its manifest authenticates under this master key, its checksums
    match, and the key decrypts it."""
    from memory_ledger.restore.backup import taken_here, verify

    checked = verify(_backup(service.settings, backup_id), service.log.master)
    here = taken_here(checked, service.ledger)
    return {"verified": True, "taken_by_this_store": here, **_shown(checked)}


class DrillBody(StrictModel):
    backup_id: Annotated[str | None, Field(pattern=BACKUP_ID)] = None


@router.post("/drills")
def drill(service: Service, caller: Operator, body: DrillBody) -> dict[str, Any]:
    """Restore a backup (default: the newest) into a scratch copy and check that nothing
    erased came back; the report says `passed` or `failed` with its findings."""
    from memory_ledger.jobs.registry import drill_by_hand

    path = _backup(service.settings, body.backup_id) if body.backup_id else None
    report = drill_by_hand(
        service.job_context, datetime.now(UTC), path, run_by=f"token:{caller.token_id}"
    )
    shown = report.to_dict()
    shown.pop("report_files", None)
    return shown


class RestoreBody(StrictModel):
    backup_id: Annotated[str, Field(pattern=BACKUP_ID)]
    dry_run: StrictBool = False
    #: A backup another store took is refused unless this names that store (its store
    #: id, or for a backup older than store ids, its backup id): recorded in the ledger.
    accept_foreign: Annotated[str, Field(pattern=f"{STORE_ID}|{BACKUP_ID}")] | None = None


@router.post("/restores")
def restore(request: Request, caller: Operator, body: RestoreBody) -> dict[str, Any]:
    """Restore a backup over the store this process serves: load it, replay every
    erasure the ledger recorded since, rebuild, verify, and only then serve again.
    `dry_run` returns the plan and changes nothing. While it runs every other request
    gets 503; if it fails half-way, the store stays closed and the same call finishes it."""
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.restore.backup import open_verified
    from memory_ledger.restore.restore import plan
    from memory_ledger.restore.restore import restore as run_restore

    serving = request.app.state.serving
    settings, master = serving.service.settings, serving.service.log.master
    path = _backup(settings, body.backup_id)
    if body.dry_run:
        backup, data = open_verified(path, master)
        with LifecycleLedger(settings) as ledger:
            return plan(backup, ledger, data, accept_foreign=body.accept_foreign).to_dict()

    def run() -> Any:
        with LifecycleLedger(settings) as ledger:
            return run_restore(
                path, settings, master, ledger, datetime.now(UTC), force=True,
                restored_by=f"token:{caller.token_id}", accept_foreign=body.accept_foreign,
            )  # fmt: skip

    return serving.replace(run).to_dict()


@router.get("/jobs")
def jobs(
    service: Service, _: Operator, runs: Annotated[int, Query(ge=1, le=RUNS_KEPT)] = 1
) -> dict[str, Any]:
    """Every job: what it does, how often, its next run, its lease and its last runs."""
    from memory_ledger.jobs.runs import RunStore
    from memory_ledger.jobs.status import job_rows

    with RunStore(service.settings) as store:
        return {"jobs": job_rows(service.settings, store, runs, datetime.now(UTC))}


@router.post("/jobs/{name}/runs")
def run_job(
    service: Service, _: Operator, name: Annotated[str, Path(max_length=64)]
) -> dict[str, Any]:
    """Run one job now, under its lease and recorded, as `jobs run-once` does. A job that
    another run holds is a 409 naming the holder; a failed run is answered with its
    outcome and error code (never content)."""
    from memory_ledger.jobs.registry import spec_named
    from memory_ledger.jobs.runs import RunStore
    from memory_ledger.jobs.scheduler import execute

    try:
        spec_named(name)
    except InvalidWrite as exc:  # an unknown job is not there, and nothing ran
        raise NotFound(str(exc)) from None
    with RunStore(service.settings) as store:
        result = execute(service.job_context, name, datetime.now(UTC), runs=store)
    if result.held_by is not None:
        held = result.held_by
        raise InvalidTransition(
            f"{name} is running in {held.holder} (lease until {held.expires_at}); nothing was done"
        )
    return result.to_dict()
