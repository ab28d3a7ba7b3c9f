"""Backup commands: `backup create [PATH]`, `backup list`, `backup verify BACKUP`, and
`restore BACKUP` (`restore --resume` / `--abort` for a store left restoring), `drill
[--backup BACKUP]`. Thin: each calls restore/. A backup is named by its id (`bk-...`, as
`backup list` shows it) or by its directory: restore/store.py `resolve` finds it."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from memory_ledger.cli.common import DataDir, Json, Url, app, emit, open_operations, out

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
    with open_operations(data_dir, url, as_json, create=False) as ops:
        made = ops.backups.take(datetime.now(UTC), path, keep_days, taken_by=by)
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
    with open_operations(data_dir, url, as_json, create=False) as ops:
        found = ops.backups.under(path)

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
    with open_operations(data_dir, url, as_json, create=False) as ops:
        checked, here = ops.backups.verify(backup)

        def human() -> None:
            taken_by = checked.manifest.store_id
            out.print(
                f"{checked.manifest.backup_id}: verified"
                + (
                    f"; taken by another store ({taken_by}), not this one "
                    f"({ops.backups.store_id}): a restore refuses it unless told "
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
    from memory_ledger.api import MemoryService
    from memory_ledger.cli.common import fail
    from memory_ledger.config import Settings
    from memory_ledger.errors import InvalidWrite, MemoryLedgerError
    from memory_ledger.operations import Restores

    try:
        if (backup is not None) + resume + abort != 1:
            raise InvalidWrite("name a BACKUP to restore, or pass --resume or --abort alone")
        if (resume or abort) and (dry_run or force or accept_foreign):
            raise InvalidWrite(
                "--resume and --abort take no --dry-run, --force or --accept-foreign: they "
                "finish or abandon the restore as it was started"
            )
        # No service is opened: a store left restoring serves nothing until this ends.
        restores = Restores.for_store(Settings.resolve(data_dir, url), MemoryService)
        if abort:
            aborted = restores.abort(aborted_by=by)
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
            result = restores.resume(datetime.now(UTC), restored_by=by)
        elif dry_run:
            assert backup is not None
            result = restores.plan(backup, accept_foreign=accept_foreign)
        else:
            assert backup is not None
            result = restores.restore(
                restores.backup_path(backup), datetime.now(UTC), force=force,
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

    # A failed drill is said once, below: not also as the drill job's log line.
    logging.getLogger("memory_ledger.jobs").addHandler(logging.NullHandler())
    with open_operations(data_dir, url, as_json, create=False) as ops:
        report = ops.backups.drill(datetime.now(UTC), backup, run_by=by, keep_scratch=keep)

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
