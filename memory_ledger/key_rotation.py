"""Master-key rotation: every live data key rewrapped under a new master key.

The master key wraps every data key in the key store (and a backup's file key and the
data keys inside it), and derives the key that signs the ledger's heads and the key
that authenticates backup manifests. Rotating it rewraps, never re-encrypts: the data
keys themselves, and so every sealed copy in the log, the projections and the vector
files, stay as they are.

The steps, each recorded in the `key_rotation` meta row of the event store (beside the
key store, so a chunk's rewrap and its progress commit together), so that a rotation
killed anywhere (kill -9 included) is finished by running it again:

1. **start**: the new key is made durable first (a development key in
   `dev-master.key.next`; a production key is the operator's, given in
   MEMORY_LEDGER_NEW_MASTER_KEY, already in their secret store), then the mark is
   written: from then on every open of the store for serving is refused, and a process
   that opened it before is refused any new key (keystore.KeySQL.insert_keys);
2. **rewrap**: live keys in key order, `chunk_size` per transaction, each chunk with
   the position it reached. Destroyed keys are left as they are (NULL): an erased item
   is not resurrected;
3. **switch**: in one transaction, every live key is opened with the new key (any
   straggler still under the old one is rewrapped), and the store's key check becomes
   the new key's: the proof that every key readable before is readable after;
4. **backups**: every backup the store knows (restore/store.py `known`) is rewrapped
   (restore/backup.py `rekey`), so it stays verifiable and restorable; one under
   neither key, or of format 1, cannot be and is counted (it becomes unreadable);
5. **destroy**: a development key file's old material is overwritten in place with
   the new key and the data directory is searched for the old key's bytes
   (memory_ledger/residue.py); a key given in the environment is the operator's to destroy;
6. **record**: the new signing key (`audit_key`, replacing the old) and a
   `key_rotation` entry are appended to the ledger, then the mark is removed.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from memory_ledger.config import NEW_MASTER_KEY_ENV, Settings
from memory_ledger.crypto import DEV_KEY_FILE, MASTER_KEY_ENV, MasterKey, load_master_key
from memory_ledger.errors import (
    ConfigurationError,
    CorruptKeyEntry,
    InvalidWrite,
    KeyCheckMissing,
    WrongMasterKey,
)
from memory_ledger.keystore import KEY_CHECK, ROTATION
from memory_ledger.projections.vector_codes import CODES_DIR
from memory_ledger.projections.vector_files import fsync_dir
from memory_ledger.retrieval.state_files import STATE_DIR
from memory_ledger.times import now_text

#: Where a rotation of a development key keeps the new key until it replaces the old.
NEXT_DEV_KEY_FILE = "dev-master.key.next"
#: The flock a rotation holds on SQLite (an advisory lock of ROTATION_LOCK_ID on PostgreSQL).
LOCK_FILE = "key-rotation.lock"
ROTATION_LOCK_ID = 0x6D6C6B72  # "mlkr"
DEFAULT_CHUNK = 500
MAX_CHUNK = 100_000
PHASES = ("rewrap", "backups", "destroy", "record")


@dataclass(frozen=True)
class Rotation:
    """What a finished rotation did (ids and counts; never key material)."""

    rotation_id: str
    old_key_id: str
    new_key_id: str
    keys_rewrapped: int
    keys_verified: int
    destroyed_keys_left: int
    backups_rewrapped: int
    backups_not_rewrapped: int
    old_key_material: str  # "destroyed" or "held_by_operator"
    old_key_bytes_found: int | None  # None: not searched (see `destroy`)
    audit_key_id: str
    resumed: bool

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def master_key_id(master: MasterKey) -> str:
    """A master key's public id: the first 32 hex digits of its check value (a keyed
    fingerprint already stored beside the data), never anything that opens a key."""
    return master.check_value()[:32]


def rotate(
    settings: Settings,
    by: str,
    *,
    chunk_size: int = DEFAULT_CHUNK,
    after_chunk: Callable[[int], None] | None = None,
) -> Rotation:
    """Rotate the store's master key, or finish a rotation that was interrupted.

    The current key is the one the store opens with (MEMORY_LEDGER_MASTER_KEY or the
    development key file); the new one is MEMORY_LEDGER_NEW_MASTER_KEY, or, for a
    development key only, one generated here. `after_chunk(rewrapped)` is called after
    each committed chunk. Raises ConfigurationError (a key missing or wrong, nothing
    changed), CorruptKeyEntry (a key entry that opens under neither key: the mark stays,
    nothing is lost; repair it and run again)."""
    from memory_ledger.event_log import EventLog
    from memory_ledger.restoring import refuse_while_restoring

    if isinstance(chunk_size, bool) or not 1 <= chunk_size <= MAX_CHUNK:
        raise InvalidWrite(f"chunk_size must be a whole number from 1 to {MAX_CHUNK}")
    _check_actor(by)
    settings.require_store()
    settings.check_reachable()
    refuse_while_restoring(settings)
    current, _ = load_master_key(settings, allow_dev_key=False)
    with rotation_lock(settings):
        with settings.schema_lock():
            log = EventLog(settings, current, rotating=True)
        try:
            return _Rotator(settings, log, current, by, chunk_size, after_chunk).run()
        finally:
            log.close()


@contextmanager
def rotation_lock(settings: Settings) -> Iterator[None]:
    """Hold the store's rotation lock for the whole run, or refuse: two rotations at
    once would each make a new key and rewrap under it. The operating system (a flock
    in the data directory) or the server (a session advisory lock on PostgreSQL, whose
    every host must be excluded) releases it when the process dies, kill -9 included,
    so a rotation that was killed is resumed at once."""
    busy = ConfigurationError(
        "another `memory-ledger keys rotate` is running on this store; wait for it to "
        "finish. Nothing was changed"
    )
    if settings.postgres is None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(settings.data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise busy from None
            yield
        finally:
            os.close(fd)  # closing the descriptor releases the lock
        return
    with settings._pg_connect() as conn:
        row = conn.execute("SELECT pg_try_advisory_lock(%s)", (ROTATION_LOCK_ID,)).fetchone()
        if not (row and row[0]):
            raise busy
        try:
            yield
        finally:
            conn.execute("SELECT pg_advisory_unlock(%s)", (ROTATION_LOCK_ID,))


class _Rotator:
    def __init__(
        self,
        settings: Settings,
        log: Any,
        current: MasterKey,
        by: str,
        chunk_size: int,
        after_chunk: Callable[[int], None] | None,
    ) -> None:
        self.settings = settings
        self.log = log
        self.sql = log.key_sql
        self.current = current
        self.by = by
        self.chunk_size = chunk_size
        self.after_chunk = after_chunk

    # -- the mark -------------------------------------------------------------------------

    def _meta(self) -> dict[str, str]:
        with self.log.recorder.datastore.transaction(commit=False) as cursor:
            return self.sql.read_meta(cursor, (KEY_CHECK, ROTATION))

    def _save(self, cursor: Any, state: dict[str, Any]) -> None:
        self.sql.write_meta(cursor, ROTATION, json.dumps(state, sort_keys=True))

    def _set_phase(self, state: dict[str, Any], phase: str) -> None:
        state["phase"] = phase
        with self.log.recorder.datastore.transaction(commit=True) as cursor:
            self._save(cursor, state)

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Rotation:
        meta = self._meta()
        if KEY_CHECK not in meta:
            raise KeyCheckMissing(
                "the store has no master-key check (key_check), so the key in use cannot be "
                "proven before anything is rewrapped; run `memory-ledger doctor "
                "--repair-key-check` first. Nothing was changed",
                code="key_check_missing",
                repair="memory-ledger doctor --repair-key-check",
            )
        resumed = ROTATION in meta
        if resumed:
            state = json.loads(meta[ROTATION])
            old, new = self._keys_to_resume(state, meta[KEY_CHECK])
        else:
            self.current.verify(meta[KEY_CHECK])
            old, new = self.current, self._new_key()
            state = self._start(old, new)
        if state["phase"] == "rewrap":
            self._rewrap(state, old, new)
        if state["phase"] == "backups":
            self._backups(state, old, new)
        found: int | None = None
        if state["phase"] == "destroy":
            found = self._destroy(state, old, new)
        return self._record(state, new, found, resumed)

    def _start(self, old: MasterKey, new: MasterKey) -> dict[str, Any]:
        state: dict[str, Any] = {
            "rotation_id": f"keyrot-{secrets.token_hex(8)}",
            "old_key_id": master_key_id(old),
            "new_key_id": master_key_id(new),
            "old_check": old.check_value(),
            "new_check": new.check_value(),
            # where the old key's material is: the development key file (ours to
            # overwrite, also when the variable names the same key), the environment
            "dev_key": self._holds(self._dev_file, old),
            "key_from_env": old.source != str(self._dev_file),
            "started_at": now_text(),
            "phase": "rewrap",
            "after": None,
            "rewrapped": 0,
            "straggling": 0,
            "verified": 0,
            "destroyed_left": 0,
            "backups_rewrapped": 0,
            "backups_not_rewrapped": 0,
        }
        with self.log.recorder.datastore.transaction(commit=True) as cursor:
            if self.sql.read_meta(cursor, (ROTATION,)):  # another rotation got there first
                raise ConfigurationError(
                    "another master-key rotation started at the same moment; run "
                    "`memory-ledger keys rotate` again once it has finished"
                )
            self._save(cursor, state)
        return state

    @staticmethod
    def _holds(path: Path, key: MasterKey) -> bool:
        try:
            found = MasterKey.from_base64(path.read_text(), str(path))
        except (OSError, ConfigurationError):
            return False
        return secrets.compare_digest(found.material, key.material)

    @property
    def _dev_file(self) -> Path:
        return self.settings.data_dir / DEV_KEY_FILE

    @property
    def _next_file(self) -> Path:
        return self.settings.data_dir / NEXT_DEV_KEY_FILE

    def _new_key(self) -> MasterKey:
        """The key to rotate to, durable before anything is wrapped under it."""
        given = self.settings.new_master_key
        if given:
            new = MasterKey.from_base64(given, f"${NEW_MASTER_KEY_ENV}")
        elif self.current.source != str(self._dev_file):
            raise ConfigurationError(
                f"no new master key: set {NEW_MASTER_KEY_ENV} to the new base64-encoded "
                "32-byte key, stored in your secret manager first (a key that exists "
                "nowhere else would be lost with this process). Nothing was changed"
            )
        else:
            new = MasterKey.generate(str(self._next_file))
            _write_key_file(self._next_file, new)
        if secrets.compare_digest(new.check_value(), self.current.check_value()):
            raise ConfigurationError(
                f"the new master key ({NEW_MASTER_KEY_ENV}) is the key in use; give "
                "another one. Nothing was changed"
            )
        return new

    def _keys_to_resume(
        self, state: dict[str, Any], store_check: str
    ) -> tuple[MasterKey, MasterKey]:
        """The old and new keys of a rotation that was interrupted, each checked against
        what the mark recorded: the old one is needed until the backups are rewrapped."""
        candidates = [self.current]
        given = self.settings.new_master_key
        if given:
            candidates.append(MasterKey.from_base64(given, f"${NEW_MASTER_KEY_ENV}"))
        if self._next_file.exists():
            candidates.append(
                MasterKey.from_base64(self._next_file.read_text(), str(self._next_file))
            )
        by_check = {k.check_value(): k for k in candidates}
        new = by_check.get(state["new_check"])
        if new is None:
            raise WrongMasterKey(
                f"a master-key rotation to key {state['new_key_id']} was interrupted; to "
                f"finish it, set {NEW_MASTER_KEY_ENV} to that key (for a development key, "
                f"{self._next_file} holds it). Nothing was changed"
            )
        old = by_check.get(state["old_check"])
        if old is None and state["phase"] in ("rewrap", "backups"):
            raise WrongMasterKey(
                f"a master-key rotation from key {state['old_key_id']} was interrupted "
                "before every key was rewrapped; to finish it, set "
                f"{MASTER_KEY_ENV} to that (old) key and {NEW_MASTER_KEY_ENV} to the new "
                "one. Nothing was changed"
            )
        if state["phase"] in ("destroy", "record") and store_check != state["new_check"]:
            raise ConfigurationError("the rotation's mark and the store's key check disagree")
        return old or new, new

    def _rewrap(self, state: dict[str, Any], old: MasterKey, new: MasterKey) -> None:
        while True:
            with self.log.recorder.datastore.transaction(commit=True) as cursor:
                self._zero_freed_space(cursor)
                after = tuple(state["after"]) if state["after"] else None
                rows = self.sql.live_keys_after(cursor, after, self.chunk_size)
                if not rows:
                    break
                self.sql.replace_wrapped(
                    cursor, [(i, g, new.wrap(i, g, old.unwrap(i, g, w))) for i, g, w in rows]
                )
                state["after"] = [rows[-1][0], rows[-1][1]]
                state["rewrapped"] += len(rows)
                self._save(cursor, state)
            if self.after_chunk is not None:
                self.after_chunk(state["rewrapped"])
        self._switch(state, old, new)

    def _switch(self, state: dict[str, Any], old: MasterKey, new: MasterKey) -> None:
        """Every live key opened under the new key, and the store's key check made the
        new key's, in one transaction (no writer can slip a key in between)."""
        with self.log.recorder.datastore.transaction(commit=True) as cursor:
            if self.settings.postgres is not None:
                cursor.execute(f"LOCK TABLE {self.sql.keys_table} IN EXCLUSIVE MODE")
            else:  # take the write lock before reading
                self._zero_freed_space(cursor)
                cursor.execute(f"UPDATE {self.sql.meta_table} SET name = name WHERE 0")
            stragglers = []
            rows = self.sql.live_keys_after(cursor, None, None)
            for item_id, generation, wrapped in rows:
                try:
                    new.unwrap(item_id, generation, wrapped)
                except CorruptKeyEntry:
                    key = old.unwrap(item_id, generation, wrapped)  # raises if neither
                    stragglers.append((item_id, generation, new.wrap(item_id, generation, key)))
            self.sql.replace_wrapped(cursor, stragglers)
            state["straggling"] = len(stragglers)
            state["verified"] = len(rows)
            state["destroyed_left"] = self.sql.count_keys(cursor)[1]
            state["phase"] = "backups"
            self.sql.write_meta(cursor, KEY_CHECK, new.check_value())
            self._save(cursor, state)
        self.log.compact()  # the old-key wrappings out of the WAL (SQLite), dead rows (PG)
        # The recall states' and search codes' files are sealed under subkeys of the old
        # key: they would no longer open, and nothing sealed under it should outlive it.
        shutil.rmtree(self.settings.data_dir / STATE_DIR, ignore_errors=True)
        shutil.rmtree(self.settings.data_dir / CODES_DIR, ignore_errors=True)

    def _zero_freed_space(self, cursor: Any) -> None:
        """SQLite zeroes what a rewrap frees (the old wrappings), as every key write does
        (recorders._apply_keys); PostgreSQL's dead rows go with `compact`'s VACUUM."""
        if self.settings.postgres is None:
            cursor.execute("PRAGMA secure_delete = ON")

    def _backups(self, state: dict[str, Any], old: MasterKey, new: MasterKey) -> None:
        from memory_ledger.restore.backup import rekey
        from memory_ledger.restore.store import known

        done = skipped = 0
        for backup in known(self.settings.data_dir):
            try:
                rekey(backup.path, old, new)  # False: rewrapped before an interruption
            except ConfigurationError:
                skipped += 1  # under another key, format 1, or damaged: it cannot be
            else:
                done += 1
        state["backups_rewrapped"], state["backups_not_rewrapped"] = done, skipped
        self._set_phase(state, "destroy")

    def _destroy(self, state: dict[str, Any], old: MasterKey, new: MasterKey) -> int | None:
        """Overwrite a development key file's old material with the new key, then search
        every file of the data directory for the old key's bytes (raw and base64). On a
        resumed run whose old key was already overwritten, the search cannot run (the
        old key is nowhere to search for): None."""
        from memory_ledger.residue import file_paths_under, scan

        if state["dev_key"]:
            _overwrite_key_file(self._dev_file, new)
            self._next_file.unlink(missing_ok=True)
        found = None
        if old is not new:
            needles = [old.material, base64.b64encode(old.material)]
            found = len(scan(file_paths_under(self.settings.data_dir), needles))
        self._set_phase(state, "record")
        return found

    def _record(
        self, state: dict[str, Any], new: MasterKey, found: int | None, resumed: bool
    ) -> Rotation:
        from memory_ledger.audit.heads import Auditor
        from memory_ledger.ledger import EntryType, LifecycleLedger

        material = "held_by_operator" if state["key_from_env"] else "destroyed"
        with LifecycleLedger(self.settings) as ledger:
            auditor = Auditor(ledger, new)
            auditor.record_key(self.by)
            if not ledger.entries(state["rotation_id"]):
                ledger.append(
                    state["rotation_id"],
                    EntryType.KEY_ROTATION,
                    {
                        "old_key_id": state["old_key_id"],
                        "new_key_id": state["new_key_id"],
                        "keys_rewrapped": state["rewrapped"] + state["straggling"],
                        "keys_verified": state["verified"],
                        "destroyed_keys_left": state["destroyed_left"],
                        "backups_rewrapped": state["backups_rewrapped"],
                        "backups_not_rewrapped": state["backups_not_rewrapped"],
                        "old_key_material": material,
                        "old_key_files_found": found,
                        "rotated_by": self.by,
                    },
                )
        with self.log.recorder.datastore.transaction(commit=True) as cursor:
            self.sql.write_meta(cursor, ROTATION, None)
        return Rotation(
            rotation_id=state["rotation_id"],
            old_key_id=state["old_key_id"],
            new_key_id=state["new_key_id"],
            keys_rewrapped=state["rewrapped"] + state["straggling"],
            keys_verified=state["verified"],
            destroyed_keys_left=state["destroyed_left"],
            backups_rewrapped=state["backups_rewrapped"],
            backups_not_rewrapped=state["backups_not_rewrapped"],
            old_key_material=material,
            old_key_bytes_found=found,
            audit_key_id=auditor.key.key_id,
            resumed=resumed,
        )


def _check_actor(by: str) -> None:
    """The ledger's own rule for who did something, checked before anything changes
    (the entry that records it is written last)."""
    from pydantic import TypeAdapter, ValidationError

    from memory_ledger.ledger import Actor

    try:
        TypeAdapter(Actor).validate_python(by)
    except ValidationError:
        raise InvalidWrite(
            "--by must be an identifier or a namespace (tenant/user); nothing was changed"
        ) from None


def _write_key_file(path: Path, key: MasterKey) -> None:
    """A key file (mode 0600), fsynced with its directory before it is relied on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as handle:
        handle.write(base64.b64encode(key.material).decode("ascii") + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    fsync_dir(path.parent)


def _overwrite_key_file(path: Path, key: MasterKey) -> None:
    """The old key's bytes overwritten where they lie (same length, same file), not a
    new file renamed over the old one, which would leave them in a freed block."""
    text = (base64.b64encode(key.material).decode("ascii") + "\n").encode("ascii")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.pwrite(fd, text, 0)
        os.ftruncate(fd, len(text))
        os.fsync(fd)
    finally:
        os.close(fd)
