"""Backups in the data map: the store that cannot erase, and says so exactly.

A backup is a sealed copy taken in the past; a forget cannot reach into it (rewriting a
backup would make it something else than a copy of the past). What it can do is say,
in the request's receipts, exactly where sealed copies of its targets still are:

- which registered backups were taken after a target was recorded (they hold it);
- that every restore of them re-erases it (restore/restore.py replays the ledger);
- the date the backup retention job destroys the last of them.

The registry (`DATA_DIR/backups.json`) lists where each backup was written: ids and
paths only. Reading it costs nothing when there are no backups; otherwise the targets'
recording times are read from the log (one aggregate each).

`resolve` finds a backup named by its id (in the registry, or under `DATA_DIR/backups`)
or by its directory: every command and route that names a backup uses it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from memory_ledger.errors import ConfigurationError, NotFound
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.restore.backup import (
    BACKUP_ID,
    BACKUPS_DIR,
    MANIFEST,
    Backup,
    list_backups,
    read_manifest,
)
from memory_ledger.restore.registry import registry_paths
from memory_ledger.store_protocol import Evidence, Receipt
from memory_ledger.times import canonical_time, to_utc

if TYPE_CHECKING:
    from memory_ledger.event_log import EventLog

_BACKUP_ID = re.compile(BACKUP_ID)


def registered(data_dir: Path) -> list[Backup]:
    """The registered backups that still exist, oldest first."""
    out = []
    for path in registry_paths(data_dir):
        try:
            out.append(Backup(path, read_manifest(path)))
        except ConfigurationError:
            continue  # destroyed (by retention or by hand): it holds nothing any more
    return sorted(out, key=lambda b: b.manifest.created_at)


def known(data_dir: Path) -> list[Backup]:
    """The backups this store knows, oldest first: the registered ones, and those kept
    under DATA_DIR/backups (registered or not)."""
    found = {b.manifest.backup_id: b for b in list_backups(Path(data_dir) / BACKUPS_DIR)}
    found.update({b.manifest.backup_id: b for b in registered(data_dir)})
    return sorted(found.values(), key=lambda b: b.manifest.created_at)


def resolve(data_dir: Path, name: str | Path, *, paths: bool = True) -> Path:
    """The directory of the backup `name` names: an id (`bk-...`) this store knows
    (`known`), or, with `paths`, a backup's directory (one that holds a manifest).
    NotFound, saying what was looked for, if neither matches. Only found here: whether
    it verifies is `open_verified`'s to say."""
    text = str(name)
    is_id = _BACKUP_ID.fullmatch(text) is not None
    if is_id:
        for backup in known(data_dir):
            if backup.manifest.backup_id == text:
                return backup.path
    if not paths:  # over HTTP: ids only, and no host path in the answer
        raise NotFound(f"no backup {text} is registered with this store")
    if (Path(text) / MANIFEST).is_file():
        return Path(text)
    why = (
        f"no backup {text} is registered with this store or kept in "
        f"{Path(data_dir) / BACKUPS_DIR}, and no backup directory is at that path"
        if is_id
        else f"no backup directory (with its {MANIFEST}) is at that path, and it is not a "
        "backup id (bk-...)"
    )
    raise NotFound(f"{text} is not a readable backup: {why}")


def expires_at(backup: Backup, ledger: LifecycleLedger) -> datetime:
    """When retention destroys `backup`: the earlier of the manifest's expiry and the one
    the ledger recorded when it was taken. Listing reads a manifest without checking its
    MAC (that needs the master key), so a manifest edited to a later expiry must not
    keep a backup, nor the receipts' promise, past the date on record."""
    recorded = [
        to_utc(e.payload["expires_at"])
        for e in ledger.entries(backup.manifest.backup_id)
        if e.entry_type is EntryType.BACKUP
    ]
    return min([backup.manifest.expires_at, *recorded])


class BackupsStore:
    """The registered backups, as a store of the data map."""

    name = "backups"
    holds = "encrypted backups of the event and key store (sealed copies from before erasures)"

    def __init__(self, data_dir: Path, log: EventLog, ledger: LifecycleLedger) -> None:
        self.data_dir, self.log, self.ledger = data_dir, log, ledger

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        evidence = self.verify_absent(item_ids)
        return Receipt(self.name, "restore_replays", len(item_ids), "ok", dict(evidence.detail))

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        """Which backups hold sealed copies of the items: absent for every read, since
        any restore replays the erasure first, but there until the backups expire."""
        backups = registered(self.data_dir)
        holding = self._holding(backups, item_ids) if backups else []
        detail: dict[str, int | bool | str] = {
            "backups_holding_sealed_copies": len(holding),
            "restore_replays_erasure": True,
        }
        if holding:
            detail["first_backup"] = holding[0].manifest.backup_id
            detail["last_backup"] = holding[-1].manifest.backup_id
            last = max(expires_at(b, self.ledger) for b in holding)
            detail["last_copy_destroyed_by"] = canonical_time(last)
        return Evidence(self.name, True, detail)

    def _holding(self, backups: list[Backup], item_ids: Sequence[str]) -> list[Backup]:
        # Items the log does not hold are left out (get_many: one query per 500 ids).
        items = self.log.get_many([UUID(i) for i in item_ids]).values()
        if not items:
            return []
        earliest = min(item.created_on for item in items)
        return [b for b in backups if b.manifest.restore_point.at >= earliest]

    def at_rest(self) -> Iterator[bytes]:
        """Each backup's sealed files as stored: ciphertext under a file key the master
        key wraps (what the contract suite checks for plaintext)."""
        for backup in registered(self.data_dir):
            for entry in backup.manifest.files:
                yield (backup.path / entry.name).read_bytes()

    def rebuild(self) -> int:
        return 0  # copies of the past are not rebuilt
