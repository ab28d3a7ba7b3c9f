"""What a restore keeps from after its restore point: the one list, and the carrying.

A backup is the event and key store at one instant. A restore must not roll back
anything else the system knew after that instant, or verifications that were true
before it stop being true after it. Everything is in one of three groups:

- **Never in a backup, so never rolled back**: the lifecycle ledger (requests,
  receipts, statuses, holds, subscriber and host registrations, policy installs,
  backups, drills: it is what the restore replays from), access tokens and idempotency
  keys (`access.sqlite`), the scheduler's runs and leases (`jobs.sqlite`), the retention
  policy (`policy.toml`: a drill copies it into its scratch copy; a restore into a
  directory whose policy is not the version the ledger last recorded says so), this
  host's id (`host.json`).
- **Replayed from the ledger**: every erasure recorded since the restore point
  (forgets, expiries, session ends, redactions' rewrites), as tombstones and destroyed
  keys, each tombstone the replay writes recorded in the ledger under the restore's id;
  every verification window closed since (the fingerprints' keys destroyed again).
- **Carried from the store being replaced**: the residue fingerprints of requests
  recorded since (they live in the key store, inside the event store's file), when
  that store is still readable. When it is not (lost, damaged), the loss is recorded
  per request (`files` / `verification_closed` with `lost_with_replaced_store`), so
  `verify` and `doctor` say what happened instead of reporting it as damage.
- **Started anew**: the change feed's epoch (cursors taken before name positions the
  copy does not have).

The same list, for operators: docs/operations.md, "What a restore carries over".

Fingerprints are carried as the key store holds them: wrapped under the master key,
never unwrapped on the way (the restore marker keeps them, so a restore killed after it
replaced the store still has them).
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from memory_ledger.config import Settings
from memory_ledger.consistency import fingerprints_were_kept
from memory_ledger.crypto import MasterKey
from memory_ledger.event_log import EventLog
from memory_ledger.forgetting.residue_check import LOST_IN_RESTORE, RESIDUE_KEY_PREFIX
from memory_ledger.keystore import NewKey
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.policy import load_policy

log = logging.getLogger("memory_ledger.restore")


def capture_fingerprints(settings: Settings, master: MasterKey) -> list[list[Any]]:
    """The live fingerprint rows of the store about to be replaced, as
    [ident, generation, wrapped (base64)]: empty when there is no store, or it cannot
    be read (a damaged store is a reason to restore; its loss is recorded later)."""
    if not settings.store_exists():
        return []
    try:
        old = EventLog(settings, master)
        try:
            idents = [i for i in old.key_states() if i.startswith(RESIDUE_KEY_PREFIX)]
            rows = old.keys_for(idents).live_rows()
        finally:
            old.close()
    except Exception as exc:  # any failure to read a store we are replacing anyway
        log.warning("the fingerprints of the store being replaced are unreadable: %s", exc)
        return []
    return [[i, g, base64.b64encode(w).decode()] for i, g, w in rows]


def put_back_fingerprints(log_: EventLog, captured: list[list[Any]]) -> int:
    """Insert the captured rows the restored copy lacks (none twice: a re-run of an
    interrupted restore finds them already there). Returns how many were put back."""
    idents = [str(row[0]) for row in captured]
    ring = log_.keys_for(idents)
    new = [
        NewKey(str(i), int(g), base64.b64decode(w))
        for i, g, w in captured
        if not ring.has_row(str(i), int(g))
    ]
    if new:
        log_.save([], new_keys=new)
    return len(new)


def lost_fingerprints(log_: EventLog, ledger: LifecycleLedger, requests: list[str]) -> list[str]:
    """Of `requests`, those whose byte scan kept fingerprints, whose window is not
    recorded as closed, and of which the restored key store holds no row at all."""
    ring = log_.keys_for([f"{RESIDUE_KEY_PREFIX}{r}" for r in requests])
    out = []
    for request_id in requests:
        kept, closed = fingerprints_were_kept(ledger, request_id)
        if kept and not closed and not ring.rows_of(f"{RESIDUE_KEY_PREFIX}{request_id}"):
            out.append(request_id)
    return out


def record_lost(ledger: LifecycleLedger, requests: list[str], restore_id: str) -> None:
    """Close the verification window of each request whose fingerprints the restore
    could not carry, saying so: its erasure stands (replayed and verified by the
    restore), but no byte scan can check it again."""
    for request_id in requests:
        ledger.append(
            request_id,
            EntryType.RECEIPT,
            {
                "store": "files",
                "action": "verification_closed",
                "targets": 0,
                "status": "ok",
                "evidence": {
                    "fingerprints_destroyed": False,
                    LOST_IN_RESTORE: True,
                    "restore": restore_id,
                },
            },
        )


def policy_mismatch(settings: Settings, ledger: LifecycleLedger) -> str | None:
    """A note when the data directory's retention policy is not the version the ledger
    last recorded as installed (a restore into a new directory, without policy.toml):
    reads and the retention sweep would apply another policy than the one on record."""
    installed = [
        int(e.payload["version"]) for e in ledger.entries() if e.entry_type is EntryType.POLICY
    ]
    if not installed:
        return None
    retention = load_policy(settings.data_dir).retention
    here = retention.version if retention is not None else 1
    if here == installed[-1]:
        return None
    return (
        f"the retention policy in {settings.data_dir} is version {here}, but the ledger "
        f"records version {installed[-1]} as installed: copy the installed policy.toml "
        "into the data directory (see `policy show`)"
    )
