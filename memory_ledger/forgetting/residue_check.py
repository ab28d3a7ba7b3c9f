"""The verification scan of a forget request: every file, for what it erased.

No store keeps content in clear, so a forget is complete when the stores' receipts are
in and the key store has proved the destroyed keys' bytes gone (key_proof.py): the
proof's cost follows the key store, not the data. Reading every byte of every file for
the erased texts is still worth doing, as an audit of that design, but not on the path
of every forget, where its cost grew with every other user's data. It runs here, from
the scheduled job (jobs/verification_scan.py) or `verify REQUEST_ID`, and records its
own `files` / `residue_scan` receipt per request.

It has no plaintext and must not have any: the request kept keyed fingerprints of its
texts, their distinctive fragments and its destroyed keys' wrapped bytes, sealed in the
erasable key store until the verification window closes (`keep`). A fingerprint found
inside an out-of-scope item's clear identifier (a predicate, an id) is counted as
shared, never as residue: identifiers are in clear by design.

Whether fingerprints were kept is on record: the request's `files` / `scan_scheduled`
receipt says `fingerprints_kept: true`. Closing the window destroys their key and
leaves the row, and the scheduled job also records a `verification_closed` receipt. So
a row that is not there at all, for a request that kept fingerprints and whose closing
was never recorded, was deleted: the scan says so (`FINGERPRINTS_LOST`) instead of
looking like a closed window, and the consistency check reports it as
`fingerprints_missing`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Text, select

from memory_ledger.consistency import fingerprints_were_kept
from memory_ledger.keystore import KeyDestruction, NewKey
from memory_ledger.projections.catalog import catalog
from memory_ledger.residue import (
    Fingerprints,
    ResidueFinding,
    file_paths_under,
    fingerprint,
    scan_fingerprint_bytes,
    scan_fingerprints,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from memory_ledger.config import Settings
    from memory_ledger.event_log import EventLog
    from memory_ledger.ledger import LifecycleLedger

PG_ROWS_ONLY = "on PostgreSQL the server's own files are not read"
#: The receipt action that closes a request's verification window
#: (jobs/verification_window.py); a restore reads it too (restore/restore.py).
WINDOW_CLOSED_ACTION = "verification_closed"
WINDOW_CLOSED = (
    "not run: the verification window has closed and the fingerprints' key was destroyed"
)
CLOSED_ON_RECORD = (
    "not run: the verification window was recorded as closed (its fingerprints were lost "
    "before that)"
)
NONE_KEPT = "not run: no fingerprints were kept (nothing readable was erased)"
#: The evidence flag of a window a restore closed because the store it replaced, which
#: held the fingerprints, was lost (restore/carried.py).
LOST_IN_RESTORE = "lost_with_replaced_store"
CLOSED_BY_RESTORE = (
    "not run: the fingerprints were lost with the store that {restore} replaced from a "
    "backup; that restore erased this request's items again and verified them absent "
    "from every store, but no byte scan can check them any more"
)
FINGERPRINTS_LOST = (
    "not run: INTEGRITY PROBLEM: the fingerprints' key row is missing from the key store, "
    "but this request's byte scan kept fingerprints and its verification window was never "
    "recorded as closed (the row was deleted); see `memory-ledger doctor`"
)


@dataclass(frozen=True)
class ScanOutcome:
    checked: bool
    how: str
    files: list[str]
    #: Fingerprints found only inside an item's clear identifiers (in clear by design).
    shared: int = 0
    scanned: int = 0  # files read
    rebuilt: int = 0  # files rebuilt with VACUUM because they held residue


class ResidueCheck:
    """A request's keyed fingerprints and the byte scan that uses them. It holds the
    pieces it reads (the log and its key store, the ledger, the projections' engine,
    the location): nothing else of the service."""

    def __init__(
        self, log: EventLog, ledger: LifecycleLedger, engine: Engine, settings: Settings
    ) -> None:
        self.log = log
        self.ledger = ledger
        self.engine = engine
        self.settings = settings

    # -- fingerprints: a key-store row of their own, erasable like any data key ----------

    def keep(self, request_id: str, needles: Sequence[bytes]) -> None:
        if self._latest(request_id) is None:  # a resumed request keeps its first run's
            self._store(request_id, 0, fingerprint(needles))

    def fingerprints(self, request_id: str) -> Fingerprints | None:
        latest = self._latest(request_id)
        return Fingerprints.from_bytes(latest[1]) if latest is not None else None

    def _latest(self, request_id: str) -> tuple[int, bytes] | None:
        ident = _ident(request_id)
        return self.log.keys_for([ident]).latest(ident)

    def close(self, request_id: str) -> None:
        """Destroy the fingerprints: later verifications check the stores only."""
        self.log.save([], destroy=[KeyDestruction(_ident(request_id), None)])

    def _store(self, request_id: str, generation: int, prints: Fingerprints) -> None:
        """A new generation of the fingerprints; every older one is destroyed with it."""
        ident = _ident(request_id)
        sealed = self.log.master.wrap(ident, generation, prints.to_bytes())
        retired = [KeyDestruction(ident, tuple(range(generation)))] if generation else []
        self.log.save([], new_keys=[NewKey(ident, generation, sealed)], destroy=retired)

    # -- scans ---------------------------------------------------------------------------

    def scan_files(self, request_id: str) -> ScanOutcome:
        """The verification scan: every file under the data directory, searched with the
        request's keyed fingerprints (its texts, their fragments, its destroyed keys'
        bytes). A file that still holds one is rebuilt with VACUUM and scanned again;
        what is still found inside an out-of-scope item's clear identifier is counted
        as shared, not residue. Run by the scheduled job and by `verify`, never on the
        forget path: its cost is every byte of every user's data."""
        prints, why = self._prints(request_id)
        if prints is None:
            return ScanOutcome(False, why, [])
        settings = self.settings
        data_dir = settings.data_dir
        paths = file_paths_under(data_dir)
        found = scan_fingerprints(paths, prints)
        rebuilt = [
            p
            for p in {f.path for f in found}
            if rewrite_sqlite_file(settings, self.engine, self.log, Path(p))
        ]
        if rebuilt:
            # secure_delete zeroes freed cells, but a page's unused gap can still hold
            # old bytes; rebuilding the file (VACUUM) leaves only live rows.
            paths = file_paths_under(data_dir)
            found = scan_fingerprints(paths, prints)
        tables = database_rows(settings)
        for name, data in tables.items():
            found += [
                ResidueFinding(name, f.needle_index) for f in scan_fingerprint_bytes(data, prints)
            ]
        shared = self._in_clear_identifiers(prints, {f.needle_index for f in found})
        files = sorted({f.path for f in found if f.needle_index not in shared})
        note = f"; {len(rebuilt)} file(s) rebuilt with VACUUM" if rebuilt else ""
        rows = f" and the live rows of {len(tables)} tables ({PG_ROWS_ONLY})" if tables else ""
        how = f"keyed fingerprints over {len(paths)} files under {data_dir}{rows}{note}"
        return ScanOutcome(True, how, files, len(shared), len(paths) + len(tables), len(rebuilt))

    def _prints(self, request_id: str) -> tuple[Fingerprints | None, str]:
        ident = _ident(request_id)
        keys = self.log.keys_for([ident])
        latest = keys.latest(ident)
        if latest is not None:
            return Fingerprints.from_bytes(latest[1]), ""
        if keys.rows_of(ident):
            return None, WINDOW_CLOSED
        kept, closed = fingerprints_were_kept(self.ledger, request_id)
        if kept and not closed:
            return None, FINGERPRINTS_LOST
        restore = self._closed_by_restore(request_id) if closed else None
        if restore is not None:
            return None, CLOSED_BY_RESTORE.format(restore=restore)
        return None, CLOSED_ON_RECORD if closed else NONE_KEPT

    def _closed_by_restore(self, request_id: str) -> str | None:
        """The restore that closed the request's window because it lost the
        fingerprints with the store it replaced, if one did."""
        for entry in self.ledger.entries(request_id):
            payload = entry.payload
            if entry.entry_type == "receipt" and payload["action"] == "verification_closed":
                evidence = payload.get("evidence") or {}
                if isinstance(evidence, dict) and evidence.get(LOST_IN_RESTORE):
                    return str(evidence.get("restore", "a restore"))
        return None

    def _in_clear_identifiers(self, prints: Fingerprints, found: set[int]) -> set[int]:
        """Of the fingerprints found, those an item's clear columns contain (an id, a
        predicate, a namespace: in clear by design): searched in those columns' bytes
        with the same fingerprints, so no plaintext is needed. Only when something was
        found: a clean scan pays nothing for it."""
        if not found:
            return set()
        with self.engine.connect() as conn:
            columns = _clear_text_columns()
            values = conn.execute(select(*columns)).all()
        clear = "\n".join(str(v) for row in values for v in row if v is not None).encode()
        return found & {f.needle_index for f in scan_fingerprint_bytes(clear, prints)}


