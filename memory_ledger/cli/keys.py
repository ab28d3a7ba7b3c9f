"""Master-key commands: `keys rotate`. Thin: memory_ledger/key_rotation.py does the work."""

from __future__ import annotations

from typing import Annotated

import typer

from memory_ledger.cli.common import DataDir, Json, Url, app, emit, fail, out, whole_number

keys_app = typer.Typer(help="The master key that wraps every data key.")
app.add_typer(keys_app, name="keys")


@keys_app.command("rotate")
def keys_rotate(
    by: Annotated[str, typer.Option("--by", help="Who rotates (for the ledger).")] = "operator",
    chunk_size: Annotated[
        int,
        typer.Option(
            "--chunk-size",
            parser=whole_number(1, 100_000),
            help="Data keys rewrapped per transaction.",
        ),
    ] = 500,
    data_dir: DataDir = None,
    url: Url = None,
    as_json: Json = False,
) -> None:
    """Rewrap every data key (and every backup) under a new master key, then destroy the
    old key's material. The new key is MEMORY_LEDGER_NEW_MASTER_KEY (for a development
    key file, generated if unset). Run it again to finish a rotation that was stopped."""
    from memory_ledger.config import Settings
    from memory_ledger.errors import MemoryLedgerError
    from memory_ledger.operations.keys import rotate_master_key

    try:
        done = rotate_master_key(Settings.resolve(data_dir, url), by, chunk_size=chunk_size)
    except MemoryLedgerError as exc:
        fail(exc, as_json)

    def human() -> None:
        out.print(
            f"{'finished' if done.resumed else 'rotated'} {done.rotation_id}: master key "
            f"{done.old_key_id} -> {done.new_key_id}"
        )
        out.print(
            f"{done.keys_rewrapped} data key(s) rewrapped, {done.keys_verified} opened with the "
            f"new key; {done.destroyed_keys_left} destroyed key(s) left destroyed"
        )
        out.print(
            f"{done.backups_rewrapped} backup(s) rewrapped"
            + (
                f"; {done.backups_not_rewrapped} could not be (under another key, format 1 "
                "or damaged) and no longer open"
                if done.backups_not_rewrapped
                else ""
            )
        )
        out.print(f"heads are signed from now on by key {done.audit_key_id}")
        if done.old_key_material == "destroyed":
            scan = (
                "not searched (resumed after it was overwritten)"
                if done.old_key_bytes_found is None
                else f"{done.old_key_bytes_found} file(s) hold its bytes"
            )
            out.print(f"the old development key was overwritten with the new one; {scan}")
        else:
            out.print(
                "set MEMORY_LEDGER_MASTER_KEY to the new key, then destroy the old one in "
                "your secret manager: the store opens only with the new key now"
            )

    emit(as_json, done.to_dict(), human)
