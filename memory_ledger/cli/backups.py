"""Backup commands: `backup create [PATH]`, `backup list`, `backup verify PATH`. Thin:
each calls restore/backup.py."""

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
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Take a consistent, encrypted copy of the event and key store while writes go on."""
    from restore.backup import create

    with open_service(data_dir, url, as_json) as service:
        made = create(
            service.settings, service.log.master, service.ledger, datetime.now(UTC), path, keep_days
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
    from restore.backup import BACKUPS_DIR, list_backups

    with open_service(data_dir, url, as_json) as service:
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


@backup_app.command("verify")
def backup_verify(
    path: Annotated[Path, typer.Argument(help="The backup's directory.")],
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Check a backup: manifest, checksums, and that this master key decrypts it."""
    from restore.backup import verify

    with open_service(data_dir, url, as_json) as service:
        checked = verify(path, service.log.master)
        emit(
            as_json,
            {"verified": True, **checked.to_dict()},
            lambda: out.print(f"{checked.manifest.backup_id}: verified"),
        )


@app.command("restore")
def restore_command(
    path: Annotated[Path, typer.Argument(help="The backup's directory.")],
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the restore plan; change nothing.")
    ] = False,
    force: Annotated[
        bool, typer.Option("--force", help="Replace a store already in the data directory.")
    ] = False,
    by: Annotated[str, typer.Option("--by", help="Who restores (for the ledger).")] = "operator",
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Restore a backup: load it, replay every erasure the ledger recorded, rebuild,
    verify, and only then serve. Run it again to finish an interrupted restore."""
    from memory_ledger.cli.common import fail
    from memory_ledger.config import Settings
    from memory_ledger.crypto import load_master_key
    from memory_ledger.errors import MemoryLedgerError
    from memory_ledger.ledger import LifecycleLedger
    from restore.backup import verify
    from restore.restore import plan, restore

    try:
        settings = Settings.resolve(data_dir, url)
        master, _ = load_master_key(settings.data_dir, allow_dev_key=False)
        with LifecycleLedger(settings) as ledger:
            if dry_run:
                result = plan(verify(path, master), ledger)
            else:
                result = restore(path, settings, master, ledger, datetime.now(UTC), force=force,
                                 restored_by=by)  # fmt: skip
    except MemoryLedgerError as exc:
        fail(exc, as_json)

    def human() -> None:
        out.print(
            f"{result.backup_id}: {result.status}; restore point {result.restore_position}; "
            f"{len(result.erase_again)} item(s) to erase again "
            f"({len(result.rewritten_after_backup)} rewritten after the backup), "
            f"{result.tombstones_after_restore_point} tombstone(s) after the restore point"
        )

    emit(as_json, result.to_dict(), human)


@app.command()
def drill(
    backup: Annotated[
        Path | None, typer.Option("--backup", help="The backup (default: the newest registered).")
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
    from restore.drill import drill as run_drill

    with open_service(data_dir, url, as_json) as service:
        report = run_drill(service, datetime.now(UTC), backup, run_by=by, keep_scratch=keep)

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