def rewrite_sqlite_file(settings: Settings, engine: Engine, log: EventLog, path: Path) -> bool:
    """Rebuild one of our SQLite files (VACUUM, then truncate its WAL) so that only
    live rows remain in it; False if the path is not one of them."""
    if settings.postgres is not None:
        return False
    if path == settings.projections_path:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.exec_driver_sql("VACUUM")
            conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
        return True
    if path == settings.events_path:
        log.rewrite_file()
        return True
    return False


def database_rows(settings: Settings) -> dict[str, bytes]:
    """On PostgreSQL, every table of the store's schema as bytes (binary COPY: text and
    bytea exactly as stored), for the fingerprint scan; empty on SQLite, whose files are
    scanned whole. The server's own files (dead tuples before VACUUM, WAL) are not ours
    to read, so on PostgreSQL the scan covers what any query can see."""
    if settings.postgres is None:
        return {}
    schema = settings.postgres.schema
    out: dict[str, bytes] = {}
    with settings._pg_connect() as conn:
        names = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND table_type = 'BASE TABLE' ORDER BY table_name",
            (schema,),
        ).fetchall()
        for (name,) in names:
            sql = f'COPY "{schema}"."{name}" TO STDOUT (FORMAT BINARY)'
            with conn.cursor().copy(sql) as copy:
                out[f"{schema}.{name}"] = b"".join(bytes(chunk) for chunk in copy)
    return out


def _clear_text_columns() -> list[Any]:
    return [c for c in catalog.c if isinstance(c.type, Text) and c.name != "item_id"]


RESIDUE_KEY_PREFIX = "residue:"


def _ident(request_id: str) -> str:
    return f"{RESIDUE_KEY_PREFIX}{request_id}"
