"""Backup commands: `backup create [PATH]`, `backup list`, `backup verify BACKUP`, and
`restore BACKUP` (`restore --resume` / `--abort` for a store left restoring), `drill
[--backup BACKUP]`. Thin: each calls restore/. A backup is named by its id (`bk-...`, as
`backup list` shows it) or by its directory: restore/store.py `resolve` finds it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from memory_ledger.cli.common import DataDir, Json, Url, app, emit, open_service, out

backup_app = typer.Typer(help="Encrypted backups of the event and key store.")
app.add_typer(backup_app, name="backup")


@backup_app.command("create")
def backup_create(
    path: Annotated[
        Path | None, typer.Argument(help="Directory to keep it under (default: DATA_DIR/backups).")
    ] = None,
    keep_days: Annotated[int, typer.Option(help="Days until backup retention destroys it.")] = 30,
    by: Annotated[str, typer.Option("--by", help="Who takes it (for the ledger).")] = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Take a consistent, encrypted copy of the event and key store while writes go on."""
    from memory_ledger.restore.backup import create

    with open_service(data_dir, url, as_json, create=False) as service:
        made = create(
            service.settings,
            service.log.master,
            service.ledger,
            datetime.now(UTC),
            path,
            keep_days,
            taken_by=by,
        )
        point = made.manifest.restore_point
        emit(
            as_json,
            made.to_dict(),
            lambda: out.print(
                f"{made.manifest.backup_id}: restore point {point.position} at "
                f"{point.at.isoformat()}, in {made.path}"
            ),
        )


