"""Backups: a consistent, encrypted copy of the event store and key store, with a manifest.

What a backup holds is the event store's file (the sealed events, the tombstones and the
key store: one SQLite file, written together so that an event and its key are never
apart), copied while writes continue (SQLite's online backup API; on PostgreSQL, the
event and key tables copied from one snapshot into an SQLite file of the same tables:
restore/pg_snapshot.py), then sealed as a whole under a fresh file key that the master
key wraps. It never holds the lifecycle
ledger (the ledger is what a restore replays from: restoring it from the same backup
would forget the very tombstones the restore must apply), the projections (rebuilt from
the log on restore), nor the master key.

The manifest (`manifest.json`, no personal data) says what the backup is: its id, the
store it was taken from (since format 3: the store id its ledger holds), the format
version, the tool version, the restore point (the log position and time of the
last event in the copy), each file's SHA-256 and size, the master key's check value
(so a backup is verified against the key before anything is decrypted), the wrapped
file key, and when the backup retention policy destroys it. Since format 2 it is
authenticated: `mac` is an HMAC-SHA256, under a key derived from the master key for this
purpose alone (crypto.BACKUP_MANIFEST_LABEL), of a canonical serialisation of every other
field. Everything that reads a backup to trust it (`verify`, and so `backup verify`,
`restore`, its dry run and `drill`) goes through `open_verified`, which refuses a manifest
that does not authenticate (changed after it was taken) and one of format 1 (which had no
MAC: nothing shows its restore point, times or expiry are the ones it was taken with).
Listing (`list_backups`, the registry) still reads both, so every backup stays named in
receipts and destroyed by retention at its expiry.

A backup is a place where sealed copies of erased items live on until it expires; the
backups store (restore/store.py) says so in every forget's receipts, and any restore
re-erases them by replaying the ledger's tombstones (restore/restore.py).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import sqlite3
import tempfile
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Annotated, Any, Literal

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from pydantic import Field, ValidationError

from memory_ledger.audit.signed import signature_problems, signed
from memory_ledger.config import Settings
from memory_ledger.crypto import BACKUP_MANIFEST_LABEL, MasterKey
from memory_ledger.errors import ConfigurationError, InvalidWrite
from memory_ledger.ledger import EntryType, LifecycleLedger
from memory_ledger.projections.vector_files import fsync_dir, write_atomic
from memory_ledger.restore import pg_snapshot
from memory_ledger.restore.registry import register
from memory_ledger.times import AwareDatetime, canonical_time
from memory_ledger.write_policy import StrictModel

#: 3: the manifest names the store the backup was taken from (`store_id`).
FORMAT_VERSION = 3
#: The first format whose manifest carries a MAC; older ones are refused for restore.
AUTHENTICATED_FORMAT = 2
MANIFEST = "manifest.json"
#: A backup's id, as its manifest, its directory, the CLI and the HTTP routes name it.
BACKUP_ID = r"^bk-[0-9a-f]{16}$"
#: A store's id (memory_ledger/ledger `LifecycleLedger.store_id`).
STORE_ID = r"^st-[0-9a-f]{16}$"
SEALED_EVENTS = "events.sqlite.sealed"
#: The events table in the backup's SQLite file, by the backend it was taken from.
EVENTS_TABLES = {"sqlite": "stored_events", "postgresql": pg_snapshot.EVENTS_TABLE}
BACKUPS_DIR = "backups"  # under the data directory, unless a path is given
DEFAULT_KEEP_DAYS = 30
MAX_KEEP_DAYS = 3660
_NONCE = 12


class ManifestFile(StrictModel):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_.\-]{0,63}$")]
    sha256: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    size: Annotated[int, Field(strict=True, ge=0)]


class RestorePoint(StrictModel):
    position: Annotated[int, Field(strict=True, ge=0)]  # the last notification id copied
    at: AwareDatetime  # when the copy was taken


class LedgerAnchor(StrictModel):
    """The lifecycle ledger's head when the backup was taken: a restore requires a
    ledger that still holds it, so a ledger missing, replaced by an older copy or cut
    short is found even when the backup holds no tombstone to compare."""

    seq: Annotated[int, Field(strict=True, ge=0)]
    hash: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]


class Manifest(StrictModel):
    format_version: Annotated[int, Field(strict=True, ge=1)]
    tool_version: str
    backup_id: Annotated[str, Field(pattern=BACKUP_ID)]
    backend: Literal["sqlite", "postgresql"]
    #: The store it was taken from (its ledger's store id): a restore refuses a backup
    #: of another store unless told otherwise. Absent before format 3.
    store_id: Annotated[str, Field(pattern=STORE_ID)] | None = None
    created_at: AwareDatetime
    expires_at: AwareDatetime
    restore_point: RestorePoint
    master_check: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    ledger_anchor: LedgerAnchor
    wrapped_file_key: str
    files: tuple[ManifestFile, ...]
    #: HMAC-SHA256 of every other field but `signature` (`manifest_mac`); absent in format 1.
    mac: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")] | None = None
    #: The ledger key's Ed25519 signature of every other field (memory_ledger/audit/signed.py),
    #: checked by the standalone verifier with the public key alone; absent before it.
    signature: dict[str, str] | None = None


@dataclass(frozen=True)
class Backup:
    """A backup on disk: where it is, and its manifest."""

    path: Path
    manifest: Manifest

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), **json.loads(self.manifest.model_dump_json())}


def tool_version() -> str:
    try:
        return version("memory-ledger")
    except PackageNotFoundError:  # a checkout run without installing
        return "unknown"


def create(
    settings: Settings,
    master: MasterKey,
    ledger: LifecycleLedger,
    now: datetime,
    dest: Path | None = None,
    keep_days: int = DEFAULT_KEEP_DAYS,
    taken_by: str = "operator",
) -> Backup:
    """Take a backup of the event and key store while writes continue, register
    it (the data map's backups store) and record it in the ledger."""
    if isinstance(keep_days, bool) or not isinstance(keep_days, int):
        raise InvalidWrite("keep_days must be a whole number of days")
    if not 1 <= keep_days <= MAX_KEEP_DAYS:
        raise InvalidWrite(f"keep_days must be from 1 to {MAX_KEEP_DAYS}")
    audit = ledger.verify()
    if not audit.ok:
        raise ConfigurationError(
            f"the lifecycle ledger does not verify ({audit.explanation}): a backup needs a "
            "whole ledger beside it, since a restore replays erasures from it"
        )
    backup_id = f"bk-{uuid.uuid4().hex[:16]}"
    root = (dest or settings.data_dir / BACKUPS_DIR).resolve()
    target = root / backup_id
    target.mkdir(parents=True, exist_ok=False)
    with tempfile.TemporaryDirectory(dir=root) as scratch:
        copy = Path(scratch) / "events.sqlite"
        if settings.postgres is None:
            position = _online_copy(settings.events_path, copy)
        else:
            position = pg_snapshot.dump(settings, copy)
        plain = copy.read_bytes()
    file_key = AESGCM.generate_key(bit_length=256)
    nonce = secrets.token_bytes(_NONCE)
    sealed = nonce + AESGCM(file_key).encrypt(nonce, plain, backup_id.encode())
    del plain
    (target / SEALED_EVENTS).write_bytes(sealed)
    manifest = Manifest(
        format_version=FORMAT_VERSION,
        tool_version=tool_version(),
        backup_id=backup_id,
        backend=settings.backend,
        store_id=ledger.store_id,
        created_at=now,
        expires_at=now + timedelta(days=keep_days),
        restore_point=RestorePoint(position=position, at=now),
        master_check=master.check_value(),
        ledger_anchor=LedgerAnchor(seq=audit.head_seq, hash=audit.head_hash),
        wrapped_file_key=base64.b64encode(master.wrap(backup_id, 1, file_key)).decode(),
        files=(ManifestFile(name=SEALED_EVENTS, sha256=_sha256(sealed), size=len(sealed)),),
    )
    mac = manifest_mac(json.loads(manifest.model_dump_json()), master)
    body = json.loads(manifest.model_copy(update={"mac": mac}).model_dump_json())
    manifest = Manifest.model_validate(signed("backup manifest", body, master))
    write_atomic(target, MANIFEST, manifest.model_dump_json(indent=2).encode())
    register(settings.data_dir, target)
    ledger.append(
        backup_id,
        EntryType.BACKUP,
        {
            "backup_id": backup_id,
            "restore_position": position,
            "expires_at": canonical_time(manifest.expires_at),
            "taken_by": taken_by,
        },
    )
    return Backup(target, manifest)


def taken_here(backup: Backup, ledger: LifecycleLedger) -> bool | None:
    """Whether the store whose ledger this is took the backup: None for a backup older
    than store ids (its manifest names no store; restore/restore.py `foreign` decides)."""
    taken_by = backup.manifest.store_id
    return None if taken_by is None else taken_by == ledger.store_id


def read_manifest(path: Path) -> Manifest:
    """The manifest of the backup at `path`, validated (a clear error if it is not one,
    or is from a newer format than this tool reads). Not authenticated: what lists
    backups reads it; what trusts one goes through `open_verified`."""
    return _load_manifest(path)[1]


def manifest_mac(raw: dict[str, Any], master: MasterKey) -> str:
    """The MAC of a manifest (as its JSON object): of every field but `mac` itself and
    the `signature` made after it, serialised canonically (sorted keys, no spaces,
    ASCII), so rewriting the file's layout changes nothing and changing any value is
    found."""
    body = {k: v for k, v in raw.items() if k not in ("mac", "signature")}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return master.mac(BACKUP_MANIFEST_LABEL, canonical.encode("ascii"))


def _load_manifest(path: Path) -> tuple[dict[str, Any], Manifest]:
    """The manifest as read (its JSON object, what the MAC is of) and validated, from
    one read of the file."""
    file = Path(path) / MANIFEST
    try:
        raw = json.loads(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(
            f"{path} is not a readable backup: {exc.strerror or type(exc).__name__}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigurationError(f"{path} is not a readable backup: {exc}") from None
    found = raw.get("format_version") if isinstance(raw, dict) else None
    if isinstance(found, int) and found > FORMAT_VERSION:
        raise ConfigurationError(
            f"the backup at {path} is of format {found}; this version reads format "
            f"{FORMAT_VERSION}: restore it with a newer memory-ledger"
        )
    try:
        return raw, Manifest.model_validate(raw)
    except ValidationError as exc:
        fields = ", ".join(".".join(map(str, e["loc"])) for e in exc.errors())
        raise ConfigurationError(f"the backup manifest at {file} is invalid ({fields})") from None


def _authenticate(raw: dict[str, Any], manifest: Manifest, master: MasterKey) -> None:
    """The manifest is the one the backup was written with, under this master key."""
    if manifest.format_version < AUTHENTICATED_FORMAT:
        raise ConfigurationError(
            f"the backup {manifest.backup_id} is of format {manifest.format_version}, whose "
            "manifest is not authenticated: nothing shows that its restore point, times, "
            "expiry and checksums are the ones it was taken with, so this version neither "
            "verifies nor restores it. Take a new backup; the old one stays listed until "
            "retention destroys it"
        )
    if not secrets.compare_digest(manifest.master_check, master.check_value()):
        raise ConfigurationError(
            f"the backup {manifest.backup_id} was taken under another master key; "
            "set the key it was taken with (MEMORY_LEDGER_MASTER_KEY)"
        )
    if manifest.mac is None or not secrets.compare_digest(manifest.mac, manifest_mac(raw, master)):
        raise ConfigurationError(
            f"the backup {manifest.backup_id} manifest does not authenticate under this "
            "master key: it was changed after the backup was taken (its id, restore point, "
            "times, expiry or checksums cannot be trusted); it cannot be verified or restored"
        )
    problems = signature_problems(raw, master) if manifest.signature is not None else []
    if problems:
        raise ConfigurationError(
            f"the backup {manifest.backup_id} manifest's signature does not hold for this "
            f"store's ledger key ({'; '.join(problems)}); it cannot be verified or restored"
        )


def verify(path: Path, master: MasterKey) -> Backup:
    """Checksums, manifest and decryptability with this master key; raises if any fails."""
    return open_verified(path, master)[0]


def open_verified(path: Path, master: MasterKey) -> tuple[Backup, bytes]:
    """`verify`, answering the event store's decrypted bytes too (in memory only), so a
    restore decrypts the backup once. The one place a backup is checked: its manifest
    authenticated first (format, master key, MAC), then every file's checksum, then
    decryption."""
    raw, manifest = _load_manifest(path)
    _authenticate(raw, manifest, master)
    for entry in manifest.files:
        data = _read(Path(path) / entry.name)
        if len(data) != entry.size or _sha256(data) != entry.sha256:
            raise ConfigurationError(
                f"the backup {manifest.backup_id} is damaged: {entry.name} does not match "
                "its checksum (truncated or changed); it cannot be restored"
            )
    opened = open_events(Path(path), manifest, master)
    if not opened.startswith(b"SQLite format 3\x00"):
        raise ConfigurationError(f"the backup {manifest.backup_id} holds no SQLite database")
    return Backup(Path(path), manifest), opened


def open_events(path: Path, manifest: Manifest, master: MasterKey) -> bytes:
    """The event store's bytes, decrypted in memory."""
    file_key = master.unwrap(manifest.backup_id, 1, base64.b64decode(manifest.wrapped_file_key))
    sealed = _read(path / SEALED_EVENTS)
    try:
        return AESGCM(file_key).decrypt(
            sealed[:_NONCE], sealed[_NONCE:], manifest.backup_id.encode()
        )
    except (InvalidTag, ValueError):
        raise ConfigurationError(
            f"the backup {manifest.backup_id} does not decrypt: it was changed"
        ) from None


#: The suffix of a backup's files rewritten under a new master key before they replace
#: the old ones (`rekey`).
REKEY_SUFFIX = ".rekey"


def rekey(path: Path, old: MasterKey, new: MasterKey) -> bool:
    """Rewrap the backup at `path` from the master key `old` to `new` (a master-key
    rotation, memory_ledger/key_rotation.py): every live data key in its key store is
    rewrapped, its key check replaced, and the whole sealed again under a fresh file
    key wrapped by `new`; the manifest keeps its id, restore point, times, expiry and
    ledger anchor, and gets new checksums, a new MAC and a new signature. The copy is
    decrypted in memory only (an in-memory SQLite database). True when it was rewritten,
    False when it already was under `new`. A backup under neither key, or of format 1,
    is refused (ConfigurationError): after the old key is destroyed nothing opens it.

    The sealed file and the manifest are written beside the old ones first (with
    REKEY_SUFFIX, fsynced), then renamed over them, the manifest last; an interrupted
    rewrite is finished (or discarded) by `finish_rekey` before anything else."""
    from memory_ledger.keystore import KEY_CHECK, KEYS_TABLE, META_TABLE

    path = Path(path)
    finish_rekey(path)
    raw, manifest = _load_manifest(path)
    if secrets.compare_digest(manifest.master_check, new.check_value()):
        _authenticate(raw, manifest, new)
        return False
    _, plain = open_verified(path, old)
    conn = sqlite3.connect(":memory:")
    try:
        conn.deserialize(plain)
        del plain
        rows = conn.execute(
            f"SELECT item_id, generation, wrapped FROM {KEYS_TABLE} WHERE wrapped IS NOT NULL"
        ).fetchall()
        conn.executemany(
            f"UPDATE {KEYS_TABLE} SET wrapped = ? WHERE item_id = ? AND generation = ?",
            [(new.wrap(i, g, old.unwrap(i, g, bytes(w))), i, g) for i, g, w in rows],
        )
        conn.execute(
            f"UPDATE {META_TABLE} SET value = ? WHERE name = ?", (new.check_value(), KEY_CHECK)
        )
        conn.commit()
        rewrapped = conn.serialize()
    finally:
        conn.close()
    backup_id = manifest.backup_id
    file_key = AESGCM.generate_key(bit_length=256)
    nonce = secrets.token_bytes(_NONCE)
    sealed = nonce + AESGCM(file_key).encrypt(nonce, rewrapped, backup_id.encode())
    del rewrapped
    fields = {
        "master_check": new.check_value(),
        "wrapped_file_key": base64.b64encode(new.wrap(backup_id, 1, file_key)).decode(),
        "files": (ManifestFile(name=SEALED_EVENTS, sha256=_sha256(sealed), size=len(sealed)),),
        "mac": None,
        "signature": None,
    }
    body = json.loads(manifest.model_copy(update=fields).model_dump_json())
    body["mac"] = manifest_mac(body, new)
    renewed = Manifest.model_validate(signed("backup manifest", body, new))
    write_atomic(path, SEALED_EVENTS + REKEY_SUFFIX, sealed)
    write_atomic(path, MANIFEST + REKEY_SUFFIX, renewed.model_dump_json(indent=2).encode())
    finish_rekey(path)
    return True


def finish_rekey(path: Path) -> None:
    """Complete a `rekey` of the backup at `path` that was interrupted: once its new
    manifest was written, both new files replace the old ones (the manifest last);
    before that, the new sealed file alone is discarded and the old backup stands."""
    path = Path(path)
    new_sealed = path / (SEALED_EVENTS + REKEY_SUFFIX)
    new_manifest = path / (MANIFEST + REKEY_SUFFIX)
    if new_manifest.exists():
        if new_sealed.exists():
            os.replace(new_sealed, path / SEALED_EVENTS)
        os.replace(new_manifest, path / MANIFEST)
        fsync_dir(path)
    elif new_sealed.exists():
        new_sealed.unlink()


def list_backups(root: Path) -> list[Backup]:
    """The backups under `root`, oldest first; unreadable entries are skipped."""
    found = []
    for child in sorted(Path(root).glob("bk-*")):
        try:
            found.append(Backup(child, read_manifest(child)))
        except ConfigurationError:
            continue
    return sorted(found, key=lambda b: b.manifest.created_at)


def copy_sqlite(source: Path, dest: Path) -> None:
    """A consistent copy of an SQLite file with the online backup API, while writers go
    on (a file copy could catch a page half-written, or miss what is still in the WAL)."""
    src = sqlite3.connect(f"file:{source}?mode=ro", uri=True)
    dst = sqlite3.connect(dest)
    try:
        src.backup(dst)
        dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
    finally:
        dst.close()
        src.close()


def _online_copy(source: Path, copy: Path) -> int:
    """The event store copied; returns the last notification id (rowid of
    stored_events) in the copy: its restore point."""
    copy_sqlite(source, copy)
    conn = sqlite3.connect(copy)
    try:
        row = conn.execute("SELECT max(rowid) FROM stored_events").fetchone()
    finally:
        conn.close()
    return int(row[0] or 0)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise ConfigurationError(f"cannot read {path}: {exc.strerror or exc}") from None


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
