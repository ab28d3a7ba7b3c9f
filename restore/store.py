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
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING
from uuid import UUID

from memory_ledger.errors import ConfigurationError, NotFound
from memory_ledger.stores import Evidence, Receipt
from memory_ledger.times import canonical_time
from projections.vector_files import write_atomic
from restore.backup import Backup, read_manifest

if TYPE_CHECKING:
    from memory_ledger.api import MemoryService

REGISTRY = "backups.json"


def registered(data_dir: Path) -> list[Backup]:
    """The registered backups that still exist, oldest first."""
    out = []
    for path in _paths(data_dir):
        try:
            out.append(Backup(path, read_manifest(path)))
        except ConfigurationError:
            continue  # destroyed (by retention or by hand): it holds nothing any more
    return sorted(out, key=lambda b: b.manifest.created_at)


def register(data_dir: Path, path: Path) -> None:
    paths = [p for p in _paths(data_dir) if p != path.resolve()] + [path.resolve()]
    _write(data_dir, paths)


def unregister(data_dir: Path, path: Path) -> None:
    _write(data_dir, [p for p in _paths(data_dir) if p != path.resolve()])


class BackupsStore:
    """The registered backups, as a store of the data map."""

    name = "backups"
    holds = "encrypted backups of the event and key store (sealed copies from before erasures)"

    def __init__(self, service: MemoryService) -> None:
        self.service = service

    def erase(self, item_ids: Sequence[str]) -> Receipt:
        evidence = self.verify_absent(item_ids)
        return Receipt(self.name, "restore_replays", len(item_ids), "ok", dict(evidence.detail))

    def verify_absent(self, item_ids: Sequence[str]) -> Evidence:
        """Which backups hold sealed copies of the items: absent for every read, since
        any restore replays the erasure first, but there until the backups expire."""
        backups = registered(self.service.settings.data_dir)
        holding = self._holding(backups, item_ids) if backups else []
        detail: dict[str, int | bool | str] = {
            "backups_holding_sealed_copies": len(holding),
            "restore_replays_erasure": True,
        }
        if holding:
            detail["first_backup"] = holding[0].manifest.backup_id
            detail["last_backup"] = holding[-1].manifest.backup_id
            last = max(b.manifest.expires_at for b in holding)
            detail["last_copy_destroyed_by"] = canonical_time(last)
        return Evidence(self.name, True, detail)

    def _holding(self, backups: list[Backup], item_ids: Sequence[str]) -> list[Backup]:
        earliest: datetime | None = None
        for item_id in item_ids:
            try:
                created = self.service.log.get(UUID(item_id)).created_on
            except NotFound:
                continue
            earliest = created if earliest is None else min(earliest, created)
        if earliest is None:
            return []
        return [b for b in backups if b.manifest.restore_point.at >= earliest]

    def at_rest(self) -> Iterator[bytes]:
        """Each backup's sealed files as stored: ciphertext under a file key the master
        key wraps (what the contract suite checks for plaintext)."""
        for backup in registered(self.service.settings.data_dir):
            for entry in backup.manifest.files:
                yield (backup.path / entry.name).read_bytes()

    def rebuild(self) -> int:
        return 0  # copies of the past are not rebuilt


def _paths(data_dir: Path) -> list[Path]:
    try:
        raw = json.loads((Path(data_dir) / REGISTRY).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"the backup registry {data_dir}/{REGISTRY}: {exc}") from None
    return [Path(p) for p in raw.get("backups", []) if isinstance(p, str)]


def _write(data_dir: Path, paths: list[Path]) -> None:
    listed = json.dumps({"backups": [str(p) for p in paths]}, indent=2)
    write_atomic(Path(data_dir), REGISTRY, listed.encode("utf-8"))
