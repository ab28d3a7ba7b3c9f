"""Backup retention: expired backups are destroyed, and the ledger records it.

A backup holds sealed copies of everything erased after it was taken, until it is
destroyed; its expiry date (set when it is taken, `--keep-days`) is what every forget's
`backups` receipt names as the day the last copy goes. This job keeps that promise:
each registered backup past its expiry at `now` (the earlier of its manifest's and the
one the ledger recorded when it was taken: restore/store.py) is deleted from disk, removed
from the registry, and recorded (`backup_destroyed`, reason `retention_expiry`).
Time is given, never read here.
"""

from __future__ import annotations

import shutil
from datetime import datetime

from memory_ledger.jobs.context import JobContext
from memory_ledger.ledger import EntryType
from memory_ledger.restore.registry import unregister
from memory_ledger.restore.store import expires_at, registered


def destroy_expired(context: JobContext, now: datetime) -> dict[str, int]:
    destroyed = 0
    for backup in registered(context.settings.data_dir):
        if expires_at(backup, context.ledger) > now:
            continue
        backup_id = backup.manifest.backup_id
        shutil.rmtree(backup.path)
        unregister(context.settings.data_dir, backup.path)
        if context.ledger.entries(backup_id):  # taken by this tool: its entry comes first
            context.ledger.append(
                backup_id,
                EntryType.BACKUP_DESTROYED,
                {"backup_id": backup_id, "reason": "retention_expiry"},
            )
        destroyed += 1
    return {"destroyed": destroyed}
