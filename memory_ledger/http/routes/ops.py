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
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request, status
from pydantic import Field, StrictBool, StrictInt

from memory_ledger.access import Access
from memory_ledger.errors import Forbidden, InvalidTransition, InvalidWrite, NotFound
from memory_ledger.http.auth import Caller, Ops, serving_of
from memory_ledger.operations import (
    BACKUP_ID,
    DEFAULT_KEEP_DAYS,
    MAX_KEEP_DAYS,
    RUNS_KEPT,
    STORE_ID,
    Backup,
)
from memory_ledger.operations.shapes import StrictModel

router = APIRouter(prefix="/v1/ops", tags=["ops"])


async def _ops(caller: Caller) -> Access:
    if caller.role != "ops":
        raise Forbidden("operations need an ops token")
    return caller


Operator = Annotated[Access, Depends(_ops)]


def _shown(backup: Backup) -> dict[str, Any]:
    """A backup without its path: where the files lie is the host's business."""
    return {k: v for k, v in backup.to_dict().items() if k not in ("path", "wrapped_file_key")}


class BackupBody(StrictModel):
    keep_days: Annotated[StrictInt, Field(ge=1, le=MAX_KEEP_DAYS)] = DEFAULT_KEEP_DAYS


@router.get("/backups")
def backups(ops: Ops, _: Operator) -> dict[str, Any]:
    """The backups of this store, oldest first."""
    return {"backups": [_shown(b) for b in ops.backups.known()]}


@router.post("/backups", status_code=status.HTTP_201_CREATED)
def take_backup(ops: Ops, caller: Operator, body: BackupBody) -> dict[str, Any]:
    """Take a consistent, encrypted copy of the event and key store while writes go on."""
    made = ops.backups.take(
        datetime.now(UTC), None, body.keep_days, taken_by=f"token:{caller.token_id}"
    )
    return _shown(made)


@router.post("/backups/{backup_id}/verify")
def verify_backup(
    ops: Ops, _: Operator, backup_id: Annotated[str, Path(pattern=BACKUP_ID)]
) -> dict[str, Any]:
    """Check a backup: its manifest authenticates under this master key, its checksums
    match, and the key decrypts it. Named by id only: no caller reaches a host path."""
    checked, here = ops.backups.verify(backup_id, paths=False)
    return {"verified": True, "taken_by_this_store": here, **_shown(checked)}


class DrillBody(StrictModel):
    backup_id: Annotated[str | None, Field(pattern=BACKUP_ID)] = None


@router.post("/drills")
def drill(ops: Ops, caller: Operator, body: DrillBody) -> dict[str, Any]:
    """Restore a backup (default: the newest) into a scratch copy and check that nothing
    erased came back; the report says `passed` or `failed` with its findings."""
    report = ops.backups.drill(
        datetime.now(UTC), body.backup_id, run_by=f"token:{caller.token_id}", paths=False
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
    serving = serving_of(request)
    restores = serving.operations.restores
    if body.dry_run:
        return restores.plan(
            body.backup_id, accept_foreign=body.accept_foreign, paths=False
        ).to_dict()
    path = restores.backup_path(body.backup_id, paths=False)  # an unknown id closes nothing

    def run() -> Any:
        return restores.restore(
            path, datetime.now(UTC), force=True,
            restored_by=f"token:{caller.token_id}", accept_foreign=body.accept_foreign,
        )  # fmt: skip

    return serving.replace(run).to_dict()


@router.get("/jobs")
def jobs(
    ops: Ops, _: Operator, runs: Annotated[int, Query(ge=1, le=RUNS_KEPT)] = 1
) -> dict[str, Any]:
    """Every job: what it does, how often, its next run, its lease and its last runs."""
    return {"jobs": ops.jobs.rows(runs, datetime.now(UTC))}


@router.post("/jobs/{name}/runs")
def run_job(ops: Ops, _: Operator, name: Annotated[str, Path(max_length=64)]) -> dict[str, Any]:
    """Run one job now, under its lease and recorded, as `jobs run-once` does. A job that
    another run holds is a 409 naming the holder; a failed run is answered with its
    outcome and error code (never content)."""
    try:
        result = ops.jobs.run_once(name, datetime.now(UTC))
    except InvalidWrite as exc:  # an unknown job is not there, and nothing ran
        raise NotFound(str(exc)) from None
    if result.held_by is not None:
        held = result.held_by
        raise InvalidTransition(
            f"{name} is running in {held.holder} (lease until {held.expires_at}); nothing was done"
        )
    return result.to_dict()
