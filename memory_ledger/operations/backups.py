"""Backups, restores and drills as library calls, assembled once for every surface.

`Restores` holds only the settings and the master key: a restore replaces the store, so
it works on a closed one (the CLI opens no service for it; the HTTP server closes its own
first, memory_ledger/http/serving.py) and opens the lifecycle ledger itself for each
call. Backups are named by id or directory; `paths=False` keeps a caller (HTTP) to the
ids this store registered, so no answer names a host path."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey, load_master_key
from memory_ledger.jobs.context import JobContext
from memory_ledger.ledger import LifecycleLedger
from memory_ledger.restore import restore as restoring
from memory_ledger.restore.backup import BACKUPS_DIR, Backup, create, list_backups, open_verified
from memory_ledger.restore.backup import taken_here as _taken_here
from memory_ledger.restore.backup import verify as _verify
from memory_ledger.restore.drill import DrillReport
from memory_ledger.restore.live import StoreOpener
from memory_ledger.restore.restore import RestorePlan
from memory_ledger.restore.store import known, resolve


class Backups:
    """Take, list and verify the encrypted backups of one open store, and drill them."""

    def __init__(
        self,
        settings: Settings,
        master: MasterKey,
        ledger: LifecycleLedger,
        jobs: Callable[[], JobContext],
    ) -> None:
        self._settings = settings
        self._master = master
        self._ledger = ledger
        self._jobs = jobs

    def resolve(self, name: str | Path, *, paths: bool = True) -> Path:
        """The directory of a backup named by id (or, with `paths`, by directory)."""
        return resolve(self._settings.data_dir, name, paths=paths)

    def take(
        self, now: datetime, path: Path | None = None, keep_days: int = 30, *, taken_by: str
    ) -> Backup:
        """A consistent, encrypted copy of the event and key store (writes go on)."""
        return create(
            self._settings, self._master, self._ledger, now, path, keep_days, taken_by=taken_by
        )

    def known(self) -> list[Backup]:
        """The backups this store registered, oldest first."""
        return known(self._settings.data_dir)

    def under(self, path: Path | None = None) -> list[Backup]:
        """The backups kept under `path` (default: DATA_DIR/backups), oldest first."""
        return list_backups(path or self._settings.data_dir / BACKUPS_DIR)

    def verify(self, name: str | Path, *, paths: bool = True) -> tuple[Backup, bool | None]:
        """The backup checked under this master key, and whether this store took it
        (None for a backup older than store ids)."""
        checked = _verify(self.resolve(name, paths=paths), self._master)
        return checked, _taken_here(checked, self._ledger)

    @property
    def store_id(self) -> str:
        """This store's id, as a backup's manifest names the store that took it."""
        return self._ledger.store_id

    def drill(
        self,
        now: datetime,
        name: str | Path | None = None,
        *,
        run_by: str,
        keep_scratch: bool = False,
        paths: bool = True,
    ) -> DrillReport:
        """Restore a backup (default: the newest registered) into a scratch copy and
        check that nothing erased came back."""
        from memory_ledger.jobs.scheduler import drill_by_hand

        path = self.resolve(name, paths=paths) if name is not None else None
        return drill_by_hand(self._jobs(), now, path, run_by=run_by, keep_scratch=keep_scratch)


class Restores:
    """Restore a backup over a store, finish or abandon one left half-way."""

    def __init__(self, settings: Settings, master: MasterKey, open_store: StoreOpener) -> None:
        self._settings = settings
        self._master = master
        self._open_store = open_store

    @classmethod
    def for_store(cls, settings: Settings, open_store: StoreOpener) -> Restores:
        """For a store no service has open (a restore may have left it unservable): its
        master key is loaded, never created. `open_store` opens the restored store
        (memory_ledger/api.py `MemoryService`)."""
        master, _ = load_master_key(settings, allow_dev_key=False)
        return cls(settings, master, open_store)

    def marked(self) -> bool:
        """Whether the store is marked as being restored (it serves nothing until the
        restore is finished or aborted)."""
        from memory_ledger.restoring import RestoreMarker

        return RestoreMarker(self._settings).read() is not None

    def plan(
        self, name: str | Path, *, accept_foreign: str | None = None, paths: bool = True
    ) -> RestorePlan:
        """What a restore of that backup would do; nothing changes."""
        path = resolve(self._settings.data_dir, name, paths=paths)
        backup, data = open_verified(path, self._master)
        with LifecycleLedger(self._settings) as ledger:
            return restoring.plan(backup, ledger, data, accept_foreign=accept_foreign)

    def backup_path(self, name: str | Path, *, paths: bool = True) -> Path:
        """Resolve a backup's name before the store closes (a bad name changes nothing)."""
        return resolve(self._settings.data_dir, name, paths=paths)

    def restore(
        self,
        path: Path,
        now: datetime,
        *,
        restored_by: str,
        force: bool = False,
        accept_foreign: str | None = None,
    ) -> RestorePlan:
        """Load the backup at `path`, replay every erasure recorded since, rebuild,
        verify, then open (restore/restore.py `restore`)."""
        with LifecycleLedger(self._settings) as ledger:
            return restoring.restore(
                path, self._settings, self._master, ledger, now, open_store=self._open_store,
                force=force, restored_by=restored_by, accept_foreign=accept_foreign,
            )  # fmt: skip

    def resume(self, now: datetime, *, restored_by: str) -> RestorePlan:
        """Finish the restore this store was left in."""
        with LifecycleLedger(self._settings) as ledger:
            return restoring.resume(
                self._settings, self._master, ledger, now,
                open_store=self._open_store, restored_by=restored_by,
            )  # fmt: skip

    def abort(self, *, aborted_by: str) -> dict[str, Any]:
        """Abandon that restore and put back the store it replaced."""
        with LifecycleLedger(self._settings) as ledger:
            return restoring.abort(
                self._settings, self._master, ledger,
                open_store=self._open_store, aborted_by=aborted_by,
            )  # fmt: skip