@backup_app.command("list")
def backup_list(
    path: Annotated[Path | None, typer.Argument(help="Where backups are kept.")] = None,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """The backups kept under PATH (default: DATA_DIR/backups), oldest first."""
    from memory_ledger.restore.backup import BACKUPS_DIR, list_backups

    with open_service(data_dir, url, as_json, create=False) as service:
        found = list_backups(path or service.settings.data_dir / BACKUPS_DIR)

        def human() -> None:
            if not found:
                out.print("no backups")
            for b in found:
                m = b.manifest
                out.print(
                    f"{m.backup_id}  restore point {m.restore_point.position}  "
                    f"taken {m.created_at.isoformat()}  expires {m.expires_at.isoformat()}"
                )

        emit(as_json, {"backups": [b.to_dict() for b in found]}, human)


BackupName = Annotated[str, typer.Argument(help="The backup: its id (bk-...) or its directory.")]


@backup_app.command("verify")
def backup_verify(
    backup: BackupName,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Check a backup: its manifest authenticates under this master key, its checksums
    match, and the key decrypts it; and say whether this store took it (a restore
    refuses another store's backup unless told otherwise)."""
    from memory_ledger.restore.backup import taken_here, verify
    from memory_ledger.restore.store import resolve

    with open_service(data_dir, url, as_json, create=False) as service:
        checked = verify(resolve(service.settings.data_dir, backup), service.log.master)
        here = taken_here(checked, service.ledger)

        def human() -> None:
            taken_by = checked.manifest.store_id
            out.print(
                f"{checked.manifest.backup_id}: verified"
                + (
                    f"; taken by another store ({taken_by}), not this one "
                    f"({service.ledger.store_id}): a restore refuses it unless told "
                    f"--accept-foreign {taken_by}"
                    if here is False
                    else ""
                )
            )

        emit(as_json, {"verified": True, "taken_by_this_store": here, **checked.to_dict()}, human)


@app.command("restore")
def restore_command(
    backup: Annotated[
        str | None,
        typer.Argument(help="The backup: its id (bk-...) or its directory."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the restore plan; change nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a store already in the data directory.")
    ] = False,
    accept_foreign: Annotated[
        str | None,
        typer.Option(
            "--accept-foreign",
            help="Restore a backup another store took: its store id, as the refusal names it "
            "(recorded in the ledger).",
        ),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option("--resume", help="Finish the restore this store was left in (no BACKUP)."),
    ] = False,
    abort: Annotated[
        bool,
        typer.Option(
            "--abort", help="Abandon that restore and put back the store it replaced (no BACKUP)."
        ),
    ] = False,
    by: Annotated[str, typer.Option("--by", help="Who restores (for the ledger).")] = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Restore a backup: load it, replay every erasure the ledger recorded, rebuild,
    verify, and only then serve. A store left restoring (the restore was killed or
    failed) is finished with --resume or put back as it was with --abort."""
    from memory_ledger.cli.common import fail
    from memory_ledger.config import Settings
    from memory_ledger.crypto import load_master_key
    from memory_ledger.errors import InvalidWrite, MemoryLedgerError
    from memory_ledger.ledger import LifecycleLedger
    from memory_ledger.restore import restore as restoring
    from memory_ledger.restore.backup import open_verified
    from memory_ledger.restore.store import resolve

    try:
        if (backup is not None) + resume + abort != 1:
            raise InvalidWrite("name a BACKUP to restore, or pass --resume or --abort alone")
        if (resume or abort) and (dry_run or force or accept_foreign):
            raise InvalidWrite(
                "--resume and --abort take no --dry-run, --force or --accept-foreign: they "
                "finish or abandon the restore as it was started"
            )
        settings = Settings.resolve(data_dir, url)
        master, _ = load_master_key(settings, allow_dev_key=False)
        with LifecycleLedger(settings) as ledger:
            if abort:
                aborted = restoring.abort(settings, master, ledger, aborted_by=by)
                emit(
                    as_json,
                    aborted,
                    lambda: out.print(
                        f"{aborted['restore_id']} ({aborted['backup_id']}): aborted; "
                        + (
                            "the store it replaced is back"
                            if aborted["put_back"]
                            else "it had replaced nothing"
                        )
                    ),
                )
                return
            if resume:
                result = restoring.resume(settings, master, ledger, datetime.now(UTC),
                                          restored_by=by)  # fmt: skip
            else:
                assert backup is not None
                path = resolve(settings.data_dir, backup)
                if dry_run:
                    opened, data = open_verified(path, master)
                    result = restoring.plan(opened, ledger, data, accept_foreign=accept_foreign)
                else:
                    result = restoring.restore(
                        path, settings, master, ledger, datetime.now(UTC), force=force,
                        restored_by=by, accept_foreign=accept_foreign,
                    )  # fmt: skip
    except MemoryLedgerError as exc:
        fail(exc, as_json)

    def human() -> None:
        # What the replay erases: planned, the items the backup does not hold erased
        # already; done, the ones the copy held live.
        erased = (
            f"{result.erased_again} item(s) erased again"
            if result.status == "restored"
            else f"{result.to_erase_again} item(s) to erase again"
        )
        held = result.already_erased_in_backup
        out.print(
            f"{result.backup_id}: {result.status}; restore point {result.restore_position}; "
            f"{erased} ({len(result.rewritten_after_backup)} rewritten after the backup"
            + (f"; {held} already erased in the backup" if held is not None else "")
            + f"), {result.tombstones_after_restore_point} tombstone(s) after the restore point"
        )

    emit(as_json, result.to_dict(), human)


@app.command()
def drill(
    backup: Annotated[
        str | None,
        typer.Option(
            "--backup", help="The backup: its id or directory (default: the newest registered)."
        ),
    ] = None,
    keep: Annotated[bool, typer.Option("--keep", help="Keep the scratch copy.")] = False,
    by: Annotated[str, typer.Option("--by", help="Who runs it (for the ledger).")] = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Restore a backup into a scratch copy, replay, rebuild and check that nothing erased
    came back (every store, the files' bytes) and that kept items read. Writes a report
    (JSON and markdown under DATA_DIR/drills) and a ledger entry; exit 7 on any finding."""
    import logging

    from memory_ledger.jobs.registry import drill_by_hand
    from memory_ledger.restore.store import resolve

    # A failed drill is said once, below: not also as the drill job's log line.
    logging.getLogger("memory_ledger.jobs").addHandler(logging.NullHandler())
    with open_service(data_dir, url, as_json, create=False) as service:
        path = resolve(service.settings.data_dir, backup) if backup is not None else None
        report = drill_by_hand(
            service.job_context, datetime.now(UTC), path, run_by=by, keep_scratch=keep
        )

        def human() -> None:
            out.print(
                f"{report.drill_id} on {report.backup_id}: {report.outcome.upper()} "
                f"({report.erasures_checked} erasure(s) checked, {report.files_scanned} "
                f"file(s) scanned, {report.retained_sampled} kept item(s) read)"
            )
            for finding in report.findings:
                out.print(f"  finding: {finding}")
            out.print(f"  report: {report.report_files[-1]}")

        emit(as_json, report.to_dict(), human)
        if not report.passed:
            raise typer.Exit(7)
