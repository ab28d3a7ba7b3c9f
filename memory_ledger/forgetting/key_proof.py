"""The key store's proof that a request's destroyed keys are gone from its bytes.

Every store keeps personal content sealed under its item's data key (../docs/DESIGN.md,
"Sealed everywhere"), so a forget is complete once every store's receipt is in and
the destroyed keys' wrapped bytes are provably gone: the ciphertext left anywhere else
(free pages, WAL frames, old files, backups) can no longer be opened by anyone. This is
that proof, and its cost follows the key store's size, about 150 bytes per key, not the
size of the data.

On SQLite the key table lives in the event store's file. After a checkpoint that
truncates the WAL, the proof reads the pages that held the destroyed keys (the key
table's B-tree path to each row, read from the file: sqlite_pages.py), the free-list
pages (a page freed from the key table goes there) and whatever is left of the WAL, and
searches them for the destroyed keys' wrapped bytes: its cost follows the request, not
the key store's size. The wrapped bytes are read just before the keys are
destroyed and kept in memory only. On PostgreSQL the server's files are not ours to
read: the receipt says so, and that VACUUM of the key table ran.

The scheduled verification scan (jobs/verification_scan.py) later reads every file of
the data directory for the erased texts, their fragments and these same key bytes (as
keyed fingerprints), so a copy the page walk could not see is still caught, later.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memory_ledger.event_log import EventLog
from memory_ledger.forgetting.sqlite_pages import (
    UnexpectedPage,
    free_pages,
    pages_of_rows,
    read_pages,
)
from memory_ledger.keystore import KEYS_TABLE
from memory_ledger.residue import search_bytes

STORE = "key_store"
#: Distinct byte values a wrapped key must have to be searched for (a real one, 60
#: random bytes, has about 50).
MIN_DISTINCT_BYTES = 16
ACTION = "key_bytes_gone"


@dataclass(frozen=True)
class KeyBytes:
    """Wrapped bytes of the live keys of items a request is about to change: memory only,
    never stored or logged (they are what the proof searches for). Those still live after
    the request (a resumed request's rewritten mention keeps its new key) are dropped by
    `destroyed`."""

    keys: tuple[tuple[str, int, bytes], ...]

    @classmethod
    def capture(cls, log: EventLog, item_ids: Sequence[str]) -> KeyBytes:
        rows = log.keys_for(list(dict.fromkeys(item_ids))).live_rows()
        # A wrapped key is random bytes; a corrupted entry of repeated bytes (a zero
        # fill) would be "found" in every zeroed page and prove nothing either way.
        return cls(tuple(r for r in rows if len(set(r[2])) >= MIN_DISTINCT_BYTES))

    def destroyed(self, log: EventLog) -> KeyBytes:
        ring = log.keys_for(sorted({item for item, _, _ in self.keys}))
        return KeyBytes(tuple(k for k in self.keys if not ring.is_live(k[0], k[1])))

    @property
    def wrapped(self) -> tuple[bytes, ...]:
        return tuple(w for _, _, w in self.keys)


@dataclass(frozen=True)
class KeyProof:
    checked: bool
    how: str
    keys_searched: int
    found: int
    bytes_read: int
    #: The file had to be rebuilt (VACUUM) before the bytes were gone.
    rebuilt: bool = False
    #: Every page of the key table was read (after a rebuild, or a file not shaped as
    #: expected), not only the pages that held the destroyed keys.
    whole_table: bool = False

    @property
    def ok(self) -> bool:
        return self.found == 0

    def evidence(self) -> dict[str, int | bool | str]:
        return {  # counts and flags only: the ledger takes no free text
            "checked": self.checked,
            "keys_searched": self.keys_searched,
            "keys_found": self.found,
            "bytes_read": self.bytes_read,
            "file_rebuilt": self.rebuilt,
            "whole_table": self.whole_table,
        }


def prove(log: EventLog, keys: KeyBytes) -> KeyProof:
    """Checkpoint the event store and search the pages that held the destroyed keys for
    them (`touched_pages`; the whole key table if its file is not shaped as expected)."""
    keys = keys.destroyed(log)
    done = "; ".join(log.compact())
    if log.settings.postgres is not None:
        return KeyProof(False, f"not read: the server's files; {done}", len(keys.wrapped), 0, 0)
    if not keys.wrapped:
        return KeyProof(False, f"nothing to search (no live key was destroyed); {done}", 0, 0, 0)
    path = log.settings.events_path
    data, whole = touched_pages(path, [(item, generation) for item, generation, _ in keys.keys])
    read = "every key table page" if whole else "the key table pages that held them"
    found = search_bytes(data, list(keys.wrapped))
    rebuilt = ""
    if found:
        # secure_delete zeroes freed cells, but a page that SQLite rebuilt when it split
        # or merged (an insert of new keys, a rotation) can keep an old copy of a cell
        # that moved away in its unused gap, and that copy outlives the key's
        # destruction. Rare; rebuilding the file (VACUUM) leaves only live rows, and
        # then every page of the key table is read.
        log.rewrite_file()
        data, read, whole = key_pages(path), "every key table page", True
        found = search_bytes(data, list(keys.wrapped))
        rebuilt = "; the file was rebuilt with VACUUM (a destroyed key's bytes were found)"
    how = f"{read}, free-list and WAL pages of {path.name} ({len(data)} bytes); {done}{rebuilt}"
    return KeyProof(True, how, len(keys.wrapped), len(found), len(data), bool(rebuilt), whole)


def touched_pages(path: Path, keys: Sequence[tuple[str, int]]) -> tuple[bytes, bool]:
    """The bytes of the pages that held these keys' rows (the B-tree path to each, read
    from the file: sqlite_pages), the free list and the WAL, and whether every page of
    the key table had to be read instead. Its cost
    follows the request, not the key store: at 100,000 keys every key table page is 40
    times more. Falls back to every key table page if the file is not as expected."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        row = conn.execute(
            "SELECT rootpage FROM sqlite_schema WHERE type = 'table' AND name = ?", (KEYS_TABLE,)
        ).fetchone()
    conn.close()
    try:
        with open(path, "rb", buffering=0) as handle:
            fd = handle.fileno()
            page_size, pages = pages_of_rows(fd, int(row[0]), keys)
            data = read_pages(fd, page_size, pages)
    except (UnexpectedPage, IndexError, TypeError):
        return key_pages(path), True  # the B-tree was not as expected: read it all
    return data + _wal(path), False


def key_pages(path: Path) -> bytes:
    """The bytes of every page that can hold a key: the key table's pages, the free-list
    trunk and leaf pages, and the WAL (empty after a truncating checkpoint)."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = [
            int(p)
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? ORDER BY pageno", (KEYS_TABLE,)
            )
        ]
    conn.close()
    with open(path, "rb", buffering=0) as handle:
        header = os.pread(handle.fileno(), 100, 0)
        pages.extend(free_pages(header, handle.fileno(), page_size))
        data = read_pages(handle.fileno(), page_size, pages)
    return data + _wal(path)


def _wal(path: Path) -> bytes:
    wal = Path(f"{path}-wal")
    return wal.read_bytes() if wal.exists() else b""
