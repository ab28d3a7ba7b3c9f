"""Restore from a backup, replaying every erasure the ledger recorded, before any read.

A backup is a copy of the past: it holds, sealed, everything erased since it was taken.
A restore therefore never serves the copy as it is. Its steps, each recorded in the
data directory's `RESTORING.json` marker so that a restore interrupted anywhere (kill
-9 included) is run again to the same result:

1. **check** the backup (manifest, checksums, this master key), that it is this store's
   (its manifest names this ledger's store id: a backup of another store is refused
   unless the operator names it, `--accept-foreign`, which the ledger records) and the
   lifecycle ledger (its hash chain verifies; it explains every tombstone the backup
   holds: a ledger that does not is missing, damaged or behind the backup, and may lack
   tombstones the restore must replay, so the restore refuses);
2. **load**: the marker is written first (the store then refuses to open for serving),
   the store being replaced is set aside (`RESTORING-previous` in the data directory),
   the backup's event store replaces it, the projections and vector files are removed
   (they are rebuilt from the log);
3. **replay**: every item the ledger says was erased (targets and cascades of every
   executed request: forgets, retention expiries, session ends, redactions' targets) is
   tombstoned again with its keys destroyed if the copy still holds it live; and every
   item a request *rewrote* after the backup was taken (mentions redacted, history
   shredded, spans redacted) is erased too, because the copy holds its words from before
   the rewrite and the rewrite itself cannot be replayed (spans are never recorded);
4. **rebuild** every projection and the vector index from the restored log;
5. **verify**: every replayed item is absent from every store;
6. **open**: the restore is recorded in the ledger (`restore-...`), the store set aside
   is removed, and the marker last. Only then does the store serve.

A store left marked (killed, or a step that failed) is finished by `resume` (the same as
running the restore again with its backup) or abandoned by `abort`, which puts back the
store set aside at step 2; each is itself run again to the same result if interrupted.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

from memory_ledger.config import Settings
from memory_ledger.crypto import MasterKey
from memory_ledger.errors import ConfigurationError
from memory_ledger.event_log import EventLog
from memory_ledger.feed.feed import EPOCH, EPOCH_START
from memory_ledger.forgetting.residue_check import RESIDUE_KEY_PREFIX
from memory_ledger.forgetting.residue_check import WINDOW_CLOSED_ACTION as WINDOW_CLOSED
from memory_ledger.keystore import KeyDestruction
from memory_ledger.ledger import EntryType, LedgerEntry, LifecycleLedger
from memory_ledger.projections.keyword_index import INDEX_KEY_PREFIX
from memory_ledger.projections.vector_files import write_atomic
from memory_ledger.projections.vector_index import VECTORS_DIR
from memory_ledger.restore import carried as carried_after
from memory_ledger.restore import pg_snapshot
from memory_ledger.restore.backup import EVENTS_TABLES, MANIFEST, Backup, open_verified
from memory_ledger.restore.live import StoreOpener
from memory_ledger.restoring import WAY_FORWARD, RestoreMarker
from memory_ledger.times import canonical_time

STEPS = ("checked", "loaded", "replayed", "rebuilt", "verified", "opened")
#: Request statuses whose erasures happened (or began): they are replayed.
EXECUTED = ("pending", "partial", "completed")
REPLAY_REASON = "restore_replay"
#: Tests set it to a step's name: the process kills itself (SIGKILL) right after it.
KILL_AFTER_ENV = Settings.RESTORE_KILL_AFTER_ENV
#: Where the store a restore replaces is kept until the restore opens (or is aborted).
PREVIOUS_DIR = "RESTORING-previous"
#: On PostgreSQL, the replaced store's tables, as an SQLite file (pg_snapshot).
EVENTS_FILE = "events.sqlite"
#: What the restore replaced: a store (kept aside), or none.
KEPT, NONE = "kept", "none"


@dataclass
class RestorePlan:
    """What a restore would do, and (once run) what it did."""

    backup_id: str
    restore_position: int
    restore_time: str
    erase_again: list[str] = field(default_factory=list)  # erased since, or rewritten
    rewritten_after_backup: list[str] = field(default_factory=list)
    tombstones_after_restore_point: int = 0
    #: Of `erase_again`: the items the backup does not hold as tombstones (what the
    #: replay erases again, where the copy holds them), and those it already holds
    #: erased. Counted once the backup's bytes are read (a dry run, a restore's check).
    to_erase_again: int | None = None
    already_erased_in_backup: int | None = None
    #: Requests whose verification window the ledger records as closed: their
    #: fingerprints' keys, live again in a copy taken before, are destroyed again.
    windows_closed: list[str] = field(default_factory=list)
    projections_to_rebuild: bool = True
    status: str = "planned"
    restore_id: str = ""
    erased_again: int = 0
    derived_keys_destroyed: int = 0
    verified: bool = False
    #: Requests whose fingerprints the replaced store did not hand over (it was lost or
    #: unreadable): their windows are recorded as closed by this restore.
    fingerprints_lost: list[str] = field(default_factory=list)
    #: Set when the data directory's policy is not the one the ledger records.
    policy_note: str | None = None
    #: The store restored into, the store the backup was taken from (None: a backup older
    #: than store ids), and, when they differ, what the operator accepted
    #: (`--accept-foreign`): the foreign store's id, recorded in the ledger.
    store_id: str = ""
    backup_store_id: str | None = None
    foreign_accepted: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # per step, this run

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def plan(
    backup: Backup,
    ledger: LifecycleLedger,
    data: bytes | None = None,
    *,
    accept_foreign: str | None = None,
) -> RestorePlan:
    """The restore plan from the backup's manifest and the ledger; checks that the
    ledger is whole and not behind the backup, and that the backup is this store's
    (`foreign`), ConfigurationError otherwise. Given the
    backup's decrypted bytes too (`open_verified`), as a dry run has them, it checks
    that the ledger explains every tombstone the backup holds, as the restore does, and
    counts the items to erase again apart from those the backup holds erased already."""
    manifest = backup.manifest
    anchor = manifest.ledger_anchor
    audit = ledger.verify(anchor=(anchor.seq, anchor.hash))
    if not audit.ok:
        behind = audit.reason in ("truncated", "anchor_mismatch")
        if behind and manifest.store_id not in (None, ledger.store_id):
            raise ConfigurationError(
                f"the backup {manifest.backup_id} was taken by the store {manifest.store_id}, "
                f"and the lifecycle ledger at {ledger.location} (store {ledger.store_id}) does "
                "not hold its ledger anchor: either the backup is another store's, or this "
                "store's ledger is missing, behind the backup or was replaced (a new ledger "
                "gets a new store id). A restore replays erasures from this ledger, which "
                "cannot vouch for that backup, so it cannot be restored here, with "
                "--accept-foreign or without; nothing was changed"
            )
        why = (
            "it does not hold the entry that was its head when the backup was taken: it is "
            "missing, an older copy, or was replaced"
            if behind
            else f"it does not verify ({audit.explanation})"
        )
        raise ConfigurationError(
            f"the lifecycle ledger at {ledger.location} is behind the backup or damaged: "
            f"{why}. A restore replays erasures from it, so nothing was restored"
        )
    accepted = foreign(backup, ledger, accept_foreign)
    point = manifest.restore_point
    taken = canonical_time(manifest.created_at)
    out = RestorePlan(manifest.backup_id, point.position, canonical_time(point.at))
    out.store_id, out.backup_store_id = ledger.store_id, manifest.store_id
    out.foreign_accepted = accepted
    erase: dict[str, None] = {}
    rewritten: dict[str, None] = {}
    statuses = ledger.latest_statuses()
    for request_id, entries in requests_in(ledger).items():
        if statuses.get(request_id) not in EXECUTED:
            continue
        if any(e.payload.get("action") == WINDOW_CLOSED for e in entries[1:]):
            out.windows_closed.append(request_id)
        request = entries[0].payload
        resolved = [e.payload for e in entries if e.entry_type is EntryType.RESOLVED]
        tombstones = [e.payload for e in entries if e.entry_type is EntryType.TOMBSTONE]
        out.tombstones_after_restore_point += sum(
            1 for t in tombstones if t["position"] > point.position
        )
        after_backup = entries[-1].recorded_at >= taken
        if request["scope"].get("kind") == "redaction":
            if after_backup:
                for payload in resolved:
                    rewritten.update(dict.fromkeys([*payload["targets"], *payload["cascaded"]]))
            continue
        for payload in resolved:
            erase.update(dict.fromkeys([*payload["targets"], *payload["cascaded"]]))
            if after_backup:
                kept = [*(payload.get("history") or []), *(payload.get("mentions") or [])]
                rewritten.update(dict.fromkeys(kept))
        erase.update(dict.fromkeys(t["item_id"] for t in tombstones))
    out.rewritten_after_backup = [i for i in rewritten if i not in erase]
    out.erase_again = [*erase, *out.rewritten_after_backup]
    if data is not None:
        _account_for(backup_tombstones(data, backup), out)
    return out


def foreign(backup: Backup, ledger: LifecycleLedger, accept: str | None = None) -> str | None:
    """None when the backup is this store's; when it is another's and `accept` names
    that store, its id (what the restore records); ConfigurationError otherwise, so a
    restore refuses before it marks or replaces anything.

    A backup is this store's when its manifest (authenticated) names this ledger's
    store id. One older than store ids names none: it is this store's when its ledger
    anchor, which `plan` requires this ledger to hold, is a real entry (seq > 0: the
    chain's hashes are of this store's own history); with an anchor at seq 0 (its
    store's ledger was empty) nothing binds it to any store, and it is accepted only by
    name, its backup id standing for the store id it lacks."""
    manifest = backup.manifest
    taken_by = manifest.store_id
    if taken_by == ledger.store_id or (taken_by is None and manifest.ledger_anchor.seq > 0):
        return None
    other = taken_by or manifest.backup_id
    if accept == other:
        return other
    why = (
        f"was taken by another store ({taken_by})"
        if taken_by
        else "is older than store ids and nothing binds it to this store (its store's "
        "ledger was empty when it was taken)"
    )
    raise ConfigurationError(
        f"the backup {manifest.backup_id} {why}; this store is {ledger.store_id}. Restoring "
        "it would replace this store's memories with that store's; nothing was changed. "
        f"If that is what you mean, pass --accept-foreign {other} (over HTTP, "
        f'"accept_foreign": "{other}"): the restore records it in the ledger'
    )


def requests_in(ledger: LifecycleLedger) -> dict[str, list[LedgerEntry]]:
    """Every request's entries, in chain order, from one read of the ledger."""
    out: dict[str, list[LedgerEntry]] = {}
    for entry in ledger.entries():
        if entry.entry_type is EntryType.REQUEST or entry.request_id in out:
            out.setdefault(entry.request_id, []).append(entry)
    return out


def restore(
    backup_path: Path,
    settings: Settings,
    master: MasterKey,
    ledger: LifecycleLedger,
    now: datetime,
    *,
    open_store: StoreOpener,
    restored_by: str = "operator",
    force: bool = False,
    accept_foreign: str | None = None,
) -> RestorePlan:
    """Restore the backup into the store `settings` name, replay, rebuild, verify, then
    open. Re-running an interrupted restore (or `resume`) finishes it; `abort` undoes
    it. A backup of another store is refused before anything is marked, unless
    `accept_foreign` names that store (`foreign`). `open_store` opens the restored
    store to replay and rebuild it."""

    backup, data = open_verified(backup_path, master)
    if backup.manifest.backend != settings.backend:
        raise ConfigurationError(
            f"the backup {backup.manifest.backup_id} is of a {backup.manifest.backend} store "
            f"and the target is {settings.backend}: restore it into a {backup.manifest.backend} "
            "store"
        )
    marker = RestoreMarker(settings)
    state = marker.read()
    if state and state.get("backup_id") != backup.manifest.backup_id:
        raise ConfigurationError(
            f"{marker.where} is being restored from backup {state.get('backup_id')}; "
            f"finish that restore first ({WAY_FORWARD})"
        )
    if not state and settings.store_exists() and not force:
        raise ConfigurationError(
            f"{settings.describe()} already holds a store; restore into an empty one, "
            "or pass --force to replace it (the replay runs all the same)"
        )
    if state and accept_foreign is None:
        accept_foreign = state.get("foreign_accepted")  # what the interrupted run accepted
    result = plan(backup, ledger, accept_foreign=accept_foreign)
    _check_ledger_explains(data, backup, result)
    done = set(state.get("done", [])) if state else set()
    restore_id = state.get("restore_id") if state else f"restore-{uuid.uuid4().hex[:16]}"
    result.restore_id = str(restore_id)

    counted = dict(state.get("counted", {})) if state else {}
    # Before anything is replaced: what the store being replaced knows that the backup
    # cannot (restore/carried.py), kept in the marker so a re-run still has it.
    carried = state.get("carried") if state else None
    if carried is None:
        carried = carried_after.capture_fingerprints(settings, master)
    previous = state.get("previous") if state else None
    clock = [time.perf_counter()]

    def save_state() -> None:
        marker.write(
            {
                "backup_id": result.backup_id,
                "backup_path": str(Path(backup_path).resolve()),
                "restore_id": result.restore_id,
                "foreign_accepted": result.foreign_accepted,
                "previous": previous,
                "counted": counted,
                "carried": carried,
                "done": sorted(done),
            },
        )

    def mark(step: str) -> None:
        done.add(step)
        now_s = time.perf_counter()
        result.seconds[step] = round(now_s - clock[0], 3)
        clock[0] = now_s
        save_state()
        if settings.restore_kill_after_step == step:  # fault injection for the kill -9 tests
            os.kill(os.getpid(), signal.SIGKILL)

    settings.data_dir.mkdir(parents=True, exist_ok=True)
    mark("checked")
    if "loaded" not in done:
        if previous is None:  # decided once, recorded before anything moves
            previous = _previous_kind(settings)
            save_state()
        _keep_aside(settings, master, previous)
        _load(data, settings, master)
        mark("loaded")
    service = open_store(settings, master, restoring=True)
    try:
        if "replayed" not in done:
            carried_after.put_back_fingerprints(service.log, carried)
            wanted = [UUID(i) for i in result.erase_again]
            live = [i for i in service.log.get_many(wanted).values() if not i.erased]
            keys = _derived_keys(service.log, result)
            if not counted:  # counted before the replay commits, so a re-run keeps them
                counted = {"items": len(live), "keys": len(keys)}
                save_state()
            service.log.tombstone(
                result.erase_again,
                REPLAY_REASON,
                missing_ok=True,
                also_destroy=keys,
                request_id=result.restore_id,
            )
            # A new epoch for the change feed: cursors taken before name positions this
            # copy does not have (feed.py); the feed says where the restore reopened it.
            stamp = canonical_time(datetime.now(UTC))
            epoch = {EPOCH: result.restore_id, EPOCH_START: f"{service.log.max_position()} {stamp}"}
            service.log.set_meta(epoch)
            mark("replayed")
        result.erased_again = int(counted.get("items", 0))
        result.derived_keys_destroyed = int(counted.get("keys", 0))
        if "rebuilt" not in done:
            service.rebuild()
            service.compact()  # the destroyed keys' bytes leave the WAL too
            mark("rebuilt")
        unverified = [
            s.name for s in service.stores if not s.verify_absent(result.erase_again).absent
        ]
        if unverified:
            raise ConfigurationError(
                "the restore's replayed erasures did not verify in "
                f"{', '.join(unverified)}; the store stays closed (marked restoring): "
                f"{WAY_FORWARD}"
            )
        result.verified = True
        mark("verified")
        if not ledger.entries(result.restore_id):
            summary = {
                "backup_id": result.backup_id,
                "restore_position": result.restore_position,
                "tombstones_replayed": result.tombstones_after_restore_point,
                "items_erased_again": result.erased_again,
                "kept_items_erased": len(result.rewritten_after_backup),
                "derived_keys_destroyed": result.derived_keys_destroyed,
                "projections_rebuilt": True,
                "verified": True,
                "restored_by": restored_by,
                "foreign_accepted": result.foreign_accepted,
            }
            entries = [(EntryType.RESTORE, summary), *_replayed_tombstones(service.log, result)]
            ledger.append_many(result.restore_id, entries)
        lost = carried_after.lost_fingerprints(service.log, ledger, list(requests_in(ledger)))
        carried_after.record_lost(ledger, lost, result.restore_id)
        result.fingerprints_lost = lost
        result.policy_note = carried_after.policy_mismatch(settings, ledger)
    finally:
        service.close()
    # The replaced store goes before the mark: kept, it would hold what is erased later.
    shutil.rmtree(settings.data_dir / PREVIOUS_DIR, ignore_errors=True)
    marker.clear()
    result.status = "restored"
    return result


def resume(
    settings: Settings,
    master: MasterKey,
    ledger: LifecycleLedger,
    now: datetime,
    *,
    open_store: StoreOpener,
    restored_by: str = "operator",
) -> RestorePlan:
    """Finish the restore the store's mark records, from the step it reached: the same
    as running it again with its backup, which the mark names (its directory, or its id
    in this store's registry)."""
    from memory_ledger.restore.store import resolve

    state = _marked(settings)
    path = Path(str(state.get("backup_path") or ""))
    if not (path / MANIFEST).is_file():
        path = resolve(settings.data_dir, str(state.get("backup_id")))
    return restore(
        path, settings, master, ledger, now, open_store=open_store, restored_by=restored_by
    )


def abort(
    settings: Settings,
    master: MasterKey,
    ledger: LifecycleLedger,
    *,
    open_store: StoreOpener,
    aborted_by: str = "operator",
) -> dict[str, Any]:
    """Abandon the restore the store's mark records and serve the store it replaced, as
    it was when the restore began (kept aside before the backup was loaded, in
    `PREVIOUS_DIR`; a target that held no store is left empty). Its projections are
    rebuilt, the abort is recorded in the ledger (`restore_aborted`, under the restore's
    id), the copy kept aside removed, and only then the mark. Interrupted anywhere, it
    is run again to the same result. A restore already recorded in the ledger (it
    verified its replay) is not aborted: it is finished with `resume`."""

    marker = RestoreMarker(settings)
    state = _marked(settings)
    restore_id = str(state.get("restore_id"))
    recorded = ledger.entries(restore_id)
    if any(e.entry_type is EntryType.RESTORE for e in recorded):
        raise ConfigurationError(
            f"the restore {restore_id} verified its replay and is recorded in the ledger; "
            "it cannot be aborted: finish it with `memory-ledger restore --resume`"
        )
    done = set(state.get("aborted", []))
    previous = state.get("previous")
    if previous is None and "loaded" in state.get("done", []):
        raise ConfigurationError(
            f"the restore {restore_id} was started by an earlier version, which kept nothing "
            "aside to put back: finish it with `memory-ledger restore --resume`"
        )
    # On SQLite the store's files are moved aside before the load: some may be moved
    # already. On PostgreSQL the tables are only copied, and replaced by the load.
    moved = settings.postgres is None and previous == KEPT
    moved = moved and (settings.data_dir / PREVIOUS_DIR).exists()
    put_back = moved or "loaded" in state.get("done", [])
    if put_back and "put_back" not in done:
        _put_back(settings, master, str(previous))
        done.add("put_back")
        marker.write({**state, "aborted": sorted(done)})
    if put_back and "rebuilt" not in done:
        service = open_store(settings, master, restoring=True)
        try:
            service.rebuild()
            service.compact()
        finally:
            service.close()
        done.add("rebuilt")
        marker.write({**state, "aborted": sorted(done)})
    if not recorded:
        payload = {
            "backup_id": str(state.get("backup_id")),
            "put_back": put_back,
            "aborted_by": aborted_by,
        }
        ledger.append(restore_id, EntryType.RESTORE_ABORTED, payload)
    shutil.rmtree(settings.data_dir / PREVIOUS_DIR, ignore_errors=True)
    marker.clear()
    return {"restore_id": restore_id, "backup_id": state.get("backup_id"), "status": "aborted",
            "put_back": put_back}  # fmt: skip


def _marked(settings: Settings) -> dict[str, Any]:
    state = RestoreMarker(settings).read()
    if not state or not state.get("restore_id"):
        raise ConfigurationError(
            f"{RestoreMarker(settings).where} is not being restored: there is no restore to "
            "resume or abort"
        )
    return state


def _previous_kind(settings: Settings) -> str:
    """What the restore replaces: a store (`KEPT` once set aside) or none (`NONE`)."""
    return KEPT if settings.store_exists() else NONE


def _keep_aside(settings: Settings, master: MasterKey, previous: str) -> None:
    """Set the store about to be replaced aside (`PREVIOUS_DIR`), so `abort` can put it
    back. On SQLite its files are moved (the main file, its WAL and shared memory, as
    they are: a re-run moves what is left); on PostgreSQL its tables are copied into an
    SQLite file of the same tables (pg_snapshot, as a backup copies them), created
    empty first if there were none, so putting them back also empties a new store."""
    aside = settings.data_dir / PREVIOUS_DIR
    aside.mkdir(parents=True, exist_ok=True)
    if settings.postgres is None:
        if previous == KEPT:
            for suffix in ("-wal", "-shm", ""):  # the main file last: it names the store
                source = Path(f"{settings.events_path}{suffix}")
                if source.exists():
                    os.replace(source, aside / source.name)
        return
    if (aside / EVENTS_FILE).exists():
        return
    with settings.schema_lock():
        EventLog(settings, master).close()  # the tables, on an empty database
    scratch = aside / f"{EVENTS_FILE}.partial"
    scratch.unlink(missing_ok=True)
    pg_snapshot.dump(settings, scratch)
    os.replace(scratch, aside / EVENTS_FILE)


def _put_back(settings: Settings, master: MasterKey, previous: str) -> None:
    """Undo `_load`: the store set aside back in place (none, if there was none), the
    projections and vector files derived from the restored copy dropped."""
    aside = settings.data_dir / PREVIOUS_DIR
    if settings.postgres is None:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{settings.events_path}{suffix}").unlink(missing_ok=True)
        if previous == KEPT:
            name = settings.events_path.name
            for kept in (f"{name}-wal", f"{name}-shm", name):
                if (aside / kept).exists():
                    os.replace(aside / kept, settings.data_dir / kept)
    else:
        pg_snapshot.load(settings, aside / EVENTS_FILE)
    _drop_derived(settings)


def _replayed_tombstones(
    log: EventLog, result: RestorePlan
) -> list[tuple[EntryType, dict[str, Any]]]:
    """A `tombstone` ledger entry for every tombstone the replay wrote (those past the
    restore point), so the ledger explains each one: an item rewritten after the backup
    is erased by the restore, and no request of the ledger names it as a target."""
    positions = log.item_tombstones()
    return [
        (EntryType.TOMBSTONE, {"item_id": item_id, "position": position})
        for item_id in result.erase_again
        if (position := positions.get(item_id)) is not None and position > result.restore_position
    ]


def _derived_keys(log: EventLog, result: RestorePlan) -> list[KeyDestruction]:
    """The live keys of derived artifacts that must not come back with the copy: every
    keyword-index key (the rebuild indexes under new ones, so whatever index bytes of
    erased items survive anywhere stay untestable, as a whole-user forget left them),
    and the fingerprints of every verification window the ledger records as closed.
    Summary keys need nothing: the rebuild recomposes each summary under a new key
    generation and destroys the old ones."""
    closed = {f"{RESIDUE_KEY_PREFIX}{r}" for r in result.windows_closed}
    return [
        KeyDestruction(ident, None)
        for ident, (live, _) in log.key_states().items()
        if live and (ident.startswith(INDEX_KEY_PREFIX) or ident in closed)
    ]


def _check_ledger_explains(data: bytes, backup: Backup, result: RestorePlan) -> None:
    """Every tombstone in the backup must be one the ledger recorded: a ledger that does
    not know them is missing entries, or older than the backup."""
    _account_for(backup_tombstones(data, backup), result)


def _account_for(held: set[str], result: RestorePlan) -> None:
    """Refuse if the backup holds a tombstone (`held`) the ledger does not explain;
    otherwise count which of the items to erase again the backup already holds erased."""
    unexplained = held.difference(result.erase_again)
    if unexplained:
        raise ConfigurationError(
            f"the backup holds {len(unexplained)} tombstone(s) the lifecycle ledger does not "
            "record: the ledger is missing, damaged or behind the backup's restore point, "
            "and the restore could miss erasures it must replay; nothing was restored"
        )
    result.already_erased_in_backup = sum(1 for i in result.erase_again if i in held)
    result.to_erase_again = len(result.erase_again) - result.already_erased_in_backup


def backup_tombstones(data: bytes, backup: Backup) -> set[str]:
    """The ids of the items the backup's event store (its decrypted bytes) holds
    tombstoned."""
    table = EVENTS_TABLES[backup.manifest.backend]
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / "events.sqlite"
        copy.write_bytes(data)
        conn = sqlite3.connect(copy)
        try:
            rows = conn.execute(
                f"SELECT originator_id FROM {table} WHERE topic LIKE '%Erased'"
            ).fetchall()
        finally:
            conn.close()
    return {_uuid_text(r[0]) for r in rows}


def _uuid_text(value: object) -> str:
    return str(UUID(bytes=value)) if isinstance(value, bytes) else str(UUID(str(value)))


def _load(data: bytes, settings: Settings, master: MasterKey) -> None:
    """Put the backup's event and key store in place; drop what is rebuilt from it."""
    if settings.postgres is None:
        for suffix in ("-wal", "-shm"):
            Path(f"{settings.events_path}{suffix}").unlink(missing_ok=True)
        write_atomic(settings.data_dir, settings.events_path.name, data)
    else:
        with settings.schema_lock():
            EventLog(settings, master).close()  # the tables, on an empty database
        with tempfile.TemporaryDirectory() as scratch:
            copy = Path(scratch) / "events.sqlite"
            copy.write_bytes(data)
            pg_snapshot.load(settings, copy)
    _drop_derived(settings)


def _drop_derived(settings: Settings) -> None:
    """What is rebuilt from the log: stale once the log under it is replaced."""
    for stale in _derived_files(settings):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)


def _derived_files(settings: Settings) -> Iterable[Path]:
    if settings.postgres is None:  # on PostgreSQL the rebuild drops the projection tables
        projections = settings.projections_path
        yield from (projections, Path(f"{projections}-wal"), Path(f"{projections}-shm"))
    yield settings.data_dir / VECTORS_DIR
